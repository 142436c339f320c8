//! The operator's existing Secret keeps working unchanged (issue 31, G5): the example Secrets of
//! `deploy/overlays/*/secret.example.yaml` — upstream's formats — sealed with each shipped
//! driver's own declarations differ from the operator's bytes only where a declared value was,
//! where a placeholder now stands, and every declared value was taken out.

mod common;

use std::path::Path;

use common::runtime;
use wasm_ccm_runtime::secrets::{PLACEHOLDER_LEN, PLACEHOLDER_PREFIX, SecretOptions, Vault};

/// The `stringData` value `key` of the Secret in `file` (under the repository root).
fn example(file: &str, key: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: serde_norway::Value =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    doc["stringData"][key]
        .as_str()
        .unwrap_or_else(|| panic!("{file} has no stringData.{key}"))
        .to_string()
}

/// Whether `sealed` is `original` with some values replaced by placeholders, and nothing else
/// changed; returns how many placeholders there are.
fn only_values_replaced(original: &str, sealed: &str) -> usize {
    let (mut a, mut b, mut found) = (original, sealed, 0);
    while let Some(at) = b.find(PLACEHOLDER_PREFIX) {
        assert_eq!(
            &a[..at.min(a.len())],
            &b[..at],
            "bytes before a placeholder changed"
        );
        let placeholder = &b[at..at + PLACEHOLDER_LEN];
        assert!(
            placeholder[PLACEHOLDER_PREFIX.len()..]
                .bytes()
                .all(|c| c.is_ascii_hexdigit()),
            "{placeholder}"
        );
        b = &b[at + PLACEHOLDER_LEN..];
        a = &a[at..];
        // The original value runs up to where the sealed text goes on.
        let rest = b.split('\n').next().unwrap_or_default();
        let end = if rest.is_empty() {
            a.find('\n').unwrap_or(a.len())
        } else {
            a.find(rest)
                .unwrap_or_else(|| panic!("the text after a value changed: {rest:?}"))
        };
        a = &a[end..];
        found += 1;
    }
    assert_eq!(a, b, "bytes after the last placeholder changed");
    found
}

async fn sealed_example(driver: &str, file: &str, key: &str) -> (String, String, usize) {
    let compiled = runtime()
        .compile(driver, std::fs::read(driver).expect("driver"))
        .await
        .expect("compiles");
    let info = runtime().info(&compiled).await.expect("info");
    let original = example(file, key);
    let sealed = Vault::seal(
        &info.name,
        &info.secrets,
        original.as_bytes(),
        &[],
        &SecretOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    let text = String::from_utf8(sealed.config).expect("utf-8");
    let n = only_values_replaced(&original, &text);
    (original, text, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_cloudstack_secret_is_sealed_in_place() {
    for overlay in ["cloudstack-configmap", "cloudstack-oci"] {
        let file = format!("deploy/overlays/{overlay}/secret.example.yaml");
        let (original, sealed, n) =
            sealed_example(wasm_ccm_drivers::CLOUDSTACK_DRIVER, &file, "cloud-config").await;
        assert_eq!(n, 2, "{overlay}: api-key and secret-key\n{sealed}");
        assert!(
            original.contains("<API key>") && !sealed.contains("<API key>"),
            "{sealed}"
        );
        assert!(!sealed.contains("<secret key>"), "{sealed}");
        assert!(sealed.contains("api-url = https://cloudstack.example/client/api"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_phoenixnap_secret_is_sealed_in_place() {
    for overlay in ["phoenixnap-configmap", "phoenixnap-oci"] {
        let file = format!("deploy/overlays/{overlay}/secret.example.yaml");
        let (_, sealed, n) =
            sealed_example(wasm_ccm_drivers::PHOENIXNAP_DRIVER, &file, "cloud-sa.json").await;
        assert_eq!(n, 2, "{overlay}: clientID and clientSecret\n{sealed}");
        let json: serde_json::Value = serde_json::from_str(&sealed).expect("still JSON");
        assert!(
            json["clientSecret"]
                .as_str()
                .is_some_and(|v| v.starts_with(PLACEHOLDER_PREFIX))
        );
        assert_eq!(json["location"], "PHX");
    }
}
