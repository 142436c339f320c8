//! The PhoenixNAP API simulator over real HTTP on loopback: every test starts its own simulator
//! on a free port, so they run in parallel and share nothing.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use wasm_ccm_sim::phoenixnap::{
    Match, PhoenixnapOptions, PhoenixnapSim, Seed, SeedIpBlock, SeedPublicNetwork, SeedServer,
    SeedTag,
};

const NODE: &str = "0123456789abcdef01234567";
const NETWORK: &str = "60473c2509268bc77fd06d29";
const OTHER_NETWORK: &str = "60473c2509268bc77fd06d30";
const CCM_TAGS: [&str; 5] = [
    "usage",
    "cluster",
    "serviceNamespace",
    "serviceName",
    "delete",
];

/// A simulator, a client pointed at it and a valid bearer token.
struct Pn {
    sim: PhoenixnapSim,
    client: reqwest::Client,
    token: String,
}

/// A response: status, headers and JSON body (Null when empty or not JSON).
struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
    text: String,
}

async fn start_with(options: PhoenixnapOptions) -> Pn {
    let addr = "127.0.0.1:0".parse().expect("literal address");
    let sim = match PhoenixnapSim::start(addr, options).await {
        Ok(s) => s,
        Err(e) => panic!("simulator did not start: {e:#}"),
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    let token = sim.issue_token();
    Pn { sim, client, token }
}

/// Default options, one server [`NODE`], public networks [`NETWORK`] (PHX) and
/// [`OTHER_NETWORK`] (ASH).
async fn start() -> Pn {
    let pn = start_with(PhoenixnapOptions::default()).await;
    pn.sim.add_server(
        SeedServer::new("node-1")
            .with_id(NODE)
            .public(&["198.51.100.130"])
            .private(&["10.0.0.11"]),
    );
    pn.sim
        .add_server(SeedServer::new("node-2").private(&["10.0.0.12"]));
    pn.sim
        .add_public_network(SeedPublicNetwork::new("k8s").with_id(NETWORK).with_vlan(20));
    pn.sim.add_public_network(
        SeedPublicNetwork::new("elsewhere")
            .with_id(OTHER_NETWORK)
            .with_location("ASH"),
    );
    pn
}

async fn read(resp: reqwest::Response) -> Resp {
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

impl Pn {
    /// Sends a request with the bearer token.
    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        self.send_as(method, path, body, Some(&self.token)).await
    }

    async fn send_as(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.sim.url()));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        read(req.send().await.expect("request sent")).await
    }

    async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(&body)).await
    }

    async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PUT, path, Some(&body)).await
    }

    async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, None).await
    }

    async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PATCH, path, Some(&body)).await
    }

    /// A token request with credentials as HTTP Basic (form-URL-encoded first, as Go does).
    async fn token_basic(&self, id: &str, secret: &str) -> Resp {
        let req = self
            .client
            .post(self.sim.token_url())
            .basic_auth(id, Some(secret))
            .form(&[
                ("grant_type", "client_credentials"),
                ("scope", "bmc bmc.read tags tags.read"),
            ]);
        read(req.send().await.expect("token request")).await
    }

    /// A token request with credentials as form fields.
    async fn token_form(&self, fields: &[(&str, &str)]) -> Resp {
        let req = self.client.post(self.sim.token_url()).form(fields);
        read(req.send().await.expect("token request")).await
    }

    /// Creates the CCM's tag names over the API.
    async fn create_ccm_tags(&self) {
        for name in CCM_TAGS {
            let r = self
                .post(
                    "/tag-manager/v1/tags",
                    json!({"name": name, "isBillingTag": false}),
                )
                .await;
            assert_eq!(r.status, 201, "create tag {name}: {}", r.text);
        }
    }

    /// Creates a /29 in PHX with the CCM's tags for a Service.
    async fn ccm_block(&self, cluster: &str, ns: &str, name: &str) -> Value {
        let r = self
            .post(
                "/ips/v1/ip-blocks",
                json!({
                    "location": "PHX",
                    "cidrBlockSize": "/29",
                    "tags": [
                        {"name": "usage", "value": "cloud-provider-phoenixnap-auto"},
                        {"name": "cluster", "value": cluster},
                        {"name": "serviceNamespace", "value": ns},
                        {"name": "serviceName", "value": name},
                    ],
                }),
            )
            .await;
        assert_eq!(r.status, 201, "create block: {}", r.text);
        r.body
    }

    /// Block IDs a filtered list returns.
    async fn block_ids(&self, query: &str) -> Vec<String> {
        let r = self.get(&format!("/ips/v1/ip-blocks{query}")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body
            .as_array()
            .unwrap_or_else(|| panic!("not a list: {}", r.text))
            .iter()
            .map(|b| s(&b["id"]).to_string())
            .collect()
    }
}

/// An error body of the APIs: a non-empty `message`, optional list of `validationErrors`.
fn assert_error(r: &Resp, status: u16) {
    assert_eq!(r.status, status, "body: {}", r.text);
    let message = r.body["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "no message: {}", r.text);
    let v = &r.body["validationErrors"];
    assert!(v.is_null() || v.is_array(), "validationErrors: {}", r.text);
}

/// The token endpoint's OAuth2 error body.
fn assert_oauth_error(r: &Resp, status: u16, error: &str) {
    assert_eq!(r.status, status, "body: {}", r.text);
    assert_eq!(r.body["error"], error, "body: {}", r.text);
    assert!(r.body["error_description"].is_string(), "body: {}", r.text);
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

#[tokio::test]
async fn token_by_basic_and_by_form() {
    let pn = start().await;
    let r = pn.token_basic("sim-client", "sim-secret").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["token_type"], "Bearer");
    assert_eq!(r.body["expires_in"], 3600);
    assert_eq!(r.body["scope"], "bmc bmc.read tags tags.read");
    assert_eq!(
        r.headers.get("cache-control").and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    let basic_token = s(&r.body["access_token"]).to_string();
    let servers = pn
        .send_as(Method::GET, "/bmc/v1/servers", None, Some(&basic_token))
        .await;
    assert_eq!(servers.status, 200, "{}", servers.text);
    let r = pn
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "sim-client"),
            ("client_secret", "sim-secret"),
        ])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.body["scope"], "bmc bmc.read tags tags.read",
        "default scope"
    );
    let form_token = s(&r.body["access_token"]);
    assert_ne!(form_token, basic_token);
    let tags = pn
        .send_as(Method::GET, "/tag-manager/v1/tags", None, Some(form_token))
        .await;
    assert_eq!(tags.status, 200);
    // Bad credentials, either way.
    let r = pn.token_basic("sim-client", "wrong").await;
    assert_oauth_error(&r, 401, "unauthorized_client");
    let r = pn
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "nobody"),
            ("client_secret", "sim-secret"),
        ])
        .await;
    assert_oauth_error(&r, 401, "unauthorized_client");
    let r = pn.token_form(&[("grant_type", "client_credentials")]).await;
    assert_oauth_error(&r, 401, "unauthorized_client");
    // Malformed requests.
    let r = pn
        .token_form(&[("client_id", "sim-client"), ("client_secret", "sim-secret")])
        .await;
    assert_oauth_error(&r, 400, "invalid_request");
    let r = pn
        .token_form(&[
            ("grant_type", "password"),
            ("client_id", "sim-client"),
            ("client_secret", "sim-secret"),
        ])
        .await;
    assert_oauth_error(&r, 400, "unsupported_grant_type");
    let r = read(
        pn.client
            .get(pn.sim.token_url())
            .send()
            .await
            .expect("GET token"),
    )
    .await;
    assert_eq!(r.status, 405);
    assert_eq!(
        r.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
}

