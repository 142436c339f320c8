//! The drivers' read-only view of the cluster ([`ClusterView`]): the LoadBalancer Services in
//! the informer's cache that the driver may see, with this controller manager's own latest
//! results laid over them.

use k8s_openapi::api::core::v1::Service;
use wasm_ccm_runtime::{AddressClaim, AddressQuery, ClusterView, claims_of};

use crate::convert::service_to_wit;
use crate::machinery::informer::Store;
use crate::routing::DriverView;

/// What this controller last decided for a Service, not yet visible in the cache.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingWrite {
    pub(crate) set_annotations: Vec<(String, String)>,
    pub(crate) remove_annotations: Vec<String>,
    pub(crate) ingress: Vec<wasm_ccm_runtime::types::Ingress>,
}

/// The cluster view drivers get: the LoadBalancer Services in the cache, with this controller's
/// own latest results laid over them. Without the overlay, a driver that allocates from a pool by
/// looking at the other Services (like the static driver) could hand out an address twice while
/// the watch has not yet delivered the previous write.
pub(crate) struct StoreCluster {
    store: Store<Service>,
    /// Whose view: with several drivers, a driver sees only the Services it serves or still
    /// owns, so a pool allocator never sees (or hands out) another driver's addresses.
    route: DriverView,
    pending: std::sync::Mutex<std::collections::HashMap<String, PendingWrite>>,
}

impl StoreCluster {
    /// A view of `store` for the driver of `route`.
    pub(crate) fn new(store: Store<Service>, route: DriverView) -> Self {
        StoreCluster {
            store,
            route,
            pending: Default::default(),
        }
    }

    /// Whether the driver sees `s` ([`DriverView::sees`]).
    fn visible(&self, s: &Service) -> bool {
        self.route.sees(s)
    }

    /// Records the result of an ensure for `key` (or forgets it with `None`, after a delete).
    pub(crate) fn record(&self, key: &str, write: Option<PendingWrite>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        match write {
            Some(w) => pending.insert(key.to_string(), w),
            None => pending.remove(key),
        };
    }
}

impl StoreCluster {
    /// The LoadBalancer Services for which `keep` holds, as drivers see them: with this
    /// controller's own latest results laid over the cache. Only the Services kept are converted,
    /// so a query that matches few copies few.
    fn services_where(
        &self,
        keep: impl Fn(&Service, Option<&PendingWrite>) -> bool,
    ) -> Vec<wasm_ccm_runtime::types::Service> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        // One buffer for every Service's key: a query scans every Service, and a `String` per
        // Service per query was a measurable part of an ensure at 1,000 Services.
        let mut key = String::new();
        self.store
            .list()
            .iter()
            .filter(|s| self.visible(s))
            .filter_map(|s| {
                key.clear();
                key.push_str(s.metadata.namespace.as_deref().unwrap_or_default());
                key.push('/');
                key.push_str(s.metadata.name.as_deref().unwrap_or_default());
                let write = pending.get(key.as_str());
                keep(s, write).then(|| {
                    let mut wit = service_to_wit(s);
                    if let Some(w) = write {
                        wit.annotations.retain(|(k, _)| {
                            !w.remove_annotations.contains(k)
                                && !w.set_annotations.iter().any(|(s, _)| s == k)
                        });
                        wit.annotations.extend(w.set_annotations.iter().cloned());
                        wit.ingress = w.ingress.clone();
                    }
                    wit
                })
            })
            .collect()
    }
}

/// The value of annotation `key` a driver sees on `s`: this controller's pending write first.
fn seen_annotation<'a>(
    s: &'a Service,
    write: Option<&'a PendingWrite>,
    key: &str,
) -> Option<&'a str> {
    if let Some(w) = write {
        if let Some((_, v)) = w.set_annotations.iter().find(|(k, _)| k == key) {
            return Some(v);
        }
        if w.remove_annotations.iter().any(|k| k == key) {
            return None;
        }
    }
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The addresses a driver sees on `s`: `spec.loadBalancerIP` and the ingress IPs, this
/// controller's pending ingress first.
fn seen_addresses<'a>(s: &'a Service, write: Option<&'a PendingWrite>) -> Vec<&'a str> {
    let mut ips: Vec<&str> = s
        .spec
        .as_ref()
        .and_then(|spec| spec.load_balancer_ip.as_deref())
        .into_iter()
        .collect();
    ips.extend(seen_ingress_ips(s, write));
    ips
}

