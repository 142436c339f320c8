//! The CloudStack API simulator over real HTTP on loopback: every test starts its own simulator
//! on a free port, so they run in parallel and share nothing. Requests are signed by a helper
//! written here from the protocol description (not the simulator's own code), as cloudstack-go
//! does: GET for `list*`/`query*`, form POST for the rest.

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha1::Sha1;
use wasm_ccm_sim::cloudstack::{
    CidrSeparator, CloudstackOptions, CloudstackSim, Match, Seed, SeedNetwork, SeedPublicIp, SeedVm,
};

/// IDs the example seed fixes.
const ZONE: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e01";
const K8S_NET: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e11";
const K8S_TIER: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e12";
const VPC1: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e21";
const K8S_ACL: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e31";
const NODE1: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4f01";
const NODE2: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4f02";
const NODE3: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4f03";
const VPC_NODE: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4f11";
/// Polls a test makes at most while waiting for a job; never a sleep.
const MAX_POLLS: usize = 50;

/// A simulator and a client pointed at it.
struct Cs {
    sim: CloudstackSim,
    client: reqwest::Client,
}

/// A response: status and JSON body (Null when not JSON).
#[derive(Debug)]
struct Resp {
    status: u16,
    body: Value,
}

impl Resp {
    /// The value inside the one-key envelope.
    fn inner(&self) -> &Value {
        self.body
            .as_object()
            .and_then(|m| m.values().next())
            .unwrap_or(&Value::Null)
    }

    /// Asserts a CloudStack error with this code; returns its `errortext`.
    fn error(&self, command: &str, code: u16) -> String {
        assert_eq!(self.status, code, "{command}: {}", self.body);
        let key = format!("{}response", command.to_lowercase());
        let e = &self.body[&key];
        assert_eq!(e["errorcode"], code, "{}", self.body);
        assert_eq!(e["uuidList"], json!([]), "{}", self.body);
        assert!(e["cserrorcode"].as_u64().is_some(), "{}", self.body);
        e["errortext"].as_str().unwrap_or_default().to_string()
    }
}

/// Go's `QueryEscape` as cloudstack-go signs with: unreserved characters and `*` stay, a
/// space is `%20`.
fn go_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'*' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Java's `URLEncoder` with `+` → `%20`: `*` stays, `~` is escaped.
fn java_encode(value: &str) -> String {
    go_encode(value).replace('~', "%7E")
}

