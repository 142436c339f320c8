//! End to end: the real `wasm-ccm run` binary against the Kubernetes API simulator, with the
//! real static driver and its inventory service as the cloud (and the hostile test driver for
//! failures). Every wait polls with a bound.

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;

fn lb_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_initialised_and_follow_their_instances() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(vec![
        instance("good", "10.0.0.1"),
        instance("wrong-ip", "10.0.0.2"),
        instance("doomed", "10.0.0.3"),
        instance("sleepy", "10.0.0.4"),
    ])
    .await;
    for n in [
        node("good", Some("10.0.0.1"), true),
        node("wrong-ip", Some("10.9.9.9"), true),
        node("ghost", None, true),
        node("doomed", None, true),
        node("sleepy", None, true),
    ] {
        sim.create(n).expect("node");
    }
    let port = free_port();
    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--allow-egress",
            &cloud.url(),
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--secure-port",
            &port.to_string(),
            "--bind-address",
            "127.0.0.1",
        ],
    );
    eventually("good initialised", || initialised(&sim, "good")).await;
    let good = sim.get("nodes", None, "good").expect("good");
    assert_eq!(good["spec"]["providerID"], "static://id-good");
    let labels = &good["metadata"]["labels"];
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "s1.small"),
        ("beta.kubernetes.io/instance-type", "s1.small"),
        ("topology.kubernetes.io/zone", "z1"),
        ("failure-domain.beta.kubernetes.io/zone", "z1"),
        ("topology.kubernetes.io/region", "r1"),
        ("failure-domain.beta.kubernetes.io/region", "r1"),
        ("example.com/rack", "r7"),
    ] {
        assert_eq!(labels[k], v, "label {k}");
    }
    assert!(
        labels.get("node.kubernetes.io/sneaky").is_none(),
        "reserved additional label filtered"
    );
    // The immediate address patch: provided IP first, the kubelet's hostname carried over.
    eventually("addresses", || {
        sim.get("nodes", None, "good").is_some_and(|n| {
            n["status"]["addresses"]
                == json!([
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "ExternalIP", "address": "203.0.113.1"},
                    {"type": "Hostname", "address": "good.kubelet"},
                ])
        })
    })
    .await;
    eventually("Synced event", || {
        !events(&sim, "good", "Synced").is_empty()
    })
    .await;

    // Stuck nodes say why, in a Warning event, and keep the taint.
    eventually("wrong-ip warning", || {
        events(&sim, "wrong-ip", "FailedToInitializeNode")
            .iter()
            .any(|e| {
                e["type"] == "Warning"
                    && e["note"]
                        .as_str()
                        .is_some_and(|m| m.contains("10.9.9.9") && m.contains("--node-ip"))
            })
    })
    .await;
    eventually("ghost warning", || {
        events(&sim, "ghost", "FailedToInitializeNode")
            .iter()
            .any(|e| {
                e["note"]
                    .as_str()
                    .is_some_and(|m| m.contains("found no instance"))
            })
    })
    .await;
    for stuck in ["wrong-ip", "ghost"] {
        assert!(
            has_taint(&sim.get("nodes", None, stuck).expect("node"), UNINITIALIZED),
            "{stuck} keeps its taint"
        );
    }

    // Beta → GA label reconciliation on an initialised node.
    sim.modify("nodes", None, "good", |n| {
        n["metadata"]["labels"]["failure-domain.beta.kubernetes.io/zone"] = json!("z9");
    })
    .expect("relabel");
    eventually("GA zone follows beta", || {
        sim.get("nodes", None, "good")
            .is_some_and(|n| n["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z9")
    })
    .await;

    // Lifecycle: a Ready node is never asked about; a NotReady node whose instance is gone is
    // deleted; a shut-down one is tainted, and untainted once Ready again.
    eventually("doomed and sleepy initialised", || {
        initialised(&sim, "doomed") && initialised(&sim, "sleepy")
    })
    .await;
    // The lifecycle pass asks the driver about NotReady nodes only: `sleepy`, NotReady with a
    // running instance, is asked once per pass, which shows passes running.
    set_ready(&sim, "sleepy", false);
    let exists = "wasm_ccm_driver_calls_total{driver=\"static\",function=\"instances.instance-exists\",result=\"ok\"}";
    metric_at_least(port, exists, 1.0).await;
    cloud.remove_instance("doomed");
    // Two more questions about `sleepy` after the removal: the second comes from a pass that
    // began after it, and that pass saw the Ready `doomed` without an instance.
    let asked = metric(&scrape(port).await, exists).unwrap_or(0.0);
    metric_at_least(port, exists, asked + 2.0).await;
    assert!(
        sim.get("nodes", None, "doomed").is_some(),
        "a Ready node is not deleted"
    );
    assert!(
        events(&sim, "doomed", "DeletingNode").is_empty(),
        "a Ready node is not deleted"
    );
    set_ready(&sim, "doomed", false);
    eventually("doomed deleted", || {
        sim.get("nodes", None, "doomed").is_none()
    })
    .await;
    assert!(!events(&sim, "doomed", "DeletingNode").is_empty());

    cloud.set_shutdown("sleepy", true);
    set_ready(&sim, "sleepy", false);
    eventually("shutdown taint", || {
        sim.get("nodes", None, "sleepy")
            .is_some_and(|n| has_taint(&n, SHUTDOWN))
    })
    .await;
    cloud.set_shutdown("sleepy", false);
    set_ready(&sim, "sleepy", true);
    eventually("shutdown taint removed", || {
        sim.get("nodes", None, "sleepy")
            .is_some_and(|n| !has_taint(&n, SHUTDOWN))
    })
    .await;

    // The endpoints.
    let base = format!("https://127.0.0.1:{port}");
    let http = https_client();
    let ready = http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .expect("healthz")
            .status(),
        200
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for name in [
        "wasm_ccm_driver_calls_total{driver=\"static\",function=\"instances.instance-metadata\",result=\"ok\"}",
        "wasm_ccm_driver_calls_total{driver=\"static\",function=\"instances.instance-metadata\",result=\"not-found\"}",
        "wasm_ccm_driver_call_duration_seconds_bucket",
        "node_controller_cloud_provider_taint_removal_delay_seconds_count",
        "wasm_ccm_driver_http_requests_total{driver=\"static\",host=\"127.0.0.1\"",
        "wasm_ccm_kube_requests_total{verb=\"patch\"",
        "wasm_ccm_nodes_pending_initialization",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancers_follow_their_services() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) =
        static_cloud(vec![instance("n1", "10.0.0.1"), instance("n2", "10.0.0.2")]).await;
    for n in ["n1", "n2"] {
        sim.create(node(n, None, true)).expect("node");
    }
    sim.create(lb_service("web")).expect("svc");
    let mut classed = lb_service("classed");
    classed["spec"]["loadBalancerClass"] = json!("example.com/other");
    sim.create(classed).expect("svc");
    let mut bad = lb_service("bad");
    bad["spec"]["loadBalancerIP"] = json!("198.51.100.7");
    sim.create(bad).expect("svc");
    let _ccm = Ccm::start(
        &sim,
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
    eventually("web has an address", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    let web = service(&sim, "web").expect("web");
    assert!(
        has_finalizer(&web),
        "finalizer before the load balancer exists"
    );
    let ip = ingress_ip(&web).expect("ip");
    assert!(ip.starts_with("192.0.2."), "{ip}");
    assert_eq!(web["status"]["loadBalancer"]["ingress"][0]["ipMode"], "VIP");
    // The annotation the driver asked for is written by the host.
    eventually("annotation", || {
        service(&sim, "web").is_some_and(|s| {
            s["metadata"]["annotations"]["static.wasm-ccm.io/load-balancer-ip"] == ip.as_str()
        })
    })
    .await;
    for reason in ["EnsuringLoadBalancer", "EnsuredLoadBalancer"] {
        assert!(!events(&sim, "web", reason).is_empty(), "{reason}");
    }

    // An invalid request is a Warning with the driver's message, and no address.
    eventually("bad is refused", || {
        events(&sim, "bad", "SyncLoadBalancerFailed")
            .iter()
            .any(|e| {
                e["type"] == "Warning"
                    && e["note"]
                        .as_str()
                        .is_some_and(|m| m.contains("198.51.100.7"))
            })
    })
    .await;
    assert!(ingress_ip(&service(&sim, "bad").expect("bad")).is_none());

    // A class opts out entirely: no finalizer, no status, no events.
    let classed = service(&sim, "classed").expect("classed");
    assert!(!has_finalizer(&classed) && ingress_ip(&classed).is_none());
    assert!(
        sim.list("events.events.k8s.io")
            .iter()
            .all(|e| e["regarding"]["name"] != "classed")
    );

    // A backend change (exclusion label) is an update, not a re-ensure.
    let ensured_before = events(&sim, "web", "EnsuredLoadBalancer").len();
    sim.modify("nodes", None, "n2", |n| {
        n["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"] =
            json!("true");
    })
    .expect("label");
    eventually("UpdatedLoadBalancer", || {
        !events(&sim, "web", "UpdatedLoadBalancer").is_empty()
    })
    .await;
    assert_eq!(
        events(&sim, "web", "EnsuredLoadBalancer").len(),
        ensured_before
    );

    // A port change re-ensures and keeps the address.
    sim.modify("services", Some("default"), "web", |s| {
        s["spec"]["ports"][0]["port"] = json!(8080);
    })
    .expect("port");
    eventually("re-ensured", || {
        events(&sim, "web", "EnsuredLoadBalancer")
            .iter()
            .map(|e| e["series"]["count"].as_u64().unwrap_or(1))
            .sum::<u64>()
            > 1
    })
    .await;
    assert_eq!(
        ingress_ip(&service(&sim, "web").expect("web")).as_deref(),
        Some(ip.as_str())
    );

    // Type change: load balancer released, finalizer and status removed.
    sim.modify("services", Some("default"), "web", |s| {
        s["spec"]["type"] = json!("ClusterIP");
    })
    .expect("type");
    eventually("cleaned up", || {
        service(&sim, "web").is_some_and(|s| !has_finalizer(&s) && ingress_ip(&s).is_none())
    })
    .await;
    // The event is published after the finalizer write, so it may trail the cleaned-up state.
    eventually("DeletedLoadBalancer event", || {
        !events(&sim, "web", "DeletedLoadBalancer").is_empty()
    })
    .await;

    // Back to LoadBalancer, then deleted: the finalizer holds it until the cleanup ran.
    sim.modify("services", Some("default"), "web", |s| {
        s["spec"]["type"] = json!("LoadBalancer");
    })
    .expect("type");
    eventually("finalizer back", || {
        service(&sim, "web").is_some_and(|s| has_finalizer(&s) && ingress_ip(&s).is_some())
    })
    .await;
    sim.remove("services", Some("default"), "web")
        .expect("delete");
    eventually("deleted", || service(&sim, "web").is_none()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_follow_pod_cidrs() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) =
        static_cloud(vec![instance("n1", "10.0.0.1"), instance("n2", "10.0.0.2")]).await;
    for (n, cidr) in [("n1", "10.244.1.0/24"), ("n2", "10.244.2.0/24")] {
        let mut v = node(n, None, true);
        v["spec"]["podCIDR"] = json!(cidr);
        v["spec"]["podCIDRs"] = json!([cidr]);
        sim.create(v).expect("node");
    }
    // A stale route of a node that no longer exists, inside the cluster CIDR.
    let client = reqwest::Client::new();
    let put = client
        .put(format!("{}/routes/stale", cloud.url()))
        .bearer_auth("t0ken")
        .body(
            json!({"name": "stale", "targetNode": "gone", "destinationCidr": "10.244.9.0/24"})
                .to_string(),
        )
        .send()
        .await
        .expect("put");
    assert!(put.status().is_success());
    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--allow-egress",
            &cloud.url(),
            "--cluster-cidr",
            "10.244.0.0/16",
            "--leader-elect=false",
        ],
    );
    eventually("routes", || {
        let mut dests: Vec<String> = cloud
            .routes()
            .iter()
            .map(|r| r["destinationCidr"].as_str().unwrap_or("").to_string())
            .collect();
        dests.sort();
        dests == ["10.244.1.0/24", "10.244.2.0/24"]
    })
    .await;
    let n1 = sim.get("nodes", None, "n1").expect("n1");
    let uid = n1["metadata"]["uid"].as_str().expect("uid");
    assert!(
        cloud.routes().iter().any(|r| r["name"] == uid),
        "name hint is the node UID"
    );
    eventually("NetworkUnavailable=False", || {
        sim.get("nodes", None, "n2").is_some_and(|n| {
            n["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "NetworkUnavailable"
                        && c["status"] == "False"
                        && c["reason"] == "RouteCreated"
                })
            })
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_without_cluster_cidr_disable_only_the_route_controller() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(vec![instance("n1", "10.0.0.1")]).await;
    sim.create(node("n1", None, true)).expect("node");
    let ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &["--allow-egress", &cloud.url(), "--leader-elect=false"],
    );
    eventually("n1 initialised", || initialised(&sim, "n1")).await;
    eventually("clear error", || {
        ccm.log()
            .contains("route controller is disabled: --cluster-cidr is empty")
    })
    .await;
}

