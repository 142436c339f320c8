//! Seed files (YAML multi-document, List, JSON) and the standalone binary.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use wasm_ccm_sim::kube::{SeedError, load_seed_file, parse_seed};

const SEED: &str = r#"
# Two documents and a List; an empty document is skipped.
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {zone: a}
status:
  addresses: [{type: InternalIP, address: 10.0.0.1}]
---
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec:
    type: LoadBalancer
    ports: [{port: 443}]
- apiVersion: coordination.k8s.io/v1
  kind: Lease
  metadata: {name: cloud-controller-manager, namespace: kube-system}
  spec: {holderIdentity: someone}
"#;

#[tokio::test]
async fn yaml_documents_and_lists_seed_the_store() {
    let objects = parse_seed(SEED).expect("seed parses");
    assert_eq!(objects.len(), 3);
    let s = common::start().await;
    s.sim.seed(objects).expect("seeded");
    let node = s.get("/api/v1/nodes/node-a").await.body;
    assert_eq!(
        node["status"]["addresses"][0]["address"], "10.0.0.1",
        "status is kept when seeding"
    );
    assert!(node["metadata"]["uid"].is_string());
    // The namespace of a seeded object is created on demand; Services get their allocations.
    assert_eq!(s.get("/api/v1/namespaces/shop").await.status, 200);
    let svc = s.get("/api/v1/namespaces/shop/services/web").await.body;
    assert!(svc["spec"]["ports"][0]["nodePort"].is_u64());
    assert!(svc["spec"]["clusterIP"].is_string());
    let lease = s
        .get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cloud-controller-manager")
        .await
        .body;
    assert_eq!(lease["spec"]["holderIdentity"], "someone");
    assert_eq!(s.sim.list("leases").len(), 1);

    // Seeding again replaces, keeping the uid.
    let uid = node["metadata"]["uid"].clone();
    s.sim
        .seed(vec![json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "labels": {"zone": "b"}}})])
        .expect("reseeded");
    let node = s.sim.get("nodes", None, "node-a").expect("node");
    assert_eq!(node["metadata"]["labels"]["zone"], "b");
    assert_eq!(node["metadata"]["uid"], uid);

    let unknown = s.sim.seed(vec![
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    ]);
    assert!(unknown.is_err());
}

#[test]
fn json_files_and_errors() {
    let dir = std::env::temp_dir().join(format!("wasm-ccm-sim-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("nodes.json");
    std::fs::write(
        &path,
        r#"{"apiVersion":"v1","kind":"NodeList","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"j1"}}]}"#,
    )
    .expect("write");
    let objects = load_seed_file(&path).expect("loads");
    assert_eq!(objects[0]["metadata"]["name"], "j1");
    assert!(matches!(
        load_seed_file(&dir.join("missing.yaml")),
        Err(SeedError::Read { .. })
    ));
    assert!(matches!(
        parse_seed("kind: Node\nmetadata: {name: x}\n"),
        Err(SeedError::Shape { .. })
    ));
    assert!(matches!(parse_seed("{"), Err(SeedError::Parse { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the real binary with a seed file and reads its first line for the URL.
#[tokio::test]
async fn standalone_binary_serves_the_seed() {
    let dir = std::env::temp_dir().join(format!("wasm-ccm-sim-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let seed = dir.join("seed.yaml");
    std::fs::write(&seed, SEED).expect("write seed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasm-ccm-sim"))
        .args(["kube", "--listen", "127.0.0.1:0", "--seed"])
        .arg(&seed)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let _ = reader.read_line(&mut line);
        // Keep draining: the binary prints more lines, and a closed pipe would make its next
        // `println!` panic and take the server down mid-test.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        line
    })
    .await
    .expect("reader");
    let url = line
        .trim()
        .strip_prefix("kube simulator listening on ")
        .map(str::to_string);
    let result = async {
        let url = url.ok_or_else(|| format!("unexpected first line {line:?}"))?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| e.to_string())?;
        let nodes: serde_json::Value = client
            .get(format!("{url}/api/v1/nodes"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(common::names(&nodes))
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(result, Ok(vec!["node-a".to_string()]));
}