/// The Base64 HMAC-SHA1 of the sorted, encoded, lowercased parameters.
fn signature(pairs: &[(String, String)], secret: &str, java: bool) -> String {
    let mut sorted: Vec<&(String, String)> = pairs.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let text = sorted
        .iter()
        .map(|(k, v)| {
            let v = if java { java_encode(v) } else { go_encode(v) };
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase();
    let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC key");
    mac.update(text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// RFC 3339 UTC `secs` from now.
fn expires_in(secs: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `k=v&...` with values Go-encoded.
fn query(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", go_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

async fn start_with(options: CloudstackOptions) -> Cs {
    let sim = match CloudstackSim::start_with(options).await {
        Ok(s) => s,
        Err(e) => panic!("simulator did not start: {e:#}"),
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    Cs { sim, client }
}

/// Default options and the example account.
async fn start() -> Cs {
    let cs = start_with(CloudstackOptions::default()).await;
    cs.sim.seed(Seed::example()).expect("example seed");
    cs
}

impl Cs {
    /// The parameters cloudstack-go adds, plus `extra`.
    fn params(&self, command: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = vec![
            ("apiKey".into(), self.sim.api_key()),
            ("command".into(), command.into()),
            ("response".into(), "json".into()),
            ("signatureversion".into(), "3".into()),
            ("expires".into(), expires_in(900)),
        ];
        pairs.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        pairs
    }

    /// `pairs` plus their signature.
    fn signed(&self, mut pairs: Vec<(String, String)>, java: bool) -> Vec<(String, String)> {
        let sig = signature(&pairs, &self.sim.secret_key(), java);
        pairs.push(("signature".into(), sig));
        pairs
    }

    async fn read(resp: reqwest::Response) -> Resp {
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body read");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp { status, body }
    }

    /// A GET with exactly these parameters.
    async fn send_get(&self, pairs: &[(String, String)]) -> Resp {
        let url = format!("{}?{}", self.sim.url(), query(pairs));
        Cs::read(self.client.get(url).send().await.expect("GET sent")).await
    }

    /// A form POST with exactly these parameters.
    async fn send_post(&self, pairs: &[(String, String)]) -> Resp {
        let req = self
            .client
            .post(self.sim.url())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(query(pairs));
        Cs::read(req.send().await.expect("POST sent")).await
    }

    /// A signed request: GET for `list*`/`query*`, POST otherwise.
    async fn call(&self, command: &str, extra: &[(&str, &str)]) -> Resp {
        let pairs = self.signed(self.params(command, extra), false);
        if command.starts_with("list") || command.starts_with("query") {
            self.send_get(&pairs).await
        } else {
            self.send_post(&pairs).await
        }
    }

    /// A call that must answer 200; returns the inner object.
    async fn ok(&self, command: &str, extra: &[(&str, &str)]) -> Value {
        let r = self.call(command, extra).await;
        assert_eq!(r.status, 200, "{command}: {}", r.body);
        r.inner().clone()
    }

    /// The items of a list call (empty when the answer has none).
    async fn list(&self, command: &str, key: &str, extra: &[(&str, &str)]) -> Vec<Value> {
        let inner = self.ok(command, extra).await;
        inner[key].as_array().cloned().unwrap_or_default()
    }

    /// One `queryAsyncJobResult` poll.
    async fn poll(&self, job: &str) -> Value {
        self.ok("queryAsyncJobResult", &[("jobid", job)]).await
    }

    /// Polls until the job is no longer pending (bounded).
    async fn wait(&self, job: &str) -> Value {
        for _ in 0..MAX_POLLS {
            let r = self.poll(job).await;
            if r["jobstatus"] != 0 {
                return r;
            }
        }
        panic!("job {job} still pending after {MAX_POLLS} polls");
    }

    /// An async command that must succeed; returns its `jobresult`.
    async fn run(&self, command: &str, extra: &[(&str, &str)]) -> Value {
        let started = self.ok(command, extra).await;
        let job = s(&started["jobid"]).to_string();
        assert!(!job.is_empty(), "{command}: no jobid in {started}");
        let done = self.wait(&job).await;
        assert_eq!(done["jobstatus"], 1, "{command}: {done}");
        done["jobresult"].clone()
    }

    /// Allocates a public IP for an isolated network (`networkid`) or a VPC (`vpcid`).
    async fn associate(&self, param: &str, id: &str) -> Value {
        self.run("associateIpAddress", &[(param, id)]).await["ipaddress"].clone()
    }

    /// Creates a TCP round-robin rule; returns it.
    async fn lb_rule(&self, ip: &str, network: &str, name: &str, port: &str) -> Value {
        let result = self
            .run(
                "createLoadBalancerRule",
                &[
                    ("name", name),
                    ("algorithm", "roundrobin"),
                    ("privateport", "30080"),
                    ("publicport", port),
                    ("networkid", network),
                    ("publicipid", ip),
                    ("protocol", "tcp"),
                    ("openfirewall", "false"),
                    ("cidrlist", "0.0.0.0/0"),
                ],
            )
            .await;
        result["loadbalancer"].clone()
    }
}

#[tokio::test]
async fn signed_get_and_post_are_accepted() {
    let cs = start().await;
    let pairs = cs.signed(cs.params("listZones", &[("name", "zone1")]), false);
    let r = cs.send_get(&pairs).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["listzonesresponse"]["count"], 1);
    assert_eq!(r.body["listzonesresponse"]["zone"][0]["id"], ZONE);
    let r = cs.send_post(&pairs).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["listzonesresponse"]["zone"][0]["name"], "zone1");

    // Query parameters and a form body merge on POST.
    let pairs = cs.signed(cs.params("listZones", &[]), false);
    let (head, tail) = pairs.split_at(2);
    let req = cs
        .client
        .post(format!("{}?{}", cs.sim.url(), query(head)))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(query(tail));
    let r = Cs::read(req.send().await.expect("sent")).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // `response` other than json still answers JSON.
    let r = cs.call("listZones", &[]).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn java_and_go_encoded_signatures_are_accepted() {
    let cs = start().await;
    let extra = [("keyword", "a*b~c d/e,f")];
    for java in [false, true] {
        let pairs = cs.signed(cs.params("listVirtualMachines", &extra), java);
        let r = cs.send_get(&pairs).await;
        assert_eq!(r.status, 200, "java={java}: {}", r.body);
        assert_eq!(r.body, json!({"listvirtualmachinesresponse": {}}));
    }
    // A `+0000` offset in `expires` is accepted too.
    let mut pairs = cs.params("listZones", &[]);
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
    pairs[4].1 = at.strftime("%Y-%m-%dT%H:%M:%S+0000").to_string();
    let r = cs.send_get(&cs.signed(pairs, false)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn bad_credentials_and_expired_requests_are_401() {
    let cs = start().await;
    let text = "unable to verify user credentials and/or request signature";
    // Tampered signature.
    let mut pairs = cs.signed(cs.params("listZones", &[]), false);
    if let Some(last) = pairs.last_mut() {
        last.1 = format!("x{}", last.1);
    }
    assert_eq!(cs.send_get(&pairs).await.error("listZones", 401), text);
    // A parameter changed after signing.
    let mut pairs = cs.signed(cs.params("listZones", &[("name", "zone1")]), false);
    pairs[5].1 = "zone2".into();
    assert_eq!(cs.send_get(&pairs).await.error("listZones", 401), text);
    // Unknown API key.
    let mut pairs = cs.params("listZones", &[]);
    pairs[0].1 = "someone-else".into();
    let pairs = cs.signed(pairs, false);
    assert_eq!(cs.send_get(&pairs).await.error("listZones", 401), text);
    // No signature.
    let pairs = cs.params("listZones", &[]);
    assert_eq!(cs.send_get(&pairs).await.error("listZones", 401), text);
    // Expired (signed correctly).
    let mut pairs = cs.params("listZones", &[]);
    pairs[4].1 = expires_in(-60);
    let r = cs.send_get(&cs.signed(pairs, false)).await;
    assert_eq!(r.error("listZones", 401), text);
    // signatureversion=3 without expires.
    let mut pairs = cs.params("listZones", &[]);
    pairs.remove(4);
    let r = cs.send_get(&cs.signed(pairs, false)).await;
    assert_eq!(r.error("listZones", 401), text);
}

#[tokio::test]
async fn unknown_and_missing_commands() {
    let cs = start().await;
    let t = cs
        .call("deployVirtualMachine", &[])
        .await
        .error("deployVirtualMachine", 432);
    assert!(t.contains("deployVirtualMachine"), "{t}");
    // Command names are case-sensitive, as CloudStack's command map is.
    cs.call("listzones", &[]).await.error("listzones", 432);
    let pairs: Vec<(String, String)> = cs
        .signed(cs.params("x", &[]), false)
        .into_iter()
        .filter(|(k, _)| k != "command")
        .collect();
    let r = cs.send_get(&pairs).await;
    assert_eq!(r.status, 431, "{}", r.body);
    assert_eq!(r.body["errorresponse"]["errorcode"], 431);
}

#[tokio::test]
async fn management_server_metrics_are_admin_only() {
    let cs = start().await;
    let t = cs
        .call("listManagementServersMetrics", &[])
        .await
        .error("listManagementServersMetrics", 432);
    assert_eq!(
        t,
        "The API [listManagementServersMetrics] does not exist or is not available for the \
         account for user sim-user."
    );
    let caps = cs.ok("listCapabilities", &[]).await;
    assert_eq!(caps["capability"]["cloudstackversion"], "4.22.0.0");

    let admin = start_with(CloudstackOptions {
        admin: true,
        ..CloudstackOptions::default()
    })
    .await;
    let servers = admin
        .list("listManagementServersMetrics", "managementserver", &[])
        .await;
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["version"], "4.22.0.0");
    admin.sim.set_version("4.20.1.0");
    let servers = admin
        .list("listManagementServersMetrics", "managementserver", &[])
        .await;
    assert_eq!(servers[0]["version"], "4.20.1.0");
}

#[tokio::test]
async fn hostname_is_the_hypervisor_and_only_for_admins() {
    let cs = start().await;
    let vms = cs
        .list("listVirtualMachines", "virtualmachine", &[("id", NODE1)])
        .await;
    assert_eq!(vms.len(), 1);
    assert!(vms[0].get("hostname").is_none(), "{}", vms[0]);
    cs.sim.set_admin(true);
    let vms = cs
        .list("listVirtualMachines", "virtualmachine", &[("id", NODE1)])
        .await;
    assert_eq!(vms[0]["hostname"], "kvm-host-01");
    let vm = &vms[0];
    assert_eq!(vm["name"], "k8s-node-1");
    assert_eq!(vm["serviceofferingname"], "Medium Instance");
    assert_eq!(vm["zonename"], "zone1");
    assert_eq!(vm["state"], "Running");
    assert_eq!(vm["nic"][0]["ipaddress"], "10.1.1.11");
    assert_eq!(vm["nic"][0]["isdefault"], true);
    assert_eq!(vm["nic"][0]["networkid"], K8S_NET);
    assert!(vm["nic"][0].get("ip6address").is_none());
    let node2 = cs
        .list("listVirtualMachines", "virtualmachine", &[("id", NODE2)])
        .await;
    assert_eq!(node2[0]["nic"][0]["ip6address"], "fd00:10:1:1::12");
}

#[tokio::test]
async fn empty_lists_have_no_count() {
    let cs = start_with(CloudstackOptions::default()).await;
    let r = cs
        .call("listLoadBalancerRules", &[("listall", "true")])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, json!({"listloadbalancerrulesresponse": {}}));
    let r = cs.call("listZones", &[]).await;
    assert_eq!(r.body, json!({"listzonesresponse": {}}));
}

#[tokio::test]
async fn pagination_counts_every_match() {
    let cs = start_with(CloudstackOptions::default()).await;
    let vms: Vec<String> = (0..600)
        .map(|i| {
            format!(
                "{{name: vm-{i:03}, zone: z, nics: [{{network: n, ip: 10.0.{}.{}}}]}}",
                i / 250,
                i % 250 + 1
            )
        })
        .collect();
    let yaml = format!(
        "zones: [{{name: z}}]\nnetworks: [{{name: n, zone: z}}]\nvms: [{}]",
        vms.join(", ")
    );
    cs.sim
        .seed(Seed::parse(&yaml).expect("seed"))
        .expect("600 VMs");
    let first = cs.ok("listVirtualMachines", &[]).await;
    assert_eq!(first["count"], 600);
    assert_eq!(first["virtualmachine"].as_array().map(Vec::len), Some(500));
    let second = cs
        .ok("listVirtualMachines", &[("page", "2"), ("pagesize", "500")])
        .await;
    assert_eq!(second["count"], 600);
    let items = second["virtualmachine"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 100);
    assert_eq!(items[0]["name"], "vm-500");
    let beyond = cs
        .ok("listVirtualMachines", &[("page", "3"), ("pagesize", "500")])
        .await;
    assert_eq!(beyond, json!({"count": 600}));
    let t = cs
        .call("listVirtualMachines", &[("page", "1"), ("pagesize", "501")])
        .await
        .error("listVirtualMachines", 431);
    assert_eq!(t, "Page size can't exceed max allowed page size value: 500");
}

#[tokio::test]
async fn vm_name_filter_is_a_case_insensitive_substring() {
    let cs = start().await;
    let names = |vms: Vec<Value>| -> Vec<String> {
        vms.iter().map(|v| s(&v["name"]).to_string()).collect()
    };
    let vms = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("name", "NODE-1")],
        )
        .await;
    assert_eq!(names(vms), ["k8s-node-1", "k8s-vpc-node-1"]);
    let vms = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("name", "k8s-node")],
        )
        .await;
    assert_eq!(names(vms), ["k8s-node-1", "k8s-node-2", "k8s-node-3"]);
    cs.sim.set_vm_state(NODE3, "Stopped");
    let vms = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("state", "stopped")],
        )
        .await;
    assert_eq!(names(vms), ["k8s-node-3"]);
}

