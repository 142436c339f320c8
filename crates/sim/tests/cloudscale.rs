//! The cloudscale API simulator over real HTTP on loopback: every test starts its own
//! simulator on a free port, so they run in parallel and share nothing.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, Match, Seed, SeedServer};

const SUBNET: &str = "11111111-2222-4333-8444-555555555555";
const SERVER: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

/// A simulator plus a client pointed at it.
struct Cs {
    sim: CloudscaleSim,
    client: reqwest::Client,
}

/// A response: status, headers and JSON body (Null when empty or not JSON).
struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    text: String,
}

async fn start_with(options: CloudscaleOptions) -> Cs {
    let addr = "127.0.0.1:0".parse().expect("literal address");
    let sim = match CloudscaleSim::start(addr, options).await {
        Ok(s) => s,
        Err(e) => panic!("simulator did not start: {e:#}"),
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    Cs { sim, client }
}

/// A simulator with default options and one server in [`SUBNET`] (10.0.0.0/24).
async fn start() -> Cs {
    let cs = start_with(CloudscaleOptions::default()).await;
    cs.sim.add_server(
        SeedServer::new("node-1")
            .with_uuid(SERVER)
            .public(&["5.102.145.10", "2a06:c01::10"])
            .private(SUBNET, "10.0.0.0/24", &["10.0.0.10"]),
    );
    cs
}

impl Cs {
    /// Sends a request to a path (or an absolute href) with the simulator's token.
    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        let token = format!("Bearer {}", self.sim.token());
        self.send_raw(method, path, body.map(Value::to_string), Some(&token))
            .await
    }

    async fn send_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
        authorization: Option<&str>,
    ) -> Resp {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", self.sim.url())
        };
        let mut req = self.client.request(method, url);
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body read");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
            text,
        }
    }

    async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(&body)).await
    }

    async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PATCH, path, Some(&body)).await
    }

    async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, None).await
    }

    /// Creates an LB with the public VIP pair; returns its JSON.
    async fn lb(&self, name: &str) -> Value {
        let r = self
            .post(
                "/v1/load-balancers",
                json!({"name": name, "flavor": "lb-standard", "vip_addresses": []}),
            )
            .await;
        assert_eq!(r.status, 201, "create LB: {}", r.text);
        r.body
    }

    /// Creates a pool on `lb`; returns its JSON.
    async fn pool(&self, lb: &Value, name: &str) -> Value {
        let r = self
            .post(
                "/v1/load-balancers/pools",
                json!({"name": name, "load_balancer": lb["uuid"], "algorithm": "round_robin", "protocol": "tcp"}),
            )
            .await;
        assert_eq!(r.status, 201, "create pool: {}", r.text);
        r.body
    }

    /// Creates a member, a listener on `port` and a tcp monitor in `pool`.
    async fn fill_pool(&self, pool: &Value, port: u16) {
        let uuid = pool["uuid"].as_str().unwrap_or("");
        let member = self
            .post(
                &format!("/v1/load-balancers/pools/{uuid}/members"),
                json!({"name": "10.0.0.10:30080", "protocol_port": 30080, "address": "10.0.0.10", "subnet": SUBNET}),
            )
            .await;
        assert_eq!(member.status, 201, "member: {}", member.text);
        let listener = self
            .post(
                "/v1/load-balancers/listeners",
                json!({"pool": uuid, "name": format!("tcp/{port}"), "protocol": "tcp", "protocol_port": port}),
            )
            .await;
        assert_eq!(listener.status, 201, "listener: {}", listener.text);
        let monitor = self
            .post(
                "/v1/load-balancers/health-monitors",
                json!({"pool": uuid, "type": "tcp", "http": {}}),
            )
            .await;
        assert_eq!(monitor.status, 201, "monitor: {}", monitor.text);
    }
}

/// Error bodies are flat objects of strings (the SDK decodes them as `map[string]string`).
fn assert_flat_error(r: &Resp, status: u16) {
    assert_eq!(r.status, status, "body: {}", r.text);
    let obj = r
        .body
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {}", r.text));
    assert!(!obj.is_empty(), "empty error body");
    assert!(
        obj.values().all(Value::is_string),
        "error body is not flat: {}",
        r.text
    );
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

#[tokio::test]
async fn missing_or_wrong_token_is_401() {
    let cs = start().await;
    let r = cs.send_raw(Method::GET, "/v1/servers", None, None).await;
    assert_flat_error(&r, 401);
    assert_eq!(
        r.body["detail"],
        "Authentication credentials were not provided."
    );
    let r = cs
        .send_raw(Method::GET, "/v1/servers", None, Some("Bearer nope"))
        .await;
    assert_flat_error(&r, 401);
    assert_eq!(r.body["detail"], "Invalid token.");
    let custom = start_with(CloudscaleOptions {
        token: "t0k3n".into(),
        ..CloudscaleOptions::default()
    })
    .await;
    assert_eq!(custom.sim.token(), "t0k3n");
    assert_eq!(custom.get("/v1/servers").await.status, 200);
    // Rejected requests are logged too.
    let statuses: Vec<u16> = cs.sim.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [401, 401]);
}

#[tokio::test]
async fn servers_list_get_and_404() {
    let cs = start().await;
    let second = cs.sim.add_server(
        SeedServer::new("node-2")
            .with_zone("lpg1")
            .with_flavor("plus-8-4")
            .with_status("stopped")
            .private("", "10.0.0.0/24", &["10.0.0.11"]),
    );
    let list = cs.get("/v1/servers").await;
    assert_eq!(list.status, 200);
    let names: Vec<&str> = list.body.as_array().map_or(Vec::new(), |a| {
        a.iter().map(|s| s["name"].as_str().unwrap_or("")).collect()
    });
    assert_eq!(names, ["node-1", "node-2"]);

    let one = cs.get(&format!("/v1/servers/{SERVER}")).await.body;
    assert_eq!(one["uuid"], SERVER);
    assert_eq!(one["status"], "running");
    assert_eq!(one["zone"]["slug"], "rma1");
    assert_eq!(
        one["flavor"],
        json!({"slug": "flex-4-2", "name": "Flex-4-2", "vcpu_count": 2, "memory_gb": 4})
    );
    assert_eq!(one["href"], format!("{}/v1/servers/{SERVER}", cs.sim.url()));
    assert_eq!(one["tags"], json!({}));
    assert!(
        one["created_at"]
            .as_str()
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
    );
    let public = &one["interfaces"][0];
    assert_eq!(public["type"], "public");
    assert_eq!(public["network"]["name"], "public");
    assert_eq!(public["addresses"][0]["version"], 4);
    assert_eq!(public["addresses"][0]["prefix_length"], 24);
    assert_eq!(public["addresses"][0]["gateway"], "5.102.145.1");
    assert_eq!(
        public["addresses"][0]["subnet"],
        json!({"uuid": "", "cidr": "5.102.145.0/24", "href": ""})
    );
    assert_eq!(public["addresses"][1]["version"], 6);
    assert_eq!(public["addresses"][1]["prefix_length"], 64);
    let private = &one["interfaces"][1];
    assert_eq!(private["type"], "private");
    assert_eq!(private["addresses"][0]["address"], "10.0.0.10");
    assert_eq!(private["addresses"][0]["subnet"]["uuid"], SUBNET);
    assert_eq!(private["addresses"][0]["subnet"]["cidr"], "10.0.0.0/24");

    // The second server joined the same subnet by CIDR.
    let two = cs.get(&format!("/v1/servers/{second}")).await.body;
    assert_eq!(
        two["interfaces"][0]["addresses"][0]["subnet"]["uuid"],
        SUBNET
    );
    assert_eq!(
        two["interfaces"][0]["network"]["uuid"],
        private["network"]["uuid"]
    );
    assert_eq!(two["flavor"]["vcpu_count"], 4);
    assert_eq!(two["status"], "stopped");

    assert!(cs.sim.set_server_status(&second, "running"));
    assert_eq!(
        cs.get(&format!("/v1/servers/{second}")).await.body["status"],
        "running"
    );
    assert!(cs.sim.remove_server(&second));
    assert!(!cs.sim.remove_server(&second));
    assert!(!cs.sim.set_server_status(&second, "running"));
    let gone = cs.get(&format!("/v1/servers/{second}")).await;
    assert_flat_error(&gone, 404);
    assert_eq!(gone.body, json!({"detail": "Not found."}));
    assert_eq!(cs.sim.servers().len(), 1);
}