#[tokio::test]
async fn basic_credentials_are_form_url_decoded_and_basic_can_be_refused() {
    let pn = start_with(PhoenixnapOptions {
        client_id: "id with space".into(),
        client_secret: "s3c:r&t+/".into(),
        ..PhoenixnapOptions::default()
    })
    .await;
    assert_eq!(pn.sim.client_id(), "id with space");
    // Go's clientcredentials escapes both parts with url.QueryEscape before Basic encoding.
    let r = pn.token_basic("id+with+space", "s3c%3Ar%26t%2B%2F").await;
    assert_eq!(r.status, 200, "{}", r.text);
    // With Basic refused, the client's fallback to form fields is what works.
    pn.sim.accept_basic_auth(false);
    let r = pn.token_basic("id+with+space", "s3c%3Ar%26t%2B%2F").await;
    assert_oauth_error(&r, 401, "unauthorized_client");
    let r = pn
        .token_form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "id with space"),
            ("client_secret", "s3c:r&t+/"),
        ])
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    pn.sim.accept_basic_auth(true);
    let r = pn.token_basic("id+with+space", "s3c%3Ar%26t%2B%2F").await;
    assert_eq!(r.status, 200, "{}", r.text);
}

#[tokio::test]
async fn missing_unknown_and_expired_tokens_are_401() {
    let pn = start().await;
    let r = pn.send_as(Method::GET, "/bmc/v1/servers", None, None).await;
    assert_error(&r, 401);
    assert_eq!(
        r.headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    let r = pn
        .send_as(Method::GET, "/ips/v1/ip-blocks", None, Some("nope"))
        .await;
    assert_error(&r, 401);
    // A token from the endpoint works until the simulator expires it mid-run.
    let fresh = pn.token_basic("sim-client", "sim-secret").await;
    let token = s(&fresh.body["access_token"]).to_string();
    for path in [
        "/bmc/v1/servers",
        "/ips/v1/ip-blocks",
        "/networks/v1/public-networks",
        "/tag-manager/v1/tags",
    ] {
        let r = pn.send_as(Method::GET, path, None, Some(&token)).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
    pn.sim.expire_tokens();
    for path in ["/bmc/v1/servers", "/networks/v1/public-networks"] {
        let r = pn.send_as(Method::GET, path, None, Some(&token)).await;
        assert_error(&r, 401);
        assert!(s(&r.body["message"]).contains("expired"), "{}", r.text);
    }
    assert_error(&pn.get("/bmc/v1/servers").await, 401);
    // A new token works again.
    let renewed = pn.token_basic("sim-client", "sim-secret").await;
    let r = pn
        .send_as(
            Method::GET,
            "/bmc/v1/servers",
            None,
            Some(s(&renewed.body["access_token"])),
        )
        .await;
    assert_eq!(r.status, 200);
    // A zero TTL: every token is expired on arrival.
    let short = start_with(PhoenixnapOptions {
        token_ttl: Duration::ZERO,
        ..PhoenixnapOptions::default()
    })
    .await;
    let r = short.token_basic("sim-client", "sim-secret").await;
    assert_eq!(r.body["expires_in"], 0);
    assert_error(&short.get("/bmc/v1/servers").await, 401);
}

#[tokio::test]
async fn servers_list_get_and_404() {
    let pn = start().await;
    let r = pn.get("/bmc/v1/servers").await;
    assert_eq!(r.status, 200);
    let list = r.body.as_array().cloned().unwrap_or_default();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["hostname"], "node-1");
    let second_id = s(&list[1]["id"]).to_string();
    assert_eq!(second_id.len(), 24, "24 hex digits");
    assert!(second_id.bytes().all(|b| b.is_ascii_hexdigit()));
    let r = pn.get(&format!("/bmc/v1/servers/{NODE}")).await;
    assert_eq!(r.status, 200);
    let server = &r.body;
    assert_eq!(server["id"], NODE);
    assert_eq!(server["status"], "powered-on");
    assert_eq!(server["type"], "s1.c1.medium");
    assert_eq!(server["location"], "PHX");
    assert_eq!(server["publicIpAddresses"], json!(["198.51.100.130"]));
    assert_eq!(server["privateIpAddresses"], json!(["10.0.0.11"]));
    assert_eq!(server["networkType"], "PUBLIC_AND_PRIVATE");
    assert_eq!(server["tags"], json!([]));
    for field in [
        "os",
        "cpu",
        "cpuCount",
        "coresPerCpu",
        "cpuFrequency",
        "ram",
        "storage",
        "pricingModel",
        "provisionedOn",
    ] {
        assert!(!server[field].is_null(), "{field} missing: {}", r.text);
    }
    let private = &server["networkConfiguration"]["privateNetworkConfiguration"];
    assert_eq!(private["privateNetworks"][0]["ips"], json!(["10.0.0.11"]));
    let r = pn.get(&format!("/bmc/v1/servers/{second_id}")).await;
    assert_eq!(r.body["networkType"], "PRIVATE_ONLY");
    assert_eq!(r.body["publicIpAddresses"], json!([]));
    // bmcapi.spec.yaml Server: storageConfiguration is required; configurationType is
    // writeOnly and never answered (review finding S1).
    assert_eq!(
        server["storageConfiguration"],
        json!({"rootPartition": {"raid": "NO_RAID", "size": -1}})
    );
    assert!(private.get("configurationType").is_none(), "{}", r.text);
    assert!(
        server["networkConfiguration"]["ipBlocksConfiguration"]
            .get("configurationType")
            .is_none(),
        "{}",
        r.text
    );
    // An unknown server is 403 with the API's error body, as the real API answers (upstream
    // commit d84a2c5); 404 as a switch. Trailing slashes are tolerated.
    let r = pn.get("/bmc/v1/servers/ffffffffffffffffffffffff").await;
    assert_error(&r, 403);
    pn.sim.set_gone_server_status(404);
    let r = pn.get("/bmc/v1/servers/ffffffffffffffffffffffff").await;
    assert_error(&r, 404);
    pn.sim.set_gone_server_status(403);
    assert_eq!(
        pn.get(&format!("/bmc/v1/servers/{NODE}/")).await.status,
        200
    );
    // Test hooks: status changes and removal.
    assert!(pn.sim.set_server_status(NODE, "powered-off"));
    let r = pn.get(&format!("/bmc/v1/servers/{NODE}")).await;
    assert_eq!(r.body["status"], "powered-off");
    assert!(pn.sim.remove_server(NODE));
    assert!(!pn.sim.remove_server(NODE));
    assert!(!pn.sim.set_server_status(NODE, "powered-on"));
    // A deleted server: 403 too.
    assert_error(&pn.get(&format!("/bmc/v1/servers/{NODE}")).await, 403);
    assert_eq!(pn.sim.servers().len(), 1);
    // Unknown paths and methods.
    assert_error(&pn.get("/bmc/v1/nothing").await, 404);
    let r = pn.post("/bmc/v1/servers", json!({})).await;
    assert_error(&r, 405);
    assert_eq!(
        r.headers.get("allow").and_then(|v| v.to_str().ok()),
        Some("GET")
    );
}

#[tokio::test]
async fn blocks_are_created_with_tags_and_filtered_with_and_semantics() {
    let pn = start().await;
    pn.create_ccm_tags().await;
    let a = pn.ccm_block("uid-1", "default", "web").await;
    let b = pn.ccm_block("uid-1", "default", "api").await;
    let c = pn.ccm_block("uid-2", "default", "web").await;
    assert_eq!(a["status"], "unassigned");
    assert_eq!(a["location"], "PHX");
    assert_eq!(a["cidrBlockSize"], "/29");
    assert_eq!(a["isBringYourOwn"], false);
    assert!(a["assignedResourceId"].is_null());
    assert!(a["createdOn"].is_string());
    assert_eq!(a["tags"][1]["name"], "cluster");
    assert_eq!(a["tags"][1]["value"], "uid-1");
    assert_eq!(a["tags"][1]["isBillingTag"], false);
    assert_eq!(s(&a["tags"][1]["id"]).len(), 24);
    // Real, distinct, non-overlapping /29s from the documentation pool.
    let cidrs: Vec<&str> = [&a, &b, &c].iter().map(|x| s(&x["cidr"])).collect();
    assert_eq!(
        cidrs,
        ["198.51.100.0/29", "198.51.100.8/29", "198.51.100.16/29"]
    );
    let id = |v: &Value| s(&v["id"]).to_string();
    assert_eq!(
        pn.block_ids("?tag=cluster.uid-1&tag=usage.cloud-provider-phoenixnap-auto")
            .await,
        [id(&a), id(&b)]
    );
    assert_eq!(
        pn.block_ids("?tag=cluster.uid-1&tag=serviceName.web&tag=serviceNamespace.default")
            .await,
        [id(&a)]
    );
    assert_eq!(pn.block_ids("?tag=serviceName.web").await, [id(&a), id(&c)]);
    assert!(
        pn.block_ids("?tag=cluster.uid-1&tag=delete.true")
            .await
            .is_empty()
    );
    assert!(pn.block_ids("?tag=cluster.uid-3").await.is_empty());
    // A filter not in the form tagName.tagValue is refused (ipapi.spec.yaml `ipBlocksGet`).
    assert_error(&pn.get("/ips/v1/ip-blocks?tag=serviceName").await, 400);
    assert_eq!(pn.block_ids("").await.len(), 3);
    let r = pn.get(&format!("/ips/v1/ip-blocks/{}", id(&b))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b);
    // ipapi.spec.yaml `ipBlocksIpBlockIdGet` lists 401, 403 and 500, no 404.
    assert_error(
        &pn.get("/ips/v1/ip-blocks/ffffffffffffffffffffffff").await,
        403,
    );
    assert_eq!(pn.sim.ip_blocks().len(), 3);
}

#[tokio::test]
async fn block_creation_is_validated() {
    let pn = start().await;
    pn.create_ccm_tags().await;
    let bad = [
        json!({"cidrBlockSize": "/29"}),
        json!({"location": "MARS", "cidrBlockSize": "/29"}),
        json!({"location": "PHX", "cidrBlockSize": "29"}),
        json!({"location": "PHX", "cidrBlockSize": "/29", "tags": [{"name": "nope", "value": "x"}]}),
        json!({"location": "PHX", "cidrBlockSize": "/29", "tags": [{"name": "usage", "value": "a.b"}]}),
        json!({"location": "PHX", "cidrBlockSize": "/29", "tags": [{"name": "usage"}, {"name": "usage"}]}),
        json!({"location": "PHX", "cidrBlockSize": "/29", "tags": {"name": "usage"}}),
        json!(["not", "an", "object"]),
    ];
    for body in bad {
        let r = pn.post("/ips/v1/ip-blocks", body.clone()).await;
        assert_error(&r, 400);
        assert!(
            r.body["validationErrors"]
                .as_array()
                .is_some_and(|v| !v.is_empty()),
            "{body}: {}",
            r.text
        );
    }
    let r = pn.send(Method::POST, "/ips/v1/ip-blocks", None).await;
    assert_error(&r, 400);
    let malformed = pn
        .client
        .post(format!("{}/ips/v1/ip-blocks", pn.sim.url()))
        .bearer_auth(&pn.token)
        .body("{oops")
        .send()
        .await
        .expect("request");
    assert_error(&read(malformed).await, 400);
    // Only /28 to /31 can be created (ipapi.spec.yaml IpBlockCreate.cidrBlockSize: "V4
    // supported sizes ... For a larger Block Size contact support"); /22 is a valid size of an
    // existing block but not of a new one.
    for size in ["/22", "/27", "/32"] {
        let r = pn
            .post(
                "/ips/v1/ip-blocks",
                json!({"location": "PHX", "cidrBlockSize": size}),
            )
            .await;
        assert_error(&r, 400);
        assert!(s(&r.body["message"]).contains("/28"), "{}", r.text);
    }
    // The tag-value pattern is the spec's [A-zÀ-ú0-9_-]{1,100}, literally.
    for (value, ok) in [
        ("Zúrich_1-a", true),
        // The prose's "UTF-8 Unicode letters": ü and ÿ are letters after the regex's ú.
        ("Zürich", true),
        ("ÿ", true),
        ("Ελλάδα", true),
        // Inside the regex's A-z range, but neither a letter nor a number nor - or _.
        ("a^b", false),
        ("a.b", false),
        ("a/b", false),
        ("a b", false),
        ("ø", true),
    ] {
        let r = pn
            .post(
                "/ips/v1/ip-blocks",
                json!({"location": "PHX", "cidrBlockSize": "/31",
                       "tags": [{"name": "cluster", "value": value}]}),
            )
            .await;
        assert_eq!(r.status == 201, ok, "{value}: {}", r.text);
    }
    let long = "a".repeat(101);
    let r = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/31",
                   "tags": [{"name": "cluster", "value": long}]}),
        )
        .await;
    assert_error(&r, 400);
    for b in pn.sim.ip_blocks() {
        let r = pn
            .delete(&format!("/ips/v1/ip-blocks/{}", s(&b["id"])))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    assert!(pn.sim.ip_blocks().is_empty(), "nothing was left");
    // A tag without value is fine.
    let r = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "ASH", "cidrBlockSize": "/30", "description": "d", "tags": [{"name": "usage"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(r.body["tags"][0]["value"].is_null());
    assert_eq!(r.body["description"], "d");
    assert_eq!(r.body["cidrBlockSize"], "/30");
}

#[tokio::test]
async fn tag_put_replaces_the_tag_set() {
    let pn = start().await;
    pn.create_ccm_tags().await;
    let block = pn.ccm_block("uid-1", "default", "web").await;
    let id = s(&block["id"]);
    // What EnsureLoadBalancerDeleted sends: current tags minus the service ones, plus delete.
    let r = pn
        .put(
            &format!("/ips/v1/ip-blocks/{id}/tags"),
            json!([
                {"name": "usage", "value": "cloud-provider-phoenixnap-auto"},
                {"name": "cluster", "value": "uid-1"},
                {"name": "delete", "value": "true"},
            ]),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let names: Vec<&str> = r.body["tags"]
        .as_array()
        .map(|t| t.iter().map(|x| s(&x["name"])).collect())
        .unwrap_or_default();
    assert_eq!(names, ["usage", "cluster", "delete"]);
    assert_eq!(
        pn.block_ids("?tag=cluster.uid-1&tag=usage.cloud-provider-phoenixnap-auto&tag=delete.true")
            .await,
        [id]
    );
    assert!(pn.block_ids("?tag=serviceName.web").await.is_empty());
    // Validation and 404.
    let r = pn
        .put(
            &format!("/ips/v1/ip-blocks/{id}/tags"),
            json!([{"name": "unknown", "value": "x"}]),
        )
        .await;
    assert_error(&r, 400);
    let r = pn
        .put(
            &format!("/ips/v1/ip-blocks/{id}/tags"),
            json!({"name": "usage"}),
        )
        .await;
    assert_error(&r, 400);
    let r = pn
        .put("/ips/v1/ip-blocks/ffffffffffffffffffffffff/tags", json!([]))
        .await;
    // ipapi.spec.yaml `ipBlocksIpBlockIdTagsPut` lists 400, 401, 403, 500: no 404.
    assert_error(&r, 403);
    // An empty list clears the tags.
    let r = pn
        .put(&format!("/ips/v1/ip-blocks/{id}/tags"), json!([]))
        .await;
    assert_eq!(r.body["tags"], json!([]));
}

#[tokio::test]
async fn assignment_goes_through_assigning_and_unassigning() {
    let pn = start_with(PhoenixnapOptions {
        assign_after: Duration::from_secs(3600),
        ..PhoenixnapOptions::default()
    })
    .await;
    pn.sim
        .add_public_network(SeedPublicNetwork::new("k8s").with_id(NETWORK));
    pn.create_ccm_tags().await;
    let block = pn.ccm_block("uid-1", "default", "web").await;
    let id = s(&block["id"]);
    let block_path = format!("/ips/v1/ip-blocks/{id}");
    let assign_path = format!("/networks/v1/public-networks/{NETWORK}/ip-blocks");
    let r = pn.post(&assign_path, json!({"id": id})).await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert_eq!(r.body["id"], id);
    assert_eq!(r.body["cidr"], block["cidr"]);
    // Assigning: no assigned resource yet (the CCM's Get fails transiently here).
    let r = pn.get(&block_path).await;
    assert_eq!(r.body["status"], "assigning");
    assert!(r.body["assignedResourceId"].is_null());
    assert!(r.body["assignedResourceType"].is_null());
    let network = pn
        .get(&format!("/networks/v1/public-networks/{NETWORK}"))
        .await;
    assert_eq!(network.body["ipBlocks"][0]["id"], id);
    assert_eq!(pn.sim.public_network_blocks(NETWORK).len(), 1);
    // Neither a second assignment nor a delete while it is going on.
    assert_error(&pn.post(&assign_path, json!({"id": id})).await, 409);
    // ipapi.spec.yaml `ipBlocksIpBlockIdDelete` lists 401, 403, 500 only: the refusal is 403.
    assert_error(&pn.delete(&block_path).await, 403);
    assert_error(&pn.delete(&format!("{assign_path}/{id}")).await, 409);
    pn.sim.settle();
    let r = pn.get(&block_path).await;
    assert_eq!(r.body["status"], "assigned");
    assert_eq!(r.body["assignedResourceId"], NETWORK);
    // The real API's spelling (upstream commit 86fc6c9).
    assert_eq!(r.body["assignedResourceType"], "public network");
    // An assigned block cannot be deleted.
    let r = pn.delete(&block_path).await;
    assert_error(&r, 403);
    assert!(s(&r.body["message"]).contains("unassign"), "{}", r.text);
    // Unassign: 202 with a plain string, then `unassigning` keeping the assignment.
    let r = pn.delete(&format!("{assign_path}/{id}")).await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert!(r.body.is_string(), "{}", r.text);
    let r = pn.get(&block_path).await;
    assert_eq!(r.body["status"], "unassigning");
    assert_eq!(r.body["assignedResourceId"], NETWORK);
    assert_error(&pn.delete(&format!("{assign_path}/{id}")).await, 409);
    assert_error(&pn.delete(&block_path).await, 403);
    pn.sim.settle();
    let r = pn.get(&block_path).await;
    assert_eq!(r.body["status"], "unassigned");
    assert!(r.body["assignedResourceId"].is_null());
    assert!(pn.sim.public_network_blocks(NETWORK).is_empty());
    let network = pn
        .get(&format!("/networks/v1/public-networks/{NETWORK}"))
        .await;
    assert_eq!(network.body["ipBlocks"], json!([]));
    // Now it can be deleted.
    let r = pn.delete(&block_path).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["ipBlockId"], id);
    assert!(r.body["result"].is_string());
    // Gone: 403 for both (no 404 in the spec for either operation).
    assert_error(&pn.get(&block_path).await, 403);
    assert_error(&pn.delete(&block_path).await, 403);
    // PATCH is the one IP-block operation that documents 404.
    assert_error(
        &pn.patch(&block_path, json!({"description": "x"})).await,
        404,
    );
}

#[tokio::test]
async fn zero_assign_after_completes_on_the_next_read() {
    let pn = start().await;
    pn.sim.set_network_resource_type("PUBLIC_NETWORK");
    let block = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29"}),
        )
        .await
        .body;
    let id = s(&block["id"]);
    let r = pn
        .post(
            &format!("/networks/v1/public-networks/{NETWORK}/ip-blocks"),
            json!({"id": id}),
        )
        .await;
    assert_eq!(r.status, 202);
    let r = pn.get(&format!("/ips/v1/ip-blocks/{id}")).await;
    assert_eq!(r.body["status"], "assigned");
    assert_eq!(r.body["assignedResourceType"], "PUBLIC_NETWORK");
    let r = pn
        .delete(&format!(
            "/networks/v1/public-networks/{NETWORK}/ip-blocks/{id}"
        ))
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(pn.sim.ip_blocks()[0]["status"], "unassigned");
    // A longer assign_after applies to transitions started afterwards; bounded polling sees it
    // finish after settle().
    pn.sim.set_assign_after(Duration::from_secs(3600));
    let r = pn
        .post(
            &format!("/networks/v1/public-networks/{NETWORK}/ip-blocks"),
            json!({"id": id}),
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(pn.sim.ip_blocks()[0]["status"], "assigning");
    pn.sim.settle();
    let mut status = String::new();
    for _ in 0..10 {
        status = s(&pn.get(&format!("/ips/v1/ip-blocks/{id}")).await.body["status"]).to_string();
        if status == "assigned" {
            break;
        }
    }
    assert_eq!(status, "assigned");
}

#[tokio::test]
async fn blocks_assigned_elsewhere_are_refused() {
    let pn = start().await;
    pn.sim.add_tag(SeedTag::new("cluster"));
    let elsewhere = pn.sim.add_ip_block(
        SeedIpBlock::new()
            .with_cidr("203.0.113.8/29")
            .assigned_to("PUBLIC_NETWORK", "ffffffffffffffffffffffff")
            .with_tag("cluster", "uid-1"),
    );
    let on_server = pn.sim.add_ip_block(
        SeedIpBlock::new()
            .with_cidr("203.0.113.16/29")
            .assigned_to("server", NODE),
    );
    let blocks = pn.sim.ip_blocks();
    assert_eq!(blocks[0]["status"], "assigned");
    assert_eq!(blocks[0]["assignedResourceId"], "ffffffffffffffffffffffff");
    assert_eq!(blocks[1]["assignedResourceType"], "server");
    let assign_path = format!("/networks/v1/public-networks/{NETWORK}/ip-blocks");
    for id in [&elsewhere, &on_server] {
        let r = pn.post(&assign_path, json!({"id": id})).await;
        assert_error(&r, 409);
        assert!(
            s(&r.body["message"]).contains("already assigned"),
            "{}",
            r.text
        );
        let r = pn.delete(&format!("/ips/v1/ip-blocks/{id}")).await;
        assert_error(&r, 403);
        // Not on this network: a bad request (networkapi.spec.yaml documents 400/409 there,
        // no 404).
        assert_error(&pn.delete(&format!("{assign_path}/{id}")).await, 400);
    }
    // A block in another location than the network.
    let ash = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "ASH", "cidrBlockSize": "/29"}),
        )
        .await
        .body;
    let r = pn.post(&assign_path, json!({"id": ash["id"]})).await;
    assert_error(&r, 400);
    let r = pn
        .post(
            &format!("/networks/v1/public-networks/{OTHER_NETWORK}/ip-blocks"),
            json!({"id": ash["id"]}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    // Unknown network, unknown block, missing id.
    let r = pn
        .post(
            "/networks/v1/public-networks/ffffffffffffffffffffffff/ip-blocks",
            json!({"id": ash["id"]}),
        )
        .await;
    // networkapi.spec.yaml `publicNetworksNetworkIdIpBlocksPost` lists 400, 401, 403, 409, 500:
    // an unknown network is 403, an unknown block named in the body 400.
    assert_error(&r, 403);
    let r = pn
        .post(&assign_path, json!({"id": "ffffffffffffffffffffffff"}))
        .await;
    assert_error(&r, 400);
    assert_error(&pn.post(&assign_path, json!({})).await, 400);
    // A block set to `error assigning` by the test.
    let r = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29"}),
        )
        .await;
    let id = s(&r.body["id"]).to_string();
    assert_eq!(pn.post(&assign_path, json!({"id": id})).await.status, 202);
    assert!(pn.sim.set_block_status(&id, "error assigning"));
    // A failed assignment may be retried (upstream re-assigned such blocks) ...
    assert_eq!(pn.post(&assign_path, json!({"id": id})).await.status, 202);
    // ... or unassigned.
    assert!(pn.sim.set_block_status(&id, "error assigning"));
    assert_eq!(pn.delete(&format!("{assign_path}/{id}")).await.status, 202);
    assert_eq!(
        pn.get(&format!("/ips/v1/ip-blocks/{id}")).await.body["status"],
        "unassigned"
    );
    // Networks list and filter.
    let r = pn.get("/networks/v1/public-networks").await;
    assert_eq!(r.body.as_array().map(Vec::len), Some(2));
    assert_eq!(r.body[0]["vlanId"], 20);
    assert_eq!(r.body[0]["location"], "PHX");
    assert_eq!(r.body[0]["name"], "k8s");
    let r = pn.get("/networks/v1/public-networks?location=ASH").await;
    assert_eq!(r.body.as_array().map(Vec::len), Some(1));
    assert_eq!(r.body[0]["ipBlocks"][0]["id"], ash["id"]);
    // A location the spec does not list is refused, not answered with an empty list.
    assert_error(
        &pn.get("/networks/v1/public-networks?location=MARS").await,
        400,
    );
    // networkapi.spec.yaml `publicNetworksNetworkIdGet` lists 401, 403, 500: no 404.
    assert_error(
        &pn.get("/networks/v1/public-networks/ffffffffffffffffffffffff")
            .await,
        403,
    );
    // Unassigning from an unknown network: 403; an unknown block: 400 (not on the network).
    assert_error(
        &pn.delete(&format!(
            "/networks/v1/public-networks/ffffffffffffffffffffffff/ip-blocks/{}",
            s(&ash["id"])
        ))
        .await,
        403,
    );
    assert_error(
        &pn.delete(&format!("{assign_path}/ffffffffffffffffffffffff"))
            .await,
        400,
    );
}