#[tokio::test]
async fn projects_scope_lists_and_lookups_by_id() {
    let cs = start().await;
    let project = cs.sim.add_project("team-a");
    let net = cs
        .sim
        .add_network(SeedNetwork::isolated("team-net", "zone1").in_project("team-a"));
    let vm = cs
        .sim
        .add_vm(SeedVm::new("team-node", "zone1").nic(&net, "10.9.0.5"));
    let projects = cs
        .list("listProjects", "project", &[("name", "team-a")])
        .await;
    assert_eq!(projects.len(), 1);
    assert_eq!(projects[0]["id"], project.as_str());

    let own = cs.list("listVirtualMachines", "virtualmachine", &[]).await;
    assert_eq!(own.len(), 4);
    assert!(own.iter().all(|v| v.get("projectid").is_none()));
    let scoped = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("projectid", &project)],
        )
        .await;
    assert_eq!(scoped.len(), 1);
    assert_eq!(scoped[0]["projectid"], project.as_str());
    assert_eq!(scoped[0]["project"], "team-a");
    let all = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("projectid", "-1")],
        )
        .await;
    assert_eq!(all.len(), 1);

    // By ID: strict, the project entity is invisible without its projectid.
    let r = cs.call("listVirtualMachines", &[("id", &vm)]).await;
    assert_eq!(r.body, json!({"listvirtualmachinesresponse": {}}));
    let found = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("id", &vm), ("projectid", &project)],
        )
        .await;
    assert_eq!(found.len(), 1);
    let r = cs.call("listNetworks", &[("id", &net)]).await;
    assert_eq!(r.body, json!({"listnetworksresponse": {}}));
    // projectid=-1 with listall adds the account's own; a root admin's ID lookup sees all.
    let everything = cs
        .list(
            "listVirtualMachines",
            "virtualmachine",
            &[("projectid", "-1"), ("listall", "true")],
        )
        .await;
    assert_eq!(everything.len(), 5);
    cs.sim.set_admin(true);
    let found = cs
        .list("listVirtualMachines", "virtualmachine", &[("id", &vm)])
        .await;
    assert_eq!(found.len(), 1);
    cs.sim.set_admin(false);

    // An unknown ID is a parameter error in CloudStack's words; an expunged VM lists empty.
    let unknown = "00000000-0000-4000-8000-000000000000";
    let t = cs
        .call("listVirtualMachines", &[("id", unknown)])
        .await
        .error("listVirtualMachines", 431);
    assert_eq!(
        t,
        format!(
            "Invalid parameter id value={unknown} due to incorrect long value format, or entity \
             does not exist or due to incorrect parameter annotation for the field in api cmd \
             class."
        )
    );
    assert!(cs.sim.remove_vm(NODE1));
    let r = cs.call("listVirtualMachines", &[("id", NODE1)]).await;
    assert_eq!(r.body, json!({"listvirtualmachinesresponse": {}}));

    // Addresses allocated for a project network need its projectid.
    let t = cs
        .call("associateIpAddress", &[("networkid", &net)])
        .await
        .error("associateIpAddress", 431);
    assert!(t.contains("project"), "{t}");
    let r = cs
        .run(
            "associateIpAddress",
            &[("networkid", &net), ("projectid", &project)],
        )
        .await;
    assert_eq!(r["ipaddress"]["projectid"], project.as_str());
}

#[tokio::test]
async fn load_balancer_rule_jobs_complete_after_the_configured_polls() {
    let cs = start_with(CloudstackOptions {
        job_polls: 3,
        ..CloudstackOptions::default()
    })
    .await;
    cs.sim.seed(Seed::example()).expect("seed");
    cs.sim.set_job_polls(1);
    let ip = cs.associate("networkid", K8S_NET).await;
    cs.sim.set_job_polls(3);
    let started = cs
        .ok(
            "createLoadBalancerRule",
            &[
                ("name", "a1b2-tcp-80"),
                ("algorithm", "roundrobin"),
                ("privateport", "30080"),
                ("publicport", "80"),
                ("networkid", K8S_NET),
                ("publicipid", s(&ip["id"])),
                ("protocol", "tcp"),
                ("openfirewall", "false"),
                ("cidrlist", "0.0.0.0/0"),
            ],
        )
        .await;
    let job = s(&started["jobid"]).to_string();
    let rule_id = s(&started["id"]).to_string();
    assert!(!job.is_empty() && !rule_id.is_empty(), "{started}");
    let rules = cs
        .list(
            "listLoadBalancerRules",
            "loadbalancerrule",
            &[("keyword", "a1b2"), ("listall", "true")],
        )
        .await;
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0]["state"], "Add");
    assert_eq!(rules[0]["id"], rule_id.as_str());
    assert_eq!(cs.sim.pending_jobs(), 1);

    for _ in 0..2 {
        let r = cs.poll(&job).await;
        assert_eq!(r["jobstatus"], 0, "{r}");
        assert!(r.get("jobresult").is_none(), "{r}");
        assert!(r.get("completed").is_none(), "{r}");
    }
    let done = cs.poll(&job).await;
    assert_eq!(done["jobstatus"], 1, "{done}");
    assert_eq!(done["jobresultcode"], 0);
    assert_eq!(done["jobresulttype"], "object");
    assert_eq!(done["jobinstancetype"], "LoadBalancerRule");
    assert_eq!(done["jobinstanceid"], rule_id.as_str());
    assert!(
        s(&done["cmd"]).ends_with("CreateLoadBalancerRuleCmd"),
        "{done}"
    );
    assert!(done["completed"].is_string());
    let rule = &done["jobresult"]["loadbalancer"];
    assert_eq!(rule["state"], "Active");
    assert_eq!(rule["publicport"], "80");
    assert_eq!(rule["privateport"], "30080");
    assert_eq!(rule["publicip"], ip["ipaddress"]);
    assert_eq!(rule["networkid"], K8S_NET);
    assert_eq!(rule["tags"], json!([]));
    assert_eq!(cs.sim.pending_jobs(), 0);

    // settle() completes whatever is pending.
    cs.ok("deleteLoadBalancerRule", &[("id", &rule_id)]).await;
    assert_eq!(cs.sim.load_balancer_rules()[0]["state"], "Revoke");
    cs.sim.settle();
    assert_eq!(cs.sim.pending_jobs(), 0);
    assert!(cs.sim.load_balancer_rules().is_empty());

    // An unknown job is a parameter error.
    cs.call("queryAsyncJobResult", &[("jobid", "nope")])
        .await
        .error("queryAsyncJobResult", 431);
}

#[tokio::test]
async fn time_based_and_immediate_jobs() {
    let cs = start_with(CloudstackOptions {
        job_polls: 0,
        ..CloudstackOptions::default()
    })
    .await;
    cs.sim.seed(Seed::example()).expect("seed");
    // Zero polls: done before the command answers.
    let started = cs.ok("associateIpAddress", &[("networkid", K8S_NET)]).await;
    let ip = cs.sim.public_ips();
    let ip = ip.iter().find(|i| i["id"] == started["id"]).expect("ip");
    assert_eq!(ip["state"], "Allocated");
    // Duration zero: due at once, completed by the next request.
    cs.sim.set_job_polls(100);
    cs.sim.set_job_duration(Some(Duration::ZERO));
    let started = cs.ok("associateIpAddress", &[("networkid", K8S_NET)]).await;
    let listed = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("id", s(&started["id"]))],
        )
        .await;
    assert_eq!(listed[0]["state"], "Allocated");
    assert!(listed[0]["allocated"].is_string());
}

#[tokio::test]
async fn rules_on_one_address_conflict_by_port_whatever_the_protocol() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let ip_id = s(&ip["id"]).to_string();
    let first = cs.lb_rule(&ip_id, K8S_NET, "svc-tcp-8080", "8080").await;
    let create = |protocol: &'static str, port: &'static str| {
        let ip_id = ip_id.clone();
        let cs = &cs;
        async move {
            cs.call(
                "createLoadBalancerRule",
                &[
                    ("name", "other"),
                    ("algorithm", "source"),
                    ("privateport", "30081"),
                    ("publicport", port),
                    ("networkid", K8S_NET),
                    ("publicipid", &ip_id),
                    ("protocol", protocol),
                ],
            )
            .await
        }
    };
    let t = create("tcp", "8080")
        .await
        .error("createLoadBalancerRule", 537);
    // FirewallManagerImpl.detectRulesConflict's text, the rule as FirewallRuleVO.toString.
    assert!(
        t.starts_with("The range specified, 8080-8080, conflicts with rule Rule[")
            && t.ends_with("-LoadBalancing-Active] which has 8080-8080"),
        "{t}"
    );
    // Every LB rule is a `tcp` firewall rule to CloudStack: tcp-proxy and UDP conflict too.
    create("tcp-proxy", "8080")
        .await
        .error("createLoadBalancerRule", 537);
    let t = create("udp", "8080")
        .await
        .error("createLoadBalancerRule", 537);
    assert!(t.contains("conflicts with rule"), "{t}");
    // Another port is fine, with any protocol.
    assert_eq!(create("udp", "8443").await.status, 200);
    assert_eq!(create("tcp", "8444").await.status, 200);
    // Bad protocol and algorithm are parameter errors.
    create("sctp", "9000")
        .await
        .error("createLoadBalancerRule", 431);
    let t = cs
        .call(
            "createLoadBalancerRule",
            &[
                ("name", "x"),
                ("algorithm", "random"),
                ("privateport", "1"),
                ("publicport", "2"),
                ("publicipid", &ip_id),
            ],
        )
        .await
        .error("createLoadBalancerRule", 431);
    assert!(t.contains("algorithm"), "{t}");
    let t = cs
        .call("createLoadBalancerRule", &[("name", "x")])
        .await
        .error("createLoadBalancerRule", 431);
    assert_eq!(
        t,
        "Unable to execute API command createloadbalancerrule due to missing parameter algorithm"
    );
    // A deleted rule frees its port.
    cs.run("deleteLoadBalancerRule", &[("id", s(&first["id"]))])
        .await;
    assert_eq!(create("tcp", "8080").await.status, 200);
}

