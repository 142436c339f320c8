//! cloudscale's own client judges the cloudscale simulator: `cloudscale-cli` 1.5.0 from PyPI
//! (pinned in crates/sim/clients/cloudscale.txt, with its `cloudscale-sdk`) lists and changes
//! what it supports (servers, floating IPs, networks, subnets), and the SDK's generic resource
//! class drives the load balancer objects the CLI has no commands for
//! (crates/sim/clients/cloudscale_lb.py). The printed output is asserted, not just exit codes.
//!
//! The venv is built once under `target/tools/`; without PyPI the test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, SeedServer};

const SUBNET: &str = "11111111-2222-4333-8444-555555555555";
const SERVER: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
const SERVER_2: &str = "aaaaaaaa-bbbb-4ccc-8ddd-ffffffffffff";

/// The venv with `cloudscale-cli`, or a panic that names PyPI.
fn venv() -> PathBuf {
    wasm_ccm_test_tools::pypi::venv("cloudscale-cli", "crates/sim/clients/cloudscale.txt")
        .unwrap_or_else(|e| {
            panic!(
                "cannot install cloudscale-cli from PyPI (needs python3 with venv and PyPI \
                 reachable once; the venv is kept under target/tools/): {e}"
            )
        })
}

/// One client run against `sim`: environment cleared but for what the client needs, and a
/// config file name that exists nowhere, so no `cloudscale.ini` of the machine is read.
struct Client {
    venv: PathBuf,
    api_url: String,
    token: String,
}

impl Client {
    fn new(venv: PathBuf, sim: &CloudscaleSim) -> Self {
        Self {
            venv,
            // cloudscale-sdk's `CLOUDSCALE_API_URL` includes `/v1` (its default is
            // `https://api.cloudscale.ch/v1`).
            api_url: format!("{}/v1", sim.url()),
            token: sim.token(),
        }
    }

    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.venv.as_os_str())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONIOENCODING", "utf-8")
            .env("LC_ALL", "C.UTF-8")
            .env("NO_PROXY", "*")
            .env("CLOUDSCALE_CONFIG", "wasm-ccm-test-no-such-file.ini")
            .env("CLOUDSCALE_API_URL", &self.api_url)
            .env("CLOUDSCALE_API_TOKEN", &self.token)
            .current_dir(&self.venv);
        cmd
    }

    /// Runs `cloudscale ARGS` and returns its stdout; a failure panics with both streams.
    async fn cli(&self, args: &[&str]) -> String {
        let mut cmd = self.command(&self.venv.join("bin/cloudscale"));
        cmd.args(args);
        run(cmd, format!("cloudscale {}", args.join(" "))).await
    }

    /// `cloudscale -o json ARGS`, parsed.
    async fn cli_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["-o", "json"];
        all.extend_from_slice(args);
        let out = self.cli(&all).await;
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("cloudscale {all:?} printed no JSON ({e}):\n{out}"))
    }

    /// Runs the SDK script crates/sim/clients/cloudscale_lb.py with `args`.
    async fn sdk(&self, args: &[&str]) -> String {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/cloudscale_lb.py");
        let mut cmd = self.command(&self.venv.join("bin/python"));
        cmd.arg(&script)
            .arg(&self.api_url)
            .arg(&self.token)
            .args(args);
        run(cmd, format!("cloudscale_lb.py {}", args.join(" "))).await
    }
}

/// Runs `cmd` off the runtime's threads (the simulator serves on them) and returns stdout.
async fn run(mut cmd: Command, what: String) -> String {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("client task")
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The table row (whitespace-split cells) whose first cell is `first`.
fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{table}"))
}