/// The ingress IPs a driver sees on `s`: this controller's pending ingress, else the status.
fn seen_ingress_ips<'a>(s: &'a Service, write: Option<&'a PendingWrite>) -> Vec<&'a str> {
    match write {
        Some(w) => w.ingress.iter().filter_map(|i| i.ip.as_deref()).collect(),
        None => s
            .status
            .iter()
            .filter_map(|st| st.load_balancer.as_ref())
            .flat_map(|lb| lb.ingress.iter().flatten())
            .filter_map(|i| i.ip.as_deref())
            .collect(),
    }
}

impl ClusterView for StoreCluster {
    fn load_balancer_services(&self) -> Vec<wasm_ccm_runtime::types::Service> {
        self.services_where(|_, _| true)
    }

    fn services_with_annotation(
        &self,
        key: &str,
        values: &[String],
    ) -> Vec<wasm_ccm_runtime::types::Service> {
        // A set: a pool driver asks about thousands of addresses at once, and every Service's
        // value is looked up in them.
        let values: std::collections::HashSet<&str> = values.iter().map(String::as_str).collect();
        self.services_where(|s, write| {
            seen_annotation(s, write, key).is_some_and(|v| values.is_empty() || values.contains(v))
        })
    }

    fn address_claims(&self, ips: &[String], annotation: &str) -> Vec<AddressClaim> {
        let wanted = AddressQuery::new(ips);
        let mut out = Vec::new();
        if wanted.is_empty() {
            return out;
        }
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = String::new();
        // Nothing is converted: each Service's addresses are read where they are, so a query
        // about thousands of candidates costs a scan and copies only the claims.
        for s in self.store.list().iter().filter(|s| self.visible(s)) {
            key.clear();
            key.push_str(s.metadata.namespace.as_deref().unwrap_or_default());
            key.push('/');
            key.push_str(s.metadata.name.as_deref().unwrap_or_default());
            let write = pending.get(key.as_str());
            let value = (!annotation.is_empty())
                .then(|| seen_annotation(s, write, annotation))
                .flatten();
            let load_balancer_ip = s
                .spec
                .as_ref()
                .and_then(|spec| spec.load_balancer_ip.as_deref());
            claims_of(
                s.metadata.uid.as_deref().unwrap_or_default(),
                load_balancer_ip,
                value,
                seen_ingress_ips(s, write),
                &wanted,
                &mut out,
            );
        }
        out
    }

