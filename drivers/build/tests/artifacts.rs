//! The build script's outputs exist, are components, and the shipped driver fits a ConfigMap.

use std::path::Path;

const COMPONENT_PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

#[test]
fn every_guest_is_a_component() {
    let all = wasm_ccm_drivers::all();
    // The shipped drivers and the test components the sandbox and conformance tests need.
    let names: Vec<&str> = all.iter().map(|(name, _)| *name).collect();
    for needed in [
        "static",
        "cloudscale",
        "phoenixnap",
        "cloudstack",
        "hostile",
        "future-major",
        "broken",
        "hostile-lb",
        "template",
    ] {
        assert!(names.contains(&needed), "no `{needed}` guest in {names:?}");
    }
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "a guest name twice: {names:?}");
    for (name, path) in all {
        assert!(
            Path::new(path).is_absolute(),
            "{name}: {path} is not absolute"
        );
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("{name}: cannot read {path}: {e}"));
        assert!(
            bytes.starts_with(&COMPONENT_PREAMBLE),
            "{name}: {path} is not a component"
        );
    }
}

#[test]
fn shipped_drivers_fit_a_configmap() {
    // Every shipped driver (the build table's), and the template a driver author starts from.
    let template = ("template", wasm_ccm_drivers::TEMPLATE_DRIVER);
    let shipped = wasm_ccm_drivers::SHIPPED
        .iter()
        .map(|(name, bytes)| (*name, bytes.len() as u64));
    let template_size = std::fs::metadata(template.1)
        .unwrap_or_else(|e| panic!("template: cannot read {}: {e}", template.1))
        .len();
    for (name, size) in shipped.chain([(template.0, template_size)]) {
        if let Err(why) = wasm_ccm_drivers::check_fits_configmap(name, size) {
            panic!("{why}");
        }
    }
}

#[test]
fn a_driver_over_the_configmap_limit_is_refused_with_its_size_and_the_limit() {
    let limit = wasm_ccm_drivers::CONFIGMAP_LIMIT;
    let key = wasm_ccm_drivers::CONFIGMAP_KEY.len() as u64;
    assert_eq!(
        wasm_ccm_drivers::check_fits_configmap("just-fits", limit - key),
        Ok(limit)
    );
    let err = wasm_ccm_drivers::check_fits_configmap("fat", limit - key + 1).unwrap_err();
    assert!(
        err.contains("fat driver (1048566 bytes)")
            && err.contains("1048577 bytes")
            && err.contains("limit of 1048576 bytes"),
        "{err}"
    );
}
