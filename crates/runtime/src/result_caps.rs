//! Caps on what a driver's results may carry across the boundary.
//!
//! wasmtime's hostcall fuel (set from `--memory-limit`) already bounds the bytes a single result
//! may make the host allocate; these caps bound the *shape* — list lengths and string sizes — so
//! that a result the host is about to act on is never big enough to hurt it later (copied into
//! Kubernetes objects, events, metrics, logs). They are generous: the controllers apply the
//! tighter Kubernetes rules (label syntax, address parsing) afterwards and drop what is invalid
//! with a Warning event. Every cap is listed in `wit/README.md`; a result over a cap is refused
//! whole as [`crate::HostError::ResultOverCap`].

use crate::model::types::{
    EnsureResult, Ingress, InstanceMetadata, InstancePage, ProviderError, ProviderInfo, Route,
    SecretOrigin, SecretUse,
};
use crate::text::shown;

/// Longest string in a result (a provider ID, an address, a label or annotation value).
pub(crate) const MAX_STRING_BYTES: usize = 64 * 1024;
/// Node addresses in one `instance-metadata`.
pub(crate) const MAX_ADDRESSES: usize = 64;
/// Extra labels in one `instance-metadata`.
pub(crate) const MAX_LABELS: usize = 128;
/// Ingress entries of one load balancer.
pub(crate) const MAX_INGRESS: usize = 64;
/// Annotations set, and annotations removed, by one `ensure`.
pub(crate) const MAX_ANNOTATIONS: usize = 64;
/// Routes one `routes.list` may return (two per node at 5,000 nodes, with room).
pub(crate) const MAX_ROUTES: usize = 20_000;
/// Instances one `instance-listing.list-instances` page may carry (15,000 nodes, with room).
pub(crate) const MAX_LISTED_PER_PAGE: usize = 20_000;
/// Longest `next` page token of a listing: a cursor, an offset or a page number, never data.
pub(crate) const MAX_PAGE_TOKEN_BYTES: usize = 1024;
/// Most secrets one driver may declare in `info().secrets`.
pub(crate) const MAX_SECRETS: usize = 16;
/// Most locations in one secret's `at`, and most settings of one `secret-origin`.
pub(crate) const MAX_SECRET_LOCATIONS: usize = 8;
/// Most uses of one secret.
pub(crate) const MAX_SECRET_USES: usize = 16;
/// Most `token-origins` of one `oauth2-client` use.
pub(crate) const MAX_TOKEN_ORIGINS: usize = 8;
/// Longest `provider-error` message or retry reason kept; longer ones are cut (not refused: the
/// error still says what happened).
pub(crate) const MAX_ERROR_MESSAGE_BYTES: usize = 4 * 1024;

/// A value whose size the host checks before acting on it.
pub(crate) trait Capped {
    /// `Err` names the first part over its cap, e.g. `addresses: 70 entries, at most 64`.
    fn check_caps(&self) -> Result<(), String>;

    /// Passes every string of the value through `redact`. The host calls it on every answer
    /// before anything acts on it, so a secret the host knows of cannot ride out of the guest in
    /// an answer the host writes to Kubernetes or quotes in its own messages.
    fn redact_strings(&mut self, redact: &dyn Fn(&mut String));
}

/// Redacts each string of `pairs` (keys and values).
fn redact_pairs(pairs: &mut [(String, String)], redact: &dyn Fn(&mut String)) {
    for (k, v) in pairs {
        redact(k);
        redact(v);
    }
}

fn string(what: &str, s: &str) -> Result<(), String> {
    if s.len() > MAX_STRING_BYTES {
        return Err(format!(
            "{what}: {} bytes, at most {MAX_STRING_BYTES}",
            s.len()
        ));
    }
    Ok(())
}

fn count(what: &str, n: usize, max: usize) -> Result<(), String> {
    if n > max {
        return Err(format!("{what}: {n} entries, at most {max}"));
    }
    Ok(())
}

impl Capped for bool {
    fn check_caps(&self) -> Result<(), String> {
        Ok(())
    }

    fn redact_strings(&mut self, _: &dyn Fn(&mut String)) {}
}

impl Capped for () {
    fn check_caps(&self) -> Result<(), String> {
        Ok(())
    }

    fn redact_strings(&mut self, _: &dyn Fn(&mut String)) {}
}

impl Capped for String {
    fn check_caps(&self) -> Result<(), String> {
        string("string", self)
    }

    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        redact(self);
    }
}

impl Capped for InstanceMetadata {
    fn check_caps(&self) -> Result<(), String> {
        string("provider-id", &self.provider_id)?;
        string("instance-type", &self.instance_type)?;
        string("zone", &self.zone)?;
        string("region", &self.region)?;
        count("addresses", self.addresses.len(), MAX_ADDRESSES)?;
        for a in &self.addresses {
            string("addresses[].address", &a.address)?;
        }
        count(
            "additional-labels",
            self.additional_labels.len(),
            MAX_LABELS,
        )?;
        for (k, v) in &self.additional_labels {
            string("additional-labels[].key", k)?;
            string("additional-labels[].value", v)?;
        }
        Ok(())
    }
    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        redact(&mut self.provider_id);
        redact(&mut self.instance_type);
        redact(&mut self.zone);
        redact(&mut self.region);
        for a in &mut self.addresses {
            redact(&mut a.address);
        }
        redact_pairs(&mut self.additional_labels, redact);
    }
}

