//! The host's CloudStack signer (`wasm_ccm_runtime::secrets::cloudstack`) against CloudStack's
//! own Python client `cs` (PyPI, pinned in crates/sim/clients/cloudstack.txt): requests built
//! from cloudstack-go's recorded API responses (../shared/material/cloudstack-go/testdata, every
//! command and every string field in them) plus fixed tricky values are signed by both, and the
//! signatures must be equal.
//!
//! Where the two disagree the management server is the judge: `ApiServer.verifyRequest`
//! encodes each value with `URLEncoder.encode(value, "UTF-8").replaceAll("\\+", "%20")`, which
//! escapes `~` (`%7E`), while `cs` encodes with Python's `quote(value, safe="*")`, which keeps
//! `~` (RFC 3986 unreserved). The host follows the server, so requests with a `~` in a value
//! are listed apart ([`TILDE`]) and checked to differ from `cs` for exactly that reason. Every
//! other character (`*`, space, `+`, `/`, `=`, `%`, `&`, Unicode, control characters) is
//! encoded alike by the server, `cs` and the host.
//!
//! Needs `python3` with `venv`, and PyPI once (as crates/sim/tests/cloudstack_client.rs), and the
//! recorded material (`tests/material`: beside the clone, or `WASM_CCM_SHARED_MATERIAL`); without
//! it the test fails unless `WASM_CCM_ALLOW_MISSING_MATERIAL=1`, and then signs the fixed values
//! only.

mod material;

use std::path::PathBuf;

use serde_json::Value;
use wasm_ccm_runtime::secrets::cloudstack;
use wasm_ccm_test_tools::pypi;

const REQUIREMENTS: &str = "crates/sim/clients/cloudstack.txt";
const SCRIPT: &str = "crates/sim/clients/cloudstack_sign.py";

/// Secret keys the requests are signed with, in turn: CloudStack's keys are Base64url-like
/// text; `+`, `/` and `=` appear in keys generated elsewhere. ASCII only: the server takes the
/// key's bytes in the platform charset.
const SECRETS: [&str; 3] = [
    "VDaACYb0LV9eNjTetIOElcVQkvJck_J_QljX_FcHRj87ZKiy0z0ty0ZsYBkoXkY9b7eq1EhwJaw7FF3akA3KBQ",
    "s3cret+/=key",
    "x",
];

/// Values with `~`: `cs` leaves `~` as it is, the server (and so the host) signs `%7E`.
const TILDE: [&str; 3] = ["~", "user~1", "a~b c"];

/// Fixed values beyond what the recording holds.
const TRICKY: [&str; 16] = [
    "*",
    "a*b",
    "a b",
    "a+b",
    "10.0.0.0/8,192.168.0.0/16",
    "k=v&x=y",
    "100%",
    "Zürich",
    "名前",
    "🚀 launch",
    "!'()",
    "#?@:;$",
    "line\nbreak",
    "",
    "UPPER lower",
    "2026-11-27T08:00:00+0000",
];

/// cloudstack-go's recordings; absent, the test fails (see `material`), unless skipping them is
/// asked for.
fn recordings() -> Option<PathBuf> {
    material::dir(
        "cloudstack-go/testdata",
        "cloudstack-go's recorded API responses",
    )
}

/// Every string field below `value`, as (name, value), in document order.
fn string_fields(value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::String(s) => out.push((k.clone(), s.clone())),
                    other => string_fields(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| string_fields(v, out)),
        _ => {}
    }
}