#[tokio::test]
async fn seed_is_validated_and_all_or_nothing() {
    let cs = start().await;
    let seed = Seed::parse(
        "servers:\n  - name: web\n    interfaces:\n      - type: private\n        addresses: [{address: 10.9.0.5, cidr: 10.9.0.0/24}]\nfloating_ips:\n  - network: 5.102.150.123/32\n",
    )
    .expect("valid YAML seed");
    assert_eq!(cs.sim.seed(seed), Ok(()));
    assert_eq!(cs.sim.servers().len(), 2);
    assert_eq!(cs.sim.floating_ips().len(), 1);

    // A duplicate floating IP fails the whole seed: the valid server is not added either.
    let bad = Seed {
        servers: vec![SeedServer::new("more")],
        floating_ips: vec![wasm_ccm_sim::cloudscale::SeedFloatingIp {
            network: "5.102.150.123/32".into(),
            region: None,
        }],
    };
    assert!(cs.sim.seed(bad).is_err_and(|e| e.contains("duplicate")));
    assert_eq!(cs.sim.servers().len(), 2);
    assert!(cs.sim.add_floating_ip("5.102.150.124/24").is_err());
    assert!(cs.sim.add_floating_ip("2a06:c01::123/128").is_ok());
    assert!(
        cs.sim
            .try_add_server(SeedServer::new("x").with_uuid(SERVER))
            .is_err()
    );
    assert!(Seed::parse("servers: [{name: a, colour: red}]").is_err_and(|e| e.contains("colour")));
}

#[tokio::test]
async fn lb_is_changing_until_ready_or_settled() {
    let cs = start_with(CloudscaleOptions {
        lb_ready_after: Duration::from_secs(3600),
        ..CloudscaleOptions::default()
    })
    .await;
    let lb = cs.lb("slow").await;
    assert_eq!(lb["status"], "changing");
    let href = s(&lb["href"]).to_string();
    assert_eq!(cs.get(&href).await.body["status"], "changing");
    cs.sim.settle();
    assert_eq!(cs.get(&href).await.body["status"], "running");

    // Settling affects existing LBs only; a lower ready time applies to later ones.
    cs.sim.set_lb_ready_after(Duration::ZERO);
    let fast = cs.lb("fast").await;
    assert_eq!(
        fast["status"], "changing",
        "the create response is always changing"
    );
    assert_eq!(cs.get(s(&fast["href"])).await.body["status"], "running");

    // Default options: running on the first read.
    let quick = start().await;
    let lb = quick.lb("quick").await;
    assert_eq!(quick.get(s(&lb["href"])).await.body["status"], "running");
    assert_eq!(quick.sim.load_balancers()[0]["status"], "running");
}

#[tokio::test]
async fn vips_public_pair_and_subnet_addresses() {
    let cs = start().await;
    let a = cs.lb("a").await;
    assert_eq!(
        a["flavor"],
        json!({"slug": "lb-standard", "name": "LB-Standard"})
    );
    assert_eq!(a["zone"]["slug"], "rma1");
    let vips = &a["vip_addresses"];
    assert_eq!(vips[0]["version"], 4);
    assert_eq!(vips[0]["address"], "5.102.151.2");
    assert_eq!(vips[0]["subnet"]["cidr"], "5.102.151.0/24");
    assert_eq!(vips[1]["version"], 6);
    assert_eq!(vips[1]["address"], "2a06:c01:1:1151::2");
    assert_eq!(vips[1]["subnet"]["cidr"], "2a06:c01:1:1151::/64");
    assert!(!s(&vips[0]["subnet"]["uuid"]).is_empty());
    // Without vip_addresses at all: the next public pair.
    let b = cs
        .post(
            "/v1/load-balancers",
            json!({"name": "b", "flavor": "lb-large", "zone": "lpg1"}),
        )
        .await
        .body;
    assert_eq!(b["vip_addresses"][0]["address"], "5.102.151.3");
    assert_eq!(b["vip_addresses"][1]["address"], "2a06:c01:1:1151::3");
    assert_eq!(b["zone"]["slug"], "lpg1");
    assert_eq!(b["flavor"]["slug"], "lb-large");

    // A subnet VIP: the next free host, skipping the server's 10.0.0.10 only.
    let private = cs
        .post(
            "/v1/load-balancers",
            json!({"name": "p", "flavor": "lb-standard", "vip_addresses": [{"subnet": SUBNET}]}),
        )
        .await;
    assert_eq!(private.status, 201, "{}", private.text);
    let vip = &private.body["vip_addresses"];
    assert_eq!(vip.as_array().map(Vec::len), Some(1));
    assert_eq!(vip[0]["address"], "10.0.0.1");
    assert_eq!(vip[0]["subnet"]["uuid"], SUBNET);
    assert_eq!(
        vip[0]["subnet"]["href"],
        format!("{}/v1/subnets/{SUBNET}", cs.sim.url())
    );
    let given = cs
        .post("/v1/load-balancers", json!({"name": "g", "flavor": "lb-standard", "vip_addresses": [{"subnet": SUBNET, "address": "10.0.0.200"}]}))
        .await;
    assert_eq!(given.body["vip_addresses"][0]["address"], "10.0.0.200");

    for (vip, field_text) in [
        (
            json!({"subnet": SUBNET, "address": "10.0.1.5"}),
            "not in subnet",
        ),
        (
            json!({"subnet": SUBNET, "address": "10.0.0.200"}),
            "already in use",
        ),
        (
            json!({"subnet": SUBNET, "address": "10.0.0.10"}),
            "already in use",
        ),
        (
            json!({"subnet": "99999999-2222-4333-8444-555555555555"}),
            "does not exist",
        ),
        (
            json!({"subnet": SUBNET, "address": "bogus"}),
            "valid IPv4 or IPv6",
        ),
    ] {
        let r = cs
            .post(
                "/v1/load-balancers",
                json!({"name": "bad", "flavor": "lb-standard", "vip_addresses": [vip]}),
            )
            .await;
        assert_flat_error(&r, 400);
        assert!(
            s(&r.body["vip_addresses"]).contains(field_text),
            "{}",
            r.text
        );
    }
    assert_eq!(
        cs.sim.load_balancers().len(),
        4,
        "rejected creates leave nothing behind"
    );
}