#[tokio::test]
async fn assign_and_remove_members() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let rule = cs.lb_rule(s(&ip["id"]), K8S_NET, "svc-tcp-80", "80").await;
    let id = s(&rule["id"]).to_string();
    let members = |cs: &Cs| {
        let rules = cs.sim.load_balancer_rules();
        rules[0]["members"].clone()
    };
    let both = format!("{NODE1},{NODE2}");
    let r = cs
        .run(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", &both)],
        )
        .await;
    assert_eq!(r, json!({"success": true}));
    let mut want = vec![NODE1, NODE2];
    want.sort_unstable();
    assert_eq!(members(&cs), json!(want));
    let instances = cs
        .list(
            "listLoadBalancerRuleInstances",
            "loadbalancerruleinstance",
            &[("id", &id)],
        )
        .await;
    assert_eq!(instances.len(), 2);
    assert!(instances.iter().all(|v| v["nic"].is_array()), "full VMs");

    // The VM checks run in the job (LoadBalancingRulesManagerImpl.assignToLoadBalancer is
    // called by the command's execute): accepted, then the job fails with 431.
    let r = job_failure(
        &cs,
        "assignToLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", NODE1)],
    )
    .await;
    assert_eq!(r["errorcode"], 431, "{r}");
    let t = s(&r["errortext"]);
    assert!(t.ends_with("is already mapped to load balancer."), "{t}");
    let r = job_failure(
        &cs,
        "assignToLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", VPC_NODE)],
    )
    .await;
    assert_eq!(
        r,
        json!({
            "errorcode": 431,
            "errortext": "VM with id specified cannot be added because it doesn't belong in the same network."
        })
    );
    let t = cs
        .call(
            "assignToLoadBalancerRule",
            &[
                ("id", &id),
                ("virtualmachineids", "00000000-0000-4000-8000-000000000009"),
            ],
        )
        .await
        .error("assignToLoadBalancerRule", 431);
    assert!(
        t.starts_with("Invalid parameter virtualmachineids value="),
        "{t}"
    );

    cs.run(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", NODE1)],
    )
    .await;
    assert_eq!(members(&cs), json!([NODE2]));
    cs.call(
        "removeFromLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", NODE3)],
    )
    .await
    .error("removeFromLoadBalancerRule", 431);

    // Membership changes only when the job completes.
    cs.sim.set_job_polls(2);
    cs.ok(
        "assignToLoadBalancerRule",
        &[("id", &id), ("virtualmachineids", NODE3)],
    )
    .await;
    assert_eq!(members(&cs), json!([NODE2]));
    cs.sim.settle();
    let mut want = vec![NODE2, NODE3];
    want.sort_unstable();
    assert_eq!(members(&cs), json!(want));

    // An expunged VM leaves its load balancers.
    assert!(cs.sim.remove_vm(NODE3));
    assert_eq!(members(&cs), json!([NODE2]));
}

/// A command accepted whose job fails; returns its `jobresult`.
async fn job_failure(cs: &Cs, command: &str, extra: &[(&str, &str)]) -> Value {
    let started = cs.ok(command, extra).await;
    let done = cs.wait(s(&started["jobid"])).await;
    assert_eq!(done["jobstatus"], 2, "{command}: {done}");
    done["jobresult"].clone()
}

/// One VM CloudStack refuses (destroyed, expunging, on another network) fails the whole
/// assignment, in the job, with a text that does not name the VM
/// (`LoadBalancingRulesManagerImpl.assignToLoadBalancer`); nothing is added. A VM destroyed
/// after the command was accepted fails the job the same way.
#[tokio::test]
async fn one_refused_vm_fails_the_whole_assignment() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let rule = cs.lb_rule(s(&ip["id"]), K8S_NET, "svc-tcp-80", "80").await;
    let id = s(&rule["id"]).to_string();
    let members = |cs: &Cs| cs.sim.load_balancer_rules()[0]["members"].clone();
    let refused = json!({"errorcode": 431, "errortext": "Invalid instance id specified"});
    for state in ["Destroyed", "Expunging"] {
        assert!(cs.sim.set_vm_state(NODE2, state));
        let r = job_failure(
            &cs,
            "assignToLoadBalancerRule",
            &[
                ("id", &id),
                ("virtualmachineids", &format!("{NODE1},{NODE2}")),
            ],
        )
        .await;
        assert_eq!(r, refused, "{state}");
        assert_eq!(members(&cs), json!([]), "{state}: nothing is added");
    }
    // Stopped and Error VMs are not refused by CloudStack.
    for state in ["Stopped", "Error"] {
        assert!(cs.sim.set_vm_state(NODE2, state));
        cs.run(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", NODE2)],
        )
        .await;
        cs.run(
            "removeFromLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", NODE2)],
        )
        .await;
    }
    assert!(cs.sim.set_vm_state(NODE2, "Running"));
    // Destroyed between the command and its job.
    cs.sim.set_job_polls(1);
    let started = cs
        .ok(
            "assignToLoadBalancerRule",
            &[
                ("id", &id),
                ("virtualmachineids", &format!("{NODE1},{NODE3}")),
            ],
        )
        .await;
    assert!(cs.sim.set_vm_state(NODE3, "Destroyed"));
    let done = cs.wait(s(&started["jobid"])).await;
    assert_eq!(done["jobstatus"], 2, "{done}");
    assert_eq!(done["jobresult"], refused);
    assert_eq!(members(&cs), json!([]));
    // An expunged VM's UUID no longer resolves: refused before any job.
    assert!(cs.sim.remove_vm(NODE3));
    let t = cs
        .call(
            "assignToLoadBalancerRule",
            &[("id", &id), ("virtualmachineids", NODE3)],
        )
        .await
        .error("assignToLoadBalancerRule", 431);
    assert!(
        t.starts_with("Invalid parameter virtualmachineids value="),
        "{t}"
    );
}

#[tokio::test]
async fn addresses_for_isolated_networks_and_vpcs() {
    let cs = start().await;
    cs.sim.set_job_polls(2);
    // Isolated: associated with the network at once, allocated when the job completes.
    let started = cs.ok("associateIpAddress", &[("networkid", K8S_NET)]).await;
    let ip_id = s(&started["id"]).to_string();
    let listed = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("id", &ip_id)],
        )
        .await;
    assert_eq!(listed[0]["state"], "Allocating");
    assert!(listed[0].get("allocated").is_none());
    assert_eq!(listed[0]["associatednetworkid"], K8S_NET);
    assert_eq!(listed[0]["ipaddress"], "203.0.113.10");
    let done = cs.wait(s(&started["jobid"])).await;
    let ip = &done["jobresult"]["ipaddress"];
    assert_eq!(ip["state"], "Allocated");
    assert!(ip["allocated"].is_string());
    assert_eq!(ip["issourcenat"], false);
    assert_eq!(ip["zonename"], "zone1");
    cs.sim.set_job_polls(1);

    // VPC: no tier until the first load-balancer rule.
    let vip = cs.associate("vpcid", VPC1).await;
    assert_eq!(vip["vpcid"], VPC1);
    assert!(vip.get("associatednetworkid").is_none(), "{vip}");
    cs.lb_rule(s(&vip["id"]), K8S_TIER, "svc-tcp-443", "443")
        .await;
    let listed = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("id", s(&vip["id"]))],
        )
        .await;
    assert_eq!(listed[0]["associatednetworkid"], K8S_TIER);
    // An isolated address cannot serve the tier.
    cs.call(
        "createLoadBalancerRule",
        &[
            ("name", "x"),
            ("algorithm", "roundrobin"),
            ("privateport", "1"),
            ("publicport", "1"),
            ("networkid", K8S_TIER),
            ("publicipid", &ip_id),
        ],
    )
    .await
    .error("createLoadBalancerRule", 431);

    // A requested address must be free and in the pool.
    let r = cs
        .run(
            "associateIpAddress",
            &[("networkid", K8S_NET), ("ipaddress", "203.0.113.42")],
        )
        .await;
    assert_eq!(r["ipaddress"]["ipaddress"], "203.0.113.42");
    for address in ["203.0.113.42", "198.51.100.1"] {
        cs.call(
            "associateIpAddress",
            &[("networkid", K8S_NET), ("ipaddress", address)],
        )
        .await
        .error("associateIpAddress", 431);
    }
    // Free addresses show with allocatedonly=false only.
    let free = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[
                ("ipaddress", "203.0.113.50"),
                ("allocatedonly", "false"),
                ("listall", "true"),
            ],
        )
        .await;
    assert_eq!(free.len(), 1);
    assert_eq!(free[0]["state"], "Free");
    assert!(free[0].get("allocated").is_none());
    let r = cs
        .call("listPublicIpAddresses", &[("ipaddress", "203.0.113.50")])
        .await;
    assert_eq!(r.body, json!({"listpublicipaddressesresponse": {}}));
}

