//! Discovery documents, version and health endpoints.

mod common;

use serde_json::Value;

#[tokio::test]
async fn version_and_health() {
    let s = common::start().await;
    let v = s.get("/version").await;
    assert_eq!(v.status, 200);
    assert_eq!(v.body["major"], "1");
    assert_eq!(v.body["minor"], "37");
    assert_eq!(v.body["gitVersion"], "v1.37.0-wasm-ccm-sim");
    assert_eq!(
        v.body["gitVersion"],
        wasm_ccm_sim::kube::DEFAULT_SERVER_VERSION
    );
    for path in ["/healthz", "/readyz", "/livez", "/readyz/ping"] {
        let r = s
            .client
            .get(format!("{}{path}", s.sim.url()))
            .send()
            .await
            .expect("health request");
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.text().await.expect("text"), "ok");
    }
}

/// The served version is an option; `major` and `minor` follow it, and a text that is no
/// Kubernetes version stops the start with a message naming it.
#[tokio::test]
async fn the_served_version_is_configurable() {
    use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions};
    let options = |v: &str| KubeSimOptions {
        server_version: v.to_string(),
        ..KubeSimOptions::default()
    };
    let sim = KubeSim::start_with("127.0.0.1:0".parse().expect("address"), options("v1.35.2"))
        .await
        .expect("start");
    let v: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .get(format!("{}/version", sim.url()))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        (&v["major"], &v["minor"], &v["gitVersion"]),
        (&"1".into(), &"35".into(), &"v1.35.2".into())
    );
    let e = KubeSim::start_with("127.0.0.1:0".parse().expect("address"), options("1.35"))
        .await
        .expect_err("not a version");
    assert!(e.to_string().contains("\"1.35\""), "{e}");
}

#[tokio::test]
async fn legacy_discovery_documents() {
    let s = common::start().await;
    // kubectl asks for aggregated discovery first; plain JSON makes it fall back.
    let api = s
        .client
        .get(format!("{}/api", s.sim.url()))
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .send()
        .await
        .expect("request");
    assert_eq!(
        api.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let api: Value = api.json().await.expect("json");
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"][0], "v1");
    assert_eq!(
        api["serverAddressByClientCIDRs"][0]["serverAddress"],
        s.sim.addr().to_string()
    );

    let core = s.get("/api/v1").await.body;
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["groupVersion"], "v1");
    let find = |doc: &Value, name: &str| {
        doc["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let nodes = find(&core, "nodes");
    assert_eq!(nodes["namespaced"], false);
    assert_eq!(nodes["kind"], "Node");
    assert_eq!(nodes["shortNames"][0], "no");
    assert!(
        nodes["verbs"]
            .as_array()
            .is_some_and(|v| v.contains(&"watch".into()))
    );
    assert_eq!(find(&core, "services")["shortNames"][0], "svc");
    assert_eq!(find(&core, "namespaces")["shortNames"][0], "ns");
    assert_eq!(find(&core, "events")["shortNames"][0], "ev");
    assert_eq!(find(&core, "nodes/status")["kind"], "Node");
    assert_eq!(find(&core, "services/status")["namespaced"], true);

    let groups = s.get("/apis").await.body;
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["name"].as_str()).collect())
        .unwrap_or_default();
    // rbac.authorization.k8s.io is advertised (its objects are authorized, then refused).
    assert_eq!(
        names,
        [
            "events.k8s.io",
            "coordination.k8s.io",
            "rbac.authorization.k8s.io"
        ]
    );
    let rbac = s.get("/apis/rbac.authorization.k8s.io/v1").await.body;
    assert_eq!(find(&rbac, "roles")["kind"], "Role");
    assert_eq!(find(&rbac, "clusterrolebindings")["namespaced"], false);
    let refused = s
        .get("/apis/rbac.authorization.k8s.io/v1/clusterroles")
        .await;
    assert_eq!(refused.status, 405);
    assert!(
        refused.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("wasm-ccm-sim does not serve RBAC objects")),
        "{}",
        refused.body
    );
    let collection = s
        .delete("/api/v1/namespaces/default/configmaps", None)
        .await;
    assert_eq!(collection.status, 405);
    assert!(
        collection.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("wasm-ccm-sim does not serve deletecollection")),
        "{}",
        collection.body
    );

    let group = s.get("/apis/coordination.k8s.io").await.body;
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let leases = s.get("/apis/coordination.k8s.io/v1").await.body;
    assert_eq!(find(&leases, "leases")["namespaced"], true);
    let events = s.get("/apis/events.k8s.io/v1").await.body;
    assert_eq!(find(&events, "events")["kind"], "Event");
}

#[tokio::test]
async fn unknown_paths_are_404_status() {
    let s = common::start().await;
    for path in [
        "/api/v2",
        "/api/v1/widgets",
        "/apis/example.com/v1",
        "/apis/coordination.k8s.io/v1/namespaces/default/widgets",
        "/api/v1/services/not-namespaced-path",
        "/openapi/v3/apis/example.com/v1",
        "/openapi/v1",
        "/api/v1/nodes/n1/proxy",
    ] {
        let r = s.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.body["kind"], "Status", "{path}");
        assert_eq!(r.body["reason"], "NotFound", "{path}");
        assert_eq!(r.body["code"], 404, "{path}");
    }
    let r = s
        .send(
            reqwest::Method::POST,
            "/api/v1/services",
            Some("application/json"),
            Some(b"{}".to_vec()),
        )
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.body["reason"], "MethodNotAllowed");
}