#[tokio::test]
async fn full_tree_with_api_defaults() {
    let cs = start().await;
    let lb = cs.lb("tree").await;
    let lb_stub = json!({"uuid": lb["uuid"], "href": lb["href"], "name": "tree"});
    let pool = cs.pool(&lb, "tcp").await;
    assert_eq!(pool["algorithm"], "round_robin");
    assert_eq!(pool["protocol"], "tcp");
    assert_eq!(pool["load_balancer"], lb_stub);
    let pool_uuid = s(&pool["uuid"]);
    let pool_stub = json!({"uuid": pool_uuid, "href": pool["href"], "name": "tcp"});

    let member = cs
        .post(
            &format!("/v1/load-balancers/pools/{pool_uuid}/members"),
            json!({"name": "10.0.0.10:30080", "protocol_port": 30080, "address": "10.0.0.10", "subnet": SUBNET}),
        )
        .await;
    assert_eq!(member.status, 201, "{}", member.text);
    let m = &member.body;
    assert_eq!(m["enabled"], true);
    assert_eq!(m["monitor_port"], 30080, "defaults to protocol_port");
    assert_eq!(m["monitor_status"], "up");
    assert_eq!(m["subnet"]["uuid"], SUBNET);
    assert_eq!(m["subnet"]["cidr"], "10.0.0.0/24");
    assert_eq!(m["pool"], pool_stub);
    assert_eq!(m["load_balancer"], lb_stub);
    assert_eq!(
        m["href"],
        format!(
            "{}/v1/load-balancers/pools/{pool_uuid}/members/{}",
            cs.sim.url(),
            s(&m["uuid"])
        )
    );

    let listener = cs
        .post(
            "/v1/load-balancers/listeners",
            json!({"pool": pool_uuid, "name": "tcp/80", "protocol": "tcp", "protocol_port": 80}),
        )
        .await;
    assert_eq!(listener.status, 201, "{}", listener.text);
    let l = &listener.body;
    assert_eq!(l["pool"], pool_stub);
    assert_eq!(l["load_balancer"], lb_stub);
    assert_eq!(l["allowed_cidrs"], json!([]));
    assert_eq!(l["timeout_client_data_ms"], 50000);
    assert_eq!(l["timeout_member_connect_ms"], 5000);
    assert_eq!(l["timeout_member_data_ms"], 50000);

    let monitor = cs
        .post(
            "/v1/load-balancers/health-monitors",
            json!({"pool": pool_uuid, "type": "http", "http": {"url_path": "/livez", "version": "1.0"}}),
        )
        .await;
    assert_eq!(monitor.status, 201, "{}", monitor.text);
    let mon = &monitor.body;
    assert_eq!(mon["delay_s"], 2);
    assert_eq!(mon["timeout_s"], 1);
    assert_eq!(mon["up_threshold"], 2);
    assert_eq!(mon["down_threshold"], 3);
    assert_eq!(
        mon["http"],
        json!({"method": "GET", "url_path": "/livez", "version": "1.0", "host": null, "expected_codes": ["200"]})
    );
    assert_eq!(mon["pool"], pool_stub);
    assert_eq!(mon["load_balancer"], lb_stub);

    // `http: {}` on an http monitor means all defaults; non-http types read null.
    let udp = cs.pool(&lb, "udp").await;
    let https = cs
        .post(
            "/v1/load-balancers/health-monitors",
            json!({"pool": udp["uuid"], "type": "https", "http": {}}),
        )
        .await;
    assert_eq!(
        https.body["http"],
        json!({"method": "GET", "url_path": "/", "version": "1.1", "host": null, "expected_codes": ["200"]})
    );
    let third = cs.pool(&lb, "tcp/x").await;
    let tcp = cs
        .post(
            "/v1/load-balancers/health-monitors",
            json!({"pool": third["uuid"], "type": "tcp", "http": {}, "delay_s": 5}),
        )
        .await;
    assert_eq!(tcp.body["http"], Value::Null);
    assert_eq!(tcp.body["delay_s"], 5);

    // Lists: complete arrays, in creation order; inspection renders the same.
    let pools = cs.get("/v1/load-balancers/pools").await.body;
    assert_eq!(pools.as_array().map(Vec::len), Some(3));
    assert_eq!(Value::Array(cs.sim.pools()), pools);
    let members = cs
        .get(&format!("/v1/load-balancers/pools/{pool_uuid}/members"))
        .await
        .body;
    assert_eq!(members, json!([m]));
    assert_eq!(cs.sim.members(), vec![m.clone()]);
    assert_eq!(cs.sim.listeners(), vec![l.clone()]);
    assert_eq!(cs.sim.health_monitors().len(), 3);
    assert_eq!(
        cs.get("/v1/load-balancers/health-monitors")
            .await
            .body
            .as_array()
            .map(Vec::len),
        Some(3)
    );
}

