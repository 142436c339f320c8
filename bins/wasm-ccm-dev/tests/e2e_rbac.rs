//! End to end under RBAC: the simulator authenticates bearer tokens and authorizes every
//! request against the RBAC objects of deploy/base (rbac.yaml), and `wasm-ccm run` talks to it
//! as the ServiceAccount those manifests bind, with a kubeconfig holding that account's token.
//! A missing permission is a 403 and fails the test; rules that were never used are printed
//! (superfluous for this scenario, not a failure).

use std::collections::BTreeSet;

mod common;

use common::rbac::*;
use common::*;
use serde_json::{Value, json};

fn lb_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_rbac_is_enough_for_nodes_and_load_balancers() {
    let sim = rbac_sim(deploy_rbac(), &[]).await;

    let (cloud, config) = static_cloud(vec![
        instance("n1", "10.0.0.1"),
        instance("n2", "10.0.0.2"),
        instance("doomed", "10.0.0.3"),
    ])
    .await;
    for n in ["n1", "n2", "doomed"] {
        sim.create(node(n, None, true)).expect("node");
    }
    sim.create(lb_service("web")).expect("svc");

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = service_account_kubeconfig(&sim, dir.path());
    let port = free_port();
    let port_arg = port.to_string();

    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--kubeconfig",
            &kubeconfig,
            "--allow-egress",
            &cloud.url(),
            "--configure-cloud-routes=false",
            // The metrics port, whose token and access reviews use deploy/'s review rules.
            "--secure-port",
            &port_arg,
            "--bind-address",
            "127.0.0.1",
            // Leader election on (the default Lease kube-system/cloud-controller-manager).
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1500ms",
            "--leader-elect-retry-period",
            "200ms",
        ],
    );
    eventually("nodes initialised", || {
        ["n1", "n2", "doomed"].iter().all(|n| initialised(&sim, n))
    })
    .await;
    eventually("web has an address", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
    })
    .await;
    // Lease renewals (get + update by name).
    eventually("lease renewed", || {
        sim.rbac_decisions().iter().any(|d| {
            d.allowed && d.attributes.resource == "leases" && d.attributes.verb == "update"
        })
    })
    .await;
    // A scrape with a token: the CCM reviews it (TokenReview, then SubjectAccessReview) as its
    // ServiceAccount. That account may not read /metrics itself, so the answer is a 403.
    let started = std::time::Instant::now();
    loop {
        let answer = https_client()
            .get(format!("https://127.0.0.1:{port}/metrics"))
            .bearer_auth(SA_TOKEN)
            .send()
            .await;
        if let Ok(r) = answer {
            assert_eq!(r.status(), 403, "{:?}", r.text().await);
            break;
        }
        assert!(started.elapsed() < WAIT, "the metrics port never answered");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Node lifecycle: a NotReady node whose instance is gone is deleted.
    cloud.remove_instance("doomed");
    set_ready(&sim, "doomed", false);
    eventually("doomed deleted", || {
        sim.get("nodes", None, "doomed").is_none()
    })
    .await;
    // Service deletion: the load balancer is released and the finalizer removed.
    sim.remove("services", Some("default"), "web")
        .expect("delete");
    eventually("web deleted", || service(&sim, "web").is_none()).await;

    let decisions = sim.rbac_decisions();
    let denied: Vec<String> = decisions
        .iter()
        .filter(|d| !d.allowed)
        .map(|d| {
            format!(
                "{} {} {:?}",
                d.user,
                d.attributes.verb,
                (
                    &d.attributes.api_group,
                    d.attributes.combined_resource(),
                    &d.attributes.namespace,
                    &d.attributes.name,
                    &d.attributes.path
                )
            )
        })
        .collect();
    let forbidden = sim.requests().iter().filter(|r| r.status == 403).count();
    assert!(
        denied.is_empty() && forbidden == 0,
        "permissions missing from deploy/base/rbac.yaml: {denied:#?}\n{}",
        ccm_log(&_ccm)
    );
    let requests = sim.requests();
    assert!(!requests.is_empty(), "the simulator logged no request");
    assert!(
        requests.iter().all(|r| r.status != 401),
        "the CCM's requests carry the token"
    );

    // Which (rule, apiGroup, resource, verb) of deploy/ the CCM's account was allowed by.
    let used: BTreeSet<(String, String, usize, String, String, String)> = decisions
        .iter()
        .filter(|d| d.user == SA_USER)
        .filter_map(|d| {
            d.rule.as_ref().map(|r| {
                (
                    r.role_kind.clone(),
                    format!("{}/{}", r.role_namespace, r.role_name),
                    r.rule_index,
                    d.attributes.api_group.clone(),
                    d.attributes.combined_resource(),
                    d.attributes.verb.clone(),
                )
            })
        })
        .collect();
    let policy = sim.rbac_policy();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut unused: Vec<String> = Vec::new();
    let mut roles_used: BTreeSet<(String, String)> = BTreeSet::new();
    for object in deploy_rbac() {
        let kind = object["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let role = format!("{ns}/{name}");
        for (rr, rule) in policy.rules() {
            if rr.role_kind != kind || format!("{}/{}", rr.role_namespace, rr.role_name) != role {
                continue;
            }
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        let key = (
                            kind.to_string(),
                            role.clone(),
                            rr.rule_index,
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                        );
                        if used.contains(&key) {
                            roles_used.insert((kind.to_string(), role.clone()));
                        } else {
                            unused.push(format!(
                                "{kind} {role} rule {}: {verb} {resource} (group {group:?}){}",
                                rr.rule_index,
                                rule.get("resourceNames")
                                    .map(|n| format!(" resourceNames {n}"))
                                    .unwrap_or_default()
                            ));
                        }
                    }
                }
            }
        }
    }
    // Bindings whose role never allowed a request of the CCM.
    for object in deploy_rbac() {
        let kind = object["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
            continue;
        }
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let role_kind = object["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_ns = if role_kind == "Role" { ns } else { "" };
        let role = format!(
            "{role_ns}/{}",
            object["roleRef"]["name"].as_str().unwrap_or_default()
        );
        let any = used.iter().any(|(k, r, ..)| k == role_kind && *r == role);
        if !any {
            unused.push(format!(
                "{kind} {ns}/{}: {role_kind} {role} never allowed a request",
                object["metadata"]["name"].as_str().unwrap_or_default()
            ));
        }
    }
    // The scenario must have been judged by the rules at all.
    assert!(
        !used.is_empty() && !roles_used.is_empty(),
        "no request of the CCM was allowed by a deploy/ rule"
    );
    // What deploy/base grants beyond this scenario: every unused (verb, rule) must be one of
    // the grants listed below, each used by a path this scenario does not reliably take. A new
    // grant, or a grant of the main path (list/watch/patch of nodes and services, creating
    // events.k8s.io events, the lease) the CCM stops using, fails here. Whether a conflict
    // re-read or an event series happens depends on timing, so those may or may not be used:
    // the check is "within the list", not "equal to it".
    let unexpected: Vec<&String> = unused
        .iter()
        .filter(|u| !MAY_BE_UNUSED_IN_SCENARIO.contains(&u.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "deploy/base RBAC grants the CCM did not use here, and no entry of MAY_BE_UNUSED_IN_SCENARIO says why: {unexpected:#?}"
    );
}

/// The deploy/base grants this scenario may leave unused, and why.
const MAY_BE_UNUSED_IN_SCENARIO: &[&str] = &[
    // The informers stream their initial lists (a WATCH with sendInitialEvents); LIST is what
    // they fall back to on an apiserver without WatchList, so the grant stays.
    "ClusterRole /wasm-ccm rule 0: list nodes (group \"\")",
    "ClusterRole /wasm-ccm rule 2: list services (group \"\")",
    // A node write that meets a 409 re-reads the node (`get`); upstream's role grants the
    // `update` of nodes and of their status, which the CCM replaces by patches.
    "ClusterRole /wasm-ccm rule 0: get nodes (group \"\")",
    "ClusterRole /wasm-ccm rule 0: update nodes (group \"\")",
    "ClusterRole /wasm-ccm rule 1: update nodes/status (group \"\")",
    // The same for Services: a re-read after a conflict, and upstream's status update.
    "ClusterRole /wasm-ccm rule 2: get services (group \"\")",
    "ClusterRole /wasm-ccm rule 3: update services/status (group \"\")",
    // Events: the recorder creates events.k8s.io events, and patches one only when the same
    // event repeats into a series; the core-group verbs are upstream's for older recorders.
    "ClusterRole /wasm-ccm rule 4: create events (group \"\")",
    "ClusterRole /wasm-ccm rule 4: patch events (group \"\")",
    "ClusterRole /wasm-ccm rule 4: patch events (group \"events.k8s.io\")",
    "ClusterRole /wasm-ccm rule 4: update events (group \"\")",
    "ClusterRole /wasm-ccm rule 4: update events (group \"events.k8s.io\")",
    // Read only when the serving port delegates authentication with a client CA from the
    // extension-apiserver-authentication ConfigMap, which this scenario does not configure.
    "RoleBinding kube-system/wasm-ccm:extension-apiserver-authentication-reader: Role kube-system/extension-apiserver-authentication-reader never allowed a request",
];

fn ccm_log(ccm: &Ccm) -> String {
    let log = ccm.log();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The check has teeth: without the services/status rule the CCM's status writes are 403s,
/// worded like the apiserver's, and no address is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rule_is_a_403() {
    let mut objects = deploy_rbac();
    for o in objects.iter_mut().filter(|o| o["kind"] == "ClusterRole") {
        if let Some(rules) = o["rules"].as_array_mut() {
            rules.retain(|r| r["resources"] != json!(["services/status"]));
        }
    }
    let sim = rbac_sim(objects, &[]).await;
    let (cloud, config) = static_cloud(vec![instance("n1", "10.0.0.1")]).await;
    sim.create(node("n1", None, true)).expect("node");
    sim.create(lb_service("web")).expect("svc");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = service_account_kubeconfig(&sim, dir.path());
    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--kubeconfig",
            &kubeconfig,
            "--allow-egress",
            &cloud.url(),
            "--configure-cloud-routes=false",
            "--leader-elect=false",
        ],
    );
    let expected = format!(
        "services \"web\" is forbidden: User \"{SA_USER}\" cannot patch resource \"services/status\" in API group \"\" in the namespace \"default\""
    );
    eventually("a 403 on services/status", || {
        sim.rbac_decisions().iter().any(|d| {
            !d.allowed
                && d.attributes.combined_resource() == "services/status"
                && d.attributes.verb == "patch"
        })
    })
    .await;
    let denied = sim
        .rbac_decisions()
        .into_iter()
        .find(|d| {
            !d.allowed
                && d.attributes.combined_resource() == "services/status"
                && d.attributes.verb == "patch"
        })
        .expect("denied");
    assert_eq!(
        wasm_ccm_sim::kube::rbac::forbidden(&denied.user, &denied.attributes, &denied.reason)
            .message,
        expected
    );
    assert!(sim.requests().iter().any(|r| r.status == 403));
    assert!(ingress_ip(&service(&sim, "web").expect("web")).is_none());
}
