//! Behavioural checks of `provider` and `instances`: what the controllers rely on when they
//! initialise nodes and decide whether to delete them.

use std::collections::HashSet;
use std::net::IpAddr;

use wasm_ccm_runtime::types::{AddressType, InstanceMetadata, Node, ProviderError, ProviderInfo};
use wasm_ccm_runtime::{CallError, Driver, Outcome};

use super::differences::Differences;
use super::harness::{Harness, scope};
use super::report::Checks;
use super::scenario::{Expectation, Scenario};

/// `info` must describe the driver well enough for the host and the operator.
pub(super) fn check_info(info: &ProviderInfo, checks: &mut Checks) {
    let mut problems = Vec::new();
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !is_name(&info.name) {
        problems.push(format!(
            "name `{}` must be non-empty lower-case letters, digits and dashes (it is the --cloud-provider value)",
            info.name
        ));
    }
    let semver = info.version.split(['-', '+']).next().unwrap_or_default();
    if semver.split('.').count() != 3 || semver.split('.').any(|p| p.parse::<u64>().is_err()) {
        problems.push(format!(
            "version `{}` is not semver (MAJOR.MINOR.PATCH)",
            info.version
        ));
    }
    let scheme = &info.provider_id_scheme;
    let scheme_ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase())
        && scheme
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    if !scheme_ok {
        problems.push(format!(
            "provider-id-scheme `{scheme}` is not a URI scheme (lower-case letter, then letters, digits, + - .)"
        ));
    }
    // The host's own load-time rules (lengths, character sets, env and annotation prefixes): a
    // driver that breaks them is not loaded by `wasm-ccm run`.
    if let Err(e) = wasm_ccm_runtime::validate_info(info) {
        problems.push(e);
    }
    checks.check(
        "provider/info",
        None,
        if problems.is_empty() {
            Ok(format!(
                "{} {}, provider IDs {scheme}://…, egress [{}], env [{}], annotations [{}]",
                info.name,
                info.version,
                info.default_egress.join(", "),
                info.env_prefixes.join(", "),
                info.annotation_prefixes.join(", ")
            ))
        } else {
            Err(problems.join("; "))
        },
    );
}

/// `housekeeping` against a healthy cloud succeeds.
pub(super) async fn check_housekeeping(h: &mut Harness, checks: &mut Checks) {
    let outcome = h.warm.housekeeping(&scope("")).await;
    h.observe("provider.housekeeping", &outcome);
    checks.check(
        "provider/housekeeping",
        None,
        match outcome.result {
            Ok(()) => Ok("ok".into()),
            Err(e) => Err(format!("housekeeping failed against a healthy cloud: {e}")),
        },
    );
}

/// Every known node, every unknown node, in warm and in fresh instances.
pub(super) async fn check_nodes(
    h: &mut Harness,
    scenario: &Scenario,
    info: &ProviderInfo,
    checks: &mut Checks,
    diffs: &mut Differences,
) {
    for known in &scenario.nodes {
        let node = &known.node;
        let subject = Some(node.name.as_str());
        let exists = call_exists(h, node, diffs).await;
        checks.check(
            "instances/exists",
            subject,
            match exists {
                Ok(e) if e == known.expect.exists => Ok(format!("exists = {e}")),
                Ok(e) => Err(format!(
                    "exists = {e}, the scenario says {}{}",
                    known.expect.exists,
                    if e {
                        ""
                    } else {
                        " (false makes the host delete the Node)"
                    }
                )),
                Err(e) if node.provider_id.is_empty() => Ok(declined(&e)),
                Err(e) => Err(format!("instance-exists failed: {e}")),
            },
        );
        if !known.expect.exists {
            continue;
        }
        let shutdown = call_shutdown(h, node, diffs).await;
        checks.check(
            "instances/shutdown",
            subject,
            match shutdown {
                Ok(s) if s == known.expect.shutdown => Ok(format!("shutdown = {s}")),
                Ok(s) => Err(format!(
                    "shutdown = {s}, the scenario says {}",
                    known.expect.shutdown
                )),
                Err(e) if node.provider_id.is_empty() => Ok(declined(&e)),
                Err(e) => Err(format!("instance-shutdown failed: {e}")),
            },
        );
        let metadata = call_metadata(h, node, diffs).await;
        match metadata {
            Ok(m) => {
                checks.check(
                    "instances/metadata",
                    subject,
                    well_formed(&m, &known.expect),
                );
                checks.check(
                    "instances/provider-id-scheme",
                    subject,
                    scheme_used(&m.provider_id, &info.provider_id_scheme),
                );
                checks.check(
                    "instances/metadata-expected",
                    subject,
                    expected(&m, &known.expect),
                );
            }
            Err(e) => {
                let msg = format!("instance-metadata failed: {e}");
                checks.check("instances/metadata", subject, Err(msg));
                checks.skip("instances/provider-id-scheme", subject, "no metadata");
                checks.skip("instances/metadata-expected", subject, "no metadata");
            }
        }
    }
    for node in &scenario.unknown_nodes {
        let exists = call_exists(h, node, diffs).await;
        checks.check(
            "instances/unknown-node",
            Some(&node.name),
            match exists {
                Ok(false) => Ok("exists = false".into()),
                Ok(true) => Err("exists = true for a node the cloud does not have".into()),
                Err(e) if node.provider_id.is_empty() => Ok(declined(&e)),
                Err(e) => Err(format!(
                    "instance-exists failed ({e}); an unknown node must give exists = false, never an error, or the host can never delete it"
                )),
            },
        );
    }
}