fn lease(sim: &KubeSim) -> Option<Value> {
    sim.get("leases", Some("kube-system"), "cloud-controller-manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_is_handed_over_and_loss_exits_non_zero() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(vec![
        instance("a", "10.0.0.1"),
        instance("b", "10.0.0.2"),
        instance("c", "10.0.0.3"),
    ])
    .await;
    let lease_flags = [
        "--allow-egress",
        &cloud.url(),
        "--configure-cloud-routes=false",
        "--leader-elect-lease-duration",
        "2s",
        "--leader-elect-renew-deadline",
        "1500ms",
        "--leader-elect-retry-period",
        "200ms",
    ];
    // Each serves /metrics on its own port: `leader_election_master_status` says who leads.
    let serving = |port: &str| {
        let mut flags = lease_flags.map(str::to_string).to_vec();
        flags.extend(["--secure-port", port, "--bind-address", "127.0.0.1"].map(str::to_string));
        flags
    };
    let master = r#"leader_election_master_status{name="cloud-controller-manager"}"#;
    let (first_port, second_port) = (free_port(), free_port());
    let first_flags = serving(&first_port.to_string());
    let first_flags: Vec<&str> = first_flags.iter().map(String::as_str).collect();
    let mut first = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &first_flags,
    );
    eventually("first leads", || {
        lease(&sim).is_some_and(|l| l["spec"]["holderIdentity"].is_string())
    })
    .await;
    metric_becomes(first_port, master, 1.0).await;
    let first_id = lease(&sim).expect("lease")["spec"]["holderIdentity"]
        .as_str()
        .expect("holder")
        .to_string();
    let (_, uuid) = first_id.rsplit_once('_').expect("hostname_uuid");
    assert_eq!(uuid.len(), 36, "{first_id}");
    sim.create(node("a", None, true)).expect("node");
    eventually("a initialised by the leader", || initialised(&sim, "a")).await;

    let second_flags = serving(&second_port.to_string());
    let second_flags: Vec<&str> = second_flags.iter().map(String::as_str).collect();
    let mut second = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &second_flags,
    );
    // The standby does nothing while the lease is held. First a positive sign that it tried:
    // its log says it waits, and the lease was read since it started. The leader renews with a
    // PUT over the lease it last saw and reads only after a PUT that failed, so the reads beyond
    // one per failed PUT are the standby's.
    let mark = sim.requests().last().map_or(0, |r| r.seq);
    eventually("the standby waits for the lease", || {
        second.log().contains("waiting to acquire the lease")
    })
    .await;
    eventually("the standby reads the lease", || {
        let (mut reads, mut failed_writes) = (0i64, 0i64);
        for r in sim.requests() {
            if r.seq <= mark || r.resource.as_deref() != Some("leases.coordination.k8s.io") {
                continue;
            }
            match r.method.as_str() {
                "GET" => reads += 1,
                "PUT" | "PATCH" if !(200..300).contains(&r.status) => failed_writes += 1,
                _ => {}
            }
        }
        // Two reads of the standby's beyond any the leader made after a failed renewal.
        reads - failed_writes >= 2
    })
    .await;
    assert_eq!(
        lease(&sim).expect("lease")["spec"]["holderIdentity"],
        first_id.as_str()
    );
    assert!(!second.log().contains("became leader"), "{}", second.log());
    // A standby reports 0 (client-go sets it when the elector is made), the leader 1.
    metric_becomes(second_port, master, 0.0).await;
    assert_eq!(metric(&scrape(first_port).await, master), Some(1.0));

    // A clean stop releases the lease; the standby takes over at once and works.
    first.signal("-TERM");
    assert_eq!(first.wait_exit(), Some(0), "clean stop exits 0");
    eventually("second leads", || {
        lease(&sim).is_some_and(|l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty() && h != first_id)
        })
    })
    .await;
    let l = lease(&sim).expect("lease");
    assert_eq!(l["spec"]["leaseTransitions"], 1, "{l}");
    assert_eq!(l["spec"]["leaseDurationSeconds"], 2);
    assert!(l["spec"]["acquireTime"].is_string() && l["spec"]["renewTime"].is_string());
    sim.create(node("b", None, true)).expect("node");
    eventually("b initialised by the new leader", || initialised(&sim, "b")).await;
    metric_becomes(second_port, master, 1.0).await;

    // Someone else takes the lease (as a Go CCM would after an expiry): the leader exits 1.
    sim.modify(
        "leases",
        Some("kube-system"),
        "cloud-controller-manager",
        |l| {
            l["spec"]["holderIdentity"] = json!("go-ccm_0000");
            l["spec"]["leaseDurationSeconds"] = json!(3600);
        },
    )
    .expect("steal");
    assert_eq!(
        second.wait_exit(),
        Some(1),
        "losing the lease exits non-zero"
    );
    assert!(second.log().contains("lost the leader lease"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_drops_expiry_conflicts_and_errors_are_survived() {
    use wasm_ccm_sim::kube::{RequestMatcher, Verb};
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(
        (0..4)
            .map(|i| instance(&format!("n{i}"), &format!("10.0.0.{}", i + 1)))
            .collect(),
    )
    .await;
    sim.create(node("n0", None, true)).expect("node");
    let _ccm = Ccm::start(
        &sim,
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
    eventually("n0", || initialised(&sim, "n0")).await;

    // The watch is dropped and its resourceVersion expires: the informer re-lists. A change the
    // node informer does not see moves the resourceVersion past the informer's, so the resumed
    // watch is older than the compacted history and must get the 410.
    sim.create(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bump", "namespace": "default"},
    }))
    .expect("configmap");
    let mark = sim.requests().last().map_or(0, |r| r.seq);
    sim.compact();
    sim.drop_watches();
    sim.create(node("n1", None, true)).expect("node");
    eventually("n1 after a 410", || initialised(&sim, "n1")).await;
    // The 410 comes as an ERROR event inside a 200 watch (the log records the head's status);
    // what shows it was taken for one is the re-list after the compaction: a streaming list (a
    // node WATCH with sendInitialEvents=true, as the informer asks for first) or a LIST of nodes.
    let relisted = sim.requests().into_iter().any(|r| {
        r.seq > mark
            && r.resource.as_deref() == Some("nodes")
            && (r.verb == Some(Verb::List)
                || (r.verb == Some(Verb::Watch) && r.query.contains("sendInitialEvents=true")))
    });
    assert!(
        relisted,
        "no node LIST after the watch expired: the informer did not re-list"
    );

    // Conflicts on the initialising write are retried.
    let mark = sim.requests().last().map_or(0, |r| r.seq);
    sim.faults().conflict_next_writes("nodes", 3);
    sim.create(node("n2", None, true)).expect("node");
    eventually("n2 after 409s", || initialised(&sim, "n2")).await;
    assert_eq!(sim.faults().pending(), 0, "the 409s were not all used");
    assert_eq!(faulted(&sim, mark, 409), 3, "{:#?}", sim.requests());

    // Server errors back off and retry.
    let mark = sim.requests().last().map_or(0, |r| r.seq);
    sim.faults().fail_next(
        2,
        500,
        RequestMatcher::resource("nodes").with_verb(Verb::Patch),
    );
    sim.create(node("n3", None, true)).expect("node");
    eventually("n3 after 500s", || initialised(&sim, "n3")).await;
    assert_eq!(sim.faults().pending(), 0, "the 500s were not all used");
    assert_eq!(faulted(&sim, mark, 500), 2, "{:#?}", sim.requests());
}

/// Requests to nodes after `mark` that an injected fault answered with `status`.
fn faulted(sim: &KubeSim, mark: u64, status: u16) -> usize {
    sim.requests()
        .iter()
        .filter(|r| {
            r.seq > mark
                && r.faulted
                && r.status == status
                && r.resource.as_deref() == Some("nodes")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_traps_and_deadlines_are_events_and_do_not_block_other_nodes() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    for n in ["trap", "loop", "fine"] {
        sim.create(node(n, None, true)).expect("node");
    }
    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::HOSTILE_DRIVER,
        "hostile",
        &json!({}),
        &[
            "--call-timeout",
            "300ms",
            "--leader-elect=false",
            "--concurrent-node-syncs",
            "2",
        ],
    );
    eventually("fine initialised", || initialised(&sim, "fine")).await;
    eventually("trap event", || {
        events(&sim, "trap", "FailedToInitializeNode")
            .iter()
            .any(|e| e["note"].as_str().is_some_and(|m| m.contains("trap")))
    })
    .await;
    eventually("deadline event", || {
        events(&sim, "loop", "FailedToInitializeNode")
            .iter()
            .any(|e| e["note"].as_str().is_some_and(|m| m.contains("deadline")))
    })
    .await;
    for n in ["trap", "loop"] {
        assert!(has_taint(
            &sim.get("nodes", None, n).expect("node"),
            UNINITIALIZED
        ));
    }
}

/// Beside the CCM in charge of a converged cluster of each cloud, a shadow with that cloud's
/// driver agrees and writes nothing: not to Kubernetes (its requests carry `; shadow)` in the
/// User-Agent), not to the cloud (the simulator's own count of writes). PhoenixNAP's driver gets
/// its OAuth token through the shadow's refusal of writes; CloudStack's reads are GETs of
/// `list*` commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_beside_each_clouds_converged_cluster_agrees_and_writes_nothing() {
    for name in ["cloudscale", "cloudstack", "phoenixnap"] {
        let sim = KubeSim::start(localhost()).await.expect("kube sim");
        let cloud = wasm_ccm_sim::kit::start(name, Default::default())
            .await
            .expect("cloud sim");
        for index in 0..2 {
            let node = wasm_ccm_sim::kit::SimNode::numbered(index);
            cloud.add_instance(index, &node).expect("instance");
            sim.create(common::node(&node.name, None, true))
                .expect("node");
        }
        sim.create(lb_service("web")).expect("service");
        let setup = cloud.driver_setup();
        let ccm = Ccm::start_setup(&sim, &setup, &[]);
        eventually(&format!("{name}: converged"), || {
            initialised(&sim, "node-0000")
                && initialised(&sim, "node-0001")
                && service(&sim, "web")
                    .is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
        })
        .await;
        let since = last_seq(&sim);
        let (_, cloud_writes) = cloud.request_counts();
        let port = free_port();
        let port_arg = port.to_string();
        let shadow = Ccm::start_setup(
            &sim,
            &setup,
            &[
                "--shadow",
                "--shadow-grace",
                "0s",
                "--leader-elect=false",
                "--secure-port",
                &port_arg,
            ],
        );
        shadow_first_passes(port, 1.0, 2.0).await;
        let report = shadow_report(port).await;
        assert_eq!(report["summary"]["diverged"], 0, "{name}: {report:#}");
        assert_eq!(report["summary"]["pending"], 0, "{name}: {report:#}");
        drop(shadow);
        assert_eq!(
            shadow_writes_since(&sim, since),
            Vec::<String>::new(),
            "{name}"
        );
        // Control: the shadow's requests did reach the simulator and carry the marker the
        // filter above looks for, so "no write" is not the filter matching nothing.
        let marked: Vec<String> = sim
            .requests()
            .into_iter()
            .filter(|r| r.seq > since)
            .filter(|r| {
                r.user_agent
                    .as_deref()
                    .is_some_and(|a| a.contains("; shadow)"))
            })
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            marked.iter().any(|r| r == "GET /api/v1/nodes")
                && marked.iter().any(|r| r == "GET /api/v1/services"),
            "{name}: the shadow's lists of nodes and Services carry `; shadow)`: {marked:?}"
        );
        assert_eq!(
            cloud.request_counts().1,
            cloud_writes,
            "{name}: no cloud write"
        );
        drop(ccm);
    }
}

