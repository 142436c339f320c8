//! kubectl against the simulator (skipped, with a message, when /usr/bin/kubectl is absent).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const KUBECTL: &str = "/usr/bin/kubectl";

struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = Command::new(KUBECTL);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        // kubectl is a blocking child process; the simulator keeps serving on the runtime.
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("kubectl runs");
        (
            out.status.success(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_smoke() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return;
    }
    let s = common::start().await;
    let dir = std::env::temp_dir().join(format!("wasm-ccm-sim-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, s.sim.kubeconfig()).expect("write kubeconfig");
    let manifest = dir.join("objects.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  labels: {zone: a}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: LoadBalancer\n  ports: [{port: 80}]\n",
    )
    .expect("write manifest");
    let k = Kubectl { kubeconfig };
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
    k.ok(&[
        "patch",
        "svc",
        "web",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}}"#,
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

    let out = k.ok(&["delete", "node", "node-a"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert!(s.sim.get("nodes", None, "node-a").is_none());
    let (ok, _, stderr) = k.run(&["get", "node", "node-a"]).await;
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");

    let _ = std::fs::remove_dir_all(&dir);
}
