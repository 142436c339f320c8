//! `CHANGELOG.md` at the repository's root: its newest entry is this release (the workspace
//! version) and names the driver contract this release implements (wit/provider.wit's package),
//! so a version or contract bump that forgets the CHANGELOG fails here. docs/RELEASING.md says
//! when to write what.

use std::path::Path;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn changelog() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../CHANGELOG.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The entries as (heading, body), newest first: each starts at a `## [` line.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("## [") {
            out.push((line.to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// `## [0.1.0] - 2026-12-01` or `## [0.1.0] - unreleased` as (version, date).
fn heading(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("## [")?;
    let (version, rest) = rest.split_once(']')?;
    let date = rest.strip_prefix(" - ")?;
    Some((version, date))
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

#[test]
fn the_newest_entry_is_this_release() {
    let text = changelog();
    let entries = entries(&text);
    let (first, _) = entries
        .first()
        .expect("CHANGELOG.md has entries (`## [X.Y.Z] - YYYY-MM-DD`)");
    let (version, date) = heading(first).unwrap_or_else(|| {
        panic!("CHANGELOG.md: {first:?} is not `## [X.Y.Z] - YYYY-MM-DD` (or `- unreleased`)")
    });
    assert_eq!(
        version, VERSION,
        "CHANGELOG.md: the newest entry is {version}, the workspace version is {VERSION}; add \
         the entry for {VERSION} on top (docs/RELEASING.md)"
    );
    assert!(
        date == "unreleased" || is_date(date),
        "CHANGELOG.md: {first:?}: the date is `unreleased` until the release, then YYYY-MM-DD"
    );
    for (line, _) in &entries {
        assert!(
            heading(line).is_some_and(|(_, d)| d == "unreleased" || is_date(d)),
            "CHANGELOG.md: {line:?} is not `## [X.Y.Z] - YYYY-MM-DD`"
        );
    }
    let versions: Vec<&str> = entries
        .iter()
        .filter_map(|(l, _)| heading(l).map(|(v, _)| v))
        .collect();
    let mut unique = versions.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        versions.len(),
        "CHANGELOG.md: a version has two entries: {versions:?}"
    );
    assert!(
        entries[1..]
            .iter()
            .all(|(l, _)| !l.ends_with("- unreleased")),
        "CHANGELOG.md: only the newest entry may be unreleased"
    );
}

#[test]
fn the_newest_entry_names_the_driver_contract_of_wit() {
    let contract = wasm_ccm_test_tools::contract::qualified().unwrap_or_else(|e| panic!("{e}"));
    let text = changelog();
    let entries = entries(&text);
    let (first, body) = entries.first().expect("CHANGELOG.md has entries");
    // One line states it, so other mentions (the versions it replaces) do not count.
    let stated: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("Driver contract: `"))
        .filter_map(|l| l.split_once('`').map(|(c, _)| c))
        .collect();
    assert_eq!(
        stated,
        [contract.as_str()],
        "CHANGELOG.md, {first:?}: the entry must have exactly one line \
         \"Driver contract: `{contract}`\" (wit/provider.wit's package, which this release \
         implements)"
    );
}
