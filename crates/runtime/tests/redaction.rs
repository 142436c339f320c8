//! A credential the host knows of never comes back out through the host: not in a driver's
//! error, an event's reason or message, an answer, or a panic line the host quotes, whether the
//! driver `log.redact`ed it or not. The credentials the host knows of are credential-named
//! environment values and credential-named keys of the cloud config (`api-key = …`); the hostile
//! driver registers neither.
//!
//! Also here: a request body over the cap reaches the host's check and comes back as the typed
//! `too-large` error, not as a trap while crossing the boundary.

mod common;

use std::sync::Arc;

use common::{Reply, load, node, node_with, serve};
use wasm_ccm_drivers::HOSTILE_DRIVER;
use wasm_ccm_runtime::log::MemorySink;
use wasm_ccm_runtime::types::ProviderError;
use wasm_ccm_runtime::{CallError, CallScope, Driver, DriverOptions, HostError};
use wasm_ccm_runtime::{InitInput, http, log};

const API_KEY: &str = "AK-from-the-cloud-config";
const TOKEN: &str = "tok-from-the-environment";

fn scope() -> CallScope {
    CallScope::object("node/leak")
}

async fn leaky_driver(sink: Arc<MemorySink>) -> Driver {
    let opts = DriverOptions {
        init: InitInput {
            // INI as CloudStack's Secret holds it: the host finds `api-key` by its name.
            config: format!("[Global]\napi-url = https://cloud.example\napi-key = {API_KEY}\n")
                .into_bytes(),
            env: vec![("HOSTILE_TOKEN".into(), TOKEN.into())],
            ..Default::default()
        },
        log: log::Config {
            sink,
            ..Default::default()
        },
        ..Default::default()
    };
    load(HOSTILE_DRIVER, opts).await
}

/// Fails naming the channel when `text` carries either credential; requires one redaction mark,
/// so a text that never held the credential cannot pass.
fn assert_redacted(channel: &str, text: &str) {
    assert_redacted_n(channel, text, 1);
}

/// The same for a channel the driver filled with `quoted` credentials: each must show its own
/// mark, so one redacted credential cannot stand for two.
fn assert_redacted_n(channel: &str, text: &str, quoted: usize) {
    assert!(
        !text.contains(API_KEY) && !text.contains(TOKEN),
        "{channel} leaked a credential: {text}"
    );
    let marks = text.matches("[redacted]").count();
    assert!(
        marks >= quoted,
        "{channel} should show where each of its {quoted} credentials was ({marks} marks): {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_error_quoting_a_credential_is_redacted() {
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let outcome = driver
        .instance_metadata(&node("leak-error"), &scope())
        .await;
    let Err(CallError::Provider(ProviderError::Permanent(message))) = &outcome.result else {
        panic!(
            "expected the driver's permanent error, got {:?}",
            outcome.result
        );
    };
    assert!(message.starts_with("failed with api-key="), "{message}");
    assert_redacted_n("the error message", message, 2);
    let shown = outcome.result.unwrap_err().to_string();
    assert_redacted_n("the error's display", &shown, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_across_the_cut_of_a_long_error_is_redacted_not_halved() {
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let outcome = driver
        .instance_metadata(&node("leak-error-at-cut"), &scope())
        .await;
    let Err(CallError::Provider(ProviderError::Permanent(message))) = &outcome.result else {
        panic!(
            "expected the driver's permanent error, got {:?}",
            outcome.result
        );
    };
    assert!(
        message.ends_with("bytes]"),
        "the message was cut: {}",
        message.len()
    );
    // Redacted first, then cut: the cut falls inside the mark, and no prefix of the credential
    // of 6 bytes or more is left (cut first, then redacted, "AK-fro" would be).
    assert!(
        !message.contains(&API_KEY[..6]),
        "a prefix of the credential survived"
    );
    assert!(
        message.contains("x[redac"),
        "the mark starts where the credential did"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_reason_and_message_quoting_a_credential_are_redacted() {
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let outcome = driver
        .instance_metadata(&node("leak-event"), &scope())
        .await;
    outcome.result.expect("the call succeeds");
    let [event] = outcome.events.as_slice() else {
        panic!("expected one event, got {:?}", outcome.events);
    };
    assert!(event.reason.starts_with("Leak"), "{event:?}");
    assert_redacted_n("the event reason", &event.reason, 2);
    assert_redacted_n("the event message", &event.message, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_carrying_a_credential_is_redacted_before_the_host_uses_it() {
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let metadata = driver
        .instance_metadata(&node("leak-answer"), &scope())
        .await
        .result
        .expect("an answer");
    assert_redacted("instance-type", &metadata.instance_type);
    assert_redacted("zone", &metadata.zone);
    let [(key, value)] = metadata.additional_labels.as_slice() else {
        panic!("expected one label, got {:?}", metadata.additional_labels);
    };
    assert_redacted("a label key", key);
    assert_redacted("a label value", value);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_line_quoting_a_credential_is_redacted_in_the_trap() {
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let outcome = driver
        .instance_metadata(&node("leak-panic"), &scope())
        .await;
    let Err(CallError::Host(HostError::Trap { detail, .. })) = &outcome.result else {
        panic!("expected a trap, got {:?}", outcome.result);
    };
    assert!(
        detail.starts_with("panicked: hostile driver: api-key="),
        "{detail}"
    );
    assert_redacted_n("the trap detail", detail, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dynamic_call_answer_is_redacted_too() {
    // `wasm-ccm-dev call` prints what `call_json` returns.
    let driver = leaky_driver(Arc::new(MemorySink::default())).await;
    let outcome = driver
        .call_json(
            "instances.instance-metadata",
            serde_json::json!({"name": "leak-answer"}),
            &scope(),
        )
        .await;
    let answer = outcome.result.expect("an answer").to_string();
    assert!(answer.contains("type-"), "{answer}");
    assert_redacted("the dynamic answer", &answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_cap_is_the_typed_too_large_error() {
    let port = serve(Reply::Body(10)).await;
    let url = format!("http://127.0.0.1:{port}/upload");
    let opts = DriverOptions {
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[format!("http://127.0.0.1:{port}")])
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    // 17 MiB: over the 16 MiB request cap, under what the 64 MiB guest may hold.
    let outcome = driver
        .instance_metadata(
            &node_with("post-big", &[("url", &url), ("kb", "17408")]),
            &scope(),
        )
        .await;
    let Err(CallError::Provider(ProviderError::Permanent(message))) = &outcome.result else {
        panic!(
            "expected the driver to see too-large, got {:?}",
            outcome.result
        );
    };
    assert!(
        message.starts_with("http-error too-large: request body of 17825792 bytes"),
        "{message}"
    );
    // A body within the cap goes out: the cap, not the boundary, refused the big one.
    let small = driver
        .instance_metadata(
            &node_with("post-big", &[("url", &url), ("kb", "1")]),
            &scope(),
        )
        .await;
    assert_eq!(
        small.result.expect("a small body is sent").instance_type,
        "status=200 bytes=10"
    );
}