#[tokio::test]
async fn validation_errors_are_flat_400s() {
    let cs = start().await;
    let lb = cs.lb("v").await;
    let pool = cs.pool(&lb, "tcp").await;
    let pool_uuid = s(&pool["uuid"]).to_string();
    cs.fill_pool(&pool, 80).await;
    let members = format!("/v1/load-balancers/pools/{pool_uuid}/members");
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "/v1/load-balancers",
            json!({"flavor": "lb-standard"}),
            "name",
            "This field is required.",
        ),
        (
            "/v1/load-balancers",
            json!({"name": " ", "flavor": "lb-standard"}),
            "name",
            "This field may not be blank.",
        ),
        (
            "/v1/load-balancers",
            json!({"name": "x", "flavor": "lb-huge"}),
            "flavor",
            "\"lb-huge\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers",
            json!({"name": "x", "flavor": "lb-standard", "zone": "mars1"}),
            "zone",
            "\"mars1\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers/pools",
            json!({"name": "p", "load_balancer": lb["uuid"], "algorithm": "foo", "protocol": "tcp"}),
            "algorithm",
            "\"foo\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers/pools",
            json!({"name": "p", "load_balancer": lb["uuid"], "algorithm": "source_ip", "protocol": "http"}),
            "protocol",
            "\"http\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers/pools",
            json!({"name": "p", "load_balancer": "nope", "algorithm": "source_ip", "protocol": "tcp"}),
            "load_balancer",
            "Object with uuid=nope does not exist.",
        ),
        (
            &members,
            json!({"name": "m", "protocol_port": 80, "address": "10.0.0.10", "subnet": "nope"}),
            "subnet",
            "Object with uuid=nope does not exist.",
        ),
        (
            &members,
            json!({"name": "m", "protocol_port": 80, "address": "10.9.9.9", "subnet": SUBNET}),
            "address",
            "10.9.9.9 is not in subnet 10.0.0.0/24.",
        ),
        (
            &members,
            json!({"name": "m", "protocol_port": 0, "address": "10.0.0.10", "subnet": SUBNET}),
            "protocol_port",
            "Ensure this value is greater than or equal to 1.",
        ),
        (
            &members,
            json!({"name": "m", "protocol_port": "x", "address": "10.0.0.10", "subnet": SUBNET}),
            "protocol_port",
            "A valid integer is required.",
        ),
        (
            "/v1/load-balancers/listeners",
            json!({"pool": pool_uuid, "name": "l", "protocol": "http", "protocol_port": 81}),
            "protocol",
            "\"http\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers/listeners",
            json!({"pool": pool_uuid, "name": "l", "protocol": "tcp", "protocol_port": 80}),
            "protocol_port",
            "A listener for tcp port 80 already exists on this load balancer.",
        ),
        (
            "/v1/load-balancers/listeners",
            json!({"pool": pool_uuid, "name": "l", "protocol": "tcp", "protocol_port": 81, "allowed_cidrs": ["10.0.0.1/8"]}),
            "allowed_cidrs",
            "\"10.0.0.1/8\" is not a valid CIDR.",
        ),
        (
            "/v1/load-balancers/health-monitors",
            json!({"pool": pool_uuid, "type": "tcp"}),
            "pool",
            "This pool already has a health monitor.",
        ),
        (
            "/v1/load-balancers/health-monitors",
            json!({"pool": pool_uuid, "type": "icmp"}),
            "type",
            "\"icmp\" is not a valid choice.",
        ),
        (
            "/v1/load-balancers/health-monitors",
            json!({"pool": "nope", "type": "http", "http": {"method": "FETCH"}}),
            "http",
            "method: \"FETCH\" is not a valid choice.",
        ),
    ];
    for (path, body, field, message) in cases {
        let r = cs.post(path, body.clone()).await;
        assert_flat_error(&r, 400);
        assert_eq!(r.body[field], message, "POST {path} {body}: {}", r.text);
    }
    // The same UDP port next to TCP is fine (dual-stack TCP+UDP services).
    let udp = cs
        .post(
            "/v1/load-balancers/listeners",
            json!({"pool": pool_uuid, "name": "udp/80", "protocol": "udp", "protocol_port": 80}),
        )
        .await;
    assert_eq!(udp.status, 201, "{}", udp.text);

    // Several field errors at once, like DRF.
    let r = cs.post("/v1/load-balancers/pools", json!({})).await;
    assert_flat_error(&r, 400);
    assert_eq!(r.body.as_object().map(|o| o.len()), Some(4));

    let malformed = cs
        .send_raw(
            Method::POST,
            "/v1/load-balancers",
            Some("{\"name\":".into()),
            Some("Bearer sim-token"),
        )
        .await;
    assert_flat_error(&malformed, 400);
    assert!(s(&malformed.body["detail"]).starts_with("JSON parse error - "));
    let list = cs
        .send_raw(
            Method::POST,
            "/v1/load-balancers",
            Some("[1]".into()),
            Some("Bearer sim-token"),
        )
        .await;
    assert_flat_error(&list, 400);
    assert_eq!(
        list.body["non_field_errors"],
        "Invalid data. Expected a dictionary, but got list."
    );

    let unknown = cs.get("/v1/volumes").await;
    assert_flat_error(&unknown, 404);
    assert_eq!(unknown.body["detail"], "Not found.");
    let wrong = cs.send(Method::PUT, s(&lb["href"]), Some(&json!({}))).await;
    assert_flat_error(&wrong, 405);
    assert_eq!(wrong.body["detail"], "Method \"PUT\" not allowed.");
    assert_eq!(
        wrong.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("GET, PATCH, DELETE, HEAD")
    );
    assert_flat_error(&cs.delete("/v1/load-balancers/pools").await, 405);
    assert_flat_error(&cs.delete("/v1/load-balancers/listeners/nope").await, 404);

    // Nothing invalid was stored.
    assert_eq!(cs.sim.load_balancers().len(), 1);
    assert_eq!(cs.sim.pools().len(), 1);
    assert_eq!(cs.sim.members().len(), 1);
    assert_eq!(cs.sim.listeners().len(), 2);
    assert_eq!(cs.sim.health_monitors().len(), 1);
}

#[tokio::test]
async fn listener_and_monitor_patches_are_partial() {
    let cs = start().await;
    let lb = cs.lb("patch").await;
    let pool = cs.pool(&lb, "tcp").await;
    let listener = cs
        .post(
            "/v1/load-balancers/listeners",
            json!({"pool": pool["uuid"], "name": "tcp/80", "protocol": "tcp", "protocol_port": 80, "allowed_cidrs": ["10.0.0.0/8"]}),
        )
        .await
        .body;
    let href = s(&listener["href"]);
    let r = cs
        .patch(href, json!({"timeout_member_data_ms": 60000}))
        .await;
    assert_eq!((r.status, r.text.as_str()), (204, ""));
    let after = cs.get(href).await.body;
    assert_eq!(after["timeout_member_data_ms"], 60000);
    assert_eq!(after["timeout_client_data_ms"], 50000);
    assert_eq!(after["allowed_cidrs"], json!(["10.0.0.0/8"]));
    assert_eq!(
        cs.patch(href, json!({"allowed_cidrs": []})).await.status,
        204
    );
    let after = cs.get(href).await.body;
    assert_eq!(after["allowed_cidrs"], json!([]));
    assert_eq!(after["timeout_member_data_ms"], 60000);
    assert_eq!(after["name"], "tcp/80");
    assert_flat_error(
        &cs.patch(href, json!({"timeout_client_data_ms": -1})).await,
        400,
    );

    let monitor = cs
        .post(
            "/v1/load-balancers/health-monitors",
            json!({"pool": pool["uuid"], "type": "http", "http": {"host": "example.com"}}),
        )
        .await
        .body;
    let href = s(&monitor["href"]);
    assert_eq!(cs.patch(href, json!({"delay_s": 5})).await.status, 204);
    assert_eq!(
        cs.patch(href, json!({"http": {"url_path": "/x"}}))
            .await
            .status,
        204
    );
    assert_eq!(
        cs.patch(href, json!({"http": {"expected_codes": ["200", "204"]}}))
            .await
            .status,
        204
    );
    let after = cs.get(href).await.body;
    assert_eq!(after["delay_s"], 5);
    assert_eq!(after["timeout_s"], 1);
    assert_eq!(
        after["http"],
        json!({"method": "GET", "url_path": "/x", "version": "1.1", "host": "example.com", "expected_codes": ["200", "204"]})
    );
    assert_eq!(
        cs.patch(href, json!({"http": {"host": null}})).await.status,
        204
    );
    assert_eq!(cs.get(href).await.body["http"]["host"], Value::Null);
    let bad = cs.patch(href, json!({"http": {"version": "2"}})).await;
    assert_flat_error(&bad, 400);
    assert_eq!(bad.body["http"], "version: \"2\" is not a valid choice.");

    // LB rename.
    assert_eq!(
        cs.patch(
            s(&lb["href"]),
            json!({"name": "renamed", "tags": {"a": "b"}})
        )
        .await
        .status,
        204
    );
    let lb_after = cs.get(s(&lb["href"])).await.body;
    assert_eq!(lb_after["name"], "renamed");
    assert_eq!(lb_after["tags"], json!({"a": "b"}));
    assert_eq!(
        cs.get(s(&pool["href"])).await.body["load_balancer"]["name"],
        "renamed"
    );
}

