//! The official PhoenixNAP SDKs judge the PhoenixNAP simulator: `pnap-bmc-api`, `pnap-ip-api`,
//! `pnap-network-api` and `pnap-tag-api` from PyPI (pinned in crates/sim/clients/phoenixnap.txt,
//! generated from the OpenAPI specs PhoenixNAP publishes) call every endpoint the driver uses
//! (crates/sim/clients/phoenixnap_client.py) and decode every response into the published models,
//! raising on a mismatch. Needs `python3` with `venv`, and PyPI once (the venv is kept under
//! target/tools).

use wasm_ccm_sim::phoenixnap::{PhoenixnapOptions, PhoenixnapSim, SeedPublicNetwork, SeedServer};
use wasm_ccm_test_tools::pypi;

const NETWORK: &str = "60473c2509268bc77fd06d29";
const SERVER: &str = "5ff5cc9bc1acf144d9106233";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_decode_every_answer() {
    let sim = PhoenixnapSim::start(
        "127.0.0.1:0".parse().expect("literal address"),
        PhoenixnapOptions {
            // Characters RFC 6749 §2.3.1 form-encodes before base64.
            client_secret: "sim+secret/1:%".into(),
            ..PhoenixnapOptions::default()
        },
    )
    .await
    .expect("simulator starts");
    sim.add_server(
        SeedServer::new("worker-1")
            .with_id(SERVER)
            .public(&["198.51.100.130"])
            .private(&["10.0.0.11"]),
    );
    sim.add_server(SeedServer::new("worker-2").private(&["10.0.0.12"]));
    sim.add_public_network(SeedPublicNetwork::new("k8s").with_id(NETWORK).with_vlan(20));
    let args = [
        sim.url(),
        sim.client_id(),
        sim.client_secret(),
        NETWORK.to_string(),
        SERVER.to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        let venv = pypi::venv("pnap", "crates/sim/clients/phoenixnap.txt").unwrap_or_else(|e| {
            panic!(
                "cannot install the PhoenixNAP SDKs from PyPI (is PyPI reachable, and python3 with venv installed?): {e}"
            )
        });
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pypi::run_script(&venv, "crates/sim/clients/phoenixnap_client.py", &args)
    })
    .await
    .expect("the client task")
    .unwrap_or_else(|e| panic!("an SDK refused an answer of the simulator: {e}"));
    let lines: Vec<&str> = out.lines().collect();
    let expected = [
        "token ok",
        "servers listed 2",
        &format!("server {SERVER} worker-1 powered-on PHX raid=NO_RAID"),
        // The real API answers 403 for unknown or deleted servers (upstream commit d84a2c5).
        "gone server 403",
        "tag created usage billing=False",
        "tag created cluster billing=False",
        "tag created serviceNamespace billing=False",
        "tag created serviceName billing=False",
        "tag created delete billing=False",
        "duplicate tag 409",
        "tags listed 5",
        "tags named usage 1",
        "block created PHX /29 unassigned",
        "blocks by tags 1",
        "blocks by other tags 0",
        "block got unassigned tags=4",
        "block patched k8s",
        "network PHX 20",
        "assigned True",
        "block assigned to public network",
        "network blocks 1",
        "block retagged 3",
        "unassign answered str",
        "block unassigned",
        "block deleted True",
        "blocks left 0",
    ];
    assert_eq!(lines, expected, "output:\n{out}");
}
