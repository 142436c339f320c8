//! A hostile test driver (world `load-balancer-driver`) whose answers try to write what a driver
//! must never write. The end-to-end tests in `bins/wasm-ccm-dev/tests/e2e_driver_answers.rs` read the
//! objects back and check that the controllers refused each part.
//!
//! `instances.*` picks its answer from the node's name, `load-balancer.ensure` from the Service's:
//!
//! | name | answer |
//! | --- | --- |
//! | node `bad-scheme` | provider ID `aws:///us-east-1a/i-0123456789` (another provider's scheme) |
//! | node `steal` | provider ID `hostile-lb://ok-1` (node `ok-1`'s) |
//! | node `change-id` | provider ID `hostile-lb://someone-else` (the node already has one) |
//! | node `bad-addresses` | invalid, duplicate and 40 extra addresses |
//! | node `bad-labels` | invalid instance type and zone, invalid, reserved and 70 extra labels |
//! | node `bad-event` | a driver event with an invalid reason and a 3,000-byte note |
//! | node `gone-*`, `*victim*` | `instance-exists` is `false` |
//! | node `sleepy-*` | `instance-shutdown` is `true` |
//! | Service `svc-annotations` | annotations outside its prefixes, kubectl's, malformed, too big; removes a user's |
//! | Service `svc-bad-ingress` | invalid ingress entries beside valid ones |
//! | Service `svc-many-ingress` | 20 ingress entries |
//! | Service `svc-bad-event` | a driver event with an invalid reason and a 3,000-byte note |
//! | any other node or Service | a valid answer (`hostile-lb://<name>`; ingress `192.0.2.10` without ip-mode) |
//!
//! Every answer stays inside the runtime's own size caps, so it reaches the controllers' rules.

use wasm_ccm_sdk::cluster;
use wasm_ccm_sdk::types::{
    AddressType, Context, EnsureResult, Ingress, InstanceMetadata, IpMode, Node, NodeAddress,
    ProviderError, ProviderInfo, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider};

const SCHEME: &str = "hostile-lb";

/// The driver; it keeps no state.
pub struct HostileLb;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ip(address: &str) -> NodeAddress {
    NodeAddress::new(AddressType::InternalIp, address)
}

/// A note of 3,000 bytes of two-byte characters: over the apiserver's 1,024 bytes, and cut in
/// the middle of a character if cut by bytes carelessly.
fn long_note() -> String {
    format!("x{}", "é".repeat(1500))
}

impl Provider for HostileLb {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "hostile-lb".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: SCHEME.into(),
            default_egress: Vec::new(),
            env_prefixes: Vec::new(),
            annotation_prefixes: vec![
                "hostile-lb.example/".into(),
                "service.beta.kubernetes.io/hostile-lb-type".into(),
            ],
            secrets: Vec::new(),
        }
    }

    fn init(
        _ctx: Context,
        _config: Vec<u8>,
        _env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        Ok(HostileLb)
    }
}

impl Instances for HostileLb {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        Ok(!(node.name.starts_with("gone") || node.name.contains("victim")))
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        Ok(node.name.starts_with("sleepy"))
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        let mut meta = InstanceMetadata::new(format!("{SCHEME}://{}", node.name));
        meta.instance_type = "t1".into();
        meta.zone = "z1".into();
        meta.region = "r1".into();
        meta.addresses = vec![ip("10.0.0.1")];
        match node.name.as_str() {
            "bad-scheme" => meta.provider_id = "aws:///us-east-1a/i-0123456789".into(),
            "steal" => meta.provider_id = format!("{SCHEME}://ok-1"),
            "change-id" => meta.provider_id = format!("{SCHEME}://someone-else"),
            "bad-addresses" => {
                meta.addresses = vec![
                    ip("not-an-ip"),
                    NodeAddress::new(AddressType::ExternalIp, "999.1.1.1"),
                    NodeAddress::new(AddressType::Hostname, "bad host name!"),
                    ip("10.0.0.5"),
                    ip("10.0.0.5"),
                    NodeAddress::new(AddressType::InternalDns, "node-1.example.com"),
                ];
                meta.addresses
                    .extend((0..40).map(|i| ip(&format!("10.1.0.{i}"))));
            }
            "bad-labels" => {
                meta.instance_type = "bad value!".into();
                meta.zone = "z".repeat(300);
                let big = "v".repeat(10_000);
                meta.additional_labels = pairs(&[
                    ("bad key!", "x"),
                    ("KUBERNETES.IO/shout", "x"),
                    ("Node.Kubernetes.Io/sneaky", "x"),
                    ("example.com/big", &big),
                    ("example.com/ok", "yes"),
                ]);
                meta.additional_labels
                    .extend((0..70).map(|i| (format!("example.com/l{i}"), format!("v{i}"))));
            }
            "bad-event" => cluster::warning("bad reason!", &long_note()),
            _ => {}
        }
        Ok(meta)
    }
}

impl LoadBalancer for HostileLb {
    fn get(&self, _service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        Ok(None)
    }

    fn name(&self, service: &Service) -> String {
        format!("hostile-lb-{}", service.name)
    }

    fn ensure(&self, service: &Service, _nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        // No ip-mode: the apiserver defaults it to VIP; a converged Service must not be
        // re-written because of that.
        let plain = Ingress {
            ip: Some("192.0.2.10".into()),
            hostname: None,
            ip_mode: None,
        };
        let mut result = EnsureResult::with_ingress(vec![plain]);
        match service.name.as_str() {
            "svc-good" => {
                result.set_annotations = pairs(&[("hostile-lb.example/id", "svc-good")]);
            }
            "svc-annotations" => {
                let big = "b".repeat(40 * 1024);
                result.set_annotations = pairs(&[
                    (
                        "kubectl.kubernetes.io/last-applied-configuration",
                        "{\"hijacked\":true}",
                    ),
                    ("service.beta.kubernetes.io/aws-load-balancer-type", "nlb"),
                    ("bad key!", "x"),
                    ("hostile-lb.example/ok", "yes"),
                    ("service.beta.kubernetes.io/hostile-lb-type", "declared"),
                    ("hostile-lb.example/big-1", &big),
                    // Over the 64 KiB one answer may add.
                    ("hostile-lb.example/big-2", &big),
                ]);
                result.remove_annotations = vec![
                    "owner.example/keep-me".into(),
                    "hostile-lb.example/stale".into(),
                ];
            }
            "svc-bad-ingress" => {
                result.ingress = vec![
                    Ingress {
                        ip: Some("not-an-ip".into()),
                        hostname: None,
                        ip_mode: None,
                    },
                    Ingress {
                        ip: None,
                        hostname: None,
                        ip_mode: None,
                    },
                    Ingress::hostname("10.0.0.1"),
                    Ingress {
                        ip: None,
                        hostname: Some("lb.example.com".into()),
                        ip_mode: Some(IpMode::Proxy),
                    },
                    Ingress::vip("192.0.2.20"),
                    Ingress::hostname("ok.example.com"),
                ];
            }
            "svc-many-ingress" => {
                result.ingress = (0..20)
                    .map(|i| Ingress::vip(format!("192.0.2.{}", 100 + i)))
                    .collect();
            }
            "svc-bad-event" => cluster::warning("bad reason!", &long_note()),
            _ => {}
        }
        Ok(result)
    }

    fn update(&self, _service: &Service, _nodes: &[Node]) -> Result<(), ProviderError> {
        Ok(())
    }

    fn delete(&self, _service: &Service) -> Result<(), ProviderError> {
        Ok(())
    }
}

wasm_ccm_sdk::export_driver!(HostileLb);