#[tokio::test]
async fn pool_delete_cascades_members_listeners_and_monitors() {
    let cs = start().await;
    let lb = cs.lb("cascade").await;
    let doomed = cs.pool(&lb, "tcp").await;
    let kept = cs.pool(&lb, "tcp/other").await;
    cs.fill_pool(&doomed, 80).await;
    cs.fill_pool(&kept, 443).await;
    let r = cs.delete(s(&doomed["href"])).await;
    assert_eq!((r.status, r.text.as_str()), (204, ""));
    assert_flat_error(&cs.get(s(&doomed["href"])).await, 404);
    assert_flat_error(
        &cs.get(&format!("{}/members", s(&doomed["href"]))).await,
        404,
    );
    for (what, list) in [
        ("pools", cs.sim.pools()),
        ("members", cs.sim.members()),
        ("listeners", cs.sim.listeners()),
        ("monitors", cs.sim.health_monitors()),
    ] {
        assert_eq!(list.len(), 1, "{what}");
        let pool_uuid = if what == "pools" {
            &list[0]["uuid"]
        } else {
            &list[0]["pool"]["uuid"]
        };
        assert_eq!(pool_uuid, &kept["uuid"], "{what}");
    }
    assert_flat_error(&cs.delete(s(&doomed["href"])).await, 404);
}

#[tokio::test]
async fn lb_delete_by_href_cascades_and_unassigns_floating_ips() {
    let cs = start().await;
    cs.sim
        .add_floating_ip("5.102.150.123/32")
        .expect("floating IP");
    let doomed = cs.lb("doomed").await;
    let other = cs.lb("other").await;
    for lb in [&doomed, &other] {
        let pool = cs.pool(lb, "tcp").await;
        cs.fill_pool(&pool, 80).await;
    }
    // A listener without a pool belongs to the LB all the same.
    let poolless = cs
        .post(
            "/v1/load-balancers/listeners",
            json!({"pool": null, "load_balancer": doomed["uuid"], "name": "tcp/81", "protocol": "tcp", "protocol_port": 81}),
        )
        .await;
    assert_eq!(poolless.status, 201, "{}", poolless.text);
    assert_eq!(poolless.body["pool"], Value::Null);
    let fip = cs
        .patch(
            "/v1/floating-ips/5.102.150.123",
            json!({"load_balancer": doomed["uuid"]}),
        )
        .await;
    assert_eq!(fip.status, 204);
    assert_eq!(
        cs.sim.floating_ips()[0]["load_balancer"]["uuid"],
        doomed["uuid"]
    );

    let r = cs.delete(s(&doomed["href"])).await;
    assert_eq!((r.status, r.text.as_str()), (204, ""));
    assert_flat_error(&cs.get(s(&doomed["href"])).await, 404);
    assert_eq!(cs.sim.load_balancers().len(), 1);
    for (what, list) in [
        ("pools", cs.sim.pools()),
        ("members", cs.sim.members()),
        ("listeners", cs.sim.listeners()),
        ("monitors", cs.sim.health_monitors()),
    ] {
        assert_eq!(list.len(), 1, "{what}");
        assert_eq!(list[0]["load_balancer"]["uuid"], other["uuid"], "{what}");
    }
    let fip = &cs.sim.floating_ips()[0];
    assert_eq!(fip["load_balancer"], Value::Null);
    assert_eq!(fip["next_hop"], Value::Null);
    // The freed VIP is not handed out again right away.
    let next = cs.lb("next").await;
    assert_eq!(next["vip_addresses"][0]["address"], "5.102.151.4");
}

