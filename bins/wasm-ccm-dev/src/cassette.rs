//! HTTP cassettes: what a driver sent and what the cloud answered, recorded once against a real
//! account (`--record-http FILE`) and replayed later without the network (`--cloud
//! cassette:FILE`), so conformance can run in CI without credentials.
//!
//! Both sides sit in the host's HTTP layer after the egress check ([`HttpInterceptor`]). Secrets
//! never reach the file: headers are not recorded at all on the request side, and query
//! parameters, form fields and JSON keys whose names look secret or volatile (tokens, keys,
//! signatures, expiry stamps) are replaced by `REDACTED` — on the way in and when matching, so a
//! fresh signature still finds its recording.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasm_ccm_runtime::http::{
    Forward, HttpInterceptor, Intercepted, error_case, method_name, strip_query,
};
use wasm_ccm_runtime::http::{HttpError, Request, Response};

/// The format version written and understood.
const VERSION: u32 = 1;

/// What replaces a redacted value.
const REDACTED: &str = "REDACTED";

/// Names (lower-cased, as substrings) of values that are secret or change on every request.
const SENSITIVE: &[&str] = &[
    "token",
    "secret",
    "password",
    "signature",
    "apikey",
    "api_key",
    "api-key",
    "expires",
    "credential",
];

/// A recording.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) struct Cassette {
    pub version: u32,
    /// `scheme://host[:port]` of the cloud the recording was made against: replay points the
    /// driver at the same address so its requests match.
    pub cloud_url: Option<String>,
    pub interactions: Vec<Interaction>,
}

/// One request and what came back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) struct Interaction {
    pub request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<RecordedResponse>,
    /// The host's error case and message when no response came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

/// A request, redacted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordedRequest {
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub body: Body,
}

/// A response, with secret-looking JSON values redacted.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordedResponse {
    pub status: u16,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    #[serde(default)]
    pub body: Body,
}

/// An error instead of a response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordedError {
    pub case: String,
    pub message: String,
}

/// A body: text when it is UTF-8, hex otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Body {
    Text(String),
    Binary { hex: String },
}

impl Default for Body {
    fn default() -> Self {
        Body::Text(String::new())
    }
}

impl Body {
    fn from_bytes(bytes: &[u8]) -> Body {
        match std::str::from_utf8(bytes) {
            Ok(s) => Body::Text(s.to_string()),
            Err(_) => Body::Binary {
                hex: hex::encode(bytes),
            },
        }
    }

    fn to_bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            Body::Text(s) => Ok(s.as_bytes().to_vec()),
            Body::Binary { hex } => {
                hex::decode(hex).map_err(|e| format!("a binary body is not valid hex: {e}"))
            }
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Body::Text(s) if s.is_empty())
    }
}

fn is_sensitive(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SENSITIVE.iter().any(|s| lower.contains(s))
}

/// Form or query pairs with sensitive values replaced.
fn redact_pairs<'a>(
    pairs: impl Iterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
) -> Vec<(String, String)> {
    pairs
        .map(|(k, v)| {
            let v = if is_sensitive(&k) {
                REDACTED.to_string()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect()
}

/// The URL with sensitive query values replaced.
fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return strip_query(url);
    };
    if parsed.query().is_none() {
        return url.to_string();
    }
    let pairs = redact_pairs(parsed.query_pairs());
    parsed.query_pairs_mut().clear().extend_pairs(pairs);
    parsed.to_string()
}

fn redact_json(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, inner) in map.iter_mut() {
                if is_sensitive(k) && (inner.is_string() || inner.is_number()) {
                    *inner = Value::String(REDACTED.into());
                } else {
                    redact_json(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        _ => {}
    }
}

/// A body with sensitive JSON values or form fields replaced.
fn redact_body(bytes: &[u8]) -> Body {
    if let Ok(mut v) = serde_json::from_slice::<Value>(bytes)
        && (v.is_object() || v.is_array())
    {
        redact_json(&mut v);
        return Body::Text(v.to_string());
    }
    if let Ok(text) = std::str::from_utf8(bytes)
        && !text.is_empty()
        && !text.contains(char::is_whitespace)
        && text.contains('=')
    {
        let pairs = redact_pairs(url::form_urlencoded::parse(text.as_bytes()));
        return Body::Text(
            url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs)
                .finish(),
        );
    }
    Body::from_bytes(bytes)
}

fn recorded_request(req: &Request) -> RecordedRequest {
    RecordedRequest {
        method: method_name(req.method).to_string(),
        url: redact_url(&req.url),
        body: redact_body(&req.body),
    }
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(u.origin().ascii_serialization())
}

impl Cassette {
    /// Reads a cassette file.
    pub(crate) fn load(path: &Path) -> anyhow::Result<Cassette> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the cassette {}", path.display()))?;
        let c: Cassette = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a wasm-ccm cassette (record one with --record-http)",
                path.display()
            )
        })?;
        if c.version != VERSION {
            anyhow::bail!(
                "{} is a version {} cassette; this wasm-ccm reads version {VERSION}: record it again",
                path.display(),
                c.version
            );
        }
        Ok(c)
    }
}

