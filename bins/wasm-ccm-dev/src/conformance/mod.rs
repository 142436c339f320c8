//! `wasm-ccm-dev conformance`: checks that a driver keeps the contract of `wit/README.md` before an
//! operator trusts it with a cluster.
//!
//! It uses the same host runtime as the controllers. Static checks look at the component
//! without running it; behavioural checks call it against a cloud (a simulator, a real endpoint
//! or a cassette) with the nodes and services of a scenario file; robustness checks answer its
//! requests with faults in the host's HTTP layer. Every check has a stable id versioned with the
//! WIT, e.g. `provider/0.2/load-balancer/ensure-idempotent`; the exit status is 1 when any check
//! failed.

mod cloud;
mod differences;
mod faults;
mod harness;
mod instances;
mod level;
mod listing;
mod load_balancer;
mod locate;
mod report;
mod robustness;
mod routes;
mod scenario;
mod static_checks;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::ValueEnum;
use wasm_ccm_runtime::http::HttpInterceptor;
use wasm_ccm_runtime::types::Context;
use wasm_ccm_runtime::{DriverOptions, InitInput, PoolOptions};

use crate::cassette::Recorder;
use cloud::{CloudChoice, CloudUnderTest};
use differences::Differences;
use harness::Harness;
use level::Level;
use report::{Checks, Crash, Report, Summary};
use robustness::Target;
use scenario::{Scenario, substitute};
use wasm_ccm::GlobalArgs;
use wasm_ccm::units::parse_duration;

/// Report formats.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
    Junit,
}

/// Arguments of `wasm-ccm-dev conformance`.
#[derive(clap::Args, Debug)]
pub(crate) struct ConformanceArgs {
    /// The driver's `.wasm` file.
    driver: PathBuf,
    /// The scenario: the cloud's inventory, the driver's configuration, the nodes and services
    /// to exercise (see sdk/README.md, "Conformance scenarios"). Default: the nearest
    /// `conformance.yaml` in the current directory or one above it (a project made by
    /// `wasm-ccm-dev new` has one at its root).
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// The cloud: `sim:<name>` (a simulator started here, seeded from the scenario), an
    /// `http(s)://` URL (a real endpoint; `${CLOUD_TOKEN}` comes from WASM_CCM_CLOUD_TOKEN), or
    /// `cassette:FILE` (a recording replayed without the network). Default: the scenario's
    /// simulator.
    #[arg(long)]
    cloud: Option<String>,
    /// `core` (provider, instances) or `full` (and load-balancer). Default: the scenario's
    /// level, else full.
    #[arg(long, value_enum)]
    level: Option<Level>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    report: Format,
    /// Write the report here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Record every request that reached the cloud, and its answer, to this cassette.
    #[arg(long, value_name = "FILE")]
    record_http: Option<PathBuf>,
    /// Deadline of each call.
    #[arg(long = "call-timeout", default_value = "30s", value_parser = parse_duration)]
    call_timeout: std::time::Duration,
    /// The longest a cold compile of the driver may take: wall time on this machine, since the
    /// host compiles at start and on every reload.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    max_compile_time: std::time::Duration,
}