#[tokio::test]
async fn floating_ip_moves_between_lbs_and_servers() {
    let cs = start().await;
    cs.sim.add_floating_ip("5.102.150.123/32").expect("v4");
    cs.sim.add_floating_ip("2a06:c01::123/128").expect("v6");
    let a = cs.lb("a").await;
    let b = cs.lb("b").await;
    let path = "/v1/floating-ips/5.102.150.123";
    let fresh = cs.get(path).await.body;
    assert_eq!(fresh["network"], "5.102.150.123/32");
    assert_eq!(fresh["ip_version"], 4);
    assert_eq!(fresh["type"], "regional");
    assert_eq!(fresh["region"], json!({"slug": "rma"}));
    assert_eq!(fresh["load_balancer"], Value::Null);
    assert_eq!(fresh["server"], Value::Null);
    assert_eq!(fresh["href"], format!("{}{path}", cs.sim.url()));

    assert_eq!(
        cs.patch(path, json!({"load_balancer": a["uuid"]}))
            .await
            .status,
        204
    );
    let on_a = cs.get(path).await.body;
    assert_eq!(
        on_a["load_balancer"],
        json!({"uuid": a["uuid"], "href": a["href"], "name": "a"})
    );
    assert_eq!(on_a["next_hop"], a["vip_addresses"][0]["address"]);
    assert_eq!(
        cs.patch(path, json!({"load_balancer": b["uuid"]}))
            .await
            .status,
        204
    );
    assert_eq!(cs.get(path).await.body["load_balancer"]["uuid"], b["uuid"]);
    assert_eq!(cs.patch(path, json!({"server": SERVER})).await.status, 204);
    let on_server = cs.get(path).await.body;
    assert_eq!(on_server["load_balancer"], Value::Null);
    assert_eq!(on_server["server"]["uuid"], SERVER);
    assert_eq!(on_server["next_hop"], "5.102.145.10");

    let v6 = "/v1/floating-ips/2a06:c01::123";
    assert_eq!(
        cs.patch(v6, json!({"load_balancer": a["uuid"]}))
            .await
            .status,
        204
    );
    assert_eq!(
        cs.get(v6).await.body["next_hop"],
        a["vip_addresses"][1]["address"]
    );

    let unknown = cs.patch(path, json!({"load_balancer": "nope"})).await;
    assert_flat_error(&unknown, 400);
    assert_eq!(
        unknown.body["load_balancer"],
        "Object with uuid=nope does not exist."
    );
    assert_flat_error(&cs.patch(path, json!({"server": "nope"})).await, 400);
    assert_flat_error(&cs.get("/v1/floating-ips/5.102.150.200").await, 404);
    assert_flat_error(&cs.patch("/v1/floating-ips/bogus", json!({})).await, 404);
    assert_eq!(
        cs.get("/v1/floating-ips")
            .await
            .body
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // Removing the server unassigns its floating IP.
    assert!(cs.sim.remove_server(SERVER));
    assert_eq!(cs.get(path).await.body["server"], Value::Null);
}

/// `POST /v1/floating-ips` and `DELETE /v1/floating-ips/{ip}` (API doc "Floating IPs"; what
/// cloudscale-cli's `floating-ip create` and `delete` send).
#[tokio::test]
async fn floating_ips_are_created_and_deleted() {
    let cs = start().await;
    let v4 = cs
        .post(
            "/v1/floating-ips",
            json!({"ip_version": 4, "server": SERVER, "reverse_ptr": "a.example", "tags": {"k": "v"}}),
        )
        .await;
    assert_eq!(v4.status, 201, "{}", v4.text);
    assert_eq!(v4.body["network"], "5.102.151.1/32");
    assert_eq!(v4.body["type"], "regional");
    assert_eq!(v4.body["region"]["slug"], "rma");
    assert_eq!(v4.body["server"]["uuid"], SERVER);
    assert_eq!(v4.body["next_hop"], "5.102.145.10");
    assert_eq!(v4.body["reverse_ptr"], "a.example");
    assert_eq!(v4.body["tags"]["k"], "v");
    let v6 = cs
        .post(
            "/v1/floating-ips",
            json!({"ip_version": 6, "type": "global"}),
        )
        .await;
    assert_eq!(v6.status, 201, "{}", v6.text);
    assert_eq!(v6.body["network"], "2a06:c01:f1::1/128");
    assert_eq!(v6.body["region"], Value::Null);
    let net = cs
        .post(
            "/v1/floating-ips",
            json!({"ip_version": 6, "prefix_length": 56, "region": "lpg"}),
        )
        .await;
    assert_eq!(net.body["network"], "2a06:c01:f1:100::/56", "{}", net.text);

    for (body, key) in [
        (json!({}), "ip_version"),
        (json!({"ip_version": 5}), "ip_version"),
        (
            json!({"ip_version": 4, "prefix_length": 24}),
            "prefix_length",
        ),
        (json!({"ip_version": 4, "region": "xyz"}), "region"),
        (json!({"ip_version": 4, "type": "zonal"}), "type"),
        (json!({"ip_version": 4, "server": "nope"}), "server"),
    ] {
        let r = cs.post("/v1/floating-ips", body.clone()).await;
        assert_flat_error(&r, 400);
        assert!(r.body.get(key).is_some(), "{body}: {}", r.text);
    }
    assert_eq!(cs.sim.floating_ips().len(), 3, "refusals create nothing");

    assert_eq!(cs.delete("/v1/floating-ips/5.102.151.1").await.status, 204);
    assert_flat_error(&cs.delete("/v1/floating-ips/5.102.151.1").await, 404);
    assert_eq!(
        cs.delete("/v1/floating-ips/2a06:c01:f1:100::").await.status,
        204
    );
    // A freed address is handed out again.
    let again = cs.post("/v1/floating-ips", json!({"ip_version": 4})).await;
    assert_eq!(again.body["network"], "5.102.151.1/32");
    let allow = cs.send(Method::PUT, "/v1/floating-ips", None).await;
    assert_eq!(
        allow.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("GET, POST, HEAD")
    );
}

/// The Server and Network fields the SDK models and cloudscale-cli reads (review 2026-11-23,
/// finding 9; `network list` needs `zone`).
#[tokio::test]
async fn servers_and_networks_carry_the_sdk_fields() {
    let cs = start().await;
    let server = cs.get(&format!("/v1/servers/{SERVER}")).await.body;
    for key in [
        "image",
        "volumes",
        "ssh_fingerprints",
        "ssh_host_keys",
        "anti_affinity_with",
        "server_groups",
    ] {
        assert!(server.get(key).is_some(), "{key} missing: {server}");
    }
    assert_eq!(server["image"]["slug"], "debian-12");
    let networks = cs.get("/v1/networks").await.body;
    assert!(
        networks
            .as_array()
            .is_some_and(|n| !n.is_empty() && n.iter().all(|n| n["zone"]["slug"] == "rma1")),
        "{networks}"
    );
}

#[tokio::test]
async fn fail_next_then_success() {
    let cs = start().await;
    cs.sim.faults().fail_next(
        Match::path("/v1/load-balancers").with_method("POST"),
        500,
        2,
    );
    let body = json!({"name": "f", "flavor": "lb-standard"});
    for _ in 0..2 {
        let r = cs.post("/v1/load-balancers", body.clone()).await;
        assert_flat_error(&r, 500);
        assert_eq!(r.body["detail"], "Simulated failure.");
    }
    // Faults change no state; other methods and paths are untouched.
    assert_eq!(cs.sim.load_balancers().len(), 0);
    assert_eq!(cs.get("/v1/load-balancers").await.status, 200);
    assert_eq!(
        cs.post("/v1/load-balancers", body.clone()).await.status,
        201
    );
    assert_eq!(cs.sim.faults().pending(), 0);
    // Faults apply before authentication.
    cs.sim.faults().fail_next(Match::any(), 503, 1);
    let r = cs.send_raw(Method::GET, "/v1/servers", None, None).await;
    assert_flat_error(&r, 503);
    let lines: Vec<String> = cs.sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "POST /v1/load-balancers 500",
            "POST /v1/load-balancers 500",
            "GET /v1/load-balancers 200",
            "POST /v1/load-balancers 201",
            "GET /v1/servers 503",
        ]
    );
}

#[tokio::test]
async fn throttle_next_sends_retry_after() {
    let cs = start().await;
    cs.sim.faults().throttle_next(Match::method("GET"), 7, 1);
    let r = cs.get("/v1/servers").await;
    assert_flat_error(&r, 429);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("7")
    );
    assert_eq!(
        r.body["detail"],
        "Request was throttled. Expected available in 7 seconds."
    );
    assert_eq!(cs.get("/v1/servers").await.status, 200);
    // clear() drops rules that were not used yet.
    cs.sim.faults().throttle_next(Match::any(), 1, 5);
    cs.sim.faults().clear();
    assert_eq!(cs.get("/v1/servers").await.status, 200);
}

/// `refuse_next_as_busy`: the next mutations under `/v1/load-balancers` get the busy refusal even
/// on a running LB; reads and other paths are untouched, and the count runs out.
#[tokio::test]
async fn refuse_next_as_busy() {
    let cs = start().await;
    let lb = cs.lb("web").await;
    cs.sim.settle();
    cs.sim.faults().refuse_next_as_busy(2);
    assert_eq!(cs.get(s(&lb["href"])).await.status, 200);
    assert_eq!(
        cs.patch("/v1/floating-ips/5.102.150.200", json!({}))
            .await
            .status,
        404,
        "other paths are not refused"
    );
    for _ in 0..2 {
        let r = cs.patch(s(&lb["href"]), json!({"name": "x"})).await;
        assert_flat_error(&r, 400);
        assert_eq!(
            r.body["detail"],
            "Load balancer is currently changing, try again later."
        );
    }
    assert_eq!(
        cs.patch(s(&lb["href"]), json!({"name": "x"})).await.status,
        204
    );
    cs.sim.faults().refuse_next_as_busy(1);
    cs.sim.faults().clear();
    assert_eq!(cs.delete(s(&lb["href"])).await.status, 204);
}