/// The review's case (2026-11-28 §7), on each cloud whose load balancers have members: a node
/// joins while the CCM in charge is slower than the shadow (here it is away, and back once the
/// shadow's `update` wanted the node's member; it then adds the member with its `ensure`).
/// The shadow looks at its pending cloud write again, read-only, finds the cloud has it and
/// calls it agreed, so `wasm-ccm shadow report` exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_agrees_with_a_slower_ccm_in_charge_on_a_node_that_joins() {
    for (name, member_write) in [
        ("cloudscale", "/members"),
        ("cloudstack", "command=assignToLoadBalancerRule"),
    ] {
        let sim = KubeSim::start(localhost()).await.expect("kube sim");
        let cloud = wasm_ccm_sim::kit::start(name, Default::default())
            .await
            .expect("cloud sim");
        let mut ids = Vec::new();
        for index in 0..2 {
            let node = wasm_ccm_sim::kit::SimNode::numbered(index);
            ids.push(cloud.add_instance(index, &node).expect("instance"));
            sim.create(common::node(&node.name, None, true))
                .expect("node");
        }
        sim.create(lb_service("web")).expect("service");
        let setup = cloud.driver_setup();
        let timing = ["--node-status-update-frequency", "1s"];
        let ccm = Ccm::start_setup(&sim, &setup, &timing);
        eventually(&format!("{name}: converged"), || {
            initialised(&sim, "node-0000")
                && initialised(&sim, "node-0001")
                && service(&sim, "web")
                    .is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
        })
        .await;
        let port = free_port();
        let port_arg = port.to_string();
        let shadow = Ccm::start_setup(
            &sim,
            &setup,
            &[
                "--shadow",
                "--shadow-grace",
                "2m",
                "--leader-elect=false",
                "--node-status-update-frequency",
                "1s",
                "--secure-port",
                &port_arg,
            ],
        );
        shadow_first_passes(port, 1.0, 2.0).await;
        let report = shadow_report(port).await;
        assert_eq!(report["summary"]["diverged"], 0, "{name}: {report:#}");
        assert_eq!(report["summary"]["pending"], 0, "{name}: {report:#}");

        // The CCM in charge is away; a node joins, registered with its provider ID (kubelet
        // --provider-id), so the load balancer's member is the one thing to do about it.
        drop(ccm);
        let template = sim
            .get("nodes", None, "node-0000")
            .and_then(|n| n["spec"]["providerID"].as_str().map(str::to_string))
            .expect("node-0000 has a provider ID");
        assert!(
            template.contains(&ids[0]),
            "{name}: the provider ID {template} does not name the instance {}",
            ids[0]
        );
        let joined = wasm_ccm_sim::kit::SimNode::numbered(2);
        let id = cloud.add_instance(2, &joined).expect("instance");
        let mut node = common::node(&joined.name, None, true);
        node["spec"] = json!({"providerID": template.replace(&ids[0], &id)});
        sim.create(node).expect("the joining node");
        // The shadow wants the member: its update's write was refused and is pending.
        let update = |r: &Value| -> Option<Value> {
            r["differences"]
                .as_array()?
                .iter()
                .find(|d| {
                    d["object"] == "default/web"
                        && d["target"] == "cloud"
                        && d["action"] == "load-balancer.update"
                })
                .cloned()
        };
        let report = report_until(port, &format!("{name}: the member pending"), |r| {
            update(r).is_some_and(|d| d["verdict"] == "pending")
        })
        .await;
        let wanted = update(&report).expect("found")["cloud_writes"].to_string();
        assert!(
            wanted.contains(member_write),
            "{name}: the update wanted {wanted}"
        );

        // The CCM in charge comes back and adds the member with its ensure. The shadow's
        // update is never called again (no node changes); its pending write is rechecked.
        let _ccm = Ccm::start_setup(&sim, &setup, &timing);
        let report = report_until_long(port, &format!("{name}: every write agreed"), |r| {
            r["summary"]["pending"] == 0
                && r["summary"]["diverged"] == 0
                && update(r).is_some_and(|d| d["verdict"] == "agreed")
        })
        .await;
        assert!(
            update(&report).is_some_and(|d| d["settled"]
                .as_str()
                .is_some_and(|s| s.contains("needed no cloud write"))),
            "{name}: {report:#}"
        );
        let (code, text) = shadow_report_cli(port, "text");
        assert_eq!(code, Some(0), "{name}: both CCMs agree: exit 0\n{text}");
        assert!(text.contains("0 diverged"), "{name}: {text}");
        drop(shadow);
    }
}

