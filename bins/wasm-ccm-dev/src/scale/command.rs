//! `wasm-ccm-dev scale`'s entry: runs one measurement (one process, or the hybrid layouts of
//! `hybrid.rs`) in a work directory and prints its report. Apart from the measurements so that
//! `scale/mod.rs`, whose helpers `hybrid.rs` uses, names neither.

use std::process::ExitCode;

use anyhow::Context as _;
use wasm_ccm::GlobalArgs;

use super::{ScaleArgs, hybrid};

/// Runs the measurement.
pub(crate) async fn run(_global: &GlobalArgs, args: ScaleArgs) -> anyhow::Result<ExitCode> {
    let ccm = crate::soak::product_binary(args.ccm_binary.as_deref())?;
    let dir = std::env::temp_dir().join(format!(
        "wasm-ccm-scale-{}-{}",
        std::process::id(),
        args.nodes
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let result = match args.hybrid {
        Some(layout) => hybrid::measure(&args, layout, &ccm, &dir).await,
        None => super::measure(&args, &ccm, &dir).await,
    };
    if args.keep || result.is_err() {
        eprintln!("wasm-ccm-dev: the work directory is {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result?;
    if args.json {
        println!("{report}");
    } else {
        super::print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}