async fn start() -> CloudscaleSim {
    let sim = CloudscaleSim::start(
        "127.0.0.1:0".parse().expect("literal address"),
        CloudscaleOptions::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("simulator did not start: {e:#}"));
    sim.add_server(
        SeedServer::new("node-1")
            .with_uuid(SERVER)
            .public(&["5.102.145.10", "2a06:c01::10"])
            .private(SUBNET, "10.0.0.0/24", &["10.0.0.10"]),
    );
    sim.add_server(
        SeedServer::new("node-2")
            .with_uuid(SERVER_2)
            .with_zone("lpg1")
            .with_flavor("plus-8-4")
            .with_status("stopped")
            .private(SUBNET, "10.0.0.0/24", &["10.0.0.11"]),
    );
    sim.add_floating_ip("5.102.150.123/32")
        .expect("seed floating IP");
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_servers_networks_and_subnets() {
    let venv = venv();
    let sim = start().await;
    let c = Client::new(venv, &sim);

    let table = c.cli(&["server", "list"]).await;
    assert!(
        table.lines().next().is_some_and(|h| h
            .split_whitespace()
            .eq(["NAME", "STATUS", "FLAVOR", "ZONE", "TAGS", "UUID"])),
        "{table}"
    );
    assert_eq!(
        row(&table, "node-1"),
        ["node-1", "running", "flex-4-2", "rma1", SERVER]
    );
    assert_eq!(
        row(&table, "node-2"),
        ["node-2", "stopped", "plus-8-4", "lpg1", SERVER_2]
    );

    // The verbose table derives public and private IPs from the interfaces.
    let verbose = c.cli(&["-v", "server", "list"]).await;
    let line = verbose
        .lines()
        .find(|l| l.starts_with("node-1"))
        .unwrap_or_else(|| panic!("{verbose}"));
    assert!(
        line.contains("5.102.145.10, 2a06:c01::10") && line.contains("10.0.0.10"),
        "{verbose}"
    );

    let shown = c.cli_json(&["server", "show", SERVER]).await;
    assert_eq!(shown["name"], "node-1");
    assert_eq!(shown["flavor"]["slug"], "flex-4-2");
    assert_eq!(shown["zone"]["slug"], "rma1");
    assert_eq!(
        shown["interfaces"][1]["addresses"][0]["address"],
        "10.0.0.10"
    );
    assert_eq!(
        shown["interfaces"][1]["addresses"][0]["subnet"]["uuid"],
        SUBNET
    );
    // By name too: the UUID lookup answers 404, so the CLI searches the list and prints the
    // matches as a list.
    let by_name = c.cli_json(&["server", "show", "node-2"]).await;
    assert_eq!(by_name[0]["uuid"], SERVER_2);
    assert_eq!(by_name.as_array().map(Vec::len), Some(1));

    let subnets = c.cli(&["subnet", "list"]).await;
    let cells = row(&subnets, SUBNET);
    assert_eq!(cells[1], "10.0.0.0/24", "{subnets}");

    // Only the private network is listed; its zone comes from the server on it.
    let networks = c.cli(&["network", "list"]).await;
    let network_uuid = shown["interfaces"][1]["network"]["uuid"]
        .as_str()
        .expect("network uuid")
        .to_string();
    let cells = row(&networks, &format!("private-{}", &network_uuid[..8]));
    assert_eq!(cells.len(), 4, "{networks}");
    assert_eq!((cells[2], cells[3]), ("rma1", network_uuid.as_str()));
    assert_eq!(networks.lines().count(), 3, "{networks}");
    let network = c.cli_json(&["network", "show", &network_uuid]).await;
    assert_eq!(network["subnets"][0]["uuid"], SUBNET);
    assert_eq!(network["subnets"][0]["cidr"], "10.0.0.0/24");
    assert_eq!(network["zone"]["slug"], "rma1");
}

/// `server list --filter-tag`: the CLI sends `?tag%3Akey=value`, or the bare `?tag:key` for
/// a key alone, and prints only the matching servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_filters_servers_by_tag() {
    let venv = venv();
    let sim = start().await;
    sim.add_server(SeedServer::new("apollo-1").with_tag("project", "apollo"));
    sim.add_server(
        SeedServer::new("gemini-1")
            .with_tag("project", "gemini")
            .with_tag("tier", "db"),
    );
    let c = Client::new(venv, &sim);
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap_or_else(|| panic!("not a list: {list}"))
            .iter()
            .map(|s| s["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };

    sim.clear_requests();
    let apollo = c
        .cli_json(&["server", "list", "--filter-tag", "project=apollo"])
        .await;
    assert_eq!(names(&apollo), ["apollo-1"]);
    assert_eq!(apollo[0]["tags"]["project"], "apollo");
    let sent: Vec<String> = sim.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(sent, ["/v1/servers?tag%3Aproject=apollo"]);

    sim.clear_requests();
    let with_key = c
        .cli_json(&["server", "list", "--filter-tag", "project"])
        .await;
    assert_eq!(names(&with_key), ["apollo-1", "gemini-1"]);
    let sent: Vec<String> = sim.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(sent, ["/v1/servers?tag:project"]);

    let table = c.cli(&["server", "list", "--filter-tag", "tier=db"]).await;
    assert_eq!(row(&table, "gemini-1")[0], "gemini-1");
    assert!(
        !table.contains("apollo-1") && !table.contains("node-1"),
        "{table}"
    );

    // No match: the CLI prints nothing at all for an empty list, after a 200.
    sim.clear_requests();
    let none = c
        .cli(&[
            "-o",
            "json",
            "server",
            "list",
            "--filter-tag",
            "project=mercury",
        ])
        .await;
    assert_eq!(none.trim(), "", "{none}");
    let answered: Vec<(String, u16)> = sim
        .requests()
        .into_iter()
        .map(|r| (r.path, r.status))
        .collect();
    assert_eq!(
        answered,
        [("/v1/servers?tag%3Aproject=mercury".to_string(), 200)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_creates_assigns_and_deletes_floating_ips() {
    let venv = venv();
    let sim = start().await;
    let c = Client::new(venv, &sim);

    let table = c.cli(&["floating-ip", "list"]).await;
    assert_eq!(
        row(&table, "5.102.150.123/32"),
        ["5.102.150.123/32", "4", "regional", "rma"]
    );

    let created = c
        .cli_json(&[
            "floating-ip",
            "create",
            "--ip-version",
            "4",
            "--region",
            "lpg",
        ])
        .await;
    assert_eq!(created["network"], "5.102.151.1/32");
    assert_eq!(created["region"]["slug"], "lpg");
    let v6 = c
        .cli_json(&[
            "floating-ip",
            "create",
            "--ip-version",
            "6",
            "--prefix-length",
            "56",
            "--type",
            "global",
            "--server",
            SERVER,
        ])
        .await;
    assert_eq!(v6["network"], "2a06:c01:f1:100::/56");
    assert_eq!(v6["type"], "global");
    assert_eq!(v6["server"]["uuid"], SERVER);

    // `assign` PATCHes the server, then the CLI shows the floating IP again.
    let assigned = c
        .cli(&["floating-ip", "assign", "5.102.151.1", "--server", SERVER])
        .await;
    assert_eq!(
        row(&assigned, "5.102.151.1/32"),
        ["5.102.151.1/32", "4", "node-1", "regional", "lpg"]
    );
    let updated = c
        .cli_json(&[
            "floating-ip",
            "update",
            "5.102.151.1",
            "--reverse-ptr",
            "www.example.org",
            "--tag",
            "team=web",
        ])
        .await;
    assert_eq!(updated["reverse_ptr"], "www.example.org");
    assert_eq!(updated["tags"]["team"], "web");
    assert_eq!(updated["next_hop"], "5.102.145.10");

    let deleted = c
        .cli(&["floating-ip", "delete", "5.102.151.1", "--force"])
        .await;
    assert!(deleted.contains("5.102.151.1 deleted!"), "{deleted}");
    let after = c.cli_json(&["floating-ip", "list"]).await;
    let networks: Vec<&str> = after
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|f| f["network"].as_str())
        .collect();
    assert_eq!(networks, ["5.102.150.123/32", "2a06:c01:f1:100::/56"]);
    assert_eq!(sim.floating_ips().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_builds_lists_and_tears_down_a_load_balancer() {
    let venv = venv();
    let sim = start().await;
    let c = Client::new(venv, &sim);

    let built = c.sdk(&["build", SUBNET, "10.0.0.10"]).await;
    let kinds: Vec<&str> = built
        .lines()
        .filter_map(|l| l.strip_prefix("created "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        kinds,
        ["lb", "pool", "member", "listener", "monitor"],
        "{built}"
    );
    assert!(
        built.contains("updated pool tags={'role': 'web'}"),
        "{built}"
    );
    let lb_uuid = sim.load_balancers()[0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_string();
    assert!(built.contains(&format!("created lb {lb_uuid}")), "{built}");

    c.sdk(&["assign-fip", "5.102.150.123", &lb_uuid]).await;
    let listed = c.sdk(&["list"]).await;
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(
        lines,
        [
            "lb cli-lb running lb-standard rma1 10.0.0.1",
            "pool tcp lb=cli-lb round_robin tcp",
            "member 10.0.0.10:30080 pool=tcp 10.0.0.10 port=30080 monitor=30080 enabled=True \
             status=up",
            "listener tcp/80 pool=tcp tcp port=80 cidrs=-",
            "monitor pool=tcp http delay=2 path=/livez host=-",
            "fip 5.102.150.123/32 lb=cli-lb",
        ],
        "{listed}"
    );
    // The CLI sees the load balancer's floating IP too (its table has no LB column).
    let fip = c.cli_json(&["floating-ip", "show", "5.102.150.123"]).await;
    assert_eq!(fip["load_balancer"]["name"], "cli-lb");
    assert_eq!(fip["next_hop"], "10.0.0.1");

    let down = c.sdk(&["teardown", "cli-lb"]).await;
    let done: Vec<&str> = down
        .lines()
        .filter_map(|l| l.strip_prefix("deleted "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        done,
        ["monitor", "listener", "member", "pool", "lb"],
        "{down}"
    );
    assert_eq!(c.sdk(&["list"]).await, "fip 5.102.150.123/32 lb=-\n");
    assert!(sim.load_balancers().is_empty() && sim.pools().is_empty());
}