#[tokio::test]
async fn refuse_while_changing() {
    let cs = start_with(CloudscaleOptions {
        lb_ready_after: Duration::from_secs(3600),
        ..CloudscaleOptions::default()
    })
    .await;
    cs.sim
        .add_server(SeedServer::new("n").private(SUBNET, "10.0.0.0/24", &["10.0.0.10"]));
    let lb = cs.lb("busy").await;
    // Off by default: building on a changing LB works.
    let pool = cs.pool(&lb, "tcp").await;
    cs.sim.faults().refuse_while_changing(true);
    let refused = [
        cs.post(
            "/v1/load-balancers/pools",
            json!({"name": "p2", "load_balancer": lb["uuid"], "algorithm": "round_robin", "protocol": "tcp"}),
        )
        .await,
        cs.post(
            &format!("{}/members", s(&pool["href"])),
            json!({"name": "m", "protocol_port": 80, "address": "10.0.0.10", "subnet": SUBNET}),
        )
        .await,
        cs.post(
            "/v1/load-balancers/listeners",
            json!({"pool": pool["uuid"], "name": "tcp/80", "protocol": "tcp", "protocol_port": 80}),
        )
        .await,
        cs.post("/v1/load-balancers/health-monitors", json!({"pool": pool["uuid"], "type": "tcp"}))
            .await,
        cs.patch(s(&lb["href"]), json!({"name": "x"})).await,
        cs.delete(s(&pool["href"])).await,
        cs.delete(s(&lb["href"])).await,
    ];
    for r in &refused {
        assert_flat_error(r, 400);
        assert_eq!(
            r.body["detail"],
            "Load balancer is currently changing, try again later."
        );
    }
    // Reads still work; once running, mutations go through.
    assert_eq!(cs.get(s(&lb["href"])).await.status, 200);
    cs.sim.settle();
    assert_eq!(
        cs.patch(s(&lb["href"]), json!({"name": "x"})).await.status,
        204
    );
    assert_eq!(cs.delete(s(&lb["href"])).await.status, 204);
    assert!(cs.sim.pools().is_empty());
}

#[tokio::test]
async fn request_log_records_method_path_body_status() {
    let cs = start().await;
    assert_eq!(cs.get("/v1/load-balancers?tag:k=v").await.status, 200);
    let lb = cs.lb("logged").await;
    assert_eq!(cs.delete(s(&lb["href"])).await.status, 204);
    let log = cs.sim.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].method, "GET");
    assert_eq!(log[0].path, "/v1/load-balancers?tag:k=v");
    assert_eq!(log[0].body, None);
    assert_eq!(
        log[1].body,
        Some(json!({"name": "logged", "flavor": "lb-standard", "vip_addresses": []}))
    );
    assert_eq!(log[1].status, 201);
    let mutations: Vec<String> = cs.sim.mutations().iter().map(|r| r.line()).collect();
    assert_eq!(
        mutations,
        [
            "POST /v1/load-balancers 201".to_string(),
            format!("DELETE /v1/load-balancers/{} 204", s(&lb["uuid"])),
        ]
    );
    cs.sim.clear_requests();
    assert!(cs.sim.requests().is_empty());
}