fn base(command: &str) -> Vec<(String, String)> {
    [
        ("command", command),
        ("apiKey", "AbCdEf-k1_ZyX"),
        ("response", "json"),
        ("signatureversion", "3"),
        ("expires", "2026-11-27T08:15:00+0000"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Adds `(name, value)` unless the name is already there (any case) or is `signature`.
fn with(mut params: Vec<(String, String)>, name: &str, value: &str) -> Vec<(String, String)> {
    if !name.eq_ignore_ascii_case("signature")
        && !params.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
    {
        params.push((name.to_string(), value.to_string()));
    }
    params
}

/// The requests: per recorded command one with all its (first-seen) string fields, and one per
/// distinct string field; then the fixed values, alone and all together.
fn requests() -> (Vec<Vec<(String, String)>>, usize) {
    let mut out = Vec::new();
    let mut commands = 0;
    match recordings() {
        None => println!("only the fixed values are signed"),
        Some(dir) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .expect("read testdata")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read_to_string(&file).expect("read recording");
                let doc: Value = serde_json::from_str(&text).expect("recording is JSON");
                let Value::Object(by_command) = doc else {
                    panic!("{} is not an object of commands", file.display())
                };
                for (command, response) in &by_command {
                    commands += 1;
                    let mut fields = Vec::new();
                    string_fields(response, &mut fields);
                    let mut all = base(command);
                    for (k, v) in &fields {
                        all = with(all, k, v);
                    }
                    out.push(all);
                    let mut seen = std::collections::BTreeSet::new();
                    for (k, v) in fields {
                        if seen.insert((k.clone(), v.clone())) {
                            out.push(with(base(command), &k, &v));
                        }
                    }
                }
            }
        }
    }
    let mut all = base("listVirtualMachines");
    for (i, v) in TRICKY.iter().enumerate() {
        out.push(with(base("listVirtualMachines"), "name", v));
        out.push(with(base("createTags"), "tags[0].value", v));
        all = with(all, &format!("p{i:02}"), v);
    }
    out.push(all);
    (out, commands)
}

#[test]
fn the_host_signs_as_cloudstacks_own_client_on_every_recorded_request() {
    let (mut requests, commands) = requests();
    let tilde: Vec<Vec<(String, String)>> = TILDE
        .iter()
        .map(|v| with(base("listTags"), "value", v))
        .collect();
    let agreed = requests.len();
    requests.extend(tilde.iter().cloned());

    let venv = pypi::venv("cs", REQUIREMENTS).unwrap_or_else(|e| {
        panic!(
            "cannot install CloudStack's client `cs` from PyPI ({REQUIREMENTS}); this test needs \
             python3 with venv and PyPI reachable once: {e}"
        )
    });
    let json: Vec<Value> = requests
        .iter()
        .enumerate()
        .map(|(i, params)| {
            serde_json::json!({ "secret": SECRETS[i % SECRETS.len()], "params": params })
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("requests.json");
    std::fs::write(&file, serde_json::to_vec(&json).expect("json")).expect("write requests");
    let path = file.to_str().expect("utf-8 path");
    let out = pypi::run_script(&venv, SCRIPT, &[path]).unwrap_or_else(|e| panic!("{e}"));
    let theirs: Vec<&str> = out.lines().collect();
    assert_eq!(
        theirs.len(),
        requests.len(),
        "one signature per request:\n{out}"
    );

    let mut mismatches = Vec::new();
    for (i, params) in requests.iter().enumerate().take(agreed) {
        let ours = cloudstack::signature(params, SECRETS[i % SECRETS.len()].as_bytes());
        if ours != theirs[i] {
            mismatches.push(format!(
                "request {i}: host {ours} cs {} for {:?}",
                theirs[i],
                cloudstack::string_to_sign(params)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {agreed} signatures differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The recording covers some characters; the fixed values the rest.
    let signed: String = requests
        .iter()
        .take(agreed)
        .flat_map(|p| p.iter().map(|(_, v)| v.as_str()))
        .collect();
    for c in ['*', ' ', '+', '/', '=', '%', '&', 'ü', '名', '🚀', '\n'] {
        assert!(signed.contains(c), "no request holds {c:?}");
    }

    // `~`: the server's URLEncoder escapes it, `cs` does not; the host signs as the server.
    for (j, params) in tilde.iter().enumerate() {
        let i = agreed + j;
        let text = cloudstack::string_to_sign(params);
        assert!(text.contains("%7e"), "{text}");
        let ours = cloudstack::signature(params, SECRETS[i % SECRETS.len()].as_bytes());
        assert_ne!(
            ours, theirs[i],
            "cs keeps `~` unescaped, so its signature must differ from the server's for {params:?}"
        );
    }
    println!(
        "{agreed} of {agreed} requests signed identically by the host and cs ({commands} recorded \
         commands, {} fixed-value requests); {} requests with `~` differ as the server's encoding \
         requires",
        2 * TRICKY.len() + 1,
        tilde.len()
    );
}
