//! `wasm-ccm-dev scale --hybrid one|two`: two drivers over one cluster, in one process
//! (`run --drivers-config` with both) or in two (one DriverSet of one driver each, as two
//! single-cloud CCMs would run). The even nodes (labelled `example.com/site: static`) are the
//! static driver's inventory and the even Services carry its class; the odd ones are
//! cloudscale's (an in-process simulator; its driver serves class-less Services only). The
//! figure is the time until every node is initialised and every Service has its ingress, and
//! the peak RSS of the `run` process(es).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::Context as _;
use serde_json::{Value, json};
use wasm_ccm_sim::kit::SimNode;

use super::{
    Layout, ScaleArgs, cloud_config, common_run_flags, free_port, node_name, proc_mib, seed,
    start_sim, wait_converged,
};
use crate::children::Watched;

/// The static driver's class.
const STATIC_CLASS: &str = "example.com/static";

/// The seed with every even node labelled for the static driver and every even Service of its
/// class.
fn hybrid_seed(nodes: usize, services: usize, node_ports: bool) -> Value {
    let mut seed = seed(nodes, services, node_ports);
    if let Some(items) = seed["items"].as_array_mut() {
        for item in items.iter_mut() {
            let name = item["metadata"]["name"].as_str().unwrap_or_default();
            let index: usize = name
                .rsplit('-')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            if index % 2 == 1 {
                continue;
            }
            if item["kind"] == "Node" {
                item["metadata"]["labels"] = json!({"example.com/site": "static"});
            } else {
                item["spec"]["loadBalancerClass"] = json!(STATIC_CLASS);
            }
        }
    }
    seed
}

/// One driver entry of a DriverSet.
fn entry(name: &str, source: &Path, roles: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    source: {}\n{extra}{roles}",
        source.display()
    )
}

fn document(entries: &[String]) -> String {
    format!(
        "apiVersion: wasm-ccm.io/v1alpha1\nkind: DriverSet\ndrivers:\n{}",
        entries.join("")
    )
}

/// Runs the measurement of `layout`.
pub(crate) async fn measure(
    args: &ScaleArgs,
    layout: Layout,
    ccm: &Path,
    dir: &Path,
) -> anyhow::Result<Value> {
    let seed_path = dir.join("seed.json");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &seed_path,
        hybrid_seed(args.nodes, args.services, args.node_ports).to_string(),
    )?;
    // The static inventory holds every node: a node is the static driver's only by label, and
    // an inventory lookup of a cloudscale node is never made.
    let static_config = dir.join("static.json");
    std::fs::write(&static_config, cloud_config(args.nodes).to_string())?;
    let static_wasm = dir.join("static_driver.wasm");
    std::fs::write(
        &static_wasm,
        wasm_ccm_drivers::shipped("static").context("this build embeds no static driver")?,
    )?;
    let cloudscale_wasm = dir.join("cloudscale_driver.wasm");
    std::fs::write(
        &cloudscale_wasm,
        wasm_ccm_drivers::shipped("cloudscale")
            .context("this build embeds no cloudscale driver")?,
    )?;
    let cloudscale = wasm_ccm_sim::kit::start("cloudscale", Default::default()).await?;
    for i in (1..args.nodes).step_by(2) {
        cloudscale
            .add_instance(
                i,
                &SimNode {
                    name: node_name(i),
                    ..SimNode::numbered(i)
                },
            )
            .map_err(anyhow::Error::msg)?;
    }
    let setup = cloudscale.driver_setup();
    let static_entry = entry(
        "static",
        &static_wasm,
        &format!(
            "    nodes:\n      selector: {{matchLabels: {{example.com/site: static}}}}\n    loadBalancer: {{classes: [\"{STATIC_CLASS}\"]}}\n"
        ),
        &format!(
            "    providerIDScheme: static\n    cloudConfig: {}\n",
            static_config.display()
        ),
    );
    let cloudscale_entry = entry(
        "cloudscale",
        &cloudscale_wasm,
        "    nodes: {default: true}\n    loadBalancer: {default: true}\n",
        &format!(
            "    providerIDScheme: cloudscale\n    allowEgress: [{:?}]\n",
            setup.egress.first().cloned().unwrap_or_default()
        ),
    );
    let sets = match layout {
        Layout::One => vec![document(&[static_entry, cloudscale_entry])],
        Layout::Two => vec![document(&[static_entry]), document(&[cloudscale_entry])],
    };

    let (sim, http, api) = start_sim(args, dir, &seed_path, &kubeconfig).await?;
    let started = Instant::now();
    let mut children = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let file = dir.join(format!("drivers-{i}.yaml"));
        std::fs::write(&file, set)?;
        let mut command = Command::new(ccm);
        command
            .arg("run")
            .arg(format!("--drivers-config={}", file.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--leader-elect=false",
                "--configure-cloud-routes=false",
                "--bind-address=127.0.0.1",
            ])
            .args(common_run_flags(args))
            .arg(format!("--secure-port={}", free_port()?))
            .envs(setup.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("WASM_CCM_LOG", "warn");
        children.push(Watched::spawn(
            command,
            &format!("`{} run` #{i}", ccm.display()),
            &dir.join(format!("run-{i}.log")),
        )?);
    }
    let mut watched: Vec<&mut Watched> = children.iter_mut().collect();
    let converged_after = wait_converged(&http, &api, args, started, &mut watched).await?;
    let peaks: Vec<u64> = children
        .iter()
        .filter_map(|c| proc_mib(c.id(), "VmHWM"))
        .collect();
    let report = json!({
        "nodes": args.nodes,
        "services": args.services,
        "layout": format!("{layout:?}").to_lowercase(),
        "processes": children.len(),
        "converge_s": (converged_after.as_secs_f64() * 100.0).round() / 100.0,
        "run_peak_rss_mib_each": peaks,
        "run_peak_rss_mib_total": peaks.iter().sum::<u64>(),
        "cloudscale_load_balancers": cloudscale.load_balancers(),
    });
    drop(children);
    drop(sim);
    cloudscale.shutdown().await;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_nodes_and_services_are_the_static_drivers() {
        let seed = hybrid_seed(4, 2, true);
        let items = seed["items"].as_array().expect("items");
        let labelled: Vec<&str> = items
            .iter()
            .filter(|i| i["metadata"]["labels"]["example.com/site"] == "static")
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(labelled, ["node-00000", "node-00002"]);
        let classed: Vec<&str> = items
            .iter()
            .filter(|i| i["spec"]["loadBalancerClass"] == STATIC_CLASS)
            .filter_map(|i| i["metadata"]["name"].as_str())
            .collect();
        assert_eq!(classed, ["svc-00000"]);
    }
}