#[tokio::test]
async fn tags_are_unique_and_report_their_use() {
    let pn = start().await;
    let r = pn
        .post(
            "/tag-manager/v1/tags",
            json!({"name": "cluster", "isBillingTag": false, "description": "k8s"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["name"], "cluster");
    assert_eq!(r.body["isBillingTag"], false);
    assert_eq!(r.body["description"], "k8s");
    assert_eq!(r.body["values"], json!([]));
    let tag_id = s(&r.body["id"]).to_string();
    let r = pn
        .post(
            "/tag-manager/v1/tags",
            json!({"name": "cluster", "isBillingTag": false}),
        )
        .await;
    assert_error(&r, 409);
    assert!(
        s(&r.body["message"]).contains("already exists"),
        "{}",
        r.text
    );
    assert_error(
        &pn.post("/tag-manager/v1/tags", json!({"name": "x"})).await,
        400,
    );
    assert_error(
        &pn.post("/tag-manager/v1/tags", json!({"isBillingTag": true}))
            .await,
        400,
    );
    assert_eq!(
        pn.post(
            "/tag-manager/v1/tags",
            json!({"name": "usage", "isBillingTag": false})
        )
        .await
        .status,
        201
    );
    let r = pn.get("/tag-manager/v1/tags?name=usage").await;
    assert_eq!(r.body.as_array().map(Vec::len), Some(1));
    assert_eq!(r.body[0]["name"], "usage");
    assert_eq!(
        pn.get("/tag-manager/v1/tags")
            .await
            .body
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // Values and assignments follow the blocks that carry the tag.
    let block = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29", "tags": [{"name": "cluster", "value": "uid-1"}]}),
        )
        .await
        .body;
    let r = pn.get(&format!("/tag-manager/v1/tags/{tag_id}")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["values"], json!(["uid-1"]));
    assert_eq!(
        r.body["resourceAssignments"][0]["resourceName"],
        format!("/ips/ip-blocks/{}", s(&block["id"]))
    );
    assert_eq!(block["tags"][0]["id"], tag_id.as_str());
    // tagapi.spec.yaml `tagsTagIdGet` lists 401, 403, 500: no 404.
    assert_error(
        &pn.get("/tag-manager/v1/tags/ffffffffffffffffffffffff")
            .await,
        403,
    );
    assert_eq!(pn.sim.tags().len(), 2);
}

#[tokio::test]
async fn faults_change_nothing_and_everything_is_logged() {
    let pn = start().await;
    pn.create_ccm_tags().await;
    pn.sim.clear_requests();
    pn.sim
        .faults()
        .fail_next(Match::path("/ips/v1/ip-blocks").with_method("POST"), 500, 2);
    let body = json!({"location": "PHX", "cidrBlockSize": "/29"});
    for _ in 0..2 {
        let r = pn.post("/ips/v1/ip-blocks", body.clone()).await;
        assert_error(&r, 500);
        assert_eq!(r.body["message"], "Simulated failure.");
    }
    assert!(pn.sim.ip_blocks().is_empty());
    assert_eq!(pn.sim.faults().pending(), 0);
    assert_eq!(pn.post("/ips/v1/ip-blocks", body.clone()).await.status, 201);
    // Throttling sends Retry-After; faults apply before authentication.
    pn.sim.faults().throttle_next(Match::method("GET"), 7, 1);
    let r = pn
        .send_as(Method::GET, "/ips/v1/ip-blocks?tag=usage.x", None, None)
        .await;
    assert_error(&r, 429);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("7")
    );
    // The token endpoint fails the OAuth2 way.
    pn.sim.faults().fail_next(Match::path("/auth/"), 503, 1);
    let r = pn.token_basic("sim-client", "sim-secret").await;
    assert_oauth_error(&r, 503, "server_error");
    // 403 on a server lookup, which the CCM treats as not found.
    pn.sim
        .faults()
        .fail_next(Match::path(&format!("/bmc/v1/servers/{NODE}")), 403, 1);
    assert_error(&pn.get(&format!("/bmc/v1/servers/{NODE}")).await, 403);
    // The log: method, path, query, status, body.
    let log = pn.sim.requests();
    let lines: Vec<String> = log.iter().map(|r| r.line()).collect();
    assert_eq!(
        lines,
        [
            "POST /ips/v1/ip-blocks 500".to_string(),
            "POST /ips/v1/ip-blocks 500".to_string(),
            "POST /ips/v1/ip-blocks 201".to_string(),
            "GET /ips/v1/ip-blocks?tag=usage.x 429".to_string(),
            "POST /auth/realms/BMC/protocol/openid-connect/token 503".to_string(),
            format!("GET /bmc/v1/servers/{NODE} 403"),
        ]
    );
    assert_eq!(log[0].body, Some(body));
    assert_eq!(log[3].path, "/ips/v1/ip-blocks");
    assert_eq!(log[3].query, "tag=usage.x");
    assert_eq!(log[3].body, None);
    assert!(
        log[4]
            .body
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|b| b.contains("grant_type=client_credentials")),
        "form bodies are logged as text"
    );
    assert_eq!(pn.sim.mutations().len(), 4);
    pn.sim.clear_requests();
    assert!(pn.sim.requests().is_empty());
    // Latency is applied and cleared.
    pn.sim.faults().set_latency(Duration::from_millis(1));
    assert_eq!(pn.get("/bmc/v1/servers").await.status, 200);
    pn.sim.faults().clear();
    assert_eq!(pn.get("/bmc/v1/servers").await.status, 200);
}