fn ingress(list: &[Ingress]) -> Result<(), String> {
    count("ingress", list.len(), MAX_INGRESS)?;
    for i in list {
        if let Some(ip) = &i.ip {
            string("ingress[].ip", ip)?;
        }
        if let Some(h) = &i.hostname {
            string("ingress[].hostname", h)?;
        }
    }
    Ok(())
}

fn redact_ingress(list: &mut [Ingress], redact: &dyn Fn(&mut String)) {
    for i in list {
        i.ip.iter_mut()
            .chain(i.hostname.iter_mut())
            .for_each(redact);
    }
}

impl Capped for InstancePage {
    fn check_caps(&self) -> Result<(), String> {
        count("instances", self.instances.len(), MAX_LISTED_PER_PAGE)?;
        for listed in &self.instances {
            string("instances[].node-name", &listed.node_name)?;
            listed.metadata.check_caps()?;
        }
        if let Some(next) = &self.next
            && next.len() > MAX_PAGE_TOKEN_BYTES
        {
            return Err(format!(
                "next: {} bytes, at most {MAX_PAGE_TOKEN_BYTES}",
                next.len()
            ));
        }
        Ok(())
    }

    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        for listed in &mut self.instances {
            redact(&mut listed.node_name);
            listed.metadata.redact_strings(redact);
        }
        self.next.iter_mut().for_each(redact);
    }
}

impl Capped for Option<Vec<Ingress>> {
    fn check_caps(&self) -> Result<(), String> {
        self.as_deref().map_or(Ok(()), ingress)
    }

    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        if let Some(list) = self {
            redact_ingress(list, redact);
        }
    }
}

impl Capped for EnsureResult {
    fn check_caps(&self) -> Result<(), String> {
        ingress(&self.ingress)?;
        count(
            "set-annotations",
            self.set_annotations.len(),
            MAX_ANNOTATIONS,
        )?;
        for (k, v) in &self.set_annotations {
            string("set-annotations[].key", k)?;
            string("set-annotations[].value", v)?;
        }
        count(
            "remove-annotations",
            self.remove_annotations.len(),
            MAX_ANNOTATIONS,
        )?;
        for k in &self.remove_annotations {
            string("remove-annotations[]", k)?;
        }
        Ok(())
    }
    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        redact_ingress(&mut self.ingress, redact);
        redact_pairs(&mut self.set_annotations, redact);
        self.remove_annotations.iter_mut().for_each(redact);
    }
}

impl Capped for Vec<Route> {
    fn check_caps(&self) -> Result<(), String> {
        count("routes", self.len(), MAX_ROUTES)?;
        for r in self {
            string("routes[].name", &r.name)?;
            string("routes[].target-node", &r.target_node)?;
            string("routes[].destination-cidr", &r.destination_cidr)?;
            count(
                "routes[].target-node-addresses",
                r.target_node_addresses.len(),
                MAX_ADDRESSES,
            )?;
            for a in &r.target_node_addresses {
                string("routes[].target-node-addresses[].address", &a.address)?;
            }
        }
        Ok(())
    }
    fn redact_strings(&mut self, redact: &dyn Fn(&mut String)) {
        for r in self {
            redact(&mut r.name);
            redact(&mut r.target_node);
            redact(&mut r.destination_cidr);
            for a in &mut r.target_node_addresses {
                redact(&mut a.address);
            }
        }
    }
}

/// The settings of `origin` within [`MAX_SECRET_LOCATIONS`]; `what` names the origin.
fn origin_caps(what: &str, origin: &SecretOrigin) -> Result<(), String> {
    count(
        &format!("{what} settings"),
        origin.settings.len(),
        MAX_SECRET_LOCATIONS,
    )
}

impl Capped for ProviderInfo {
    /// Only the lengths of the secret declarations' lists: `info` has its own, stricter rules
    /// (`crate::info_rules`, which calls this first so that no rule walks an unbounded list).
    fn check_caps(&self) -> Result<(), String> {
        count("secrets", self.secrets.len(), MAX_SECRETS)?;
        for s in &self.secrets {
            // The name is not checked yet: `shown` cuts a long one.
            let name = shown(&s.name);
            count(
                &format!("secrets {name}: at"),
                s.at.len(),
                MAX_SECRET_LOCATIONS,
            )?;
            origin_caps(&format!("secrets {name}: origin"), &s.origin)?;
            count(
                &format!("secrets {name}: uses"),
                s.uses.len(),
                MAX_SECRET_USES,
            )?;
            for u in &s.uses {
                if let SecretUse::Oauth2Client(seal) = u {
                    let what = format!("secrets {name}: oauth2-client token-origins");
                    count(&what, seal.token_origins.len(), MAX_TOKEN_ORIGINS)?;
                    for o in &seal.token_origins {
                        origin_caps(&what, o)?;
                    }
                }
            }
        }
        Ok(())
    }
    fn redact_strings(&mut self, _: &dyn Fn(&mut String)) {
        // `info` runs before any secret is known (it takes no configuration).
    }
}

