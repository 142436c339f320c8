//! The component from an Istio "compat" tar+gzip layer: which file is taken, and bounded memory
//! whatever the archive holds.

use wasm_ccm_oci::wasm_from_tar_gzip;

mod common;
use common::tar_gzip;

#[test]
fn plugin_wasm_wins_a_single_wasm_will_do_and_ambiguity_is_refused() {
    let layer = tar_gzip(&[("a.wasm", b"A"), ("dir/plugin.wasm", b"P")]);
    assert_eq!(wasm_from_tar_gzip(&layer, 100).unwrap(), b"P");
    let single = tar_gzip(&[("x.wasm", b"X"), ("README", b"r")]);
    assert_eq!(wasm_from_tar_gzip(&single, 100).unwrap(), b"X");
    let two = tar_gzip(&[("a.wasm", b"A"), ("b.wasm", b"B")]);
    let err = wasm_from_tar_gzip(&two, 100).unwrap_err();
    assert!(
        err.contains("a.wasm, b.wasm") && err.contains("none is plugin.wasm"),
        "{err}"
    );
    let err = wasm_from_tar_gzip(&tar_gzip(&[("README", b"r")]), 100).unwrap_err();
    assert!(err.contains("no .wasm"), "{err}");
    let err = wasm_from_tar_gzip(b"not gzip at all", 100).unwrap_err();
    assert!(err.contains("tar+gzip layer"), "{err}");
}

#[test]
fn bombs_are_refused_within_the_budget() {
    let big = vec![0u8; 1000];
    let err = wasm_from_tar_gzip(&tar_gzip(&[("plugin.wasm", &big)]), 100).unwrap_err();
    assert!(err.contains("larger than 100 bytes"), "{err}");
    // Many compressible entries: decompression stops at the budget (4 × limit + 1 MiB).
    let files: Vec<(String, Vec<u8>)> = (0..50)
        .map(|i| (format!("f{i}.txt"), vec![0u8; 30_000]))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let err = wasm_from_tar_gzip(&tar_gzip(&refs), 1000).unwrap_err();
    assert!(err.contains("more than 1052576 bytes"), "{err}");
}
