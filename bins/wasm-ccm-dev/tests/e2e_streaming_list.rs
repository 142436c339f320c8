//! End to end: how the informers of the real `wasm-ccm run` get their initial lists from the
//! Kubernetes API simulator. Where the apiserver serves streaming lists (KEP-3157 WatchList) they
//! are streamed and no LIST is made; an apiserver without them (the `WatchList` feature gate
//! off, or older than 1.27) is asked once and then listed with LIST and WATCH; any other error
//! keeps the streaming list. Every wait polls with a bound; the simulator's request log is the
//! witness of what was asked.

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions, RequestMatcher, RequestRecord, Verb, WatchList};
use wasm_ccm_sim::static_cloud::StaticCloud;

/// The informer's line when it switches to LIST and WATCH.
const FALLBACK: &str = "the apiserver does not serve streaming lists";
const NODES: usize = 4;

fn lb_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
}

fn node_name(i: usize) -> String {
    format!("n{i}")
}

/// Nodes and a LoadBalancer Service made before the CCM starts, so only its initial lists can
/// bring them to the informers; and the CCM with the static driver.
async fn start_ccm(sim: &KubeSim) -> (StaticCloud, Ccm) {
    let (cloud, config) = static_cloud(
        (0..NODES)
            .map(|i| instance(&node_name(i), &format!("10.0.0.{}", i + 1)))
            .collect(),
    )
    .await;
    for i in 0..NODES {
        sim.create(node(&node_name(i), None, true)).expect("node");
    }
    sim.create(lb_service("web")).expect("svc");
    let ccm = Ccm::start(
        sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--allow-egress",
            &cloud.url(),
            "--configure-cloud-routes=false",
            "--leader-elect=false",
        ],
    );
    (cloud, ccm)
}

/// Every node initialised and the Service given an address: each informer's cache held every
/// object the simulator had before the start (the controllers act on the caches alone).
async fn every_object_reached_the_caches(sim: &KubeSim) {
    for i in 0..NODES {
        let name = node_name(i);
        eventually(&format!("{name} initialised"), || initialised(sim, &name)).await;
    }
    eventually("web has an address", || {
        service(sim, "web").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
}

/// The logged requests for `resource` with `verb`.
fn requests(sim: &KubeSim, resource: &str, verb: Verb) -> Vec<RequestRecord> {
    sim.requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some(resource) && r.verb == Some(verb))
        .collect()
}

/// Whether a watch asked for a streaming list.
fn streams(r: &RequestRecord) -> bool {
    r.query.split('&').any(|p| p == "sendInitialEvents=true")
}

fn fallback_lines(ccm: &Ccm) -> Vec<String> {
    ccm.log()
        .lines()
        .filter(|l| l.contains(FALLBACK))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_streamed_where_the_apiserver_serves_them() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (_cloud, ccm) = start_ccm(&sim).await;
    every_object_reached_the_caches(&sim).await;

    for resource in ["nodes", "services"] {
        assert_eq!(
            sim.request_counts_for(resource).list,
            0,
            "a LIST of {resource}: {:#?}",
            requests(&sim, resource, Verb::List)
        );
        let watches = requests(&sim, resource, Verb::Watch);
        let first = watches.first().expect("a watch");
        assert!(streams(first), "not a streaming list: {first:#?}");
        assert_eq!(first.status, 200, "{first:#?}");
        for p in [
            "resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks=true",
        ] {
            assert!(first.query.split('&').any(|q| q == p), "{p}: {first:#?}");
        }
    }
    assert!(fallback_lines(&ccm).is_empty(), "{}", ccm.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_without_watch_list_is_asked_once_then_listed() {
    for watch_list in [WatchList::GateDisabled, WatchList::Unsupported] {
        let options = KubeSimOptions {
            watch_list,
            ..KubeSimOptions::default()
        };
        let sim = KubeSim::start_with(localhost(), options)
            .await
            .expect("sim");
        let (_cloud, ccm) = start_ccm(&sim).await;
        every_object_reached_the_caches(&sim).await;

        for resource in ["nodes", "services"] {
            let watches = requests(&sim, resource, Verb::Watch);
            let refused: Vec<&RequestRecord> = watches.iter().filter(|r| streams(r)).collect();
            assert_eq!(refused.len(), 1, "{watch_list:?}: {watches:#?}");
            assert_eq!(refused[0].status, 422, "{watch_list:?}: {watches:#?}");
            let lists = requests(&sim, resource, Verb::List);
            let listed = lists
                .iter()
                .find(|r| r.status == 200 && r.seq > refused[0].seq)
                .unwrap_or_else(|| panic!("{watch_list:?}: no LIST of {resource}: {lists:#?}"));
            assert!(
                watches
                    .iter()
                    .any(|w| !streams(w) && w.status == 200 && w.seq > listed.seq),
                "{watch_list:?}: no WATCH of {resource} after its LIST: {watches:#?}"
            );
        }
        // Said once per informer, at info level.
        let lines = fallback_lines(&ccm);
        assert_eq!(lines.len(), 2, "{watch_list:?}: {}", ccm.log());
        for kind in ["kind=Node", "kind=Service"] {
            assert!(
                lines.iter().any(|l| l.contains(kind) && l.contains("INFO")),
                "{watch_list:?} {kind}: {lines:#?}"
            );
        }

        // For the rest of its life: the relist after an expired watch is a LIST again, and no
        // streaming list is asked for.
        let before = |resource: &str| sim.request_counts_for(resource).list;
        let (node_lists, service_lists) = (before("nodes"), before("services"));
        sim.faults().expire_next_watches(2);
        sim.drop_watches();
        eventually("both informers relisted", || {
            before("nodes") > node_lists && before("services") > service_lists
        })
        .await;
        for resource in ["nodes", "services"] {
            let streaming = requests(&sim, resource, Verb::Watch)
                .iter()
                .filter(|r| streams(r))
                .count();
            assert_eq!(streaming, 1, "{watch_list:?}: {resource} streamed again");
        }
        assert_eq!(fallback_lines(&ccm).len(), 2, "{}", ccm.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_that_do_not_say_unsupported_keep_the_streaming_list() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    // The first node watches fail as a server in trouble does, then as a look-alike 422 that
    // is not the ListOptions refusal (no details): each is retried with backoff, streaming.
    let node_watch = || RequestMatcher::resource("nodes").with_verb(Verb::Watch);
    for status in [500, 429, 422] {
        sim.faults().fail_next(1, status, node_watch());
    }
    let (_cloud, ccm) = start_ccm(&sim).await;
    every_object_reached_the_caches(&sim).await;
    assert_eq!(sim.faults().pending(), 0, "the faults were not all used");

    let watches = requests(&sim, "nodes", Verb::Watch);
    let statuses: Vec<(u16, bool)> = watches
        .iter()
        .take(4)
        .map(|r| (r.status, r.faulted))
        .collect();
    assert_eq!(
        statuses,
        [(500, true), (429, true), (422, true), (200, false)],
        "{watches:#?}"
    );
    assert!(
        watches.iter().take(4).all(streams),
        "a node watch that was not a streaming list: {watches:#?}"
    );
    for resource in ["nodes", "services"] {
        assert_eq!(
            sim.request_counts_for(resource).list,
            0,
            "a LIST of {resource}: {:#?}",
            requests(&sim, resource, Verb::List)
        );
    }
    assert!(fallback_lines(&ccm).is_empty(), "{}", ccm.log());
}
