//! The official Kubernetes Python client judges the simulator: `kubernetes` from PyPI (pinned in
//! crates/sim/clients/kubernetes.txt, installed once into a venv under target/tools) runs
//! crates/sim/clients/kubernetes_client.py against a simulator on loopback. The script covers
//! CRUD, the three patch types, AlreadyExists/NotFound/Invalid/Conflict, dry runs, finalizers,
//! the Service status subresource with ipMode defaulting, Leases, Events through both APIs and
//! their field selectors, pages read from the first page's snapshot (410 once compacted, with a
//! token to go on), the refusal of server-side apply, a terminating namespace, watches from a
//! version, initial events with their bookmark, and 410 after compaction; it
//! prints what the client saw and the lines are compared here with what a real apiserver
//! answers. Needs `python3` with `venv`, and PyPI the first time.

mod common;

use serde_json::json;
use wasm_ccm_test_tools::pypi;

const REQUIREMENTS: &str = "crates/sim/clients/kubernetes.txt";
const SCRIPT: &str = "crates/sim/clients/kubernetes_client.py";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_sees_an_apiserver() {
    let venv = tokio::task::spawn_blocking(|| pypi::venv("kubernetes-client-py", REQUIREMENTS))
        .await
        .expect("venv task")
        .unwrap_or_else(|e| {
            panic!(
                "cannot install the Kubernetes Python client from PyPI ({REQUIREMENTS}); this test \
                 needs python3 with venv and PyPI reachable once: {e}"
            )
        });
    let s = common::start().await;
    // A resourceVersion that compaction then makes too old, for the 410 checks.
    let cm = "/api/v1/namespaces/default/configmaps";
    assert_eq!(
        s.post(cm, &json!({"metadata": {"name": "pre"}}))
            .await
            .status,
        201
    );
    let compacted = common::rv(&s.get(cm).await.body);
    assert_eq!(s.delete(&format!("{cm}/pre"), None).await.status, 200);
    s.sim.compact();

    let args = [s.sim.url(), compacted];
    // The script blocks; the simulator keeps serving on this runtime meanwhile.
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pypi::run_script(&venv, SCRIPT, &args)
    })
    .await
    .expect("script task")
    .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = out.lines().collect();
    let expected = [
        "create cfg 1 True",
        "replace 2",
        "list ['cfg']",
        "already-exists 409 AlreadyExists configmaps -",
        "not-found 404 NotFound configmaps -",
        "invalid 422 Invalid ConfigMap metadata.name:FieldValueInvalid",
        "conflict 409 Conflict configmaps -",
        "field-selector 400 BadRequest  -",
        "strategic [('a', '2'), ('b', 'x')]",
        "merge [('a', '2')]",
        "json-patch [('a', '3')]",
        "json-patch-test 422 Invalid  :UnexpectedServerResponse",
        "dry-create dry 404 NotFound configmaps -",
        "dry-delete cfg",
        "terminating True ['example.com/hold']",
        "finalized 404 NotFound configmaps -",
        "deleted Success",
        "service LoadBalancer TCP True",
        "status 192.0.2.10 VIP",
        "main-keeps-status 192.0.2.10",
        "status-invalid 422 Invalid Service status.loadBalancer.ingress[0].ip:FieldValueInvalid,status.loadBalancer.ingress[0].ipMode:FieldValueNotSupported",
        "service-deleted V1Service lb",
        "lease b 15",
        "lease-stale 409 Conflict leases -",
        "lease-invalid 422 Invalid Lease spec.leaseDurationSeconds:FieldValueInvalid",
        "event-whole-second 400 BadRequest  -",
        "event-core-view [('ev1', 'node synced', 'Synced')]",
        "event-regarding ['ev1']",
        "event-regarding-other []",
        "event-core-label 400 BadRequest  -",
        "event-invalid 422 Invalid Event action:FieldValueRequired,type:FieldValueInvalid",
        "page-snapshot ['p1', 'p2'] [('p3', 'old'), ('p4', 'old')] True",
        "continue-compacted 410 Expired True",
        "continue-latest [('p2', 'newer'), ('p4', 'new'), ('p5', None)]",
        "server-side-apply 415 UnsupportedMediaType  -",
        "namespace-deleting Terminating True",
        "namespace-no-new-content 403 Forbidden configmaps metadata.namespace:NamespaceTerminating",
        "namespace-gone 404 NotFound namespaces -",
        "watch-from ['ADDED w1', 'MODIFIED w1']",
        "watch-initial ['ADDED w1', 'BOOKMARK true']",
        "watch-initial-without-bookmarks 422 Invalid ListOptions allowWatchBookmarks:FieldValueForbidden",
        "watch-compacted 410",
        "list-compacted 410 Expired  -",
    ];
    assert_eq!(lines, expected, "full output:\n{out}");
}