    fn services_with_address(&self, ips: &[String]) -> Vec<wasm_ccm_runtime::types::Service> {
        let wanted = AddressQuery::new(ips);
        if wanted.is_empty() {
            return Vec::new();
        }
        self.services_where(|s, write| seen_addresses(s, write).iter().any(|ip| wanted.matches(ip)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Api;
    use wasm_ccm_runtime::types::Ingress;

    fn lb_service(
        name: &str,
        annotations: serde_json::Value,
        lb_ip: Option<&str>,
        ingress: &[&str],
    ) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": name, "annotations": annotations},
            "spec": {"type": "LoadBalancer", "loadBalancerIP": lb_ip},
            "status": {"loadBalancer": {"ingress": ingress.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>()}},
        }))
        .expect("a Service")
    }

    fn names(services: Vec<wasm_ccm_runtime::types::Service>) -> Vec<String> {
        let mut names: Vec<String> = services.into_iter().map(|s| s.name).collect();
        names.sort();
        names
    }

    // A runtime only because a kube `Client` needs one to exist; nothing is requested.
    #[tokio::test]
    async fn service_queries_return_only_matches_with_this_process_results_laid_over() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let informer = crate::machinery::informer::Informer::<Service>::new(Api::all(client));
        let mut cluster_ip: Service = lb_service(
            "internal",
            serde_json::json!({"x/ip": "10.0.0.9"}),
            None,
            &[],
        );
        cluster_ip.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into());
        informer.replace(vec![
            lb_service(
                "a",
                serde_json::json!({"x/ip": "10.0.0.1"}),
                None,
                &["10.0.0.1"],
            ),
            lb_service(
                "b",
                serde_json::json!({"x/other": "1"}),
                Some("2001:db8::1"),
                &[],
            ),
            lb_service("c", serde_json::json!({}), None, &["10.0.0.3"]),
            cluster_ip,
        ]);
        let view = StoreCluster::new(
            informer.store(),
            crate::routing::Routing::alone("static", "static").view(0),
        );
        let q = |ips: &[&str]| ips.iter().map(|s| s.to_string()).collect::<Vec<_>>();

        assert_eq!(names(view.services_with_annotation("x/ip", &[])), ["a"]);
        assert_eq!(
            names(view.services_with_annotation("x/ip", &q(&["10.0.0.1"]))),
            ["a"]
        );
        assert!(
            view.services_with_annotation("x/ip", &q(&["10.0.0.2"]))
                .is_empty()
        );
        // Addresses compare as addresses; spec.loadBalancerIP counts; a Service that is not a
        // LoadBalancer never shows.
        assert_eq!(
            names(view.services_with_address(&q(&["2001:0db8::1", "10.0.0.3"]))),
            ["b", "c"]
        );
        assert!(view.services_with_address(&q(&["10.0.0.9"])).is_empty());
        assert!(view.services_with_address(&[]).is_empty());

        // This process's latest result counts before the watch delivers it: c took 10.0.0.7
        // and its annotation; a dropped its annotation and its old ingress.
        view.record(
            "default/c",
            Some(PendingWrite {
                set_annotations: vec![("x/ip".into(), "10.0.0.7".into())],
                remove_annotations: vec![],
                ingress: vec![Ingress {
                    ip: Some("10.0.0.7".into()),
                    hostname: None,
                    ip_mode: None,
                }],
            }),
        );
        view.record(
            "default/a",
            Some(PendingWrite {
                set_annotations: vec![],
                remove_annotations: vec!["x/ip".into()],
                ingress: vec![],
            }),
        );
        assert_eq!(names(view.services_with_annotation("x/ip", &[])), ["c"]);
        assert_eq!(names(view.services_with_address(&q(&["10.0.0.7"]))), ["c"]);
        assert!(
            view.services_with_address(&q(&["10.0.0.3", "10.0.0.1"]))
                .is_empty()
        );
        let c = view.services_with_annotation("x/ip", &q(&["10.0.0.7"]));
        assert_eq!(
            c[0].annotations,
            vec![("x/ip".to_string(), "10.0.0.7".to_string())]
        );
        // Every query agrees with the full list it narrows.
        assert_eq!(names(view.load_balancer_services()), ["a", "b", "c"]);

        // Claims: addresses and UIDs, in the query's spelling, with the pending overlay (c's
        // new annotation and ingress; a's removed annotation and ingress claim nothing).
        use wasm_ccm_runtime::AddressUse;
        let mut claims: Vec<(String, String, AddressUse)> = view
            .address_claims(
                &q(&["10.0.0.7", "2001:0DB8::1", "10.0.0.1", "10.0.0.9"]),
                "x/ip",
            )
            .into_iter()
            .map(|c| (c.ip, c.service_uid, c.used_as))
            .collect();
        claims.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
        assert_eq!(
            claims,
            [
                (
                    "10.0.0.7".to_string(),
                    "c".to_string(),
                    AddressUse::Annotation
                ),
                ("10.0.0.7".to_string(), "c".to_string(), AddressUse::Ingress),
                (
                    "2001:0DB8::1".to_string(),
                    "b".to_string(),
                    AddressUse::LoadBalancerIp
                ),
            ]
        );
        assert!(view.address_claims(&[], "x/ip").is_empty());
        // Without an annotation name, annotations claim nothing.
        assert_eq!(view.address_claims(&q(&["10.0.0.7"]), "").len(), 1);
    }
}