/// A node without a provider ID may be refused: some clouds (cloudscale, PhoenixNAP upstream)
/// consider a name too weak to decide that a machine is gone or stopped. An error is safe there —
/// the host does nothing — where a wrong `false` would delete the Node.
fn declined(e: &CallError) -> String {
    format!("no provider ID, and the driver declines to decide by name ({e})")
}

/// Calls `f` on the warm and on the fresh driver, notes both, compares them; returns the warm
/// result.
async fn warm_and_fresh<T, F, Fut>(
    h: &mut Harness,
    function: &str,
    node: &Node,
    diffs: &mut Differences,
    f: F,
) -> Result<T, CallError>
where
    T: PartialEq + std::fmt::Debug,
    F: Fn(Driver, Node) -> Fut,
    Fut: std::future::Future<Output = Outcome<T>>,
{
    let warm = f(h.warm.clone(), node.clone()).await;
    h.observe(function, &warm);
    let fresh = f(h.fresh.clone(), node.clone()).await;
    h.note_denied(function, &fresh);
    diffs.compare(function, &node.name, &warm.result, &fresh.result);
    warm.result
}

async fn call_exists(
    h: &mut Harness,
    node: &Node,
    diffs: &mut Differences,
) -> Result<bool, CallError> {
    warm_and_fresh(
        h,
        "instances.instance-exists",
        node,
        diffs,
        |d, n| async move { d.instance_exists(&n, &scope(&n.name)).await },
    )
    .await
}

async fn call_shutdown(
    h: &mut Harness,
    node: &Node,
    diffs: &mut Differences,
) -> Result<bool, CallError> {
    let result = warm_and_fresh(
        h,
        "instances.instance-shutdown",
        node,
        diffs,
        |d, n| async move { d.instance_shutdown(&n, &scope(&n.name)).await },
    )
    .await;
    match result {
        // The contract: not-implemented is read as "not shut down".
        Err(CallError::Provider(ProviderError::NotImplemented)) => Ok(false),
        other => other,
    }
}

async fn call_metadata(
    h: &mut Harness,
    node: &Node,
    diffs: &mut Differences,
) -> Result<InstanceMetadata, CallError> {
    warm_and_fresh(
        h,
        "instances.instance-metadata",
        node,
        diffs,
        |d, n| async move { d.instance_metadata(&n, &scope(&n.name)).await },
    )
    .await
}

fn well_formed(m: &InstanceMetadata, expect: &Expectation) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut seen = HashSet::new();
    for a in &m.addresses {
        let kind = a.kind.wit_name();
        if !seen.insert((kind, a.address.as_str())) {
            problems.push(format!("address {kind} {} is listed twice", a.address));
        }
        match a.kind {
            AddressType::InternalIp | AddressType::ExternalIp
                if a.address.parse::<IpAddr>().is_err() =>
            {
                problems.push(format!("{kind} `{}` is not an IP address", a.address));
            }
            AddressType::InternalIp | AddressType::ExternalIp => {}
            _ if a.address.trim().is_empty() => problems.push(format!("{kind} is empty")),
            _ => {}
        }
    }
    if expect.instance_type.is_some() && m.instance_type.is_empty() {
        problems.push("instance-type is empty, the scenario expects one".into());
    }
    if problems.is_empty() {
        Ok(format!(
            "{} addresses, type `{}`, zone `{}`, region `{}`",
            m.addresses.len(),
            m.instance_type,
            m.zone,
            m.region
        ))
    } else {
        Err(problems.join("; "))
    }
}

