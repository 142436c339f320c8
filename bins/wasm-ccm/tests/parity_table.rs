//! `docs/PARITY.md` against the binary: the "ours" column of its Flags tables must name exactly
//! the long flags (and aliases) `wasm-ccm run` accepts, hidden ones included, and the "ours"
//! column of its Metrics tables exactly the metric families the controllers register. A flag or
//! metric added without a row, or a row naming one that is gone, fails here, so the parity table
//! cannot drift from the code (issue 51, item 1). And every row marked `same`, in any section,
//! must name a covering test as ``test: `<path>` `<function>` ``, a file that exists and defines
//! that function (issue 51: every `same` row is covered by a ported upstream case or an e2e
//! test).
//!
//! The flags come from clap's `Command`, built as `main.rs` builds `wasm-ccm run` (the shared
//! global options, `RunArgs`, a propagated `--version`). The metric names are read from the
//! `FAMILIES` table in `crates/controllers/src/metrics.rs`, the registry's only list (it is
//! crate-private, so its source is read, as that file's own `names_in_sources` test reads
//! sources); a name missing from `FAMILIES` is dropped by the registry, so this is the set a
//! scrape can show.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::{Args, Command};
use wasm_ccm::GlobalArgs;
use wasm_ccm::run::RunArgs;

/// The workspace root (this crate is `bins/wasm-ccm`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = workspace_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e} (this test reads it from the source tree)",
            path.display()
        )
    })
}

/// `wasm-ccm run` as `main.rs` assembles it: `GlobalArgs` on the top-level command (global, so
/// propagated into `run`), `RunArgs` as `run`'s arguments, a version propagated so `run` has
/// `--version` too. `build` adds clap's `--help`/`--version` and the propagated globals.
fn run_command() -> Command {
    let top = Command::new("wasm-ccm")
        .version("0")
        .propagate_version(true);
    let mut top =
        GlobalArgs::augment_args(top).subcommand(RunArgs::augment_args(Command::new("run")));
    top.build();
    top.find_subcommand("run")
        .expect("the `run` subcommand added above")
        .clone()
}

/// Every long flag and long alias of `wasm-ccm run`, as `--name`.
fn binary_flags() -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for arg in run_command().get_arguments() {
        if let Some(long) = arg.get_long() {
            flags.insert(format!("--{long}"));
        }
        for alias in arg.get_all_aliases().unwrap_or_default() {
            flags.insert(format!("--{alias}"));
        }
    }
    flags
}

/// The metric families of `FAMILIES` in `metrics.rs`: the first string literal of each
/// `("name", Kind::…, "help")` entry.
fn registered_metrics() -> BTreeSet<String> {
    let text = read("crates/controllers/src/metrics.rs");
    let Some(start) = text.find("const FAMILIES") else {
        panic!(
            "crates/controllers/src/metrics.rs has no `const FAMILIES` any more: point registered_metrics() in this test at the registry's list of names"
        );
    };
    let body = &text[start..];
    let Some(end) = body.find("\n];") else {
        panic!(
            "`const FAMILIES` in metrics.rs does not end with a `];` line: update registered_metrics() in this test"
        );
    };
    let mut names = BTreeSet::new();
    for (i, _) in body[..end].match_indices('(') {
        if let Some(literal) = body[i + 1..end].trim_start().strip_prefix('"') {
            names.insert(literal.split('"').next().unwrap_or_default().to_string());
        }
    }
    names
}

/// The trimmed cells of a Markdown table row, or `None` for a line that is not one.
fn table_cells(line: &str) -> Option<Vec<&str>> {
    let row = line.trim().strip_prefix('|')?;
    Some(
        row.trim_end_matches('|')
            .split('|')
            .map(str::trim)
            .collect(),
    )
}