/// A seed file in the temp directory, removed on drop.
struct SeedFile(std::path::PathBuf);

impl SeedFile {
    fn new(name: &str, text: &str) -> SeedFile {
        let path = std::env::temp_dir().join(format!(
            "wasm-ccm-sim-pnap-{}-{name}.yaml",
            std::process::id()
        ));
        std::fs::write(&path, text).expect("write seed file");
        SeedFile(path)
    }
}

impl Drop for SeedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn seed_files_are_checked_and_applied_all_or_nothing() {
    let good = SeedFile::new(
        "good",
        r#"
tags:
  - name: cluster
  - name: usage
servers:
  - hostname: node-1
    id: 0123456789abcdef01234567
    status: powered-off
    type: s2.c1.medium
    location: ASH
    publicIpAddresses: [198.51.100.130]
    privateIpAddresses: [10.0.0.11]
publicNetworks:
  - id: 60473c2509268bc77fd06d29
    name: k8s
    location: ASH
    vlanId: 20
    ipBlocks: [198.51.100.128/29]
ipBlocks:
  - id: 60473c2509268bc77fd06d31
    location: ASH
    cidr: 203.0.113.0/29
    assignedResourceType: public network
    assignedResourceId: 60473c2509268bc77fd06d99
    tags:
      - {name: cluster, value: uid-1}
      - {name: usage, value: cloud-provider-phoenixnap-auto}
  - cidrBlockSize: /30
"#,
    );
    let seed = Seed::load_file(&good.0).expect("valid seed file");
    let pn = start_with(PhoenixnapOptions::default()).await;
    pn.sim.seed(seed).expect("seed applies");
    let server = pn.get("/bmc/v1/servers/0123456789abcdef01234567").await;
    assert_eq!(server.body["status"], "powered-off");
    assert_eq!(server.body["location"], "ASH");
    assert_eq!(server.body["type"], "s2.c1.medium");
    let network = pn
        .get("/networks/v1/public-networks/60473c2509268bc77fd06d29")
        .await;
    assert_eq!(network.body["ipBlocks"][0]["cidr"], "198.51.100.128/29");
    let blocks = pn.sim.ip_blocks();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["assignedResourceType"], "public network");
    assert_eq!(blocks[1]["assignedResourceType"], "public network");
    assert_eq!(blocks[2]["cidrBlockSize"], "/30");
    assert_eq!(blocks[2]["status"], "unassigned");
    assert_eq!(
        pn.block_ids("?tag=cluster.uid-1&tag=usage.cloud-provider-phoenixnap-auto")
            .await,
        ["60473c2509268bc77fd06d31"]
    );
    // Errors name the file and the problem.
    let cases = [
        (
            "unknown-field",
            "servers:\n  - hostname: a\n    hostnmae: b\n",
            "hostnmae",
        ),
        (
            "bad-cidr",
            "ipBlocks:\n  - cidr: 198.51.100.1/29\n",
            "host bits",
        ),
        (
            "bad-tag",
            "ipBlocks:\n  - tags: [{name: nope, value: x}]\n",
            "nope",
        ),
        (
            "half-assigned",
            "ipBlocks:\n  - assignedResourceId: x\n",
            "assignedResourceType",
        ),
        (
            "vlan",
            "publicNetworks:\n  - {name: a, vlanId: 5000}\n",
            "vlanId",
        ),
    ];
    for (name, text, needle) in cases {
        let file = SeedFile::new(name, text);
        let e = Seed::load_file(&file.0)
            .expect_err("invalid seed")
            .to_string();
        assert!(e.contains(needle), "{name}: {e}");
        assert!(e.contains(&file.0.display().to_string()), "{name}: {e}");
    }
    let missing = std::env::temp_dir().join("wasm-ccm-sim-pnap-does-not-exist.yaml");
    let e = Seed::load_file(&missing)
        .expect_err("missing file")
        .to_string();
    assert!(e.contains("cannot read"), "{e}");
    // seed() is all or nothing: a duplicate ID drops the valid server before it too.
    let bad = Seed {
        servers: vec![
            SeedServer::new("fresh"),
            SeedServer::new("dup").with_id("0123456789abcdef01234567"),
        ],
        ..Seed::default()
    };
    assert!(pn.sim.seed(bad).is_err_and(|e| e.contains("duplicate")));
    assert_eq!(pn.sim.servers().len(), 1);
    assert!(
        pn.sim
            .try_add_public_network(
                SeedPublicNetwork::new("x")
                    .with_location("ASH")
                    .with_vlan(20)
            )
            .is_err_and(|e| e.contains("vlanId"))
    );
}