fn scheme_used(provider_id: &str, scheme: &str) -> Result<String, String> {
    match provider_id
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix("://"))
    {
        Some(id) if !id.is_empty() => Ok(provider_id.to_string()),
        _ => Err(format!(
            "provider ID `{provider_id}` does not have the form {scheme}://<id> that info() declares"
        )),
    }
}

fn expected(m: &InstanceMetadata, e: &Expectation) -> Result<String, String> {
    let mut problems = Vec::new();
    let mut compare = |what: &str, want: &Option<String>, got: &str| {
        if let Some(want) = want
            && want != got
        {
            problems.push(format!("{what} is `{got}`, expected `{want}`"));
        }
    };
    compare("provider-id", &e.provider_id, &m.provider_id);
    compare("instance-type", &e.instance_type, &m.instance_type);
    compare("zone", &e.zone, &m.zone);
    compare("region", &e.region, &m.region);
    if let Some(want) = &e.addresses
        && want != &m.addresses
    {
        let render = |list: &[wasm_ccm_runtime::types::NodeAddress]| {
            list.iter()
                .map(|a| format!("{} {}", a.kind, a.address))
                .collect::<Vec<_>>()
                .join(", ")
        };
        problems.push(format!(
            "addresses are [{}], expected [{}] in that order",
            render(&m.addresses),
            render(want)
        ));
    }
    if problems.is_empty() {
        Ok("as the scenario expects".into())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_runtime::types::NodeAddress;

    fn meta(addresses: Vec<(AddressType, &str)>) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "acme://1".into(),
            instance_type: "small".into(),
            zone: "z1".into(),
            region: "r".into(),
            addresses: addresses
                .into_iter()
                .map(|(kind, a)| NodeAddress {
                    kind,
                    address: a.into(),
                })
                .collect(),
            additional_labels: vec![],
        }
    }

    #[test]
    fn malformed_metadata_is_named() {
        let dup = meta(vec![
            (AddressType::InternalIp, "10.0.0.1"),
            (AddressType::InternalIp, "10.0.0.1"),
            (AddressType::ExternalIp, "not-an-ip"),
        ]);
        let e = well_formed(&dup, &Expectation::default()).unwrap_err();
        assert!(e.contains("listed twice") && e.contains("not an IP"), "{e}");
        assert!(
            well_formed(
                &meta(vec![(AddressType::Hostname, "n1")]),
                &Expectation::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn scheme_must_match() {
        assert!(scheme_used("acme://1", "acme").is_ok());
        assert!(scheme_used("other://1", "acme").is_err());
        assert!(scheme_used("acme://", "acme").is_err());
        assert!(scheme_used("1", "acme").is_err());
    }

    #[test]
    fn info_rules() {
        let mut info = ProviderInfo {
            name: "acme".into(),
            version: "1.2.3".into(),
            provider_id_scheme: "acme".into(),
            default_egress: vec!["https://api.acme.example".into()],
            env_prefixes: vec!["ACME_".into()],
            annotation_prefixes: vec!["acme.example/".into()],
            secrets: Vec::new(),
        };
        let mut checks = Checks::new("0.2.0");
        check_info(&info, &mut checks);
        info.name = "Acme Cloud".into();
        info.version = "one".into();
        info.provider_id_scheme = "1acme".into();
        check_info(&info, &mut checks);
        assert!(!checks.results[0].message.is_empty());
        assert_eq!(checks.results[0].status, super::super::report::Status::Pass);
        let m = &checks.results[1].message;
        assert!(
            m.contains("name") && m.contains("semver") && m.contains("scheme"),
            "{m}"
        );
        // The host's load-time rules fail the check too: an empty env prefix would hand the
        // driver the whole environment.
        info.name = "acme".into();
        info.version = "1.2.3".into();
        info.provider_id_scheme = "acme".into();
        info.env_prefixes = vec![String::new()];
        check_info(&info, &mut checks);
        assert!(
            checks.results[2].message.contains("env-prefixes"),
            "{}",
            checks.results[2].message
        );
        assert_ne!(checks.results[2].status, super::super::report::Status::Pass);
    }
}
