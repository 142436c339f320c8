//! No file-level import circle in a product crate (issue 48): the module graph of every crate
//! root below, from its `use crate::…`/`super::…`/`self::…` and child-module paths (the rules
//! are in `wasm_ccm_test_tools::import_graph`), has no strongly connected component of more
//! than one file, except the circles listed in [`ALLOWED`], which only shrink.

use std::path::{Path, PathBuf};

use wasm_ccm_test_tools::import_graph::{Circle, circles, graph};

/// The product crates (the list: runtime, oci, controllers, sim and the product, plus
/// the developer binary), by directory from the workspace root. Every `src/lib.rs`,
/// `src/main.rs` and `src/bin/*.rs` in them is a crate root of its own.
const CRATES: &[&str] = &[
    "crates/runtime",
    "crates/controllers",
    "crates/manager",
    "crates/oci",
    "crates/sim",
    "bins/wasm-ccm",
    "bins/wasm-ccm-dev",
];

/// Circles allowed to stay. The check landed (2026-11-28, main = c797d9d) with the circles it
/// found listed here, and issue 48 opened them all, so the list is empty: a circle found now
/// fails. Add an entry only for a circle that cannot be opened yet, with the reason in a
/// comment, and shrink it as it opens (an entry that matches nothing is reported as stale).
#[rustfmt::skip]
const ALLOWED: &[(&str, &[&str])] = &[
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crate roots of `crate_dir`.
fn roots(crate_dir: &Path) -> Vec<PathBuf> {
    let src = crate_dir.join("src");
    let mut out: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = bins
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        bins.sort();
        out.extend(bins);
    }
    out
}

/// Every circle of every product crate root: (`crate/src/root.rs`, circle).
fn found() -> Vec<(String, Circle)> {
    let ws = workspace();
    let mut out = Vec::new();
    for krate in CRATES {
        let dir = ws.join(krate);
        let roots = roots(&dir);
        assert!(
            !roots.is_empty(),
            "{krate} has no src/lib.rs or src/main.rs: a product crate moved? Update CRATES in {}",
            file!()
        );
        for root in roots {
            let label = format!(
                "{krate}/{}",
                root.strip_prefix(&dir).unwrap_or(&root).display()
            );
            let g = graph(&dir, &root).unwrap_or_else(|e| panic!("{label}: {e}"));
            for c in circles(&g) {
                out.push((label.clone(), c));
            }
        }
    }
    out
}

#[test]
fn product_crates_have_no_new_import_circle() {
    let found = found();
    let mut report = String::new();
    for (root, circle) in &found {
        let files: Vec<String> = circle
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        let allowed = ALLOWED.iter().any(|(r, entry)| {
            *r == root.as_str() && files.iter().all(|f| entry.contains(&f.as_str()))
        });
        if allowed {
            eprintln!("{root}: allowed (ALLOWED in {}): {circle}", file!());
        } else {
            report.push_str(&format!("{root}: {circle}"));
        }
    }
    assert!(
        report.is_empty(),
        "import circles in product crates (a file names, through the edges below, a file that \
         names it back). Open each: move what both sides need into a file of its own that names \
         neither (a leaf), or pass it in from the caller. The rules of the graph are in \
         tests/tools/src/import_graph.rs.\n{report}"
    );
    // An entry that matches nothing any more is stale: said here (not a failure, so whoever opens
    // a circle is not stopped by this file), to be removed so the circle cannot come back.
    for (root, entry) in ALLOWED {
        let still = found.iter().any(|(r, c)| {
            r == root
                && c.files
                    .iter()
                    .any(|f| entry.contains(&f.display().to_string().as_str()))
        });
        if !still {
            eprintln!(
                "ALLOWED in {} lists a circle in {root} that is gone ({entry:?}): remove the entry",
                file!()
            );
        }
    }
}
