//! Upstream's `controllers/node/node_controller_test.go`, as data, run in process.
//!
//! Ported: `Test_syncNode` (21 cases as 15 rows: six `[instanceV2]` cases are the same row as
//! their `Instances` twin here, since a driver has one `instance-metadata` call for both Go
//! APIs), `Test_reconcileNodeLabels` (3),
//! `TestNodeAddressesNotUpdate` and `TestNodeAddressesNotUpdateV2` (one table of 2),
//! `TestUpdateNodeStatus` (4; as upstream since 1.35, kubernetes/kubernetes#136716, the pass runs
//! `--concurrent-node-status-updates` workers, and `status_pass_runs_its_own_workers` checks that
//! this many are really in flight, which upstream's call count cannot tell).
//! Skipped: `TestNodeAddressesChangeDetected` (pure; `rules::tests` covers the change
//! detection), `TestGetInstanceMetadata` (which of Go's `Instances`/`InstancesV2` APIs is asked:
//! a driver has one `instance-metadata` call).
//!
//! Translation: upstream's fake cloud answers through several calls (`InstanceID`,
//! `InstanceTypeByProviderID`, `GetZone`, …); each row scripts the one `instance-metadata` answer
//! those calls amount to. Provider IDs upstream writes without a scheme (`node0.aws.12345`,
//! `test-provider-id`) or with another provider's (`aws://12345`) are written with the fake
//! driver's scheme: ours deliberately skips nodes of another provider and refuses answers with a
//! foreign scheme (`answer_rules`), so the upstream spelling would test that instead.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasm_ccm_runtime::types::{InstanceMetadata, NodeAddress, ProviderError};

use crate::config::ControllerConfig;
use crate::controllers::node::NodeController;
use crate::controllers::node::rules::{PROVIDED_NODE_IP, UNINITIALIZED_TAINT as UNINIT};
use crate::convert::address_type_from_name;
use crate::machinery::runner::Reconciler;
use crate::test_support::{FakeCloud, Harness};
use wasm_ccm_sim::kube::RequestMatcher;

const COVER: &str = "ImproveCoverageTaint";
const CLOUD_ADDRS: &[(&str, &str)] = &[
    ("Hostname", "node0.cloud.internal"),
    ("InternalIP", "10.0.0.1"),
    ("ExternalIP", "132.143.154.163"),
];
const CLOUD_IPS: &[(&str, &str)] = &[
    ("InternalIP", "10.0.0.1"),
    ("ExternalIP", "132.143.154.163"),
];
const ZONE_LABELS: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/region", "us-west"),
    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
    ("topology.kubernetes.io/region", "us-west"),
    ("topology.kubernetes.io/zone", "us-west-1a"),
];

/// A node `node0` as a row describes it.
#[derive(Clone, Copy)]
struct N {
    provider_id: &'static str,
    taints: &'static [&'static str],
    node_ip: Option<&'static str>,
    labels: &'static [(&'static str, &'static str)],
    addresses: &'static [(&'static str, &'static str)],
}

const TAINTED: N = N {
    provider_id: "",
    taints: &[UNINIT],
    node_ip: None,
    labels: &[],
    addresses: &[],
};

fn node_json(n: &N) -> Value {
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|k| json!({"key": k, "value": "true", "effect": "NoSchedule"}))
        .collect();
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node0", "labels": labels(n.labels)},
        "spec": {"taints": taints},
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown"}],
            "addresses": addresses_json(n.addresses),
        },
    });
    if !n.provider_id.is_empty() {
        node["spec"]["providerID"] = n.provider_id.into();
    }
    if let Some(ip) = n.node_ip {
        node["metadata"]["annotations"] = json!({ PROVIDED_NODE_IP: ip });
    }
    node
}