/// The backticked names in the column headed `ours` of every table under the `## {section}`
/// heading, each with its line number. A cell may hold several names or `—`; every backticked
/// span in the column counts, and each must satisfy `valid`, so a name cannot hide in another
/// form.
fn ours_column(
    doc: &str,
    section: &str,
    valid: fn(&str) -> bool,
) -> Result<Vec<(usize, String)>, String> {
    let heading = format!("## {section}");
    let mut in_section = false;
    let mut found_section = false;
    let mut column: Option<usize> = None;
    let mut names = Vec::new();
    for (index, line) in doc.lines().enumerate() {
        let number = index + 1;
        if line.starts_with("## ") {
            in_section = line.trim_end() == heading;
            found_section |= in_section;
            column = None;
            continue;
        }
        if !in_section {
            continue;
        }
        let Some(cells) = table_cells(line) else {
            // Anything but a table row ends the table; the next one has its own header.
            column = None;
            continue;
        };
        match column {
            None => {
                column = cells.iter().position(|c| c.eq_ignore_ascii_case("ours"));
                if column.is_none() {
                    return Err(format!(
                        "line {number}: a table under `{heading}` has no column headed `ours`"
                    ));
                }
            }
            Some(_) if cells.iter().all(|c| c.chars().all(|ch| "-: ".contains(ch))) => {}
            Some(c) => {
                let Some(cell) = cells.get(c) else {
                    return Err(format!("line {number}: the row has no `ours` cell"));
                };
                for (i, span) in cell.split('`').enumerate() {
                    if i % 2 == 1 {
                        if !valid(span) {
                            return Err(format!(
                                "line {number}: `{span}` in the `ours` column is not a name of this table's kind"
                            ));
                        }
                        names.push((number, span.to_string()));
                    }
                }
            }
        }
    }
    if !found_section {
        return Err(format!("docs/PARITY.md has no `{heading}` section"));
    }
    Ok(names)
}

fn is_long_flag(span: &str) -> bool {
    span.strip_prefix("--").is_some_and(|name| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    })
}

