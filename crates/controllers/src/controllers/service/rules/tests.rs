//! Cases ported from upstream's `TestNeedsUpdate`, `TestNeedsCleanup`, `TestWantsLoadBalancer`,
//! the stable-node-set predicate tests and `Test_shouldSyncUpdatedNode_*`, as data.

use super::*;
use serde_json::{Value, json};

fn svc(v: Value) -> Service {
    let mut base = json!({
        "metadata": {"name": "s", "namespace": "default", "uid": "u1"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}]}
    });
    merge(&mut base, v);
    serde_json::from_value(base).expect("test service")
}

fn node(v: Value) -> Node {
    let mut base = json!({"metadata": {"name": "n"}, "spec": {"providerID": "static://n"}});
    merge(&mut base, v);
    serde_json::from_value(base).expect("test node")
}

/// RFC 7386 merge, enough to express each case as a change to a base object.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p,
    }
}

#[test]
fn wants_load_balancer_table() {
    for (patch, want) in [
        (json!({}), true),
        (json!({"spec": {"type": "ClusterIP"}}), false),
        (json!({"spec": {"type": "NodePort"}}), false),
        (
            json!({"spec": {"loadBalancerClass": "example.com/other"}}),
            false,
        ),
        (json!({"spec": {"loadBalancerClass": "wasm-ccm"}}), false),
    ] {
        assert_eq!(wants_load_balancer(&svc(patch.clone())), want, "{patch}");
    }
}

#[test]
fn needs_cleanup_table() {
    let fin = json!([LB_FINALIZER]);
    for (patch, want) in [
        (json!({}), false),
        (json!({"metadata": {"finalizers": fin}}), false),
        (
            json!({"metadata": {"finalizers": fin, "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            true,
        ),
        (
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["other"]}}),
            false,
        ),
        (
            json!({"metadata": {"finalizers": fin}, "spec": {"type": "ClusterIP"}}),
            true,
        ),
        (json!({"spec": {"type": "ClusterIP"}}), false),
        // Moved to another class (through ClusterIP) while no controller was watching.
        (
            json!({"metadata": {"finalizers": fin}, "spec": {"loadBalancerClass": "example.com/other"}}),
            true,
        ),
        (
            json!({"spec": {"loadBalancerClass": "example.com/other"}}),
            false,
        ),
    ] {
        assert_eq!(needs_cleanup(&svc(patch.clone())), want, "{patch}");
    }
}