#[tokio::test]
async fn disassociating_removes_the_rules_and_source_nat_stays() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let ip_id = s(&ip["id"]).to_string();
    let rule = cs.lb_rule(&ip_id, K8S_NET, "svc-tcp-80", "80").await;
    let fw = cs
        .run(
            "createFirewallRule",
            &[
                ("ipaddressid", &ip_id),
                ("protocol", "tcp"),
                ("cidrlist", "0.0.0.0/0"),
                ("startport", "80"),
                ("endport", "80"),
            ],
        )
        .await["firewallrule"]
        .clone();
    cs.sim.set_job_polls(2);
    let started = cs.ok("disassociateIpAddress", &[("id", &ip_id)]).await;
    assert!(started.get("id").is_none(), "{started}");
    let ips = cs.sim.public_ips();
    let listed = ips.iter().find(|i| i["id"] == ip_id.as_str()).expect("ip");
    assert_eq!(listed["state"], "Releasing");
    assert_eq!(cs.sim.load_balancer_rules()[0]["state"], "Revoke");
    assert_eq!(cs.sim.firewall_rules()[0]["state"], "Revoke");
    let done = cs.wait(s(&started["jobid"])).await;
    assert_eq!(done["jobresult"], json!({"success": true}));
    assert!(cs.sim.load_balancer_rules().is_empty());
    assert!(cs.sim.firewall_rules().is_empty());
    let r = cs
        .call("listLoadBalancerRules", &[("id", s(&rule["id"]))])
        .await;
    assert_eq!(r.body, json!({"listloadbalancerrulesresponse": {}}));
    let r = cs.call("listFirewallRules", &[("id", s(&fw["id"]))]).await;
    assert_eq!(r.body, json!({"listfirewallrulesresponse": {}}));
    let free = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("id", &ip_id), ("allocatedonly", "false")],
        )
        .await;
    assert_eq!(free[0]["state"], "Free");

    let source_nat = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("issourcenat", "true"), ("associatednetworkid", K8S_NET)],
        )
        .await;
    assert_eq!(source_nat.len(), 1);
    let t = cs
        .call("disassociateIpAddress", &[("id", s(&source_nat[0]["id"]))])
        .await
        .error("disassociateIpAddress", 431);
    assert_eq!(t, "Can't release source nat ip address");
}