/// Cuts a driver's error message to [`MAX_ERROR_MESSAGE_BYTES`] on a character boundary.
/// `bounded_redact(text, max)` returns at most `max` bytes of `text` with every known secret
/// replaced, redacting before it cuts (the host passes `DriverLogger::redact_bounded`): a
/// secret across the cut must not survive as a prefix.
pub(crate) fn cap_error(
    e: ProviderError,
    bounded_redact: &dyn Fn(&str, usize) -> String,
) -> ProviderError {
    use ProviderError as E;
    let cut = |m: String| {
        let kept = bounded_redact(&m, MAX_ERROR_MESSAGE_BYTES);
        if m.len() <= MAX_ERROR_MESSAGE_BYTES {
            kept
        } else {
            format!("{kept}… [cut {} bytes]", m.len().saturating_sub(kept.len()))
        }
    };
    match e {
        E::NotFound(m) => E::NotFound(cut(m)),
        E::InvalidConfig(m) => E::InvalidConfig(cut(m)),
        E::Unauthorized(m) => E::Unauthorized(cut(m)),
        E::Transient(m) => E::Transient(cut(m)),
        E::Permanent(m) => E::Permanent(cut(m)),
        E::RetryAfter(mut r) => {
            r.reason = cut(r.reason);
            E::RetryAfter(r)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::types::{AddressType, IpMode, NodeAddress, Retry};

    fn metadata() -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "x://1".into(),
            instance_type: String::new(),
            zone: String::new(),
            region: String::new(),
            addresses: Vec::new(),
            additional_labels: Vec::new(),
        }
    }

    #[test]
    fn metadata_within_caps_passes_and_over_caps_names_the_part() {
        let mut m = metadata();
        m.addresses = vec![
            NodeAddress {
                kind: AddressType::InternalIp,
                address: "10.0.0.1".into(),
            };
            MAX_ADDRESSES
        ];
        assert_eq!(m.check_caps(), Ok(()));
        m.addresses.push(m.addresses[0].clone());
        let e = m.check_caps().unwrap_err();
        assert!(e.starts_with("addresses: 65 entries"), "{e}");
        let mut m = metadata();
        m.provider_id = "x".repeat(MAX_STRING_BYTES + 1);
        assert!(m.check_caps().unwrap_err().starts_with("provider-id"));
        let mut m = metadata();
        m.additional_labels = vec![("a".into(), "b".into()); MAX_LABELS + 1];
        assert!(m.check_caps().unwrap_err().starts_with("additional-labels"));
    }

    #[test]
    fn ensure_results_are_capped_in_ingress_and_annotations() {
        let one = Ingress {
            ip: Some("192.0.2.1".into()),
            hostname: None,
            ip_mode: Some(IpMode::Vip),
        };
        let mut r = EnsureResult {
            ingress: vec![one.clone(); MAX_INGRESS],
            set_annotations: Vec::new(),
            remove_annotations: Vec::new(),
        };
        assert_eq!(r.check_caps(), Ok(()));
        r.ingress.push(one);
        assert!(r.check_caps().unwrap_err().starts_with("ingress"));
        r.ingress.clear();
        r.set_annotations = vec![("a/b".into(), "x".repeat(MAX_STRING_BYTES + 1))];
        assert!(
            r.check_caps()
                .unwrap_err()
                .starts_with("set-annotations[].value")
        );
        r.set_annotations.clear();
        r.remove_annotations = vec!["a/b".into(); MAX_ANNOTATIONS + 1];
        assert!(
            r.check_caps()
                .unwrap_err()
                .starts_with("remove-annotations")
        );
    }

    #[test]
    fn long_error_messages_are_cut_not_refused() {
        let no_secrets = |t: &str, max: usize| crate::text::cut(t, max).to_string();
        let e = cap_error(
            ProviderError::Transient("é".repeat(MAX_ERROR_MESSAGE_BYTES)),
            &no_secrets,
        );
        let ProviderError::Transient(m) = e else {
            panic!()
        };
        assert!(m.len() < MAX_ERROR_MESSAGE_BYTES + 64, "{}", m.len());
        assert!(m.ends_with("bytes]"));
        let e = cap_error(
            ProviderError::RetryAfter(Retry {
                seconds: 5,
                reason: "r".repeat(10 * MAX_ERROR_MESSAGE_BYTES),
            }),
            &no_secrets,
        );
        let ProviderError::RetryAfter(r) = e else {
            panic!()
        };
        assert_eq!(r.seconds, 5);
        assert!(r.reason.len() < MAX_ERROR_MESSAGE_BYTES + 64);
    }
}