#[test]
fn node_sync_updates_only_load_balancers_we_provisioned_and_keep() {
    let fin = json!([LB_FINALIZER]);
    for (patch, want) in [
        (json!({"metadata": {"finalizers": fin}}), true),
        // Cleaned up (finalizer gone) or never provisioned: an update could create one.
        (json!({}), false),
        // Being deleted: the cleanup owns it now.
        (
            json!({"metadata": {"finalizers": fin, "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            false,
        ),
        (
            json!({"metadata": {"finalizers": fin}, "spec": {"type": "ClusterIP"}}),
            false,
        ),
        (
            json!({"metadata": {"finalizers": fin}, "spec": {"loadBalancerClass": "example.com/other"}}),
            false,
        ),
    ] {
        assert_eq!(may_update_backends(&svc(patch.clone())), want, "{patch}");
    }
}

#[test]
fn needs_update_table() {
    let cases = [
        ("no change", json!({}), json!({}), false),
        (
            "both ClusterIP",
            json!({"spec": {"type": "ClusterIP"}}),
            json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.9"}}),
            false,
        ),
        (
            "ClusterIP to LoadBalancer",
            json!({"spec": {"type": "ClusterIP"}}),
            json!({}),
            true,
        ),
        (
            "LoadBalancer to ClusterIP",
            json!({}),
            json!({"spec": {"type": "ClusterIP"}}),
            true,
        ),
        (
            "source ranges",
            json!({}),
            json!({"spec": {"loadBalancerSourceRanges": ["10.0.0.0/8"]}}),
            true,
        ),
        (
            "port number",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 81, "protocol": "TCP", "nodePort": 30080}]}}),
            true,
        ),
        (
            "node port",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30081}]}}),
            true,
        ),
        (
            "port name",
            json!({}),
            json!({"spec": {"ports": [{"name": "web", "port": 80, "protocol": "TCP", "nodePort": 30080}]}}),
            true,
        ),
        (
            "protocol",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "UDP", "nodePort": 30080}]}}),
            true,
        ),
        (
            "target port",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080, "targetPort": 8080}]}}),
            true,
        ),
        (
            "app protocol",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080, "appProtocol": "http"}]}}),
            true,
        ),
        (
            "port added",
            json!({}),
            json!({"spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}, {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30443}]}}),
            true,
        ),
        (
            "session affinity",
            json!({}),
            json!({"spec": {"sessionAffinity": "ClientIP"}}),
            true,
        ),
        (
            "session affinity config",
            json!({}),
            json!({"spec": {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}}}}),
            true,
        ),
        (
            "load balancer IP",
            json!({}),
            json!({"spec": {"loadBalancerIP": "192.0.2.1"}}),
            true,
        ),
        (
            "external IPs added",
            json!({}),
            json!({"spec": {"externalIPs": ["198.51.100.1"]}}),
            true,
        ),
        (
            "external IPs reordered",
            json!({"spec": {"externalIPs": ["a", "b"]}}),
            json!({"spec": {"externalIPs": ["b", "a"]}}),
            true,
        ),
        (
            "annotation added",
            json!({}),
            json!({"metadata": {"annotations": {"x": "y"}}}),
            true,
        ),
        (
            "annotation changed",
            json!({"metadata": {"annotations": {"x": "y"}}}),
            json!({"metadata": {"annotations": {"x": "z"}}}),
            true,
        ),
        ("uid", json!({}), json!({"metadata": {"uid": "u2"}}), true),
        (
            "traffic policy",
            json!({}),
            json!({"spec": {"externalTrafficPolicy": "Local"}}),
            true,
        ),
        (
            "health check port",
            json!({}),
            json!({"spec": {"healthCheckNodePort": 30999}}),
            true,
        ),
        (
            "ip families count",
            json!({"spec": {"ipFamilies": ["IPv4"]}}),
            json!({"spec": {"ipFamilies": ["IPv4", "IPv6"]}}),
            true,
        ),
        (
            "labels are no trigger",
            json!({}),
            json!({"metadata": {"labels": {"a": "b"}}}),
            false,
        ),
        (
            "selector is no trigger",
            json!({}),
            json!({"spec": {"selector": {"app": "x"}}}),
            false,
        ),
        (
            "allocateLoadBalancerNodePorts is no trigger",
            json!({}),
            json!({"spec": {"allocateLoadBalancerNodePorts": false}}),
            false,
        ),
        (
            "internal traffic policy is no trigger",
            json!({}),
            json!({"spec": {"internalTrafficPolicy": "Local"}}),
            false,
        ),
        (
            "ip family policy is no trigger",
            json!({}),
            json!({"spec": {"ipFamilyPolicy": "PreferDualStack"}}),
            false,
        ),
        (
            "status is no trigger",
            json!({}),
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
            false,
        ),
        (
            "class set on both",
            json!({"spec": {"loadBalancerClass": "x"}}),
            json!({"spec": {"loadBalancerClass": "x", "sessionAffinity": "ClientIP"}}),
            false,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(needs_update(&svc(old), &svc(new)), want, "{name}");
    }
}