/// Forwards every request to the network and keeps a redacted copy of the exchange.
#[derive(Default)]
pub(crate) struct Recorder {
    interactions: Mutex<Vec<Interaction>>,
}

impl Recorder {
    /// The recording so far.
    pub(crate) fn cassette(&self, cloud_url: Option<String>) -> Cassette {
        let interactions = self
            .interactions
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default();
        let cloud_url =
            cloud_url.or_else(|| interactions.first().and_then(|i| origin_of(&i.request.url)));
        Cassette {
            version: VERSION,
            cloud_url,
            interactions,
        }
    }

    /// Writes the recording to `path`.
    pub(crate) fn save(&self, path: &Path, cloud_url: Option<String>) -> anyhow::Result<usize> {
        let cassette = self.cassette(cloud_url);
        let text = serde_json::to_string_pretty(&cassette)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write the cassette {}", path.display()))?;
        Ok(cassette.interactions.len())
    }
}

impl HttpInterceptor for Recorder {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        Box::pin(async move {
            let request = recorded_request(forward.request());
            let result = forward.send().await;
            let interaction = match &result {
                Ok(r) => Interaction {
                    request,
                    response: Some(RecordedResponse {
                        status: r.status,
                        headers: r
                            .headers
                            .iter()
                            .filter(|(k, _)| {
                                !k.eq_ignore_ascii_case("set-cookie") && !is_sensitive(k)
                            })
                            .cloned()
                            .collect(),
                        body: redact_body(&r.body),
                    }),
                    error: None,
                },
                Err(e) => Interaction {
                    request,
                    response: None,
                    error: Some(RecordedError {
                        case: error_case(e).to_string(),
                        message: error_message(e),
                    }),
                },
            };
            if let Ok(mut v) = self.interactions.lock() {
                v.push(interaction);
            }
            result
        })
    }
}

fn error_message(e: &HttpError) -> String {
    match e {
        HttpError::Denied(m)
        | HttpError::Timeout(m)
        | HttpError::Connect(m)
        | HttpError::TooLarge(m)
        | HttpError::Invalid(m) => m.clone(),
    }
}

/// The recordings of one request not yet served, and the one served last.
type Recordings = (VecDeque<Interaction>, Option<Interaction>);

/// Answers every request from a cassette, in recorded order per request; never touches the
/// network. A request with no recording fails with a `connect` error that says so.
pub(crate) struct Replayer {
    queues: Mutex<HashMap<RecordedRequest, Recordings>>,
    /// Requests that found no recording, for the report.
    misses: Mutex<BTreeMap<String, u64>>,
}

impl Replayer {
    /// Indexes a cassette.
    pub(crate) fn new(cassette: Cassette) -> Replayer {
        let mut queues: HashMap<RecordedRequest, Recordings> = HashMap::new();
        for i in cassette.interactions {
            queues.entry(i.request.clone()).or_default().0.push_back(i);
        }
        Replayer {
            queues: Mutex::new(queues),
            misses: Mutex::default(),
        }
    }

    /// `METHOD url → times` for requests the cassette could not answer.
    pub(crate) fn misses(&self) -> BTreeMap<String, u64> {
        self.misses.lock().map(|m| m.clone()).unwrap_or_default()
    }