/// Runs `wasm-ccm-dev conformance`.
pub(crate) async fn run(global: &GlobalArgs, args: ConformanceArgs) -> anyhow::Result<ExitCode> {
    let scenario_path = match &args.scenario {
        Some(path) => path.clone(),
        None => locate::project_scenario(&std::env::current_dir().context(
            "cannot read the current directory to look for conformance.yaml; pass --scenario FILE",
        )?)?,
    };
    let scenario = Scenario::load(&scenario_path)?;
    let level = match (args.level, scenario.level.as_deref()) {
        (Some(l), _) => l,
        (None, Some("core")) => Level::Core,
        _ => Level::Full,
    };
    let choice =
        match &args.cloud {
            Some(c) => CloudChoice::parse(c)?,
            None => CloudChoice::Sim(scenario.cloud.sim.clone().context(
                "the scenario names no simulator (cloud.sim); choose a cloud with --cloud",
            )?),
        };
    let bytes = std::fs::read(&args.driver)
        .with_context(|| format!("cannot read the driver {}", args.driver.display()))?;
    let origin = args.driver.display().to_string();
    let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let size = bytes.len();

    // One runtime for everything (a component only runs on the engine that compiled it),
    // without the cache so the compile time is the real one; with backtrace details, so that a
    // crash of a driver built with debug info shows file:line.
    let runtime = crate::call::dev_runtime(&GlobalArgs {
        no_cache: true,
        ..global.clone()
    })?;
    // Until the component is read, ids carry the newest version this host supports.
    let newest = wasm_ccm_runtime::SUPPORTED_VERSIONS
        .last()
        .copied()
        .unwrap_or_default();
    let mut checks = Checks::new(newest);
    let compiled = static_checks::run(
        &runtime,
        &origin,
        bytes,
        level,
        args.max_compile_time,
        &mut checks,
    )
    .await;
    let wit_version = compiled
        .as_ref()
        .map(|c| c.surface.wit_version.clone())
        .unwrap_or_default();
    if let Some(compiled) = &compiled {
        checks = rebase(checks, &compiled.surface.wit_version);
    }
    let mut measurements = Vec::new();
    let mut crashes = Vec::new();
    let mut cloud_label = String::new();
    if let Some(compiled) = compiled {
        let cloud = CloudUnderTest::start(&choice, &scenario).await?;
        cloud_label = cloud.label.clone();
        let recorder = args
            .record_http
            .as_ref()
            .map(|_| Arc::new(Recorder::default()));
        let transport: Option<Arc<dyn HttpInterceptor>> = match (&recorder, &cloud.replayer) {
            (Some(r), _) => Some(r.clone()),
            (None, Some(r)) => Some(r.clone()),
            (None, None) => None,
        };
        let opts = driver_options(&scenario, &cloud, args.call_timeout)?;
        match Harness::load(&runtime, &compiled, opts, transport, cloud.real).await {
            Err(e) => {
                crashes.extend(Crash::of("provider.init", &e));
                checks.check("provider/init", None, Err(e.to_string()))
            }
            Ok(mut h) => {
                checks.check(
                    "provider/init",
                    None,
                    Ok("init accepts the scenario's configuration".into()),
                );
                behave(&mut h, &scenario, level, &mut checks).await;
                credentials(&h, &mut checks);
                environment(&h, &mut checks);
                measurements = h.meter.measurements();
                crashes = std::mem::take(&mut h.crashes);
            }
        }
        if let Some(replayer) = &cloud.replayer {
            let misses = replayer.misses();
            checks.check(
                "replay/cassette-complete",
                None,
                if misses.is_empty() {
                    Ok("every request was in the cassette".into())
                } else {
                    Err(format!(
                        "requests the cassette does not hold (record it again): {}",
                        misses
                            .iter()
                            .map(|(r, n)| format!("{r} ×{n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                },
            );
        }
        if let (Some(recorder), Some(path)) = (&recorder, &args.record_http) {
            let n = recorder.save(path, Some(cloud.url.clone()))?;
            eprintln!("wasm-ccm: recorded {n} requests to {}", path.display());
        }
        cloud.stop().await;
    }
    let failed = checks.failed();
    let report = Report {
        driver: origin,
        sha256,
        size_bytes: size,
        wit_version,
        level: level.name().into(),
        cloud: cloud_label,
        results: checks.results,
        measurements,
        crashes,
        summary: Summary::default(),
    }
    .summarise();
    let rendered = match args.report {
        Format::Text => report.text(),
        Format::Json => report.json(),
        Format::Junit => report.junit(),
    };
    match &args.out {
        Some(path) => std::fs::write(path, rendered)
            .with_context(|| format!("cannot write the report to {}", path.display()))?,
        None => print!("{rendered}"),
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Issue 31: a driver declares its credentials so that the host holds them, and never puts a
/// placeholder where its declaration does not allow (the host refused no request for it during
/// the whole run: the driver never needed a credential in clear or elsewhere).
fn credentials(h: &Harness, checks: &mut Checks) {
    let declared: Vec<String> = h
        .warm
        .info()
        .secrets
        .iter()
        .map(|s| s.name.clone())
        .collect();
    if declared.is_empty() {
        checks.skip(
            "provider/credentials",
            None,
            "the driver declares no secrets, so it receives its credentials in clear; declare them in provider-info.secrets (wit/README.md) so that the host holds them",
        );
        return;
    }
    let misuse: Vec<String> = [&h.warm, &h.fresh, &h.faulty]
        .iter()
        .flat_map(|d| d.secret_misuse())
        .map(|((secret, reason), n)| format!("{secret} ({reason}) ×{n}"))
        .collect();
    checks.check(
        "provider/credentials",
        None,
        if misuse.is_empty() {
            Ok(format!(
                "the host held {} and applied them; the driver never placed one where its declaration does not allow",
                declared.join(", ")
            ))
        } else {
            Err(format!(
                "the host refused requests carrying a credential where its declaration does not allow: {}",
                misuse.join(", ")
            ))
        },
    );
}

/// Contract 0.2.1: a driver that names the plain environment variables it reads gets an
/// allow-list of the environment in `init`; one that does not gets every prefixed variable.
fn environment(h: &Harness, checks: &mut Checks) {
    match h.warm.plain_env() {
        Some(names) => checks.check(
            "provider/environment",
            None,
            Ok(format!(
                "init got an allow-list: {} and the declared secrets' places",
                if names.is_empty() {
                    "no plain variable".to_string()
                } else {
                    names.join(", ")
                }
            )),
        ),
        None => checks.skip(
            "provider/environment",
            None,
            "the driver does not name the plain environment variables it reads, so init gets every variable with one of its env-prefixes; name them (environment.plain-variables, contract 0.2.1) so that nothing else under the prefix reaches it",
        ),
    }
}

/// Results so far, with ids under the driver's WIT version instead of the default.
fn rebase(old: Checks, wit_version: &str) -> Checks {
    let mut checks = Checks::new(wit_version);
    for r in old.results {
        let id = r.id.splitn(3, '/').nth(2).unwrap_or(&r.id).to_string();
        checks.record(&id, r.subject.as_deref(), r.status, r.message);
    }
    checks
}

/// The driver's configuration with the cloud's address and credential filled in.
fn driver_options(
    scenario: &Scenario,
    cloud: &CloudUnderTest,
    call_timeout: std::time::Duration,
) -> anyhow::Result<DriverOptions> {
    let d = &scenario.driver;
    let token = cloud.token.as_deref();
    let fill = |s: &str| substitute(s, &cloud.url, token);
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    for (k, v) in &d.env {
        if let Some(v) = fill(v) {
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), v));
        }
    }
    let egress = match &d.egress {
        None => None,
        Some(list) => {
            let filled: Vec<String> = list.iter().filter_map(|p| fill(p)).collect();
            Some(
                wasm_ccm_runtime::EgressPolicy::parse(&filled)
                    .map_err(|e| anyhow::anyhow!("the scenario's driver.egress: {e}"))?,
            )
        }
    };
    Ok(DriverOptions {
        init: InitInput {
            context: Context {
                cluster_name: d
                    .cluster_name
                    .clone()
                    .unwrap_or_else(|| "conformance".into()),
                cluster_id: "00000000-0000-4000-8000-00000000c0f0".into(),
                // A scenario that names no version gets the newest supported one, as a current
                // cluster would report it.
                kubernetes_version: d.kubernetes_version.clone().unwrap_or_else(|| {
                    wasm_ccm_manager::kubernetes_version::NEWEST_GIT_VERSION.into()
                }),
            },
            config: fill(&d.config).unwrap_or_default().into_bytes(),
            env,
        },
        pool: PoolOptions {
            call_timeout,
            ..Default::default()
        },
        http: wasm_ccm_runtime::http::Config {
            egress,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The behavioural and robustness checks, in the order the controllers would call.
async fn behave(h: &mut Harness, scenario: &Scenario, level: Level, checks: &mut Checks) {
    let info = h.warm.info().clone();
    instances::check_info(&info, checks);
    instances::check_housekeeping(h, checks).await;
    let exports = h.warm.compiled().surface.exports;
    let mut diffs = Differences::default();
    if exports.instances {
        instances::check_nodes(h, scenario, &info, checks, &mut diffs).await;
        listing::check(h, scenario, checks).await;
    }
    let mut created = Vec::new();
    if level == Level::Full && exports.load_balancer {
        for s in &scenario.services {
            if let Some(case) = &s.expect_error {
                load_balancer::check_refused(h, s, case, scenario, checks).await;
            } else if let Some(c) =
                load_balancer::check_service(h, s, scenario, checks, &mut diffs).await
            {
                created.push(c);
            }
        }
    }
    let check_routes = level == Level::Full && exports.routes;
    if check_routes {
        routes::check(h, scenario, checks, &mut diffs).await;
    }
    // Robustness runs while the load balancers exist, so ensure takes its steady-state path.
    if let Some(known) = scenario.nodes.iter().find(|n| n.expect.exists)
        && exports.instances
    {
        robustness::check(h, &Target::Metadata(known.node.clone()), checks).await;
        robustness::check(h, &Target::Exists(known.node.clone()), checks).await;
    }
    if let Some(c) = created.first() {
        robustness::check(
            h,
            &Target::Ensure(c.service.clone(), c.nodes.clone()),
            checks,
        )
        .await;
        robustness::check(h, &Target::Delete(c.service.clone()), checks).await;
    }
    if check_routes {
        robustness::check(h, &Target::RoutesList, checks).await;
    }
    for c in &created {
        load_balancer::check_delete(h, c, checks).await;
    }
    diffs.report(checks);
    checks.check(
        "egress/declared",
        None,
        if h.denied.is_empty() {
            Ok("every request stayed within the granted egress".into())
        } else {
            Err(format!(
                "requests outside the granted egress (the host refused them): {}",
                h.denied.iter().cloned().collect::<Vec<_>>().join(", ")
            ))
        },
    );
}