#[tokio::test]
async fn hrefs_resolve() {
    let cs = start().await;
    cs.sim
        .add_floating_ip("5.102.150.123/32")
        .expect("floating IP");
    let lb = cs.lb("hrefs").await;
    let pool = cs.pool(&lb, "tcp").await;
    cs.fill_pool(&pool, 80).await;
    let server = cs.get(&format!("/v1/servers/{SERVER}")).await.body;
    let mut objects = vec![lb.clone(), pool.clone(), server.clone()];
    objects.extend(cs.sim.members());
    objects.extend(cs.sim.listeners());
    objects.extend(cs.sim.health_monitors());
    objects.extend(cs.sim.floating_ips());
    for object in &objects {
        let href = s(&object["href"]);
        assert!(href.starts_with(&cs.sim.url()), "{href}");
        let got = cs.get(href).await;
        assert_eq!(got.status, 200, "GET {href}");
        assert_eq!(got.body["href"], object["href"]);
    }
    // Stubs and subnet/network references resolve too.
    let stubs = [
        &pool["load_balancer"]["href"],
        &lb["vip_addresses"][0]["subnet"]["href"],
        &server["interfaces"][0]["network"]["href"],
        &server["interfaces"][1]["network"]["href"],
        &server["interfaces"][1]["addresses"][0]["subnet"]["href"],
    ];
    for href in stubs {
        assert_eq!(cs.get(s(href)).await.status, 200, "GET {href}");
    }
    let subnet = cs.get(&format!("/v1/subnets/{SUBNET}")).await.body;
    assert_eq!(subnet["cidr"], "10.0.0.0/24");
    // Listed subnets and networks are the private ones.
    assert_eq!(
        cs.get("/v1/subnets").await.body.as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        cs.get("/v1/networks").await.body.as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn hrefs_follow_the_host_header() {
    let cs = start().await;
    let port = cs.sim.url().rsplit(':').next().unwrap_or("").to_string();
    let url = format!("http://localhost:{port}/v1/servers/{SERVER}");
    let r = cs.send(Method::GET, &url, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["href"], url);
}

#[tokio::test]
async fn control_api_over_http() {
    let cs = start().await;
    let sim_url = |p: &str| format!("{}{p}", cs.sim.url());
    let post = |p: &str, body: String| cs.client.post(sim_url(p)).body(body).send();
    let r = post(
        "/sim/faults",
        json!({"action": "fail", "status": 502, "path_prefix": "/v1/servers"}).to_string(),
    )
    .await
    .expect("control request");
    assert_eq!(r.status().as_u16(), 204);
    assert_flat_error(&cs.get("/v1/servers").await, 502);
    let seed = "servers:\n  - name: from-http\n";
    assert_eq!(
        post("/sim/seed", seed.into())
            .await
            .expect("seed")
            .status()
            .as_u16(),
        204
    );
    assert_eq!(cs.sim.servers().len(), 2);
    let bad = post("/sim/seed", "servers: [{nmae: x}]".into())
        .await
        .expect("seed");
    assert_eq!(bad.status().as_u16(), 400);
    let log: Value = cs
        .client
        .get(sim_url("/sim/requests"))
        .send()
        .await
        .expect("log")
        .json()
        .await
        .expect("log JSON");
    assert_eq!(
        log.as_array().map(Vec::len),
        Some(1),
        "control requests are not logged"
    );
    assert_eq!(log[0]["status"], 502);
}

/// A cut request is carried out, but its answer never arrives: the client sees the connection
/// break after the headers, and the load balancer exists (an ambiguous answer for the driver).
#[tokio::test]
async fn a_cut_request_is_carried_out_and_its_answer_lost() {
    let cs = start().await;
    cs.sim
        .faults()
        .cut_next(Match::path("/v1/load-balancers").with_method("POST"), 1);
    let url = format!("{}/v1/load-balancers", cs.sim.url());
    let sent = cs
        .client
        .post(url)
        .header("authorization", format!("Bearer {}", cs.sim.token()))
        .json(&json!({"name": "cut", "flavor": "lb-standard", "vip_addresses": []}))
        .send()
        .await;
    let answer = match sent {
        Ok(resp) => resp.text().await.map(|_| ()),
        Err(e) => Err(e),
    };
    assert!(answer.is_err(), "the answer must be lost: {answer:?}");
    let lbs = cs.sim.load_balancers();
    assert_eq!(lbs.len(), 1, "the request was carried out: {lbs:?}");
    assert_eq!(lbs[0]["name"], "cut");
    // The rule is used up: the next request is answered.
    assert_eq!(cs.get("/v1/load-balancers").await.status, 200);
}

/// The names (or networks) of a list answer, in order.
fn names(r: &Resp, field: &str) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {}", r.text))
        .iter()
        .map(|x| s(&x[field]).to_string())
        .collect()
}

/// `?tag:key=value` and `?tag:key` (cloudscale-cli and the Go SDK's forms, see
/// crates/sim/src/cloudscale/query.rs) filter the servers list.
#[tokio::test]
async fn servers_list_filters_by_tag() {
    let cs = start().await;
    cs.sim
        .add_server(SeedServer::new("apollo-1").with_tag("project", "apollo"));
    cs.sim.add_server(
        SeedServer::new("gemini-1")
            .with_tag("project", "gemini")
            .with_tag("tier", "db"),
    );
    cs.sim
        .add_server(SeedServer::new("bare").with_tag("project", ""));
    let all = names(&cs.get("/v1/servers").await, "name");
    assert_eq!(all, ["node-1", "apollo-1", "gemini-1", "bare"]);
    // Python SDK: urlencode, so the colon is %3A.
    let apollo = names(&cs.get("/v1/servers?tag%3Aproject=apollo").await, "name");
    assert_eq!(apollo, ["apollo-1"]);
    // A key alone (the CLI's bare `tag:key`, the Go SDK's `tag:key=`) matches any value.
    for presence in ["/v1/servers?tag:project", "/v1/servers?tag%3Aproject="] {
        let with_key = names(&cs.get(presence).await, "name");
        assert_eq!(with_key, ["apollo-1", "gemini-1", "bare"], "{presence}");
    }
    // Several filters must all match.
    let both = names(
        &cs.get("/v1/servers?tag%3Aproject=gemini&tag%3Atier=db")
            .await,
        "name",
    );
    assert_eq!(both, ["gemini-1"]);
    let none = names(&cs.get("/v1/servers?tag%3Aproject=mercury").await, "name");
    assert!(none.is_empty(), "{none:?}");
}

/// Every list filters the same way: load balancers, pools, members, listeners, monitors,
/// floating IPs, networks and subnets.
#[tokio::test]
async fn every_list_filters_by_tag() {
    let cs = start().await;
    let tagged = cs
        .post(
            "/v1/load-balancers",
            json!({"name": "tagged", "flavor": "lb-standard", "vip_addresses": [], "tags": {"svc": "a"}}),
        )
        .await;
    assert_eq!(tagged.status, 201, "{}", tagged.text);
    cs.lb("plain").await;
    let lbs = names(&cs.get("/v1/load-balancers?tag:svc").await, "name");
    assert_eq!(lbs, ["tagged"]);

    let pool = cs.pool(&tagged.body, "tcp").await;
    let tagged_pool = cs
        .post(
            "/v1/load-balancers/pools",
            json!({"name": "udp", "load_balancer": tagged.body["uuid"], "algorithm": "round_robin", "protocol": "udp", "tags": {"svc": "a"}}),
        )
        .await;
    assert_eq!(tagged_pool.status, 201, "{}", tagged_pool.text);
    let pools = names(
        &cs.get("/v1/load-balancers/pools?tag%3Asvc=a").await,
        "name",
    );
    assert_eq!(pools, ["udp"]);

    cs.fill_pool(&pool, 80).await;
    let uuid = s(&pool["uuid"]);
    for (list, field) in [
        (format!("/v1/load-balancers/pools/{uuid}/members"), "name"),
        ("/v1/load-balancers/listeners".to_string(), "name"),
        ("/v1/load-balancers/health-monitors".to_string(), "uuid"),
    ] {
        assert_eq!(names(&cs.get(&list).await, field).len(), 1, "{list}");
        let filtered = names(&cs.get(&format!("{list}?tag:svc")).await, field);
        assert!(filtered.is_empty(), "{list}: {filtered:?}");
    }

    let fip = cs
        .post(
            "/v1/floating-ips",
            json!({"ip_version": 4, "tags": {"svc": "a"}}),
        )
        .await;
    assert_eq!(fip.status, 201, "{}", fip.text);
    cs.post("/v1/floating-ips", json!({"ip_version": 4})).await;
    assert_eq!(names(&cs.get("/v1/floating-ips").await, "network").len(), 2);
    let fips = names(&cs.get("/v1/floating-ips?tag%3Asvc=a").await, "network");
    assert_eq!(fips, [s(&fip.body["network"]).to_string()]);

    for list in ["/v1/networks", "/v1/subnets"] {
        assert!(!names(&cs.get(list).await, "uuid").is_empty(), "{list}");
        assert!(
            names(&cs.get(&format!("{list}?tag:svc")).await, "uuid").is_empty(),
            "{list}"
        );
    }
}

/// What the simulator refuses rather than ignores (query.rs): other parameters, a `tag:`
/// without a key, and tag filters outside lists.
#[tokio::test]
async fn unknown_query_parameters_and_misplaced_filters_are_refused() {
    let cs = start().await;
    for path in [
        "/v1/servers?name=node-1",
        "/v1/servers?tag%3A=x",
        &format!("/v1/servers/{SERVER}?tag:project"),
    ] {
        let r = cs.get(path).await;
        assert_flat_error(&r, 400);
    }
    let lb = cs.lb("a").await;
    let r = cs
        .patch(
            &format!("/v1/load-balancers/{}?tag:x", s(&lb["uuid"])),
            json!({"name": "b"}),
        )
        .await;
    assert_flat_error(&r, 400);
    // Refused, so nothing changed.
    assert_eq!(cs.get("/v1/load-balancers").await.body[0]["name"], "a");
}

/// The simulator's optional rate limit answers as Django REST framework's throttling does
/// (cloudscale.ch documents no limit: see `CloudApi::throttled` in src/cloudscale/server.rs).
#[tokio::test]
async fn over_its_rate_limit_the_simulator_throttles_in_drfs_shape() {
    let cs = start_with(CloudscaleOptions {
        rate_limit: Some(wasm_ccm_sim::RateLimit::new(2, Duration::from_secs(3600))),
        ..CloudscaleOptions::default()
    })
    .await;
    // Positive control: the limit's two requests are served.
    assert_eq!(cs.get("/v1/servers").await.status, 200);
    assert_eq!(cs.get("/v1/servers").await.status, 200);
    let refused = cs.get("/v1/servers").await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    let retry_after: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After seconds: {:?}", refused.headers));
    assert!((3500..=3600).contains(&retry_after), "{retry_after}");
    assert_eq!(
        refused.body,
        json!({"detail": format!("Request was throttled. Expected available in {retry_after} seconds.")})
    );
    // Refused, not served: a create over the limit changes nothing.
    let create = cs
        .post(
            "/v1/floating-ips",
            json!({"ip_version": 4, "server": SERVER}),
        )
        .await;
    assert_eq!(create.status, 429);
    assert!(cs.sim.floating_ips().is_empty());
    // Lifted: served again.
    cs.sim.faults().set_rate_limit(None);
    assert_eq!(cs.get("/v1/servers").await.status, 200);
}
