//! CloudStack's own Python client judges the simulator: `cs` from PyPI (pinned in
//! crates/sim/clients/cloudstack.txt, installed once into a venv under target/tools) runs
//! crates/sim/clients/cloudstack_client.py against a simulator on loopback. The script signs,
//! pages and waits on jobs as `cs` does, and prints what it saw; the lines are compared here.
//! Needs `python3` with `venv`, and PyPI the first time (CI has it).

use wasm_ccm_sim::cloudstack::{CloudstackSim, Seed};
use wasm_ccm_test_tools::pypi;

/// `k8s-net` of the example seed: an isolated network with the Firewall service.
const K8S_NET: &str = "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e11";
const REQUIREMENTS: &str = "crates/sim/clients/cloudstack.txt";
const SCRIPT: &str = "crates/sim/clients/cloudstack_client.py";

#[tokio::test]
async fn the_cs_client_lists_creates_and_deletes_through_the_simulator() {
    let venv = tokio::task::spawn_blocking(|| pypi::venv("cs", REQUIREMENTS))
        .await
        .expect("venv task")
        .unwrap_or_else(|e| {
            panic!(
                "cannot install CloudStack's client `cs` from PyPI ({REQUIREMENTS}); this test needs \
                 python3 with venv and PyPI reachable once: {e}"
            )
        });
    let sim = CloudstackSim::start().await.expect("simulator");
    sim.seed(Seed::example()).expect("example seed");
    let args = [
        sim.url(),
        sim.api_key(),
        sim.secret_key(),
        K8S_NET.to_string(),
    ];
    // The script blocks; the simulator keeps serving on this runtime meanwhile.
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pypi::run_script(&venv, SCRIPT, &args)
    })
    .await
    .expect("script task")
    .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = out.lines().collect();

    // The address associated is the pool's first free one; the rest follows from it.
    let associated = lines
        .iter()
        .find_map(|l| l.strip_prefix("associated "))
        .unwrap_or_else(|| panic!("no associated line in:\n{out}"));
    let ip = associated
        .split(' ')
        .next()
        .expect("an address")
        .to_string();
    assert!(ip.starts_with("203.0.113."), "{out}");
    let expected: Vec<String> = [
        "vm k8s-node-1 Running 10.1.1.11",
        "vm k8s-node-2 Running 10.1.1.12",
        "vm k8s-node-3 Running 10.1.1.13",
        "vm k8s-vpc-node-1 Running 10.1.2.11",
        "associated {ip} Allocated",
        "ip 203.0.113.5 Allocated sourcenat=True",
        "ip 203.0.113.6 Allocated sourcenat=True",
        "ip {ip} Allocated sourcenat=False",
        "tagged {ip} wasm-ccm/load-balancer=a0123",
        "tag job failed 431 Invalid resource type PublicIp",
        "firewall created tcp 80 Active",
        "fw tcp 80-80 10.0.0.0/8,192.168.0.0/16 Active",
        "lb created web-tcp-80 {ip}:80 30080 tcp Active cidrlist=''",
        "lb web-tcp-80 80 Active",
        // The real client sees CloudStack's 537 for UDP on a port an LB rule already has.
        "conflict 537 537 The range specified, 80-80",
        // A failed job as CloudStack answers it: `cs` raises "Job failure" with the jobresult.
        "job failed Job failure ['errorcode', 'errortext'] 530",
        "lb deleted success=True",
        "lb left 0",
        // Released: CloudStack drops the address's tags.
        "tags left 0",
        "ips left 203.0.113.5,203.0.113.6",
    ]
    .iter()
    .map(|l| l.replace("{ip}", &ip))
    .collect();
    assert_eq!(lines, expected, "the script printed:\n{out}");

    // The client's requests as the simulator saw them: `cs` pages lists with `page`/`pagesize`,
    // signs with signatureVersion 3 and a `+0000` expiry, and polls jobs.
    let log = sim.requests();
    assert!(
        log.iter()
            .all(|r| r.status == 200 || r.status == 537 || r.command.is_empty())
    );
    let vms = log
        .iter()
        .find(|r| r.command == "listVirtualMachines")
        .expect("listVirtualMachines");
    assert_eq!(vms.params.get("page").map(String::as_str), Some("1"));
    assert!(
        vms.params
            .get("expires")
            .is_some_and(|e| e.ends_with("+0000")),
        "{vms:?}"
    );
    assert!(log.iter().any(|r| r.command == "queryAsyncJobResult"));
}