#[tokio::test]
async fn firewall_rules_only_on_isolated_networks() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let ip_id = s(&ip["id"]).to_string();
    let params = |cidrs: &'static str, start: &'static str, end: &'static str| {
        vec![
            ("ipaddressid", ip_id.clone()),
            ("protocol", "tcp".to_string()),
            ("cidrlist", cidrs.to_string()),
            ("startport", start.to_string()),
            ("endport", end.to_string()),
        ]
    };
    let call = |p: Vec<(&'static str, String)>| {
        let cs = &cs;
        async move {
            let refs: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
            cs.call("createFirewallRule", &refs).await
        }
    };
    let r = call(params("10.0.0.0/8,192.0.2.0/24", "80", "80")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = cs.wait(s(&r.inner()["jobid"])).await;
    let rule = &done["jobresult"]["firewallrule"];
    assert_eq!(rule["startport"], 80);
    assert_eq!(rule["endport"], 80);
    assert_eq!(rule["cidrlist"], "10.0.0.0/8,192.0.2.0/24");
    assert_eq!(rule["ipaddress"], ip["ipaddress"]);
    assert_eq!(rule["purpose"], "Firewall");
    // Same protocol, same CIDR set (any order), overlapping ports: conflict.
    let t = call(params("192.0.2.0/24,10.0.0.0/8", "70", "90"))
        .await
        .error("createFirewallRule", 537);
    assert!(t.contains("conflicts with rule"), "{t}");
    // Other CIDRs: fine.
    assert_eq!(call(params("0.0.0.0/0", "80", "80")).await.status, 200);
    let listed = cs
        .list(
            "listFirewallRules",
            "firewallrule",
            &[("ipaddressid", &ip_id), ("listall", "true")],
        )
        .await;
    assert_eq!(listed.len(), 2);

    // A VPC address has no firewall.
    let vip = cs.associate("vpcid", VPC1).await;
    let t = cs
        .call(
            "createFirewallRule",
            &[
                ("ipaddressid", s(&vip["id"])),
                ("protocol", "tcp"),
                ("startport", "80"),
                ("endport", "80"),
            ],
        )
        .await
        .error("createFirewallRule", 431);
    assert!(t.contains("Firewall service is not supported"), "{t}");

    // The networks' services tell which applies.
    let net = cs.list("listNetworks", "network", &[("id", K8S_NET)]).await;
    let services: Vec<&str> = net[0]["service"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| s["name"].as_str().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    assert!(services.contains(&"Firewall") && !services.contains(&"NetworkACL"));
    let tier = cs
        .list("listNetworks", "network", &[("id", K8S_TIER)])
        .await;
    assert_eq!(tier[0]["vpcid"], VPC1);
    assert_eq!(tier[0]["aclid"], K8S_ACL);
    let services = tier[0]["service"].to_string();
    assert!(services.contains("NetworkACL") && !services.contains("Firewall"));
}

#[tokio::test]
async fn network_acl_items() {
    let cs = start().await;
    let lists = cs
        .list("listNetworkACLLists", "networkacllist", &[("id", K8S_ACL)])
        .await;
    assert_eq!(lists[0]["name"], "k8s-acl");
    assert_eq!(lists[0]["vpcid"], VPC1);
    let defaults = cs
        .list(
            "listNetworkACLLists",
            "networkacllist",
            &[("name", "default_allow")],
        )
        .await;
    assert_eq!(defaults.len(), 1);
    assert!(defaults[0].get("vpcid").is_none());
    let default_allow = s(&defaults[0]["id"]).to_string();

    let item = |acl: &str, protocol: &str| {
        vec![
            ("protocol", protocol.to_string()),
            ("aclid", acl.to_string()),
            ("action", "Allow".to_string()),
            ("cidrlist", "0.0.0.0/0".to_string()),
            ("startport", "443".to_string()),
            ("endport", "443".to_string()),
            ("networkid", K8S_TIER.to_string()),
            ("traffictype", "Ingress".to_string()),
        ]
    };
    let send = |p: Vec<(&'static str, String)>| {
        let cs = &cs;
        async move {
            let refs: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
            cs.call("createNetworkACL", &refs).await
        }
    };
    let t = send(item(K8S_ACL, "tcp-proxy"))
        .await
        .error("createNetworkACL", 431);
    assert!(t.contains("tcp-proxy"), "{t}");
    let t = send(item(&default_allow, "tcp"))
        .await
        .error("createNetworkACL", 431);
    assert_eq!(t, "Default ACL cannot be modified");

    let r = send(item(K8S_ACL, "tcp")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let done = cs.wait(s(&r.inner()["jobid"])).await;
    let acl = &done["jobresult"]["networkacl"];
    assert_eq!(acl["number"], 1);
    assert_eq!(acl["startport"], "443");
    assert_eq!(acl["endport"], "443");
    assert_eq!(acl["action"], "Allow");
    assert_eq!(acl["traffictype"], "Ingress");
    assert_eq!(acl["state"], "Active");
    let r = send(item(K8S_ACL, "udp")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    cs.sim.settle();
    let items = cs
        .list(
            "listNetworkACLs",
            "networkacl",
            &[("aclid", K8S_ACL), ("networkid", K8S_TIER)],
        )
        .await;
    let numbers: Vec<u64> = items.iter().filter_map(|i| i["number"].as_u64()).collect();
    assert_eq!(numbers, [1, 2]);
    assert_eq!(cs.sim.network_acls().len(), 2);
    cs.run("deleteNetworkACL", &[("id", s(&items[0]["id"]))])
        .await;
    assert_eq!(cs.sim.network_acls().len(), 1);

    // Ports: not for ICMP or all; a protocol number may have them.
    let t = send(item(K8S_ACL, "icmp"))
        .await
        .error("createNetworkACL", 431);
    assert_eq!(t, "Can't specify start/end port when protocol is ICMP");
    send(item(K8S_ACL, "all"))
        .await
        .error("createNetworkACL", 431);
    let r = send(item(K8S_ACL, "6")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let t = send(item(K8S_ACL, "256"))
        .await
        .error("createNetworkACL", 431);
    assert_eq!(t, "Invalid protocol number: 256");
}

#[tokio::test]
async fn acl_items_of_a_project_vpc_show_by_list_without_projectid() {
    let cs = start().await;
    let project = cs.sim.add_project("p");
    let vpc = cs.sim.add_vpc("pv", "zone1", Some("p"));
    let acl = cs.sim.add_acl_list("pacl", &vpc);
    let tier = cs
        .sim
        .add_network(SeedNetwork::tier("pt", "zone1", &vpc, Some("pacl")));
    cs.run(
        "createNetworkACL",
        &[("protocol", "tcp"), ("aclid", &acl), ("startport", "80")],
    )
    .await;
    // By list (aclid or networkid) CloudStack checks access to the VPC only.
    let by_acl = cs
        .list(
            "listNetworkACLs",
            "networkacl",
            &[("aclid", &acl), ("networkid", &tier)],
        )
        .await;
    assert_eq!(by_acl.len(), 1);
    assert_eq!(by_acl[0]["endport"], "80");
    // Otherwise the project scope applies.
    let own = cs.list("listNetworkACLs", "networkacl", &[]).await;
    assert!(own.iter().all(|i| i["aclid"] != acl.as_str()));
    // ... (and the system lists' items always show).
    let scoped = cs
        .list("listNetworkACLs", "networkacl", &[("projectid", &project)])
        .await;
    assert_eq!(scoped.len(), 5);
    assert_eq!(
        scoped.iter().filter(|i| i["aclid"] == acl.as_str()).count(),
        1
    );
    // Lists: by ID only within the scope, by VPC always (with the system lists).
    let r = cs.call("listNetworkACLLists", &[("id", &acl)]).await;
    assert_eq!(r.body, json!({"listnetworkacllistsresponse": {}}));
    let by_vpc = cs
        .list("listNetworkACLLists", "networkacllist", &[("vpcid", &vpc)])
        .await;
    let names: Vec<&str> = by_vpc.iter().map(|a| s(&a["name"])).collect();
    assert_eq!(names, ["default_allow", "default_deny", "pacl"]);
}

#[tokio::test]
async fn a_failing_job_reports_status_2_and_rolls_back() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    cs.sim.fail_next_jobs("createLoadBalancerRule", 1);
    let started = cs
        .ok(
            "createLoadBalancerRule",
            &[
                ("name", "svc-tcp-80"),
                ("algorithm", "roundrobin"),
                ("privateport", "30080"),
                ("publicport", "80"),
                ("networkid", K8S_NET),
                ("publicipid", s(&ip["id"])),
            ],
        )
        .await;
    let rule_id = s(&started["id"]).to_string();
    assert_eq!(cs.sim.load_balancer_rules()[0]["state"], "Add");
    let done = cs.wait(s(&started["jobid"])).await;
    // Shaped as the failed jobs recorded in exoscale/egoscale#322/#325.
    assert_eq!(done["jobstatus"], 2, "{done}");
    assert_eq!(done["jobresultcode"], 0);
    assert_eq!(done["jobresulttype"], "object");
    let result = done["jobresult"].as_object().expect("jobresult");
    assert_eq!(result.len(), 2, "{done}");
    assert_eq!(result["errorcode"], 530);
    assert!(result["errortext"].is_string());
    assert!(cs.sim.load_balancer_rules().is_empty());
    let r = cs.call("listLoadBalancerRules", &[("id", &rule_id)]).await;
    assert_eq!(r.body, json!({"listloadbalancerrulesresponse": {}}));
    // Only the next one failed.
    cs.lb_rule(s(&ip["id"]), K8S_NET, "svc-tcp-80", "80").await;

    // A failed release keeps the address and its rules.
    cs.sim.fail_next_jobs("disassociateIpAddress", 1);
    let started = cs
        .ok("disassociateIpAddress", &[("id", s(&ip["id"]))])
        .await;
    assert_eq!(cs.wait(s(&started["jobid"])).await["jobstatus"], 2);
    let ips = cs.sim.public_ips();
    let kept = ips.iter().find(|i| i["id"] == ip["id"]).expect("ip");
    assert_eq!(kept["state"], "Allocated");
    assert_eq!(cs.sim.load_balancer_rules()[0]["state"], "Active");
}

#[tokio::test]
async fn cidr_lists_render_with_the_configured_separator() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let rule = cs
        .run(
            "createLoadBalancerRule",
            &[
                ("name", "svc-tcp-80"),
                ("algorithm", "roundrobin"),
                ("privateport", "30080"),
                ("publicport", "80"),
                ("networkid", K8S_NET),
                ("publicipid", s(&ip["id"])),
                ("cidrlist", "10.0.0.0/8,192.0.2.0/24"),
            ],
        )
        .await["loadbalancer"]
        .clone();
    assert_eq!(rule["cidrlist"], "10.0.0.0/8,192.0.2.0/24");
    cs.sim.set_cidr_separator(CidrSeparator::Space);
    let rules = cs
        .list(
            "listLoadBalancerRules",
            "loadbalancerrule",
            &[("id", s(&rule["id"]))],
        )
        .await;
    assert_eq!(rules[0]["cidrlist"], "10.0.0.0/8 192.0.2.0/24");

    // Updating the list (CloudStack ≥ 4.22) and the algorithm.
    let updated = cs
        .run(
            "updateLoadBalancerRule",
            &[
                ("id", s(&rule["id"])),
                ("algorithm", "source"),
                ("protocol", "tcp"),
                ("cidrlist", "198.51.100.0/24"),
            ],
        )
        .await["loadbalancer"]
        .clone();
    assert_eq!(updated["algorithm"], "source");
    assert_eq!(updated["cidrlist"], "198.51.100.0/24");
    cs.call(
        "updateLoadBalancerRule",
        &[("id", s(&rule["id"])), ("algorithm", "fastest")],
    )
    .await
    .error("updateLoadBalancerRule", 431);
    // Before 4.22 the update has no cidrlist: the parameter is ignored, the list stays.
    cs.sim.set_version("4.20.1.0");
    let kept = cs
        .run(
            "updateLoadBalancerRule",
            &[("id", s(&rule["id"])), ("cidrlist", "203.0.113.0/24")],
        )
        .await["loadbalancer"]
        .clone();
    assert_eq!(kept["cidrlist"], "198.51.100.0/24");
}

#[tokio::test]
async fn faults_by_command() {
    let cs = start().await;
    cs.sim
        .faults()
        .fail_next(Match::command("listVirtualMachines"), 530, 1);
    cs.ok("listZones", &[]).await;
    let r = cs.call("listVirtualMachines", &[]).await;
    r.error("listVirtualMachines", 530);
    cs.ok("listVirtualMachines", &[]).await;
    cs.sim
        .faults()
        .throttle_next(Match::command("listZones"), 3, 1);
    let r = cs.call("listZones", &[]).await;
    r.error("listZones", 429);
    assert_eq!(cs.sim.faults().pending(), 0);

    // The same through the control API.
    let r = cs
        .client
        .post(format!("{}/sim/faults", cs.sim.base_url()))
        .body(r#"{"action": "fail", "status": 503, "command": "listZones"}"#)
        .send()
        .await
        .expect("control");
    assert_eq!(r.status().as_u16(), 204);
    cs.call("listZones", &[]).await.error("listZones", 503);
    let state: Value = cs
        .client
        .get(format!("{}/sim/state", cs.sim.base_url()))
        .send()
        .await
        .expect("state")
        .json()
        .await
        .expect("json");
    assert_eq!(state["virtualmachines"].as_array().map(Vec::len), Some(4));
}

#[tokio::test]
async fn the_request_log_redacts_credentials() {
    let cs = start().await;
    cs.associate("networkid", K8S_NET).await;
    let requests = cs.sim.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for r in &requests {
        assert_eq!(r.params["apiKey"], "REDACTED");
        assert_eq!(r.params["signature"], "REDACTED");
        assert_eq!(r.status, 200);
    }
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].command, "associateIpAddress");
    assert_eq!(requests[0].params["networkid"], K8S_NET);
    assert_eq!(requests[1].method, "GET");
    assert_eq!(requests[1].command, "queryAsyncJobResult");
    let mutations = cs.sim.mutations();
    assert_eq!(mutations.len(), 1);
    assert_eq!(mutations[0].command, "associateIpAddress");
    cs.sim.clear_requests();
    assert!(cs.sim.requests().is_empty());
}

#[tokio::test]
async fn library_seeding_builds_a_vpc_account() {
    let cs = start_with(CloudstackOptions::default()).await;
    let zone = cs.sim.add_zone("z1");
    let vpc = cs.sim.add_vpc("v", "z1", None);
    let acl = cs.sim.add_acl_list("web", &vpc);
    let tier = cs
        .sim
        .add_network(SeedNetwork::tier("t", &zone, &vpc, Some("web")));
    cs.sim.add_public_ips("z1", &["192.0.2.10-192.0.2.11"]);
    let nat = cs.sim.add_public_ip(SeedPublicIp {
        ip: "192.0.2.1".into(),
        zone: "z1".into(),
        vpc: Some(vpc.clone()),
        source_nat: true,
        ..SeedPublicIp::default()
    });
    let vm = cs.sim.add_vm(SeedVm {
        public_ip: Some("192.0.2.11".into()),
        ..SeedVm::new("n1", "z1").nic(&tier, "10.0.0.5")
    });
    let vms = cs
        .list("listVirtualMachines", "virtualmachine", &[("id", &vm)])
        .await;
    assert_eq!(vms[0]["publicip"], "192.0.2.11");
    assert!(vms[0]["publicipid"].is_string());
    let nets = cs.list("listNetworks", "network", &[("vpcid", &vpc)]).await;
    assert_eq!(nets[0]["aclid"], acl.as_str());
    let ips = cs.sim.public_ips();
    assert_eq!(ips.len(), 3);
    assert!(
        ips.iter()
            .any(|i| i["id"] == nat.as_str() && i["issourcenat"] == true)
    );
    // Bad entries are refused without changing anything.
    assert!(cs.sim.try_add_zone("z1").is_err());
    assert!(cs.sim.try_add_vm(SeedVm::new("x", "nowhere")).is_err());
    assert!(
        cs.sim
            .seed(Seed::parse("zones: [{name: z2}, {name: z2}]").expect("yaml"))
            .is_err()
    );
    assert_eq!(cs.list("listZones", "zone", &[]).await.len(), 1);
}

#[tokio::test]
async fn cidrlist_is_refused_before_4_18_and_empty_means_open() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let create = |port: &'static str, cidrs: Option<&'static str>| {
        let ip_id = s(&ip["id"]).to_string();
        let cs = &cs;
        async move {
            let mut params = vec![
                ("name", "svc"),
                ("algorithm", "roundrobin"),
                ("privateport", "30080"),
                ("publicport", port),
                ("networkid", K8S_NET),
                ("publicipid", ip_id.as_str()),
            ];
            if let Some(c) = cidrs {
                params.push(("cidrlist", c));
            }
            cs.call("createLoadBalancerRule", &params).await
        }
    };
    // Without cidrlist the rule has none (open to all), rendered "" as the recorded 4.15 answer.
    let started = create("80", None).await;
    assert_eq!(started.status, 200, "{}", started.body);
    let done = cs.wait(s(&started.inner()["jobid"])).await;
    assert_eq!(done["jobresult"]["loadbalancer"]["cidrlist"], "", "{done}");

    cs.sim.set_version("4.17.2.0");
    let caps = cs.ok("listCapabilities", &[]).await;
    assert_eq!(caps["capability"]["cloudstackversion"], "4.17.2.0");
    let t = create("81", Some("10.0.0.0/8"))
        .await
        .error("createLoadBalancerRule", 431);
    assert_eq!(
        t,
        "Parameter cidrList is deprecated; if you need to open firewall rule for the specific CIDR, please refer to createFirewallRule command"
    );
    let r = create("81", Some("10.0.0.0/8")).await;
    assert_eq!(
        r.inner()["cserrorcode"],
        4350,
        "InvalidParameterValueException"
    );
    assert_eq!(create("81", None).await.status, 200);

    cs.sim.set_version("4.18.0.0");
    assert_eq!(create("82", Some("10.0.0.0/8")).await.status, 200);
}