#[tokio::test]
async fn control_api_over_http() {
    let pn = start_with(PhoenixnapOptions {
        assign_after: Duration::from_secs(3600),
        ..PhoenixnapOptions::default()
    })
    .await;
    let sim_url = |p: &str| format!("{}{p}", pn.sim.url());
    let post = |p: &str, body: String| pn.client.post(sim_url(p)).body(body).send();
    let seed = format!(
        "publicNetworks:\n  - {{id: {NETWORK}, name: k8s}}\nservers:\n  - {{hostname: n1, id: {NODE}}}\n"
    );
    let r = post("/sim/seed", seed).await.expect("seed");
    assert_eq!(r.status().as_u16(), 204);
    let bad = post("/sim/seed", "servers: [{hostnmae: x}]".into())
        .await
        .expect("seed");
    assert_eq!(bad.status().as_u16(), 400);
    let block = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29"}),
        )
        .await
        .body;
    let r = pn
        .post(
            &format!("/networks/v1/public-networks/{NETWORK}/ip-blocks"),
            json!({"id": block["id"]}),
        )
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(pn.sim.ip_blocks()[0]["status"], "assigning");
    let r = post("/sim/settle", String::new()).await.expect("settle");
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(pn.sim.ip_blocks()[0]["status"], "assigned");
    let r = pn
        .client
        .put(sim_url(&format!("/sim/servers/{NODE}/status")))
        .body(r#"{"status": "powered-off"}"#)
        .send()
        .await
        .expect("status");
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(pn.sim.servers()[0]["status"], "powered-off");
    let r = post(
        "/sim/faults",
        json!({"action": "fail", "status": 502, "path_prefix": "/bmc/v1/servers"}).to_string(),
    )
    .await
    .expect("fault");
    assert_eq!(r.status().as_u16(), 204);
    assert_error(&pn.get("/bmc/v1/servers").await, 502);
    let r = post("/sim/expire-tokens", String::new())
        .await
        .expect("expire");
    assert_eq!(r.status().as_u16(), 204);
    assert_error(&pn.get("/bmc/v1/servers").await, 401);
    let log: Value = pn
        .client
        .get(sim_url("/sim/requests"))
        .send()
        .await
        .expect("log")
        .json()
        .await
        .expect("log JSON");
    let statuses: Vec<u64> = log
        .as_array()
        .map(|l| l.iter().filter_map(|r| r["status"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(
        statuses,
        [201, 202, 502, 401],
        "control requests are not logged"
    );
    let r = pn
        .client
        .delete(sim_url("/sim/servers/ffffffffffffffffffffffff"))
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status().as_u16(), 404);
}

/// The switches of the review's findings S2/S3 over the control API, and a failed assignment
/// (`error assigning`) may be retried (review finding D5).
#[tokio::test]
async fn gone_status_resource_type_and_assignment_retry() {
    let pn = start().await;
    let put = |path: &str, body: Value| {
        pn.client
            .put(format!("{}{path}", pn.sim.url()))
            .json(&body)
            .send()
    };
    let gone = "/bmc/v1/servers/ffffffffffffffffffffffff";
    assert_error(&pn.get(gone).await, 403);
    let r = put("/sim/gone-server-status", json!({"status": 404}))
        .await
        .expect("put");
    assert_eq!(r.status().as_u16(), 204);
    assert_error(&pn.get(gone).await, 404);
    let r = put("/sim/gone-server-status", json!({"status": 500}))
        .await
        .expect("put");
    assert_eq!(r.status().as_u16(), 400);
    let r = put(
        "/sim/network-resource-type",
        json!({"type": "PUBLIC_NETWORK"}),
    )
    .await
    .expect("put");
    assert_eq!(r.status().as_u16(), 204);
    let block = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29"}),
        )
        .await
        .body;
    let id = s(&block["id"]).to_string();
    let assign_path = format!("/networks/v1/public-networks/{NETWORK}/ip-blocks");
    assert_eq!(pn.post(&assign_path, json!({"id": id})).await.status, 202);
    assert!(pn.sim.set_block_status(&id, "error assigning"));
    let r = pn.post(&assign_path, json!({"id": id})).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let r = pn.get(&format!("/ips/v1/ip-blocks/{id}")).await;
    assert_eq!(r.body["status"], "assigned");
    assert_eq!(r.body["assignedResourceType"], "PUBLIC_NETWORK");
}

/// bmcapi.spec.yaml `serversGet`: `tag` query parameters "in the form of tagName.tagValue",
/// `explode: true`; every filter must match. The review found the list ignoring them.
#[tokio::test]
async fn servers_are_filtered_by_tag() {
    let pn = start_with(PhoenixnapOptions::default()).await;
    for tag in ["env", "ort"] {
        pn.sim.add_tag(SeedTag::new(tag));
    }
    let dev = pn.sim.add_server(
        SeedServer::new("dev-1")
            .with_tag("env", "dev")
            .with_tag("ort", "Zürich"),
    );
    let prod = pn
        .sim
        .add_server(SeedServer::new("prod-1").with_tag("env", "prod"));
    let untagged = pn.sim.add_server(SeedServer::new("plain"));
    let ids = |r: &Resp| -> Vec<String> {
        r.body
            .as_array()
            .map(|list| list.iter().map(|v| s(&v["id"]).to_string()).collect())
            .unwrap_or_else(|| panic!("not a list: {}", r.text))
    };
    let all = pn.get("/bmc/v1/servers").await;
    assert_eq!(ids(&all), [dev.clone(), prod.clone(), untagged]);
    let r = pn.get("/bmc/v1/servers?tag=env.dev").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(ids(&r), std::slice::from_ref(&dev));
    assert_eq!(r.body[0]["tags"][0]["name"], "env");
    assert_eq!(r.body[0]["tags"][0]["value"], "dev");
    assert_eq!(r.body[0]["tags"][0]["isBillingTag"], false);
    assert_eq!(ids(&pn.get("/bmc/v1/servers?tag=env.prod").await), [prod]);
    // Several filters: all must match; a non-ASCII value arrives percent-encoded.
    let r = pn
        .get("/bmc/v1/servers?tag=env.dev&tag=ort.Z%C3%BCrich")
        .await;
    assert_eq!(ids(&r), [dev]);
    let r = pn
        .get("/bmc/v1/servers?tag=env.prod&tag=ort.Z%C3%BCrich")
        .await;
    assert!(ids(&r).is_empty(), "{}", r.text);
    assert!(ids(&pn.get("/bmc/v1/servers?tag=env.test").await).is_empty());
    // Not in the documented form.
    assert_error(&pn.get("/bmc/v1/servers?tag=env").await, 400);
    // Seeded server tags must name seeded tags.
    assert!(
        pn.sim
            .try_add_server(SeedServer::new("x").with_tag("nope", "v"))
            .is_err_and(|e| e.contains("nope"))
    );
}

/// Tag names follow the same rule as values (tagapi.spec.yaml `TagCreate.name`).
#[tokio::test]
async fn tag_names_follow_the_specs_rule() {
    let pn = start_with(PhoenixnapOptions::default()).await;
    for (name, status) in [("Zürich", 201), ("a.b", 400), ("a b", 400), ("", 400)] {
        let r = pn
            .post(
                "/tag-manager/v1/tags",
                json!({"name": name, "isBillingTag": false}),
            )
            .await;
        assert_eq!(r.status, status, "{name:?}: {}", r.text);
    }
    assert!(pn.sim.try_add_tag(SeedTag::new("k8s.io/x")).is_err());
    let r = pn.get("/tag-manager/v1/tags?name=Z%C3%BCrich").await;
    assert_eq!(r.body.as_array().map(Vec::len), Some(1), "{}", r.text);
}

/// networkapi.spec.yaml `PublicNetwork.status` (`BUSY`, `READY`, `DELETING`, `ERROR`) and the
/// `Conflict` response of `publicNetworksNetworkIdIpBlocksPost` ("The resource is in an
/// incompatible state"): only a READY network takes a block.
#[tokio::test]
async fn a_network_that_is_not_ready_refuses_blocks() {
    let pn = start().await;
    let assign_path = format!("/networks/v1/public-networks/{NETWORK}/ip-blocks");
    let network_path = format!("/networks/v1/public-networks/{NETWORK}");
    assert_eq!(pn.get(&network_path).await.body["status"], "READY");
    let block = pn
        .post(
            "/ips/v1/ip-blocks",
            json!({"location": "PHX", "cidrBlockSize": "/29"}),
        )
        .await;
    let id = s(&block.body["id"]).to_string();
    for status in ["BUSY", "DELETING", "ERROR"] {
        assert!(pn.sim.set_public_network_status(NETWORK, status));
        assert_eq!(pn.get(&network_path).await.body["status"], status);
        let r = pn.post(&assign_path, json!({"id": id})).await;
        assert_error(&r, 409);
        assert!(s(&r.body["message"]).contains(status), "{}", r.text);
        assert_eq!(
            pn.get(&format!("/ips/v1/ip-blocks/{id}")).await.body["status"],
            "unassigned"
        );
    }
    // Over the control API, and back to READY.
    let url = format!("{}/sim/public-networks/{NETWORK}/status", pn.sim.url());
    let r = pn
        .client
        .put(&url)
        .body(json!({"status": "SLEEPY"}).to_string())
        .send()
        .await
        .expect("control");
    assert_eq!(r.status().as_u16(), 400);
    let r = pn
        .client
        .put(&url)
        .body(json!({"status": "READY"}).to_string())
        .send()
        .await
        .expect("control");
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(pn.post(&assign_path, json!({"id": id})).await.status, 202);
    assert!(
        !pn.sim
            .set_public_network_status("ffffffffffffffffffffffff", "READY")
    );
    // Seeded with a status; an unknown status is refused.
    let seeded = pn.sim.add_public_network(
        SeedPublicNetwork::new("broken")
            .with_location("SEA")
            .with_status("ERROR"),
    );
    let r = pn
        .get(&format!("/networks/v1/public-networks/{seeded}"))
        .await;
    assert_eq!(r.body["status"], "ERROR");
    assert!(
        pn.sim
            .try_add_public_network(SeedPublicNetwork::new("x").with_status("OK"))
            .is_err_and(|e| e.contains("status"))
    );
}

/// The simulator's optional rate limit: phoenixNAP documents none, so it answers as we chose
/// (429 with `Retry-After`, in the API's error shape; OAuth2's on the token endpoint): see
/// `CloudApi::throttled` in src/phoenixnap/server.rs.
#[tokio::test]
async fn over_its_rate_limit_the_simulator_answers_429_with_retry_after() {
    let pn = start_with(PhoenixnapOptions {
        rate_limit: Some(wasm_ccm_sim::RateLimit::new(1, Duration::from_secs(3600))),
        ..PhoenixnapOptions::default()
    })
    .await;
    // Positive control: the limit's one request is served.
    assert_eq!(pn.get("/bmc/v1/servers").await.status, 200);
    let refused = pn.get("/bmc/v1/servers").await;
    assert_eq!(refused.status, 429, "{}", refused.text);
    let retry_after: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After seconds: {:?}", refused.headers));
    assert!((3500..=3600).contains(&retry_after), "{retry_after}");
    assert!(
        refused.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Too many requests")),
        "{}",
        refused.text
    );
    // The token endpoint is limited too, with OAuth2's error body.
    let token = pn
        .client
        .post(format!(
            "{}/auth/realms/BMC/protocol/openid-connect/token",
            pn.sim.url()
        ))
        .basic_auth(pn.sim.client_id(), Some(pn.sim.client_secret()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("token request sent");
    assert_eq!(token.status().as_u16(), 429);
    let body: Value = token.json().await.expect("JSON body");
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
}