fn is_metric_name(span: &str) -> bool {
    span.starts_with(|c: char| c.is_ascii_lowercase())
        && span
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What differs between the table's names and the code's, both ways, with the lines of the
/// table rows naming something the code lacks; empty when they agree.
fn differences(table: &[(usize, String)], code: &BTreeSet<String>, what: &str) -> Vec<String> {
    let named: BTreeSet<&str> = table.iter().map(|(_, n)| n.as_str()).collect();
    let mut out: Vec<String> = code
        .iter()
        .filter(|n| !named.contains(n.as_str()))
        .map(|n| format!("{n}: {what} without a row in docs/PARITY.md (add one)"))
        .collect();
    out.extend(
        table
            .iter()
            .filter(|(_, n)| !code.contains(n))
            .map(|(line, n)| {
                format!("{n} (docs/PARITY.md line {line}): the table names a {what} the code lacks (fix or drop the row)")
            }),
    );
    out
}

#[test]
fn the_flags_table_names_exactly_the_flags_of_run() {
    let doc = read("docs/PARITY.md");
    let table = ours_column(&doc, "Flags", is_long_flag).unwrap_or_else(|e| panic!("{e}"));
    let binary = binary_flags();
    assert!(
        binary.contains("--cloud-provider") && binary.contains("--feature-gates"),
        "the clap command was not assembled as main.rs does (no --cloud-provider or hidden --feature-gates): {binary:?}"
    );
    let diff = differences(&table, &binary, "flag of `wasm-ccm run`");
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn the_metrics_table_names_exactly_the_registered_metrics() {
    let doc = read("docs/PARITY.md");
    let table = ours_column(&doc, "Metrics", is_metric_name).unwrap_or_else(|e| panic!("{e}"));
    let registered = registered_metrics();
    assert!(
        registered.contains("workqueue_depth")
            && registered.contains("route_controller_route_sync_total"),
        "the FAMILIES reader found {registered:?}: it no longer matches metrics.rs"
    );
    let diff = differences(&table, &registered, "registered metric");
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

/// The comparison itself: a row too few and a row too many are both reported, and rows
/// outside the section, in a column other than `ours`, or in the separator are not read.
#[test]
fn a_missing_row_and_a_bogus_row_are_both_reported() {
    let doc = "\
# Title
## Flags
| upstream | ours | status |
|---|---|---|
| `--a` | `--a` | same |
| `--b` | — | absent |
| — | `--bogus` | deviates |

## Metrics
| upstream | ours |
|---|---|
| `x` | `--c` |
";
    let table = ours_column(doc, "Flags", is_long_flag).expect("the sample parses");
    assert_eq!(
        table,
        vec![(5, "--a".to_string()), (7, "--bogus".to_string())]
    );
    let binary: BTreeSet<String> = ["--a", "--c"].iter().map(|s| s.to_string()).collect();
    let diff = differences(&table, &binary, "flag");
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(diff[0].starts_with("--c: flag without a row"), "{diff:?}");
    assert!(
        diff[1].starts_with("--bogus (docs/PARITY.md line 7)"),
        "{diff:?}"
    );
    // A flag written into the Metrics table's `ours` column is refused, not read as a metric.
    let err = ours_column(doc, "Metrics", is_metric_name).expect_err("`--c` is not a metric");
    assert!(err.contains("line 12"), "{err}");
    assert!(ours_column(doc, "Events", is_metric_name).is_err());
}

/// The ``test: `<path>` `<function>` `` references in `text`, in order.
fn test_references(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("test: `") {
        let after = &rest[at + "test: `".len()..];
        let parsed = after.split_once('`').and_then(|(path, tail)| {
            let (function, _) = tail.strip_prefix(" `")?.split_once('`')?;
            Some((path.to_string(), function.to_string()))
        });
        match parsed {
            Some(reference) => found.push(reference),
            // A malformed reference names no function: reported as one naming `""`.
            None => found.push((
                after.split('`').next().unwrap_or("").to_string(),
                String::new(),
            )),
        }
        rest = after;
    }
    found
}

/// Whether `source` defines a function `name` (`fn name(` or `fn name<`).
fn defines_fn(source: &str, name: &str) -> bool {
    let needle = format!("fn {name}");
    source.match_indices(&needle).any(|(i, _)| {
        matches!(
            source[i + needle.len()..].chars().next(),
            Some('(') | Some('<')
        )
    })
}

/// Every problem of the table's test references: a row whose `status` cell is `same` without a
/// `test:` reference, and a reference (in any row) whose file `source` cannot read or that
/// defines no such function. `source` reads a file by its path from the repository root.
fn coverage_problems(doc: &str, source: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut status: Option<Option<usize>> = None;
    for (index, line) in doc.lines().enumerate() {
        let number = index + 1;
        let Some(cells) = table_cells(line) else {
            status = None;
            continue;
        };
        let Some(column) = status else {
            // A table's first row is its header.
            status = Some(cells.iter().position(|c| c.eq_ignore_ascii_case("status")));
            continue;
        };
        if cells.iter().all(|c| c.chars().all(|ch| "-: ".contains(ch))) {
            continue;
        }
        let references = test_references(line);
        if column.and_then(|c| cells.get(c)) == Some(&"same") && references.is_empty() {
            problems.push(format!(
                "docs/PARITY.md line {number}: a `same` row names no covering test (add ``test: `<path>` `<function>` ``, writing the test first if there is none): {}",
                cells.first().unwrap_or(&"")
            ));
        }
        for (path, function) in references {
            match source(&path) {
                None => problems.push(format!(
                    "docs/PARITY.md line {number}: test: `{path}` `{function}`: no such file"
                )),
                Some(text) if function.is_empty() || !defines_fn(&text, &function) => {
                    problems.push(format!(
                        "docs/PARITY.md line {number}: test: `{path}` `{function}`: the file defines no `fn {function}`"
                    ))
                }
                Some(_) => {}
            }
        }
    }
    problems
}

#[test]
fn every_same_row_names_a_test_that_exists() {
    let doc = read("docs/PARITY.md");
    let root = workspace_root();
    let problems = coverage_problems(&doc, |path| std::fs::read_to_string(root.join(path)).ok());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        test_references(&doc).len() > 50,
        "the reader found too few `test:` references: it no longer matches the table's form"
    );
}

/// The coverage check itself: a `same` row without a test, a reference to a missing file or to
/// a function the file lacks are reported; a `deviates` row needs none; headers, separators
/// and text outside tables are not rows.
#[test]
fn a_same_row_without_a_test_or_with_a_bad_one_is_reported() {
    let doc = "\
## Flags
A paragraph with `same` in it.
| upstream | ours | status | note |
|---|---|---|---|
| `--a` | `--a` | same | test: `t/a.rs` `covers_a`, test: `t/a.rs` `covers_a_too` |
| `--b` | `--b` | same | nothing |
| `--c` | `--c` | deviates | differs |
| `--d` | `--d` | same | test: `t/gone.rs` `covers_d` |
| `--e` | `--e` | same | test: `t/a.rs` `covers` |

| upstream behaviour | ours | status | note |
|---|---|---|---|
| x | y | same | test: `t/a.rs` `covers_a` |
";
    let source = |path: &str| {
        (path == "t/a.rs").then(|| {
            "fn covers_a() {}\nasync fn covers_a_too<T>() {}\nfn covers_ab() {}".to_string()
        })
    };
    let problems = coverage_problems(doc, source);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("line 6") && problems[0].contains("names no covering test"));
    assert!(problems[1].contains("line 8") && problems[1].contains("no such file"));
    assert!(problems[2].contains("line 9") && problems[2].contains("defines no `fn covers`"));
    assert_eq!(
        test_references("test: `p.rs` `f`; test: `q.rs` `g` (why)"),
        [
            ("p.rs".to_string(), "f".to_string()),
            ("q.rs".to_string(), "g".to_string())
        ]
    );
}
