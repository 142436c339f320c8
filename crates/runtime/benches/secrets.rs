//! What the host's credential handling (`src/secrets`) adds to a request: the placement check
//! and substitution of a bearer token, CloudStack's signature, the fast path of a request
//! without a placeholder, and response scrubbing per 4 KiB and per MiB. Medians of 7 rounds.
//!
//! `cargo bench -p wasm-ccm-runtime --bench secrets`

use std::time::Instant;

use wasm_ccm_runtime::http::{Method, Request};
use wasm_ccm_runtime::secrets::{SecretOptions, Vault};
use wasm_ccm_runtime::types::{SecretDecl, SecretLocation, SecretOrigin, SecretUse};

const ROUNDS: usize = 7;

fn median_micros(iterations: usize, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / iterations as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn decl(name: &str, at: SecretLocation, origin: SecretOrigin, uses: Vec<SecretUse>) -> SecretDecl {
    SecretDecl {
        name: name.into(),
        at: vec![at],
        origin,
        uses,
    }
}

fn main() {
    // cloudscale: a bearer token from the environment.
    let origin = SecretOrigin {
        settings: vec![],
        default_url: "https://api.cloudscale.ch".into(),
    };
    let env = vec![(
        "CLOUDSCALE_ACCESS_TOKEN".to_string(),
        "a-cloudscale-token-of-forty-characters-x".to_string(),
    )];
    let sealed = Vault::seal(
        "cloudscale",
        &[decl(
            "access-token",
            SecretLocation::Env("CLOUDSCALE_ACCESS_TOKEN".into()),
            origin,
            vec![SecretUse::Bearer],
        )],
        b"",
        &env,
        &SecretOptions::default(),
    )
    .expect("sealed");
    let vault = sealed.vault.expect("vault");
    let placeholder = sealed.env[0].1.clone();
    let body = format!(
        "{{\"name\":\"lb\",\"members\":[{}]}}",
        (0..64)
            .map(|i| format!("{{\"address\":\"10.0.{i}.1\",\"port\":30080}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut body = body.into_bytes();
    body.resize(4096, b' ');
    let bearer = Request {
        method: Method::Post,
        url: "https://api.cloudscale.ch/v1/load-balancers/pools/x/members".into(),
        headers: vec![
            ("authorization".into(), format!("Bearer {placeholder}")),
            ("content-type".into(), "application/json".into()),
        ],
        body: body.clone(),
        timeout_ms: None,
    };
    let plain = Request {
        headers: vec![("content-type".into(), "application/json".into())],
        ..bearer.clone()
    };
    let bearer_us = median_micros(20_000, || {
        let _ = std::hint::black_box(vault.wire_request(&bearer));
    });
    let plain_us = median_micros(20_000, || {
        let _ = std::hint::black_box(vault.wire_request(&plain));
    });

    // CloudStack: the api key as a parameter, the host's signature.
    let ini = |k: &str| SecretLocation::Ini(("Global".into(), k.into()));
    let cs_origin = SecretOrigin {
        settings: vec![ini("api-url")],
        default_url: String::new(),
    };
    let file = b"[Global]\napi-url = https://cloud.example/client/api\napi-key = an-api-key-of-some-length-0123456789\nsecret-key = a-secret-key-of-some-length-0123456789\n";
    let sealed = Vault::seal(
        "cloudstack",
        &[
            decl(
                "api-key",
                ini("api-key"),
                cs_origin.clone(),
                vec![SecretUse::Param("apiKey".into())],
            ),
            decl(
                "secret-key",
                ini("secret-key"),
                cs_origin,
                vec![SecretUse::CloudstackSignature],
            ),
        ],
        file,
        &[],
        &SecretOptions::default(),
    )
    .expect("sealed");
    let cs = sealed.vault.expect("vault");
    let text = String::from_utf8(sealed.config).expect("utf-8");
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("api-key = "))
        .expect("api-key")
        .to_string();
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(600))
        .expect("time")
        .strftime("%Y-%m-%dT%H:%M:%S%%2B0000")
        .to_string();
    let signed = Request {
        method: Method::Get,
        url: format!(
            "https://cloud.example/client/api?apiKey={key}&command=listVirtualMachines&expires={expires}&listall=true&page=1&pagesize=500&response=json&signatureversion=3"
        ),
        headers: vec![("accept".into(), "application/json".into())],
        body: Vec::new(),
        timeout_ms: None,
    };
    assert!(cs.wire_request(&signed).expect("signed").is_some());
    let signed_us = median_micros(20_000, || {
        let _ = std::hint::black_box(cs.wire_request(&signed));
    });

    // Scrubbing responses without a secret in them (the usual case) and with one.
    let clean_4k = vec![b'a'; 4096];
    let clean_1m: Vec<u8> = (0..1 << 20).map(|i| b"abcdefghij{}\":, "[i % 16]).collect();
    let mut dirty_4k = clean_4k.clone();
    dirty_4k[100..140].copy_from_slice(b"a-cloudscale-token-of-forty-characters-x");
    let scrub_4k = median_micros(20_000, || {
        let _ = std::hint::black_box(vault.scrub(&clean_4k));
    });
    let scrub_dirty_4k = median_micros(20_000, || {
        let _ = std::hint::black_box(vault.scrub(&dirty_4k));
    });
    let scrub_1m = median_micros(50, || {
        let _ = std::hint::black_box(vault.scrub(&clean_1m));
    });
    // A real answer's shape: a cloudscale server list (escaped slashes, UUIDs, `+00:00`
    // offsets, URLs with queries), where the decoded views have something to decode.
    let server = |i: usize| {
        format!(
            "{{\"href\":\"https:\\/\\/api.cloudscale.ch\\/v1\\/servers\\/{i:08x}-4b6e-4c9f-9f2e-5c0d1e2f3a4b\",\"uuid\":\"{i:08x}-4b6e-4c9f-9f2e-5c0d1e2f3a4b\",\"name\":\"node-{i}\",\"status\":\"running\",\"flavor\":{{\"slug\":\"flex-8-4\"}},\"created_at\":\"2026-11-28T10:00:00.000000+00:00\",\"interfaces\":[{{\"type\":\"public\",\"addresses\":[{{\"address\":\"192.0.2.{}\",\"version\":4}}]}}],\"tags\":{{\"k8s\":\"a&b\"}},\"next\":\"https://api.cloudscale.ch/v1/servers?page=2%26size=50\"}}",
            i % 250
        )
    };
    let list = |bytes: usize| {
        let mut out = String::from("[");
        let mut i = 0;
        while out.len() < bytes {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&server(i));
            i += 1;
        }
        out.push(']');
        out.into_bytes()
    };
    let list_64k = list(64 << 10);
    let list_1m = list(1 << 20);
    let scrub_list_64k = median_micros(200, || {
        let _ = std::hint::black_box(vault.scrub(&list_64k));
    });
    let scrub_list_1m = median_micros(20, || {
        let _ = std::hint::black_box(vault.scrub(&list_1m));
    });

    println!("secrets: per request (median of {ROUNDS} rounds)");
    println!("  bearer placed and substituted, 4 KiB body: {bearer_us:8.2} us");
    println!("  no placeholder (fast path), 4 KiB body:    {plain_us:8.2} us");
    println!("  CloudStack api key + host signature:       {signed_us:8.2} us");
    println!("  scrub 4 KiB response, nothing found:       {scrub_4k:8.2} us");
    println!("  scrub 4 KiB response, one token found:     {scrub_dirty_4k:8.2} us");
    println!("  scrub 1 MiB response, nothing found:       {scrub_1m:8.2} us");
    println!("  scrub 64 KiB JSON server list, nothing:    {scrub_list_64k:8.2} us");
    println!("  scrub 1 MiB JSON server list, nothing:     {scrub_list_1m:8.2} us");
}