    fn answer(&self, req: &Request) -> Result<Response, HttpError> {
        let key = recorded_request(req);
        let found = self.queues.lock().ok().and_then(|mut q| {
            let (queue, last) = q.get_mut(&key)?;
            // Once a request's recordings are used up, the last answer repeats: the state a
            // recording ended in is the state the cloud stays in.
            if let Some(next) = queue.pop_front() {
                *last = Some(next);
            }
            last.clone()
        });
        let Some(interaction) = found else {
            if let Ok(mut m) = self.misses.lock() {
                *m.entry(format!("{} {}", key.method, key.url)).or_default() += 1;
            }
            return Err(HttpError::Connect(format!(
                "the cassette has no recording of {} {}; record it again with --record-http (the driver now sends a request it did not send then)",
                key.method,
                strip_query(&key.url)
            )));
        };
        if let Some(r) = interaction.response {
            return Ok(Response {
                status: r.status,
                headers: r.headers,
                body: r.body.to_bytes().map_err(HttpError::Connect)?,
            });
        }
        let e = interaction.error.unwrap_or(RecordedError {
            case: "connect".into(),
            message: "recorded without a response".into(),
        });
        Err(match e.case.as_str() {
            "denied" => HttpError::Denied(e.message),
            "timeout" => HttpError::Timeout(e.message),
            "too-large" => HttpError::TooLarge(e.message),
            "invalid" => HttpError::Invalid(e.message),
            _ => HttpError::Connect(e.message),
        })
    }
}

impl HttpInterceptor for Replayer {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        let answer = self.answer(forward.request());
        Box::pin(async move { answer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_runtime::http::Method;

    fn req(method: Method, url: &str, body: &str) -> Request {
        Request {
            method,
            url: url.into(),
            headers: vec![("authorization".into(), "Bearer s3cret".into())],
            body: body.as_bytes().to_vec(),
            timeout_ms: None,
        }
    }

    #[test]
    fn secrets_and_volatile_values_are_redacted() {
        let r = recorded_request(&req(
            Method::Get,
            "https://cs.example/client/api?command=listZones&apiKey=AK&signature=abc&expires=2026",
            "",
        ));
        assert!(r.url.contains("command=listZones"), "{}", r.url);
        assert!(!r.url.contains("AK") && !r.url.contains("abc") && !r.url.contains("2026"));
        let form = recorded_request(&req(
            Method::Post,
            "https://auth.example/token",
            "grant_type=client_credentials&client_secret=hunter2",
        ));
        assert_eq!(
            form.body,
            Body::Text("grant_type=client_credentials&client_secret=REDACTED".into())
        );
        let json =
            redact_body(br#"{"access_token":"t0k","expires_in":3600,"items":[{"name":"a"}]}"#);
        let Body::Text(t) = json else { panic!() };
        assert!(!t.contains("t0k") && t.contains("\"name\":\"a\""), "{t}");
        assert_eq!(
            Body::from_bytes(&[0xff, 0x00]),
            Body::Binary { hex: "ff00".into() }
        );
    }

    #[test]
    fn replay_serves_in_order_then_repeats_the_last() {
        let interaction = |body: &str| Interaction {
            request: RecordedRequest {
                method: "GET".into(),
                url: "http://cloud/v1/things".into(),
                body: Body::default(),
            },
            response: Some(RecordedResponse {
                status: 200,
                headers: vec![],
                body: Body::Text(body.into()),
            }),
            error: None,
        };
        let replayer = Replayer::new(Cassette {
            version: VERSION,
            cloud_url: None,
            interactions: vec![interaction("[]"), interaction("[1]")],
        });
        let get = req(Method::Get, "http://cloud/v1/things", "");
        let bodies: Vec<Vec<u8>> = (0..3)
            .map(|_| replayer.answer(&get).unwrap().body)
            .collect();
        assert_eq!(
            bodies,
            vec![b"[]".to_vec(), b"[1]".to_vec(), b"[1]".to_vec()]
        );
        let miss = replayer
            .answer(&req(Method::Delete, "http://cloud/v1/things/1", ""))
            .unwrap_err();
        assert!(matches!(miss, HttpError::Connect(m) if m.contains("--record-http")));
        assert_eq!(replayer.misses().len(), 1);
    }
}
