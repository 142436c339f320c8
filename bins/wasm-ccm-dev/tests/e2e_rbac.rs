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

/// deploy/components/shadow: `wasm-ccm run --shadow --leader-elect=false` as the component's
/// own ServiceAccount, with only its read-only ClusterRole (rbac.yaml) and the report reader
/// (report-reader.yaml), beside tainted nodes and a LoadBalancer Service. It works out what it
/// would write (the report names every object), yet initialises nothing, publishes no address,
/// sends no write, event or Lease request, and is never refused: the read-only role is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_component_rbac_is_read_only_and_enough() {
    const SHADOW_TOKEN: &str = "shadow-sa-token";
    const READER_TOKEN: &str = "shadow-reader-token";
    let component =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/components/shadow");
    let load = |file: &str| {
        wasm_ccm_sim::kube::load_seed_file(&component.join(file))
            .unwrap_or_else(|e| panic!("deploy/components/shadow/{file}: {e}"))
    };
    let account_of = |objects: &[Value], file: &str| -> String {
        let sa = objects
            .iter()
            .find(|o| o["kind"] == "ServiceAccount")
            .unwrap_or_else(|| panic!("{file} has a ServiceAccount"));
        format!(
            "system:serviceaccount:{}:{}",
            sa["metadata"]["namespace"].as_str().expect("namespace"),
            sa["metadata"]["name"].as_str().expect("name")
        )
    };
    let shadow_objects = load("rbac.yaml");
    let reader_objects = load("report-reader.yaml");
    let shadow_user = account_of(&shadow_objects, "rbac.yaml");
    let reader_user = account_of(&reader_objects, "report-reader.yaml");
    assert_ne!(
        shadow_user, SA_USER,
        "the shadow must not share the CCM's ServiceAccount: RBAC adds up its bindings"
    );
    // Read-only by construction: get/list/watch, and `create` only of the delegated-auth
    // reviews (questions, not writes).
    for role in shadow_objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
    {
        for rule in role["rules"].as_array().expect("rules") {
            let reviews = rule["resources"].as_array().is_some_and(|r| {
                r.iter()
                    .all(|r| r == "tokenreviews" || r == "subjectaccessreviews")
            });
            for verb in rule["verbs"].as_array().expect("verbs") {
                let verb = verb.as_str().expect("verb");
                assert!(
                    ["get", "list", "watch"].contains(&verb) || (reviews && verb == "create"),
                    "deploy/components/shadow/rbac.yaml grants {verb} in {rule}"
                );
            }
        }
    }
    let rbac: Vec<Value> = shadow_objects
        .iter()
        .chain(&reader_objects)
        .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .cloned()
        .collect();
    let sim = rbac_sim(
        rbac,
        &[
            (SHADOW_TOKEN, &shadow_user, SA_GROUPS),
            (READER_TOKEN, &reader_user, SA_GROUPS),
        ],
    )
    .await;

    let (cloud, config) = static_cloud(vec![
        instance("shadow-node-a", "10.0.0.1"),
        instance("shadow-node-b", "10.0.0.2"),
    ])
    .await;
    for n in ["shadow-node-a", "shadow-node-b"] {
        sim.create(node(n, None, true)).expect("node");
    }
    sim.create(lb_service("shadow-web")).expect("svc");

    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig_for_token(SHADOW_TOKEN)).expect("kubeconfig");
    let kubeconfig = kubeconfig.display().to_string();
    let port = free_port();
    let port_arg = port.to_string();
    let ccm = Ccm::start(
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
            "--secure-port",
            &port_arg,
            "--bind-address",
            "127.0.0.1",
            // As the component renders it.
            "--shadow",
            "--leader-elect=false",
        ],
    );

    // The report, read as the component's report reader, names every object the shadow
    // would have written: it did the work, it only did not send it.
    let started = std::time::Instant::now();
    let report = loop {
        let answer = https_client()
            .get(format!("https://127.0.0.1:{port}/shadow"))
            .bearer_auth(READER_TOKEN)
            .send()
            .await;
        if let Ok(r) = answer {
            let status = r.status();
            let body = r.text().await.unwrap_or_default();
            // The reader's token is checked (TokenReview) and may GET /shadow
            // (SubjectAccessReview); a refusal is final, anything else may be a start.
            assert!(
                status != 401 && status != 403,
                "GET /shadow as {reader_user}: {status} {body}\n{}",
                ccm_log(&ccm)
            );
            if status.is_success()
                && ["shadow-node-a", "shadow-node-b", "shadow-web"]
                    .iter()
                    .all(|name| body.contains(name))
            {
                break body;
            }
        }
        assert!(
            started.elapsed() < WAIT,
            "the report never named both nodes and the Service\n{}",
            ccm_log(&ccm)
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        serde_json::from_str::<Value>(&report).is_ok(),
        "GET /shadow answers JSON: {report}"
    );

    // Nothing reached the cluster.
    for n in ["shadow-node-a", "shadow-node-b"] {
        let node = sim.get("nodes", None, n).expect("node");
        assert!(
            has_taint(&node, UNINITIALIZED),
            "{n} was initialised by a shadow: {node}"
        );
        assert!(
            node["spec"]["providerID"].is_null(),
            "{n} got a provider ID: {node}"
        );
    }
    let svc = service(&sim, "shadow-web").expect("shadow-web");
    assert!(
        ingress_ip(&svc).is_none() && !has_finalizer(&svc),
        "a shadow wrote the Service: {svc}"
    );
    let requests = sim.requests();
    assert!(!requests.is_empty(), "the simulator logged no request");
    let review = |r: &wasm_ccm_sim::kube::RequestRecord| {
        r.method == "POST"
            && (r.path == "/apis/authentication.k8s.io/v1/tokenreviews"
                || r.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews")
    };
    let writes: Vec<String> = requests
        .iter()
        .filter(|r| r.method != "GET" && !review(r))
        .map(|r| format!("{} {}?{} -> {}", r.method, r.path, r.query, r.status))
        .collect();
    assert!(
        writes.is_empty(),
        "a shadow sent writes: {writes:#?}\n{}",
        ccm_log(&ccm)
    );
    let touched: Vec<String> = requests
        .iter()
        .filter(|r| {
            r.resource.as_deref().is_some_and(|res| {
                res.starts_with("leases") || res.starts_with("events") || res.starts_with("secrets")
            })
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        touched.is_empty(),
        "a shadow with --leader-elect=false touched leases, events or secrets: {touched:#?}"
    );
    // Never refused: no 403 at all, no denied decision, and every request carried the token.
    let denied: Vec<String> = sim
        .rbac_decisions()
        .iter()
        .filter(|d| !d.allowed)
        .map(|d| {
            format!(
                "{} {} {} {:?}",
                d.user,
                d.attributes.verb,
                d.attributes.combined_resource(),
                d.attributes.path
            )
        })
        .collect();
    assert!(
        denied.is_empty() && requests.iter().all(|r| r.status != 403),
        "permissions missing from deploy/components/shadow/rbac.yaml: {denied:#?}\n{}",
        ccm_log(&ccm)
    );
    assert!(
        requests.iter().all(|r| r.status != 401),
        "the shadow's requests carry the token"
    );
    assert!(
        sim.rbac_decisions()
            .iter()
            .any(|d| d.allowed && d.user == shadow_user),
        "no request of the shadow was judged by deploy/components/shadow/rbac.yaml"
    );
}

/// The user of each controller account, as the apiserver names it.
fn account_user(account: &str) -> String {
    format!("system:serviceaccount:kube-system:{account}")
}

/// Runs `wasm-ccm run --use-service-account-credentials` as deploy/base's ServiceAccount
/// against `objects` over nodes n1, n2 and doomed and the Service web, drives initialisation,
/// an address, a node deletion and the Service's deletion (as far as the RBAC lets them go),
/// and returns the simulator and the CCM.
async fn run_with_controller_accounts(
    objects: Vec<Value>,
    until_done: bool,
) -> (wasm_ccm_sim::kube::KubeSim, Ccm, tempfile::TempDir) {
    let sim = rbac_sim(objects, &[]).await;
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
    let ccm = Ccm::start(
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
            "--use-service-account-credentials",
        ],
    );
    if until_done {
        eventually("nodes initialised", || {
            ["n1", "n2", "doomed"].iter().all(|n| initialised(&sim, n))
        })
        .await;
        eventually("web has an address", || {
            service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
        })
        .await;
        cloud.remove_instance("doomed");
        set_ready(&sim, "doomed", false);
        eventually("doomed deleted", || {
            sim.get("nodes", None, "doomed").is_none()
        })
        .await;
        sim.remove("services", Some("default"), "web")
            .expect("delete");
        eventually("web deleted", || service(&sim, "web").is_none()).await;
    }
    // The cloud stays up for the CCM's lifetime.
    std::mem::forget(cloud);
    (sim, ccm, dir)
}

/// `--use-service-account-credentials` with deploy/base's RBAC (rbac.yaml and
/// rbac-controllers.yaml): the CCM gets (creating) node-controller and service-controller in
/// kube-system and their tokens, never route-controller's (routes off, as upstream's route
/// controller asks for no client then); every write of a controller is judged as its own
/// account (nodes as node-controller, Services as service-controller, events as one of them),
/// none as the CCM's account, while the informers, the account lookups and the token requests
/// are the CCM's own; and nothing is denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_controller_writes_as_its_own_service_account_with_deploy_rbac() {
    let mut objects = deploy_rbac();
    objects.extend(controller_rbac());
    let (sim, ccm, _dir) = run_with_controller_accounts(objects, true).await;

    for account in ["node-controller", "service-controller"] {
        assert!(
            sim.get("serviceaccounts", Some("kube-system"), account)
                .is_some(),
            "{account} was created\n{}",
            ccm_log(&ccm)
        );
    }
    assert!(
        sim.get("serviceaccounts", Some("kube-system"), "route-controller")
            .is_none(),
        "no account for a controller that does not run"
    );
    let decisions = sim.rbac_decisions();
    let denied: Vec<String> = decisions
        .iter()
        .filter(|d| !d.allowed)
        .map(|d| {
            format!(
                "{} {} {}",
                d.user,
                d.attributes.verb,
                d.attributes.combined_resource()
            )
        })
        .collect();
    assert!(
        denied.is_empty() && sim.requests().iter().all(|r| r.status != 403),
        "denied with --use-service-account-credentials: {denied:#?}\n{}",
        ccm_log(&ccm)
    );
    let node_user = account_user("node-controller");
    let service_user = account_user("service-controller");
    let writes = |resource: &str| -> Vec<(String, String)> {
        decisions
            .iter()
            .filter(|d| {
                d.attributes.combined_resource() == resource
                    && matches!(
                        d.attributes.verb.as_str(),
                        "create" | "update" | "patch" | "delete"
                    )
            })
            .map(|d| (d.user.clone(), d.attributes.verb.clone()))
            .collect()
    };
    let by = |resource: &str, user: &str, verb: &str| {
        writes(resource).iter().any(|(u, v)| u == user && v == verb)
    };
    assert!(
        by("nodes", &node_user, "patch"),
        "node initialisation as node-controller: {:?}",
        writes("nodes")
    );
    assert!(
        by("nodes/status", &node_user, "patch"),
        "addresses as node-controller"
    );
    assert!(
        by("nodes", &node_user, "delete"),
        "the lifecycle's delete as node-controller"
    );
    assert!(
        by("services/status", &service_user, "patch"),
        "ingress and finalizer as service-controller"
    );
    for resource in [
        "nodes",
        "nodes/status",
        "services",
        "services/status",
        "events",
    ] {
        let strays: Vec<_> = writes(resource)
            .into_iter()
            .filter(|(u, _)| *u != node_user && *u != service_user)
            .collect();
        assert!(
            strays.is_empty(),
            "{resource} written as another account: {strays:?}"
        );
    }
    assert!(
        writes("events")
            .iter()
            .any(|(u, _)| *u == node_user || *u == service_user),
        "events published as a controller account"
    );
    // The process's own account: the informers and the token requests.
    let own = |resource: &str, verb: &str| {
        decisions.iter().any(|d| {
            d.allowed
                && d.user == SA_USER
                && d.attributes.combined_resource() == resource
                && d.attributes.verb == verb
        })
    };
    assert!(
        own("nodes", "watch") && own("services", "watch"),
        "the informers watch as the CCM"
    );
    assert!(
        own("serviceaccounts/token", "create"),
        "tokens requested by the CCM"
    );
    assert!(
        own("serviceaccounts", "create"),
        "the missing accounts created by the CCM"
    );
    let controller_reads: Vec<_> = decisions
        .iter()
        .filter(|d| d.user != SA_USER && matches!(d.attributes.verb.as_str(), "list" | "watch"))
        .map(|d| {
            format!(
                "{} {} {}",
                d.user,
                d.attributes.verb,
                d.attributes.combined_resource()
            )
        })
        .collect();
    assert!(
        controller_reads.is_empty(),
        "a controller account listed or watched: {controller_reads:?}"
    );
    // The requests carried the accounts' tokens: a User-Agent naming the account.
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.user_agent.as_deref().is_some_and(
                |a| a.ends_with("/system:serviceaccount:kube-system:service-controller")
            )),
        "the service controller's requests name its account in the User-Agent"
    );
}

/// The check has teeth: without service-controller's binding its status writes are 403s
/// judged as service-controller (the CCM's own account may write services/status, so a write
/// sent with the process's credentials would pass), and no address is published; the node
/// controllers, still bound, initialise the nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_controllers_binding_its_writes_are_refused() {
    let mut objects = deploy_rbac();
    objects.extend(controller_rbac().into_iter().filter(|o| {
        !(o["kind"] == "ClusterRoleBinding"
            && o["metadata"]["name"] == "wasm-ccm:service-controller")
    }));
    let (sim, ccm, _dir) = run_with_controller_accounts(objects, false).await;
    let service_user = account_user("service-controller");
    eventually("a 403 on services/status for service-controller", || {
        sim.rbac_decisions().iter().any(|d| {
            !d.allowed
                && d.user == service_user
                && d.attributes.combined_resource() == "services/status"
        })
    })
    .await;
    eventually("nodes initialised", || {
        ["n1", "n2"].iter().all(|n| initialised(&sim, n))
    })
    .await;
    assert!(
        ingress_ip(&service(&sim, "web").expect("web")).is_none(),
        "{}",
        ccm_log(&ccm)
    );
}