#[tokio::test]
async fn a_small_default_page_size_refuses_larger_pages() {
    let cs = start().await;
    cs.sim.set_page_size_limit(2);
    // BaseListCmd.getPageSize's refusal.
    let t = cs
        .call("listVirtualMachines", &[("page", "1"), ("pagesize", "500")])
        .await
        .error("listVirtualMachines", 431);
    assert_eq!(t, "Page size can't exceed max allowed page size value: 2");
    // Without pagesize the limit is the page size; `count` tells the total.
    let first = cs.ok("listVirtualMachines", &[]).await;
    assert_eq!(first["virtualmachine"].as_array().map(Vec::len), Some(2));
    let total = first["count"].as_u64().expect("count") as usize;
    assert!(total > 2, "{first}");
    let mut seen = first["virtualmachine"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for page in 2..=total.div_ceil(2) {
        let p = page.to_string();
        seen.extend(
            cs.list(
                "listVirtualMachines",
                "virtualmachine",
                &[("page", &p), ("pagesize", "2")],
            )
            .await,
        );
    }
    assert_eq!(seen.len(), total);
}

/// `page` and `pagesize` go together, as `BaseListCmd.validateSpecificParameters` requires, on
/// every list command (the status, cserrorcode and text are CloudStack's; `pagesize=-1` alone
/// is every item).
#[tokio::test]
async fn page_and_pagesize_are_refused_alone_on_every_list() {
    let cs = start().await;
    let lists = [
        "listVirtualMachines",
        "listNetworks",
        "listZones",
        "listProjects",
        "listLoadBalancerRules",
        "listPublicIpAddresses",
        "listFirewallRules",
        "listNetworkACLLists",
        "listNetworkACLs",
        "listTags",
    ];
    for command in lists {
        let resp = cs.call(command, &[("page", "2")]).await;
        assert_eq!(
            resp.body[format!("{}response", command.to_lowercase())]["cserrorcode"],
            9999,
            "{command}"
        );
        let t = resp.error(command, 431);
        assert_eq!(
            t, "\"pagesize\" parameter is required when \"page\" is specified",
            "{command}"
        );
        let t = cs
            .call(command, &[("pagesize", "2")])
            .await
            .error(command, 431);
        assert_eq!(
            t, "\"page\" parameter is required when \"pagesize\" is specified",
            "{command}"
        );
        let t = cs
            .call(command, &[("page", "1"), ("pagesize", "-1")])
            .await
            .error(command, 431);
        assert_eq!(
            t, "Can't specify page parameter when pagesize is -1 (Unlimited)",
            "{command}"
        );
        assert_eq!(
            cs.call(command, &[("pagesize", "-1")]).await.status,
            200,
            "{command}"
        );
    }
    // listLoadBalancerRuleInstances too; its required `id` is checked first (ParamProcessWorker
    // runs before the paging rule).
    let t = cs
        .call("listLoadBalancerRuleInstances", &[("page", "1")])
        .await
        .error("listLoadBalancerRuleInstances", 431);
    assert_eq!(
        t,
        "Unable to execute API command listloadbalancerruleinstances due to missing parameter id"
    );
    let ip = cs.associate("networkid", K8S_NET).await;
    let rule = cs.lb_rule(s(&ip["id"]), K8S_NET, "svc-tcp-80", "80").await;
    let t = cs
        .call(
            "listLoadBalancerRuleInstances",
            &[("id", s(&rule["id"])), ("page", "1")],
        )
        .await
        .error("listLoadBalancerRuleInstances", 431);
    assert_eq!(
        t,
        "\"pagesize\" parameter is required when \"page\" is specified"
    );
    // Not a Java int: ParamProcessWorker's text, before the pairing rule.
    let t = cs
        .call("listVirtualMachines", &[("page", "two"), ("pagesize", "2")])
        .await
        .error("listVirtualMachines", 431);
    assert_eq!(
        t,
        "Unable to execute API command listvirtualmachines due to invalid value two for parameter page"
    );
    // Page 0 is the first page (BaseListCmd.getStartIndex).
    let first = cs
        .ok("listVirtualMachines", &[("page", "1"), ("pagesize", "1")])
        .await;
    let zero = cs
        .ok("listVirtualMachines", &[("page", "0"), ("pagesize", "1")])
        .await;
    assert_eq!(first, zero);
    assert_eq!(first["virtualmachine"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn seed_settings_and_control_switches() {
    let cs = start_with(CloudstackOptions::default()).await;
    let seed = Seed::parse("settings: {version: 4.15.2.0, page_size: 1}\n").expect("seed");
    cs.sim.seed(seed).expect("settings");
    let caps = cs.ok("listCapabilities", &[]).await;
    assert_eq!(caps["capability"]["cloudstackversion"], "4.15.2.0");
    // The UI's page size, as recorded (ConfigurationService.json), not the API limit.
    assert_eq!(caps["capability"]["defaultuipagesize"], 20);
    cs.call("listZones", &[("page", "1"), ("pagesize", "2")])
        .await
        .error("listZones", 431);
    assert!(Seed::parse("settings: {version: new}\n").is_ok());
    assert!(
        cs.sim
            .seed(Seed::parse("settings: {version: new}\n").expect("parse"))
            .is_err()
    );
    assert!(Seed::parse("settings: {colour: blue}\n").is_err());

    // The HTTP twins.
    let control = |path: &str, body: Value| {
        let url = format!("{}/sim/{path}", cs.sim.base_url());
        let client = cs.client.clone();
        async move {
            client
                .put(url)
                .json(&body)
                .send()
                .await
                .expect("control")
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        control("version", json!({"version": "4.18.1.0"})).await,
        204
    );
    assert_eq!(control("version", json!({"version": "latest"})).await, 400);
    assert_eq!(control("page-size", json!({"max": 3})).await, 204);
    assert_eq!(control("page-size", json!({"max": 0})).await, 400);
    let caps = cs.ok("listCapabilities", &[]).await;
    assert_eq!(caps["capability"]["cloudstackversion"], "4.18.1.0");
    assert_eq!(
        cs.call("listZones", &[("page", "1"), ("pagesize", "3")])
            .await
            .status,
        200
    );
}

/// A job that must fail; returns its `jobresult` (`errorcode`, `errortext`).
async fn failed_job(cs: &Cs, command: &str, extra: &[(&str, &str)]) -> Value {
    let started = cs.ok(command, extra).await;
    let done = cs.wait(s(&started["jobid"])).await;
    assert_eq!(done["jobstatus"], 2, "{command}: {done}");
    assert!(done.get("jobinstancetype").is_none(), "{done}");
    done["jobresult"].clone()
}

#[tokio::test]
async fn resource_tags_as_cloudstack_keeps_them() {
    let cs = start().await;
    let ip = cs.associate("networkid", K8S_NET).await;
    let ip_id = s(&ip["id"]).to_string();
    let other = cs.associate("networkid", K8S_NET).await;
    let other_id = s(&other["id"]).to_string();
    let tag =
        |key: &'static str, value: &'static str| [("tags[0].key", key), ("tags[0].value", value)];
    // Async, all checks in the job: an unknown type, a type without tags, an unknown resource
    // and an empty value are failed jobs with 431.
    for (resourcetype, id, value, text) in [
        (
            "IpAddress",
            ip_id.as_str(),
            "x",
            "Invalid resource type IpAddress".to_string(),
        ),
        (
            "Zone",
            ZONE,
            "x",
            "The resource type Zone doesn't support resource tags".to_string(),
        ),
        (
            "PublicIpAddress",
            NODE1,
            "x",
            format!("Unable to find resource by uuid {NODE1} and type PublicIpAddress"),
        ),
        (
            "PublicIpAddress",
            ip_id.as_str(),
            "",
            "Value for the key owner is either null or empty".to_string(),
        ),
    ] {
        let mut params = vec![("resourcetype", resourcetype), ("resourceids", id)];
        params.extend(tag("owner", value));
        let result = failed_job(&cs, "createTags", &params).await;
        assert_eq!(result, json!({"errorcode": 431, "errortext": text}));
    }
    cs.call(
        "createTags",
        &[("resourcetype", "PublicIpAddress"), ("resourceids", &ip_id)],
    )
    .await
    .error("createTags", 431);
    // Any case for the type; the tag shows on the IP and in listTags.
    let mut params = vec![
        ("resourcetype", "publicipaddress"),
        ("resourceids", ip_id.as_str()),
    ];
    params.extend(tag("owner", "svc-a"));
    params.extend([("tags[1].key", "cluster"), ("tags[1].value", "c1")]);
    let started = cs.ok("createTags", &params).await;
    assert!(started.get("id").is_none(), "{started}");
    assert_eq!(cs.wait(s(&started["jobid"])).await["jobstatus"], 1);
    let mut params = vec![
        ("resourcetype", "PublicIpAddress"),
        ("resourceids", other_id.as_str()),
    ];
    params.extend(tag("cluster", "c1"));
    cs.run("createTags", &params).await;
    // The same key again (any case) fails the whole job: no tag of it stays.
    let mut params = vec![
        ("resourcetype", "PublicIpAddress"),
        ("resourceids", ip_id.as_str()),
    ];
    params.extend(tag("OWNER", "svc-b"));
    params.extend([("tags[1].key", "new"), ("tags[1].value", "1")]);
    let result = failed_job(&cs, "createTags", &params).await;
    assert_eq!(result["errorcode"], 530);
    assert!(
        s(&result["errortext"]).contains("already on PublicIpAddress"),
        "{result}"
    );
    let tags = cs.list("listTags", "tag", &[("resourceid", &ip_id)]).await;
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert_eq!(tags[0]["resourcetype"], "PublicIpAddress");
    assert_eq!(tags[0]["account"], "sim-user");
    let listed = cs
        .list(
            "listPublicIpAddresses",
            "publicipaddress",
            &[("id", &ip_id)],
        )
        .await;
    assert_eq!(listed[0]["tags"].as_array().map(Vec::len), Some(2));
    // The tag filter: any pair matches (case-insensitive), not all of them.
    let by_tags = |pairs: Vec<(&'static str, &'static str)>| {
        let cs = &cs;
        async move {
            let mut ids: Vec<String> = cs
                .list("listPublicIpAddresses", "publicipaddress", &pairs)
                .await
                .iter()
                .map(|ip| s(&ip["id"]).to_string())
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(
        by_tags(tag("owner", "SVC-A").to_vec()).await,
        std::slice::from_ref(&ip_id)
    );
    let mut both = vec![ip_id.clone(), other_id.clone()];
    both.sort();
    let mut pairs = tag("owner", "svc-a").to_vec();
    pairs.extend([("tags[1].key", "cluster"), ("tags[1].value", "c1")]);
    assert_eq!(by_tags(pairs).await, both);
    assert!(by_tags(tag("owner", "svc-b").to_vec()).await.is_empty());
    // deleteTags: none matching fails the job; a matching key goes.
    let mut params = vec![
        ("resourcetype", "PublicIpAddress"),
        ("resourceids", other_id.as_str()),
    ];
    params.extend([("tags[0].key", "owner")]);
    let result = failed_job(&cs, "deleteTags", &params).await;
    assert_eq!(result["errortext"], "Failed to delete tags");
    let mut params = vec![
        ("resourcetype", "PublicIpAddress"),
        ("resourceids", other_id.as_str()),
    ];
    params.extend([("tags[0].key", "CLUSTER")]);
    cs.run("deleteTags", &params).await;
    assert!(
        cs.list("listTags", "tag", &[("resourceid", &other_id)])
            .await
            .is_empty()
    );
    // Released: CloudStack drops the IP's tags.
    cs.run("disassociateIpAddress", &[("id", &ip_id)]).await;
    assert!(cs.sim.tags().is_empty(), "{:?}", cs.sim.tags());
    cs.call("listTags", &[("resourcetype", "Ip")])
        .await
        .error("listTags", 431);
}

#[tokio::test]
async fn a_kill_point_fails_every_later_request_until_cleared() {
    let cs = start().await;
    cs.sim.set_job_polls(1_000);
    cs.sim
        .faults()
        .kill_after(Match::command("associateIpAddress"), 1, 503);
    let started = cs.ok("associateIpAddress", &[("networkid", K8S_NET)]).await;
    assert!(cs.sim.faults().killed());
    let job = s(&started["jobid"]).to_string();
    assert_eq!(
        cs.call("queryAsyncJobResult", &[("jobid", &job)])
            .await
            .status,
        503
    );
    assert_eq!(cs.call("listZones", &[]).await.status, 503);
    cs.sim.faults().clear();
    // The cloud went on without the client: the job still runs, then completes.
    assert_eq!(cs.poll(&job).await["jobstatus"], 0);
    cs.sim.settle_jobs("createTags");
    assert_eq!(cs.sim.pending_jobs(), 1);
    cs.sim.settle_jobs("associateipaddress");
    assert_eq!(cs.poll(&job).await["jobstatus"], 1);
}

/// CloudStack's API throttling (`api.throttling.max` per `api.throttling.interval`), as
/// `ApiRateLimitServiceImpl` and `ApiServer` answer it: 429, `errorcode` 429, `cserrorcode`
/// 9999, the milliseconds left in the text, and no `Retry-After`; root admins are exempt.
#[tokio::test]
async fn api_throttling_answers_as_cloudstack_does() {
    let cs = start_with(CloudstackOptions {
        rate_limit: Some(wasm_ccm_sim::RateLimit::new(2, Duration::from_secs(3600))),
        ..CloudstackOptions::default()
    })
    .await;
    cs.sim.seed(Seed::example()).expect("example seed");
    // Positive control: the limit's two requests are served.
    assert_eq!(cs.call("listZones", &[]).await.status, 200);
    assert_eq!(cs.call("listZones", &[]).await.status, 200);
    let pairs = cs.signed(cs.params("listVirtualMachines", &[]), false);
    let url = format!("{}?{}", cs.sim.url(), query(&pairs));
    let resp = cs.client.get(url).send().await.expect("GET sent");
    assert_eq!(resp.status().as_u16(), 429);
    assert!(
        resp.headers().get("retry-after").is_none(),
        "CloudStack sends none"
    );
    let body: Value = resp.json().await.expect("JSON body");
    let inner = &body["listvirtualmachinesresponse"];
    assert_eq!(inner["errorcode"], 429, "{body}");
    assert_eq!(inner["cserrorcode"], 9999, "{body}");
    let text = s(&inner["errortext"]);
    assert!(
        text.starts_with(
            "The given user has reached his/her account api limit, please retry after ["
        ) && text.ends_with("] ms."),
        "{text}"
    );
    // A root admin is not limited.
    cs.sim.set_admin(true);
    assert_eq!(cs.call("listZones", &[]).await.status, 200);
}