fn labels(l: &[(&str, &str)]) -> BTreeMap<String, String> {
    l.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn addresses_json(a: &[(&str, &str)]) -> Value {
    a.iter()
        .map(|(t, ip)| json!({"type": t, "address": ip}))
        .collect()
}

fn meta(
    provider_id: &str,
    instance_type: &str,
    zone: bool,
    addresses: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> Result<InstanceMetadata, ProviderError> {
    Ok(InstanceMetadata {
        provider_id: provider_id.into(),
        instance_type: instance_type.into(),
        zone: if zone {
            "us-west-1a".into()
        } else {
            String::new()
        },
        region: if zone {
            "us-west".into()
        } else {
            String::new()
        },
        addresses: addresses
            .iter()
            .map(|(t, ip)| NodeAddress {
                kind: address_type_from_name(t).expect("a known address type"),
                address: ip.to_string(),
            })
            .collect(),
        additional_labels: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

/// The node as the simulator holds it, reduced to what the rows compare.
fn observed(node: &Value) -> (String, Vec<String>, BTreeMap<String, String>, Value) {
    let provider_id = node
        .pointer("/spec/providerID")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let taints = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|t| t["key"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let labels = serde_json::from_value(node["metadata"]["labels"].clone()).unwrap_or_default();
    let addresses = node
        .pointer("/status/addresses")
        .cloned()
        .unwrap_or_else(|| json!([]));
    (provider_id, taints, labels, addresses)
}

struct SyncNodeCase {
    name: &'static str,
    node: N,
    /// The driver's `instance-metadata` answer.
    answer: Result<InstanceMetadata, ProviderError>,
    want_err: bool,
    /// The node afterwards.
    want: N,
}

fn sync_node_cases() -> Vec<SyncNodeCase> {
    let pid = "fake://node0.aws.12345";
    let with_ip = |ip| N {
        provider_id: pid,
        taints: &[COVER, UNINIT],
        node_ip: Some(ip),
        addresses: &[("Hostname", "node0.cloud.internal")],
        ..TAINTED
    };
    let ip_after = N {
        taints: &[COVER],
        addresses: &[
            ("InternalIP", "10.0.0.1"),
            ("ExternalIP", "132.143.154.163"),
            ("Hostname", "node0.cloud.internal"),
        ],
        ..with_ip("10.0.0.1")
    };
    let initialised = N {
        provider_id: "fake://12345",
        taints: &[],
        addresses: CLOUD_ADDRS,
        ..TAINTED
    };
    vec![
        SyncNodeCase {
            name: "node initialized with hostname",
            node: N {
                addresses: &[("Hostname", "nodeoverriden")],
                ..TAINTED
            },
            answer: meta("fake://12345", "", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: initialised,
        },
        SyncNodeCase {
            name: "node initialized with hostname and cloud provider missing hostname",
            node: N {
                addresses: &[("Hostname", "nodeoverriden")],
                ..TAINTED
            },
            answer: meta("fake://12345", "", false, CLOUD_IPS, &[]),
            want_err: false,
            want: N {
                addresses: &[
                    ("InternalIP", "10.0.0.1"),
                    ("ExternalIP", "132.143.154.163"),
                    ("Hostname", "nodeoverriden"),
                ],
                ..initialised
            },
        },
        SyncNodeCase {
            name: "node initialized with provider ID",
            node: TAINTED,
            answer: meta("fake://12345", "", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: initialised,
        },
        SyncNodeCase {
            // Not tainted: only the labels are reconciled and the driver is not asked.
            name: "node ignored",
            node: N {
                taints: &[],
                ..TAINTED
            },
            answer: meta("fake://12345", "t1.micro", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: N {
                taints: &[],
                ..TAINTED
            },
        },
        SyncNodeCase {
            // Upstream's provider ID here is `aws://12345` (the fake cloud's `Provider`); ours
            // must be of the driver's scheme.
            name: "zone/region topology labels added",
            node: TAINTED,
            answer: meta("fake://12345", "", true, CLOUD_ADDRS, &[]),
            want_err: false,
            want: N {
                labels: ZONE_LABELS,
                ..initialised
            },
        },
        SyncNodeCase {
            name: "node addresses",
            node: N {
                taints: &[COVER, UNINIT],
                ..TAINTED
            },
            answer: meta("fake://12345", "", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: N {
                taints: &[COVER],
                ..initialised
            },
        },
        SyncNodeCase {
            // Deviation: the WIT contract has no "no metadata, no error" answer (upstream's
            // nil, nil, which leaves the node untouched without an error). The nearest answer,
            // `not-found`, leaves the node untouched too, as a typed error that retries it.
            name: "nil instanceMetadata provided by InstanceV2",
            node: with_ip("10.0.0.1"),
            answer: Err(ProviderError::NotFound("no metadata yet".into())),
            want_err: true,
            want: with_ip("10.0.0.1"),
        },
        SyncNodeCase {
            name: "provided node IP address",
            node: with_ip("10.0.0.1"),
            answer: meta("", "", false, CLOUD_IPS, &[]),
            want_err: false,
            want: ip_after,
        },
        SyncNodeCase {
            name: "provided node IP address is not valid",
            node: with_ip("invalid-ip"),
            answer: meta("", "", false, CLOUD_IPS, &[]),
            want_err: true,
            want: with_ip("invalid-ip"),
        },
        SyncNodeCase {
            name: "provided node IP address is not present",
            node: with_ip("10.0.0.2"),
            answer: meta("", "", false, CLOUD_IPS, &[]),
            want_err: true,
            want: with_ip("10.0.0.2"),
        },
        SyncNodeCase {
            name: "provider ID already set",
            node: N {
                provider_id: "fake://test-provider-id",
                taints: &[COVER, UNINIT],
                ..TAINTED
            },
            answer: meta("", "", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: N {
                provider_id: "fake://test-provider-id",
                taints: &[COVER],
                addresses: CLOUD_ADDRS,
                ..TAINTED
            },
        },
        SyncNodeCase {
            // Deviation: upstream initialises a node without a provider ID when the cloud does
            // not implement one ("for backward compatibility"); ours never initialises a node
            // without one (a typed `answer-refused` error, the taint stays).
            name: "provider ID not implemented",
            node: TAINTED,
            answer: meta("", "", false, &[], &[]),
            want_err: true,
            want: TAINTED,
        },
        SyncNodeCase {
            name: "[instanceV2] node initialized with provider ID",
            node: N {
                provider_id: "fake://12345",
                ..TAINTED
            },
            answer: meta("fake://12345", "", false, CLOUD_ADDRS, &[]),
            want_err: false,
            want: initialised,
        },
        SyncNodeCase {
            name: "[instanceV2] provided additional labels",
            node: N {
                provider_id: "fake://node0.cp.12345",
                ..with_ip("10.0.0.1")
            },
            answer: meta(
                "",
                "",
                true,
                CLOUD_IPS,
                &[
                    ("topology.k8s.cp/zone-id", "az1"),
                    ("my.custom.label/foo", "bar"),
                ],
            ),
            want_err: false,
            want: N {
                provider_id: "fake://node0.cp.12345",
                labels: &[
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                    ("topology.k8s.cp/zone-id", "az1"),
                    ("my.custom.label/foo", "bar"),
                ],
                ..ip_after
            },
        },
        SyncNodeCase {
            name: "[instanceV2] provided additional labels with labels to discard",
            node: N {
                provider_id: "fake://node0.cp.12345",
                labels: &[
                    ("my.custom.label/foo", "fizz"),
                    ("my.custom.label/bar", "foo"),
                ],
                ..with_ip("10.0.0.1")
            },
            answer: meta(
                "",
                "",
                true,
                CLOUD_IPS,
                &[
                    ("topology.kubernetes.io/region", "us-other-west"),
                    ("topology.k8s.io/region", "us-other-west"),
                    ("kubernetes.io/region", "us-other-west"),
                    ("k8s.io/region", "us-other-west"),
                    ("my.custom.label/foo", "bar"),
                    ("my.custom.label/bar", "foo"),
                    ("app.k8snio/bar", "foo"),
                    ("k8snio/bar", "foo"),
                ],
            ),
            want_err: false,
            want: N {
                provider_id: "fake://node0.cp.12345",
                labels: &[
                    ("failure-domain.beta.kubernetes.io/region", "us-west"),
                    ("failure-domain.beta.kubernetes.io/zone", "us-west-1a"),
                    ("topology.kubernetes.io/region", "us-west"),
                    ("topology.kubernetes.io/zone", "us-west-1a"),
                    ("my.custom.label/foo", "fizz"),
                    ("my.custom.label/bar", "foo"),
                    ("app.k8snio/bar", "foo"),
                    ("k8snio/bar", "foo"),
                ],
                ..ip_after
            },
        },
        SyncNodeCase {
            name: "[instanceV2] error getting InstanceMetadata",
            node: TAINTED,
            answer: Err(ProviderError::Transient("metadata error".into())),
            want_err: true,
            want: TAINTED,
        },
    ]
}

async fn run_sync_node(case: SyncNodeCase) {
    let cloud = FakeCloud::default();
    cloud
        .instances
        .lock()
        .unwrap()
        .insert("node0".into(), case.answer.clone());
    let h = Harness::start(cloud, vec![node_json(&case.node)]).await;
    let result = NodeController::new(Arc::clone(&h.ctx))
        .reconcile("node0")
        .await;
    assert_eq!(
        result.is_err(),
        case.want_err,
        "{}: {:?}",
        case.name,
        result.err()
    );
    let got = observed(&h.node("node0").expect("node0"));
    let want = observed(&node_json(&case.want));
    assert_eq!(got, want, "{}", case.name);
}

#[tokio::test]
async fn test_sync_node() {
    futures::future::join_all(sync_node_cases().into_iter().map(run_sync_node)).await;
}

struct LabelsCase {
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    want: &'static [(&'static str, &'static str)],
}

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const GA_ZONE: &str = "topology.kubernetes.io/zone";
const GA_REGION: &str = "topology.kubernetes.io/region";
const BETA_TYPE: &str = "beta.kubernetes.io/instance-type";
const GA_TYPE: &str = "node.kubernetes.io/instance-type";
const RECONCILED: &[(&str, &str)] = &[
    (BETA_ZONE, "foo"),
    (BETA_REGION, "bar"),
    (GA_ZONE, "foo"),
    (GA_REGION, "bar"),
    (BETA_TYPE, "the-best-type"),
    (GA_TYPE, "the-best-type"),
];

fn reconcile_labels_cases() -> Vec<LabelsCase> {
    vec![
        LabelsCase {
            name: "requires reconcile",
            labels: &[
                (BETA_ZONE, "foo"),
                (BETA_REGION, "bar"),
                (BETA_TYPE, "the-best-type"),
            ],
            want: RECONCILED,
        },
        LabelsCase {
            name: "doesn't require reconcile",
            labels: RECONCILED,
            want: RECONCILED,
        },
        LabelsCase {
            name: "require reconcile -- secondary labels are different from primary",
            labels: &[
                (BETA_ZONE, "foo"),
                (BETA_REGION, "bar"),
                (GA_ZONE, "wrongfoo"),
                (GA_REGION, "wrongbar"),
                (BETA_TYPE, "the-best-type"),
                (GA_TYPE, "the-wrong-type"),
            ],
            want: RECONCILED,
        },
    ]
}

async fn run_reconcile_labels(case: LabelsCase) {
    let node = N {
        provider_id: "fake://1",
        taints: &[],
        labels: case.labels,
        ..TAINTED
    };
    let h = Harness::start(FakeCloud::default(), vec![node_json(&node)]).await;
    NodeController::new(Arc::clone(&h.ctx))
        .reconcile("node0")
        .await
        .expect(case.name);
    let (_, _, got, _) = observed(&h.node("node0").expect("node0"));
    assert_eq!(got, labels(case.want), "{}", case.name);
    // Converged labels are not written again.
    if case.labels == case.want {
        assert!(h.writes("nodes", "node0").is_empty(), "{}", case.name);
    }
    assert_eq!(h.cloud.calls(), Vec::<String>::new(), "{}", case.name);
}

#[tokio::test]
async fn test_reconcile_node_labels() {
    futures::future::join_all(
        reconcile_labels_cases()
            .into_iter()
            .map(run_reconcile_labels),
    )
    .await;
}

/// `TestNodeAddressesNotUpdate` and `TestNodeAddressesNotUpdateV2`: the address refresh leaves a
/// node that still waits for initialisation alone (upstream: whose instance is not known).
#[tokio::test]
async fn test_node_addresses_not_update() {
    let cases = vec![
        ("TestNodeAddressesNotUpdate", TAINTED),
        ("TestNodeAddressesNotUpdateV2", TAINTED),
    ];
    let run = |(name, node): (&'static str, N)| async move {
        let cloud = FakeCloud::default();
        cloud
            .instances
            .lock()
            .unwrap()
            .insert("node0".into(), meta("", "", false, CLOUD_ADDRS, &[]));
        let h = Harness::start(cloud, vec![node_json(&node)]).await;
        NodeController::new(Arc::clone(&h.ctx))
            .update_addresses()
            .await;
        let (_, _, _, addresses) = observed(&h.node("node0").expect("node0"));
        assert_eq!(addresses, json!([]), "{name}");
        assert!(h.writes("nodes", "node0").is_empty(), "{name}");
    };
    futures::future::join_all(cases.into_iter().map(run)).await;
}

/// `TestUpdateNodeStatus`: one pass of the address refresh asks the cloud once per node,
/// whatever the number of workers.
#[tokio::test]
async fn test_update_node_status() {
    let cases: Vec<(&str, usize, usize)> = vec![
        ("single thread", 1, 100),
        ("5 workers", 5, 100),
        ("10 workers", 10, 100),
        ("30 workers", 30, 100),
    ];
    let run = |(name, workers, nodes): (&'static str, usize, usize)| async move {
        let objects = (0..nodes)
            .map(|i| {
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": format!("node0{i}")},
                })
            })
            .collect();
        // Upstream sets both worker counts to the row's.
        let config = ControllerConfig {
            concurrent_node_syncs: workers,
            concurrent_node_status_updates: workers,
            ..ControllerConfig::default()
        };
        let h = Harness::start_with(FakeCloud::default(), objects, config).await;
        NodeController::new(Arc::clone(&h.ctx))
            .update_addresses()
            .await;
        assert_eq!(
            h.cloud.calls_of("instances.instance-metadata"),
            nodes,
            "{name}"
        );
    };
    futures::future::join_all(cases.into_iter().map(run)).await;
}

/// The status pass runs `--concurrent-node-status-updates` workers (unset: as many as
/// `--concurrent-node-syncs`), not the initialisation's count (upstream's split,
/// kubernetes/kubernetes#136716). Every node's address write is held by the simulator, so each
/// worker stops after its one `instance-metadata` call: the number of calls is the number of
/// workers.
#[tokio::test]
async fn status_pass_runs_its_own_workers() {
    // (name, --concurrent-node-syncs, --concurrent-node-status-updates, workers expected)
    let cases: Vec<(&str, usize, usize, usize)> = vec![
        ("status updates set, above node syncs", 1, 4, 4),
        ("status updates unset: node syncs", 3, 0, 3),
    ];
    let run = |(name, syncs, status, want): (&'static str, usize, usize, usize)| async move {
        const NODES: usize = 8;
        let cloud = FakeCloud::default();
        let mut objects = Vec::new();
        for i in 0..NODES {
            let node = format!("node{i}");
            let ip = format!("10.0.0.{}", i + 1);
            let answer = meta(
                &format!("fake://{node}"),
                "",
                false,
                &[("InternalIP", &ip)],
                &[],
            );
            cloud.instances.lock().unwrap().insert(node.clone(), answer);
            // Initialised, with no addresses yet: the pass writes the cloud's.
            objects.push(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node},
                "spec": {"providerID": format!("fake://{node}")},
            }));
        }
        let config = ControllerConfig {
            concurrent_node_syncs: syncs,
            concurrent_node_status_updates: status,
            ..ControllerConfig::default()
        };
        let h = Harness::start_with(cloud, objects, config).await;
        // Holds every address write for longer than any test runs.
        h.sim.faults().add_latency(
            RequestMatcher::resource("nodes")
                .with_method("PATCH")
                .with_subresource("status"),
            Duration::from_secs(24 * 3600),
        );
        let calls = || h.cloud.calls_of("instances.instance-metadata");
        let controller = NodeController::new(Arc::clone(&h.ctx));
        let pass = controller.update_addresses();
        tokio::pin!(pass);
        let reached = async {
            for _ in 0..1000 {
                if calls() >= want {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            () = &mut pass => panic!("{name}: the pass ended although every address write is held"),
            () = reached => {}
        }
        assert_eq!(calls(), want, "{name}: workers in flight");
        // They are all waiting on their held write (none was answered).
        let answered = h
            .sim
            .requests()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.subresource.as_deref() == Some("status"));
        assert_eq!(answered.count(), 0, "{name}");
    };
    futures::future::join_all(cases.into_iter().map(run)).await;
}