/// deploy/README ("The rules" of a DriverSet): the file is checked before the cluster is
/// contacted. A driver whose `info` declares another scheme than the `providerIDScheme` the
/// file gives it is refused with no request to the apiserver: not `/version`, not the
/// namespace read, and no `init` (which needs both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_set_whose_driver_declares_another_scheme_is_refused_before_the_cluster_is_contacted()
 {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    let cloud = wasm_ccm_sim::kit::start("cloudscale", Default::default())
        .await
        .expect("cloud sim");
    let setup = cloud.driver_setup();
    let env: Vec<(&str, &str)> = setup
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let set = |scheme: &str| {
        format!(
            r#"apiVersion: wasm-ccm.io/v1alpha1
kind: DriverSet
drivers:
  - name: cloud
    source: {wasm}
    providerIDScheme: {scheme}
    allowEgress: [{egress:?}]
    nodes: {{default: true}}
    loadBalancer: {{default: true}}
"#,
            wasm = wasm_ccm_drivers::CLOUDSCALE_DRIVER,
            egress = setup.egress.join(","),
        )
    };
    let flags = ["--leader-elect=false", "--configure-cloud-routes=false"];
    let mut refused = Ccm::start_set(&sim, &set("equinix"), &flags, &env);
    assert_eq!(refused.wait_exit(), Some(2), "{}", refused.log());
    let log = refused.log();
    assert!(
        log.contains(
            r#"driver "cloud" (cloudscale) declares provider-ID scheme "cloudscale", not the providerIDScheme "equinix""#
        ),
        "{log}"
    );
    let requests: Vec<String> = sim
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(requests, Vec::<String>::new(), "the cluster was contacted");
    // Control: the same set with the scheme the driver declares starts, and the simulator's
    // log does record its requests.
    let _started = Ccm::start_set(&sim, &set("cloudscale"), &flags, &env);
    eventually("the cluster contacted", || {
        sim.requests().iter().any(|r| r.path == "/version")
    })
    .await;
}
