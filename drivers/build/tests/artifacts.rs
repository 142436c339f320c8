//! The build script's outputs exist, are components, and the shipped driver fits a ConfigMap.

use std::path::Path;

const COMPONENT_PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

#[test]
fn every_guest_is_a_component() {
    assert_eq!(wasm_ccm_drivers::all().len(), 9);
    for (name, path) in wasm_ccm_drivers::all() {
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
    for (name, path) in [
        ("static", wasm_ccm_drivers::STATIC_DRIVER),
        ("cloudscale", wasm_ccm_drivers::CLOUDSCALE_DRIVER),
        ("phoenixnap", wasm_ccm_drivers::PHOENIXNAP_DRIVER),
        ("cloudstack", wasm_ccm_drivers::CLOUDSTACK_DRIVER),
        ("template", wasm_ccm_drivers::TEMPLATE_DRIVER),
    ] {
        let size = std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{name}: cannot read {path}: {e}"))
            .len();
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