#[test]
fn backend_predicates_table() {
    let cases = [
        ("plain node", json!({}), true),
        (
            "being deleted",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
            false,
        ),
        (
            "excluded, empty value",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: ""}}}),
            false,
        ),
        (
            "excluded, true",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "true"}}}),
            false,
        ),
        (
            "excluded, junk",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "junk"}}}),
            false,
        ),
        (
            "label false",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "false"}}}),
            true,
        ),
        (
            "label 0",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "0"}}}),
            true,
        ),
        (
            "label F",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "F"}}}),
            true,
        ),
        (
            "autoscaler taint",
            json!({"spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "effect": "NoSchedule"}]}}),
            false,
        ),
        (
            "not ready still a backend",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            true,
        ),
        (
            "uninitialized still a backend",
            json!({"spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}]}}),
            true,
        ),
        (
            "unschedulable still a backend",
            json!({"spec": {"unschedulable": true}}),
            true,
        ),
    ];
    for (name, patch, want) in cases {
        assert_eq!(is_backend(&node(patch)), want, "{name}");
    }
}

/// Every spelling Go's `strconv.ParseBool` accepts, and values it refuses, as the exclusion
/// label's value (upstream `nodeIncludedPredicate`: false keeps the node, true or unparsable
/// excludes it).
#[test]
fn exclusion_label_is_read_as_a_go_boolean() {
    let included = |value: Option<&str>| {
        let labels = match value {
            Some(v) => json!({EXCLUDE_LB_LABEL: v}),
            None => json!({"other": "label"}),
        };
        let n = node(json!({"metadata": {"labels": labels}}));
        assert_eq!(
            included_by_label(&n),
            is_backend(&n),
            "the label alone decides for a plain node ({value:?})"
        );
        included_by_label(&n)
    };
    let cases: &[(Option<&str>, bool)] = &[
        (None, true),
        // ParseBool's false spellings keep the node.
        (Some("0"), true),
        (Some("f"), true),
        (Some("F"), true),
        (Some("false"), true),
        (Some("FALSE"), true),
        (Some("False"), true),
        // Its true spellings exclude it.
        (Some("1"), false),
        (Some("t"), false),
        (Some("T"), false),
        (Some("true"), false),
        (Some("TRUE"), false),
        (Some("True"), false),
        // Anything ParseBool refuses excludes it.
        (Some(""), false),
        (Some("junk"), false),
        (Some("fAlSe"), false),
        (Some("no"), false),
        (Some("off"), false),
        (Some(" false"), false),
        (Some("false "), false),
        (Some("00"), false),
        (Some("karpenter"), false),
    ];
    for (value, want) in cases {
        assert_eq!(included(*value), *want, "label value {value:?}");
    }
    for (value, want) in [
        ("true", Some(true)),
        ("T", Some(true)),
        ("0", Some(false)),
        ("False", Some(false)),
        ("", None),
        ("yes", None),
    ] {
        assert_eq!(parse_go_bool(value), want, "{value:?}");
    }
}

#[test]
fn should_sync_updated_node_table() {
    let cases = [
        ("nothing changed", json!({}), json!({}), false),
        (
            "exclusion label added",
            json!({}),
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: ""}}}),
            true,
        ),
        (
            "exclusion label false to true",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "false"}}}),
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "true"}}}),
            true,
        ),
        (
            "exclusion label value junk to empty",
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: "junk"}}}),
            json!({"metadata": {"labels": {EXCLUDE_LB_LABEL: ""}}}),
            false,
        ),
        (
            "provider ID set",
            json!({"spec": {"providerID": null}}),
            json!({}),
            true,
        ),
        (
            "readiness alone",
            json!({}),
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            false,
        ),
        (
            "taint alone",
            json!({}),
            json!({"spec": {"taints": [{"key": TO_BE_DELETED_TAINT, "effect": "NoSchedule"}]}}),
            false,
        ),
        (
            "other labels",
            json!({}),
            json!({"metadata": {"labels": {"a": "b"}}}),
            false,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(
            should_sync_updated_node(&node(old), &node(new)),
            want,
            "{name}"
        );
    }
}

#[test]
fn backend_key_ignores_order_but_not_provider_ids() {
    let a = node(json!({"metadata": {"name": "a"}}));
    let b = node(json!({"metadata": {"name": "b"}}));
    let b2 = node(json!({"metadata": {"name": "b"}, "spec": {"providerID": "static://other"}}));
    assert_eq!(backend_key([&a, &b]), backend_key([&b, &a]));
    assert_ne!(backend_key([&a, &b]), backend_key([&a, &b2]));
    assert_ne!(backend_key([&a]), backend_key([&a, &b]));
}