fn all_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if let ("$ref", Some(r)) = (k.as_str(), x.as_str()) {
                    out.push(r.to_string());
                } else {
                    all_refs(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| all_refs(x, out)),
        _ => {}
    }
}

fn gvks(schema: &Value) -> Vec<(String, String, String)> {
    schema["x-kubernetes-group-version-kind"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let s = |k: &str| g[k].as_str().unwrap_or("").to_string();
            (s("group"), s("version"), s("kind"))
        })
        .collect()
}

#[tokio::test]
async fn openapi_v2_document() {
    let s = common::start().await;
    let doc = s.get("/openapi/v2").await;
    assert_eq!(doc.status, 200);
    let doc = doc.body;
    assert_eq!(doc["swagger"], "2.0");
    let defs = doc["definitions"].as_object().expect("definitions");
    for (group, kind) in [
        ("", "Node"),
        ("", "Service"),
        ("", "Pod"),
        ("", "Namespace"),
        ("", "ConfigMap"),
        ("", "Event"),
        ("events.k8s.io", "Event"),
        ("coordination.k8s.io", "Lease"),
        ("", "Status"),
        ("", "ServiceList"),
    ] {
        let found = defs.values().any(|d| {
            gvks(d)
                .iter()
                .any(|(g, v, k)| g == group && v == "v1" && k == kind)
        });
        assert!(found, "{group}/{kind}");
    }
    let spec = &defs["io.k8s.api.core.v1.ServiceSpec"]["properties"];
    assert_eq!(spec["loadBalancerClass"]["type"], "string");
    assert_eq!(
        spec["ports"]["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.ServicePort"
    );
    let mut refs = Vec::new();
    all_refs(&doc, &mut refs);
    for r in refs {
        let name = r.strip_prefix("#/definitions/").expect("v2 ref");
        assert!(defs.contains_key(name), "{r} resolves");
    }
    // Paths carry the GVK and the parameters kubectl's verifiers look for.
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/services/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Service");
    assert!(
        patch["parameters"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation"))
    );

    // client-go 1.20 asks for the protobuf form only: 406, so it moves on.
    let pb = s
        .client
        .get(format!("{}/openapi/v2", s.sim.url()))
        .header(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )
        .send()
        .await
        .expect("request");
    assert_eq!(pb.status(), 406);
}

#[tokio::test]
async fn openapi_v3_documents() {
    let s = common::start().await;
    let index = s.get("/openapi/v3").await;
    assert_eq!(index.status, 200);
    let paths = index.body["paths"].as_object().expect("paths").clone();
    let mut names: Vec<&str> = paths.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "api/v1",
            "apis/coordination.k8s.io/v1",
            "apis/events.k8s.io/v1"
        ]
    );
    for (gv, entry) in &paths {
        let url = entry["serverRelativeURL"].as_str().expect("url");
        assert!(url.starts_with(&format!("/openapi/v3/{gv}?hash=")), "{url}");
        let doc = s.get(url).await;
        assert_eq!(doc.status, 200, "{url}");
        let doc = doc.body;
        assert_eq!(doc["openapi"], "3.0.0");
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let mut refs = Vec::new();
        all_refs(&doc, &mut refs);
        for r in refs {
            let name = r.strip_prefix("#/components/schemas/").expect("v3 ref");
            assert!(schemas.contains_key(name), "{gv}: {r} resolves");
        }
        // Every PATCH names its kind and offers fieldValidation.
        for (path, item) in doc["paths"].as_object().expect("paths") {
            let patch = &item["patch"];
            if patch.is_null() {
                continue;
            }
            assert!(
                patch["x-kubernetes-group-version-kind"].is_object(),
                "{path}"
            );
            assert!(
                patch["parameters"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation")),
                "{path}"
            );
        }
    }
    let core = s.get("/openapi/v3/api/v1").await.body;
    let schemas = &core["components"]["schemas"];
    let spec = &schemas["io.k8s.api.core.v1.Service"]["properties"]["spec"];
    assert_eq!(
        spec["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.core.v1.ServiceSpec"
    );
    assert!(spec["description"].is_string());
    assert!(schemas["io.k8s.api.coordination.v1.Lease"].is_null());
    let leases = s.get("/openapi/v3/apis/coordination.k8s.io/v1").await.body;
    assert_eq!(
        gvks(&leases["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]),
        [(
            "coordination.k8s.io".to_string(),
            "v1".to_string(),
            "Lease".to_string()
        )]
    );
    assert_eq!(s.get("/openapi/v3/apis/example.com/v1").await.status, 404);
}

/// `sim kube --server-version` refuses a text that is no Kubernetes version before anything
/// starts, naming the flag.
#[test]
fn the_cli_refuses_a_server_version_that_is_no_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasm-ccm-sim"))
        .args([
            "kube",
            "--listen",
            "127.0.0.1:0",
            "--server-version",
            "1.35",
        ])
        .output()
        .expect("run wasm-ccm-sim");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--server-version") && stderr.contains("\"1.35\" does not start with `v`"),
        "{stderr}"
    );
}
