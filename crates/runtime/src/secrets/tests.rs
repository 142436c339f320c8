//! Tests of the vault: sealing the config and the environment, the placement matrix, CloudStack
//! signing, sealed OAuth2 tokens, response scrubbing and rotation.

use std::sync::Arc;

use super::*;
use crate::model::http::{Method, Request, Response};
use url::Url;

use crate::model::types::{Oauth2Seal, SecretDecl, SecretLocation, SecretOrigin, SecretUse};

const TOKEN: &str = "cloudscale-token-0123456789";
const API_KEY: &str = "cs-api-key-ABCDEFGH";
const SECRET_KEY: &str = "cs-secret/key+with=chars";
const CLIENT_ID: &str = "pnap-client-id-1234";
const CLIENT_SECRET: &str = "pnap client secret:&=";

fn env_origin(var: &str, default: &str) -> SecretOrigin {
    SecretOrigin {
        settings: vec![SecretLocation::Env(var.into())],
        default_url: default.into(),
    }
}

fn cloudscale() -> SecretDecl {
    SecretDecl {
        name: "access-token".into(),
        at: vec![SecretLocation::Env("CLOUDSCALE_ACCESS_TOKEN".into())],
        origin: env_origin("CLOUDSCALE_API_URL", "https://api.cloudscale.ch"),
        uses: vec![SecretUse::Bearer],
    }
}

fn cloudstack() -> Vec<SecretDecl> {
    let origin = SecretOrigin {
        settings: vec![SecretLocation::Ini(("Global".into(), "api-url".into()))],
        default_url: String::new(),
    };
    vec![
        SecretDecl {
            name: "api-key".into(),
            at: vec![SecretLocation::Ini(("Global".into(), "api-key".into()))],
            origin: origin.clone(),
            uses: vec![SecretUse::Param("apiKey".into())],
        },
        SecretDecl {
            name: "secret-key".into(),
            at: vec![SecretLocation::Ini(("Global".into(), "secret-key".into()))],
            origin,
            uses: vec![SecretUse::CloudstackSignature],
        },
    ]
}

const TOKEN_PATH: &str = "/auth/realms/BMC/protocol/openid-connect/token";

fn phoenixnap() -> Vec<SecretDecl> {
    let origin = SecretOrigin {
        settings: vec![SecretLocation::Json("/auth-url".into())],
        default_url: "https://auth.phoenixnap.com".into(),
    };
    vec![
        SecretDecl {
            name: "client-id".into(),
            at: vec![SecretLocation::Json("/clientID".into())],
            origin: origin.clone(),
            uses: vec![SecretUse::BasicUser, SecretUse::Param("client_id".into())],
        },
        SecretDecl {
            name: "client-secret".into(),
            at: vec![SecretLocation::Json("/clientSecret".into())],
            origin,
            uses: vec![
                SecretUse::BasicPassword,
                SecretUse::Param("client_secret".into()),
                SecretUse::Oauth2Client(Oauth2Seal {
                    token_path: TOKEN_PATH.into(),
                    token_origins: vec![SecretOrigin {
                        settings: vec![SecretLocation::Json("/base-url".into())],
                        default_url: "https://api.phoenixnap.com".into(),
                    }],
                }),
            ],
        },
    ]
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn get(url: &str, headers: &[(&str, &str)]) -> Request {
    Request {
        method: Method::Get,
        url: url.into(),
        headers: env(headers),
        body: Vec::new(),
        timeout_ms: None,
    }
}

fn form_post(url: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let mut headers = env(headers);
    headers.push((
        "content-type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    Request {
        method: Method::Post,
        url: url.into(),
        headers,
        body: body.as_bytes().to_vec(),
        timeout_ms: None,
    }
}

fn apply(vault: &Vault, req: &Request) -> Result<Option<Applied>, String> {
    let url = Url::parse(&req.url).map_err(|e| e.to_string())?;
    vault.apply(req, &url).map_err(|r| match r {
        Refusal::Denied(m) => format!("denied: {m}"),
        Refusal::Invalid(m) => format!("invalid: {m}"),
    })
}

fn sealed_cloudscale(url: Option<&str>) -> (Arc<Vault>, String) {
    let mut e = vec![
        ("CLOUDSCALE_ACCESS_TOKEN", TOKEN),
        ("CLOUDSCALE_API_TIMEOUT", "5"),
        ("CLOUDSCALE_OTHER_SECRET", "undeclared-secret-1"),
    ];
    if let Some(u) = url {
        e.push(("CLOUDSCALE_API_URL", u));
    }
    let sealed = Vault::seal(
        "cloudscale",
        &[cloudscale()],
        b"",
        &env(&e),
        &SecretOptions::default(),
    )
    .expect("sealed");
    let placeholder = sealed
        .env
        .iter()
        .find(|(k, _)| k == "CLOUDSCALE_ACCESS_TOKEN")
        .map(|(_, v)| v.clone())
        .expect("placeholder");
    assert!(placeholder.starts_with(PLACEHOLDER_PREFIX) && placeholder.len() == PLACEHOLDER_LEN);
    assert!(
        sealed
            .env
            .iter()
            .any(|(k, v)| k == "CLOUDSCALE_API_TIMEOUT" && v == "5")
    );
    assert!(
        !sealed
            .env
            .iter()
            .any(|(k, _)| k == "CLOUDSCALE_OTHER_SECRET"),
        "an undeclared credential-named variable stays out: {:?}",
        sealed.env
    );
    (sealed.vault.expect("vault"), placeholder)
}

#[test]
fn a_bearer_token_goes_only_to_its_origin_and_only_as_a_bearer_token() {
    let (vault, p) = sealed_cloudscale(None);
    let bearer = format!("Bearer {p}");
    let ok = apply(
        &vault,
        &get(
            "https://api.cloudscale.ch/v1/servers",
            &[("Authorization", &bearer)],
        ),
    )
    .expect("allowed")
    .expect("applied");
    assert_eq!(ok.wire.headers[0].1, format!("Bearer {TOKEN}"));
    assert_eq!(ok.wire.url, "https://api.cloudscale.ch/v1/servers");

    let denied = [
        // another origin: host, scheme, port
        get("https://evil.example/v1", &[("Authorization", &bearer)]),
        get("http://api.cloudscale.ch/v1", &[("Authorization", &bearer)]),
        get(
            "https://api.cloudscale.ch:8443/v1",
            &[("Authorization", &bearer)],
        ),
        // the right origin, the wrong place
        get(&format!("https://api.cloudscale.ch/v1?q={p}"), &[]),
        get(&format!("https://api.cloudscale.ch/v1/{p}"), &[]),
        get(&format!("https://api.cloudscale.ch/v1#{p}"), &[]),
        get("https://api.cloudscale.ch/v1", &[("X-Token", &p)]),
        get("https://api.cloudscale.ch/v1", &[(&format!("x-{p}"), "1")]),
        get(
            "https://api.cloudscale.ch/v1",
            &[("Authorization", &format!("Token {p}"))],
        ),
        form_post("https://api.cloudscale.ch/v1", &[], &format!("token={p}")),
    ];
    for req in denied {
        let e = apply(&vault, &req).err().unwrap_or_default();
        assert!(
            e.starts_with("denied: secret access-token"),
            "{} -> {e}",
            req.url
        );
        assert!(!e.contains(TOKEN) && !e.contains(&p), "{e}");
    }
    assert!(vault.misuse().iter().map(|(_, n)| n).sum::<u64>() >= 10);
    // A JSON body is no place for it either.
    let mut json = form_post(
        "https://api.cloudscale.ch/v1",
        &[],
        &format!("{{\"t\":\"{p}\"}}"),
    );
    json.headers.clear();
    let e = apply(&vault, &json).err().unwrap_or_default();
    assert!(
        e.starts_with("denied: secret access-token") && e.contains("the body outside a form field"),
        "{e}"
    );
    // A request without a placeholder goes as it is.
    assert!(
        apply(&vault, &get("https://api.cloudscale.ch/v1", &[]))
            .expect("ok")
            .is_none()
    );
}

#[test]
fn plain_http_is_for_loopback_unless_the_operator_allows_it() {
    let (vault, p) = sealed_cloudscale(Some("http://127.0.0.1:8080"));
    let bearer = format!("Bearer {p}");
    assert!(
        apply(
            &vault,
            &get("http://127.0.0.1:8080/v1", &[("Authorization", &bearer)])
        )
        .is_ok_and(|a| a.is_some())
    );
    let (vault, p) = sealed_cloudscale(Some("http://cloud.internal:8080"));
    let bearer = format!("Bearer {p}");
    let e = apply(
        &vault,
        &get(
            "http://cloud.internal:8080/v1",
            &[("Authorization", &bearer)],
        ),
    )
    .err()
    .unwrap_or_default();
    assert!(e.contains("--allow-plain-http-secrets"), "{e}");
}

fn sealed_cloudstack() -> (Arc<Vault>, String, String, Vec<u8>) {
    let file = format!(
        "[Global]\napi-url = https://cloud.example/client/api\napi-key = {API_KEY}\nsecret-key = \"{SECRET_KEY}\" ; comment\nzone = z1\n"
    );
    let sealed = Vault::seal(
        "cloudstack",
        &cloudstack(),
        file.as_bytes(),
        &[],
        &SecretOptions::default(),
    )
    .expect("sealed");
    let text = String::from_utf8(sealed.config.clone()).expect("utf-8");
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .map(|v| v.split(' ').next().unwrap_or_default().to_string())
            .expect("key")
    };
    let (k, s) = (value("api-key"), value("secret-key"));
    assert_eq!(
        text,
        format!(
            "[Global]\napi-url = https://cloud.example/client/api\napi-key = {k}\nsecret-key = {s} ; comment\nzone = z1\n"
        )
    );
    (sealed.vault.expect("vault"), k, s, sealed.config)
}

fn expires_in(secs: i64) -> String {
    let now = jiff::Timestamp::now().as_second() + secs;
    let ts = jiff::Timestamp::from_second(now).expect("time");
    ts.strftime("%Y-%m-%dT%H:%M:%S+0000").to_string()
}

#[test]
fn the_host_signs_cloudstack_requests_with_the_key_the_guest_never_sees() {
    let (vault, k, s, _) = sealed_cloudstack();
    let expires = cloudstack::encode(&expires_in(600));
    let url = format!(
        "https://cloud.example/client/api?command=listZones&name=a%20b&apiKey={k}&response=json&signatureversion=3&expires={expires}&signature=guess"
    );
    let applied = apply(&vault, &get(&url, &[]))
        .expect("allowed")
        .expect("applied");
    let wire = Url::parse(&applied.wire.url).expect("url");
    let params: Vec<(String, String)> = wire.query_pairs().into_owned().collect();
    let sig: Vec<&str> = params
        .iter()
        .filter(|(n, _)| n == "signature")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        sig.len(),
        1,
        "the guest's signature is replaced: {params:?}"
    );
    assert!(params.iter().any(|(n, v)| n == "apiKey" && v == API_KEY));
    let unsigned: Vec<(String, String)> = params
        .iter()
        .filter(|(n, _)| n != "signature")
        .cloned()
        .collect();
    assert_eq!(
        sig[0],
        cloudstack::signature(&unsigned, SECRET_KEY.as_bytes())
    );

    // POST: the signature goes into the form body.
    let body =
        format!("command=deployVirtualMachine&apiKey={k}&signatureversion=3&expires={expires}");
    let applied = apply(
        &vault,
        &form_post("https://cloud.example/client/api", &[], &body),
    )
    .expect("allowed")
    .expect("applied");
    let text = String::from_utf8(applied.wire.body).expect("utf-8");
    assert!(
        text.contains("&signature=")
            && text.contains(&format!("apiKey={}", form_encode_for_test(API_KEY))),
        "{text}"
    );

    // No expiry, no signature version, or an expiry too far ahead: not signed, nothing sent.
    let far = format!(
        "https://cloud.example/client/api?command=listZones&apiKey={k}&signatureversion=3&expires={}",
        cloudstack::encode(&expires_in(3600))
    );
    let none =
        format!("https://cloud.example/client/api?command=listZones&apiKey={k}&signatureversion=3");
    let unversioned = format!(
        "https://cloud.example/client/api?command=listZones&apiKey={k}&expires={}",
        cloudstack::encode(&expires_in(600))
    );
    for (bad, says) in [
        (far, "more than the 900 s the host signs for"),
        (none, "must carry an expires time"),
        (unversioned, "must carry signatureversion=3"),
    ] {
        let e = apply(&vault, &get(&bad, &[])).err().unwrap_or_default();
        assert!(e.starts_with("invalid:") && e.contains(says), "{bad}: {e}");
    }
    // The secret key has no place in a request at all.
    let leak =
        format!("https://cloud.example/client/api?command=listZones&apiKey={k}&secretkey={s}");
    assert!(apply(&vault, &get(&leak, &[])).is_err_and(|e| e.contains("secret secret-key")));
    // The api key to another origin.
    let other = format!("https://other.example/client/api?command=listZones&apiKey={k}");
    assert!(
        apply(&vault, &get(&other, &[]))
            .is_err_and(|e| e.contains("may go only to https://cloud.example"))
    );
}

fn form_encode_for_test(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

fn sealed_phoenixnap() -> (Arc<Vault>, String, String) {
    let file = format!(
        "{{\"clientID\": \"{CLIENT_ID}\", \"clientSecret\": \"{}\", \"location\": \"PHX\"}}",
        CLIENT_SECRET
    );
    let sealed = Vault::seal(
        "phoenixnap",
        &phoenixnap(),
        file.as_bytes(),
        &[],
        &SecretOptions::default(),
    )
    .expect("sealed");
    let v: serde_json::Value = serde_json::from_slice(&sealed.config).expect("json");
    let id = v["clientID"].as_str().expect("id").to_string();
    let secret = v["clientSecret"].as_str().expect("secret").to_string();
    assert_eq!(v["location"], "PHX");
    (sealed.vault.expect("vault"), id, secret)
}

#[test]
fn oauth2_credentials_go_in_basic_or_form_and_the_token_comes_back_sealed() {
    let (vault, id, secret) = sealed_phoenixnap();
    let token_url = format!("https://auth.phoenixnap.com{TOKEN_PATH}");
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    );
    use base64::Engine as _;
    let req = form_post(
        &token_url,
        &[("Authorization", &basic)],
        "grant_type=client_credentials",
    );
    let applied = apply(&vault, &req).expect("allowed").expect("applied");
    let wire_basic = applied
        .wire
        .headers
        .iter()
        .find(|(k, _)| k == "Authorization")
        .map(|(_, v)| v.clone())
        .expect("basic");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(wire_basic.trim_start_matches("Basic "))
        .expect("b64");
    assert_eq!(
        String::from_utf8(decoded).expect("utf-8"),
        format!(
            "{}:{}",
            form_encode_for_test(CLIENT_ID),
            form_encode_for_test(CLIENT_SECRET)
        )
    );
    let ask = applied.token.expect("a token request");

    // Form fields work too.
    let form = form_post(
        &token_url,
        &[],
        &format!("grant_type=client_credentials&client_id={id}&client_secret={secret}"),
    );
    let applied_form = apply(&vault, &form).expect("allowed").expect("applied");
    assert!(
        String::from_utf8_lossy(&applied_form.wire.body)
            .contains(&form_encode_for_test(CLIENT_SECRET))
    );

    // The answer is sealed; the cache answers the same request again.
    let answer = Response {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: br#"{"access_token":"real-access-token-xyz-123","expires_in":3600,"refresh_token":"r-123456789","token_type":"Bearer"}"#.to_vec(),
    };
    let sealed = vault.seal_token(ask, answer).expect("sealed");
    let v: serde_json::Value = serde_json::from_slice(&sealed.body).expect("json");
    let token_ph = v["access_token"].as_str().expect("token").to_string();
    assert!(token_ph.starts_with(PLACEHOLDER_PREFIX));
    assert!(v.get("refresh_token").is_none());
    let cached = vault.cached_token(ask).expect("cached");
    assert!(String::from_utf8_lossy(&cached.body).contains(&token_ph));

    // The sealed token goes to the API as a bearer token, nowhere else.
    let bearer = format!("Bearer {token_ph}");
    let api = apply(
        &vault,
        &get(
            "https://api.phoenixnap.com/bmc/v1/servers",
            &[("Authorization", &bearer)],
        ),
    )
    .expect("allowed")
    .expect("applied");
    assert_eq!(api.wire.headers[0].1, "Bearer real-access-token-xyz-123");
    assert_eq!(api.sealed, vec![token_ph.clone()]);
    let e = apply(
        &vault,
        &get(
            "https://auth.phoenixnap.com/x",
            &[("Authorization", &bearer)],
        ),
    )
    .err()
    .unwrap_or_default();
    assert!(
        e.starts_with("denied: a sealed OAuth2 token may go only as a bearer token")
            && e.contains("for https://auth.phoenixnap.com"),
        "{e}"
    );
    let e = apply(
        &vault,
        &get(&format!("https://api.phoenixnap.com/x?t={token_ph}"), &[]),
    )
    .err()
    .unwrap_or_default();
    assert!(
        e.starts_with("denied: a sealed OAuth2 token") && e.contains("query parameter t"),
        "{e}"
    );
    // The client secret never goes to the API origin.
    let e = apply(
        &vault,
        &form_post(
            "https://api.phoenixnap.com/x",
            &[],
            &format!("client_secret={secret}"),
        ),
    )
    .err()
    .unwrap_or_default();
    assert!(
        e.starts_with("denied: secret client-secret may go only to https://auth.phoenixnap.com"),
        "{e}"
    );

    // A response that reflects the token is scrubbed; a 401 drops it.
    let echoed = vault
        .scrubber()
        .scrub(b"{\"token\":\"real-access-token-xyz-123\"}")
        .expect("checked")
        .expect("found");
    assert!(String::from_utf8_lossy(&echoed).contains(&token_ph));
    vault.drop_tokens(&[token_ph]);
    assert!(vault.cached_token(ask).is_none());
}

#[test]
fn a_rotated_value_keeps_its_placeholder() {
    let (vault, k, _, config) = sealed_cloudstack();
    let text = String::from_utf8(config).expect("utf-8");
    let _ = text;
    let rotated = format!(
        "[Global]\napi-url = https://cloud.example/client/api\napi-key = new-api-key-0001\nsecret-key = {SECRET_KEY}\n"
    );
    assert_eq!(vault.rotate(rotated.as_bytes(), &[]), Ok(1));
    let expires = cloudstack::encode(&expires_in(600));
    let url = format!(
        "https://cloud.example/client/api?command=listZones&apiKey={k}&signatureversion=3&expires={expires}"
    );
    let applied = apply(&vault, &get(&url, &[]))
        .expect("allowed")
        .expect("applied");
    assert!(applied.wire.url.contains("apiKey=new-api-key-0001"));
    assert!(
        vault.scrubber().scrub(API_KEY.as_bytes()) == Ok(None),
        "the old value is no longer scrubbed"
    );
    // A layout change is refused and keeps the old values: the same request still carries
    // the rotated key, and the refusal says what to do.
    let two = format!("{rotated}api-key = second\n");
    let e = vault.rotate(two.as_bytes(), &[]).err().unwrap_or_default();
    assert!(
        e.contains("now holds 2 values") && e.contains("restart"),
        "{e}"
    );
    let again = apply(&vault, &get(&url, &[]))
        .expect("allowed")
        .expect("applied");
    assert!(
        again.wire.url.contains("apiKey=new-api-key-0001"),
        "{}",
        again.wire.url
    );
    assert!(!again.wire.url.contains("second"), "{}", again.wire.url);
}

#[test]
fn a_driver_without_declarations_gets_its_config_unchanged() {
    let sealed = Vault::seal(
        "x",
        &[],
        b"key = v",
        &env(&[("X_TOKEN", "t")]),
        &SecretOptions::default(),
    )
    .expect("sealed");
    assert!(sealed.vault.is_none());
    assert_eq!(sealed.config, b"key = v");
    assert_eq!(sealed.env, env(&[("X_TOKEN", "t")]));
}

#[test]
fn a_missing_origin_setting_is_an_error_that_names_the_secret() {
    let e = Vault::seal(
        "cloudstack",
        &cloudstack(),
        b"[Global]\napi-key = k\n",
        &[],
        &SecretOptions::default(),
    )
    .err()
    .unwrap_or_default();
    assert!(e.contains("secret api-key") && e.contains("api-url"), "{e}");
}

/// A token request in the client secret's name, with the guest's choice of path, method and
/// answer format.
fn token_request(
    vault: &Vault,
    id: &str,
    secret: &str,
    path: &str,
) -> Result<Option<Applied>, String> {
    let body = format!("grant_type=client_credentials&client_id={id}&client_secret={secret}");
    apply(
        vault,
        &form_post(&format!("https://auth.phoenixnap.com{path}"), &[], &body),
    )
}

#[test]
fn the_token_exchange_is_recognised_by_the_client_secret_not_by_the_path_spelling() {
    let (vault, id, secret) = sealed_phoenixnap();
    // Equivalent spellings (RFC 3986 §6.2.2.2, dot segments) are the token request, sealed.
    for path in [
        TOKEN_PATH.to_string(),
        TOKEN_PATH.replace("/token", "/%74oken"),
        TOKEN_PATH.replace("/token", "/%74%6F%6b%65%6E"),
        TOKEN_PATH.replace("/openid-connect/", "/x/../openid-connect/./"),
    ] {
        let applied = token_request(&vault, &id, &secret, &path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .expect("applied");
        assert!(
            applied.token.is_some(),
            "{path}: not taken for a token request"
        );
    }
    // Anywhere else, or not a POST, the client secret does not go at all.
    for path in [
        "/auth/realms/BMC/protocol/openid-connect/token/".to_string(),
        "/auth/realms/BMC/protocol/openid-connect/userinfo".to_string(),
        TOKEN_PATH.replace("/token", "/%2574oken"),
    ] {
        let e = token_request(&vault, &id, &secret, &path)
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("only in a POST to the token endpoint"),
            "{path}: {e}"
        );
    }
    let get = get(
        &format!("https://auth.phoenixnap.com{TOKEN_PATH}?client_id={id}&client_secret={secret}"),
        &[],
    );
    let e = apply(&vault, &get).err().unwrap_or_default();
    assert!(e.contains("a GET to"), "{e}");
    // The client ID alone is no token request (a confidential client must authenticate,
    // RFC 6749 §3.2.1): it passes, scrubbed like every request.
    let id_only = apply(
        &vault,
        &form_post(
            &format!("https://auth.phoenixnap.com{TOKEN_PATH}"),
            &[],
            &format!("client_id={id}"),
        ),
    )
    .expect("allowed")
    .expect("applied");
    assert!(id_only.token.is_none());
}

fn ask_of(vault: &Vault, id: &str, secret: &str) -> super::tokens::TokenAsk {
    token_request(vault, id, secret, TOKEN_PATH)
        .expect("allowed")
        .and_then(|a| a.token)
        .expect("a token request")
}

fn answer(status: u16, content_type: &str, body: &str) -> Response {
    Response {
        status,
        headers: vec![
            ("content-type".into(), content_type.into()),
            (
                "x-debug-token".into(),
                "real-access-token-in-a-header".into(),
            ),
        ],
        body: body.as_bytes().to_vec(),
    }
}

#[test]
fn every_answer_format_is_sealed_or_refused() {
    let (vault, id, secret) = sealed_phoenixnap();
    let ask = ask_of(&vault, &id, &secret);
    const REAL: &str = "real-access-token-abc-987";

    // A form answer (asked for with `Accept`) is sealed in its own format.
    let form = vault
        .seal_token(
            ask,
            answer(
                200,
                "application/x-www-form-urlencoded",
                &format!(
                    "access_token={REAL}&token_type=bearer&refresh_token=r-1234567890&scope=all"
                ),
            ),
        )
        .expect("sealed");
    let text = String::from_utf8_lossy(&form.body).into_owned();
    assert!(
        text.contains(&format!("access_token={PLACEHOLDER_PREFIX}")),
        "{text}"
    );
    assert!(
        !text.contains(REAL) && !text.contains("refresh_token") && text.contains("scope=all"),
        "{text}"
    );
    // No header of the endpoint's passes: the answer is the host's.
    assert!(
        form.headers
            .iter()
            .all(|(k, _)| k == "content-type" || k == "cache-control")
    );

    // JSON with an ID token: the ID token goes, the access token is sealed.
    let json = vault
        .seal_token(
            ask,
            answer(
                200,
                "application/json",
                &format!(
                    r#"{{"access_token":"{REAL}","id_token":"eyJhbGciOi.x.y","expires_in":"60"}}"#
                ),
            ),
        )
        .expect("sealed");
    let v: serde_json::Value = serde_json::from_slice(&json.body).expect("json");
    assert!(
        v["access_token"]
            .as_str()
            .is_some_and(|t| t.starts_with(PLACEHOLDER_PREFIX))
    );
    assert!(v.get("id_token").is_none());

    // What the host cannot seal is refused: a success in another format, a token under another
    // name, an error answer that names a token.
    for (status, ct, body) in [
        (200, "text/plain", format!("token: {REAL}")),
        (200, "application/xml", format!("<token>{REAL}</token>")),
        (200, "application/json", format!(r#"{{"token":"{REAL}"}}"#)),
        (
            200,
            "application/json",
            format!(r#"{{"access_token":"{REAL}","issued_token":"{REAL}"}}"#),
        ),
        (
            400,
            "application/json",
            format!(r#"{{"error":"x","access_token":"{REAL}"}}"#),
        ),
    ] {
        let refused = vault.seal_token(ask, answer(status, ct, &body));
        assert!(refused.is_err(), "{status} {ct} {body}: passed");
    }
    // An error page the host cannot read passes (scrubbed later); a JSON error is rebuilt.
    let page = vault
        .seal_token(ask, answer(401, "text/html", "<h1>invalid client</h1>"))
        .expect("passed");
    assert_eq!(page.body, b"<h1>invalid client</h1>");
    let error = vault
        .seal_token(
            ask,
            answer(401, "application/json", r#"{"error":"invalid_client"}"#),
        )
        .expect("passed");
    assert!(error.headers.iter().all(|(k, _)| k != "x-debug-token"));
}

#[test]
fn a_location_is_declared_once_and_one_value_has_one_origin() {
    // The same value under two names with different origins: refused at load.
    let mut decls = phoenixnap();
    decls[0].at = vec![SecretLocation::Json("/alias".into())];
    let file = format!("{{\"alias\": \"{CLIENT_SECRET}\", \"clientSecret\": \"{CLIENT_SECRET}\"}}");
    decls[0].origin = crate::model::types::SecretOrigin {
        settings: Vec::new(),
        default_url: "https://elsewhere.example".into(),
    };
    let e = Vault::seal(
        "phoenixnap",
        &decls,
        file.as_bytes(),
        &[],
        &SecretOptions::default(),
    )
    .err()
    .unwrap_or_default();
    assert!(
        e.contains("client-id and client-secret hold the same value")
            && e.contains("https://elsewhere.example"),
        "{e}"
    );
    // The same value for two secrets of one origin is allowed (nothing goes elsewhere).
    let mut same_origin = phoenixnap();
    same_origin[0].at = vec![SecretLocation::Json("/alias".into())];
    assert!(
        Vault::seal(
            "phoenixnap",
            &same_origin,
            file.as_bytes(),
            &[],
            &SecretOptions::default()
        )
        .is_ok()
    );
}

/// A loopback server that answers every request with its request line, raw and entity-escaped
/// (as CloudStack's XML errors quote a command), and the request line it read.
async fn echo_server() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 16 * 1024];
            let n = sock.read(&mut buf).await.unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let line = text.lines().next().unwrap_or_default().to_string();
            if let Ok(mut s) = record.lock() {
                s.push(line.clone());
            }
            let body = format!(
                "<error><errortext>{}</errortext><raw>{line}</raw></error>",
                line.replace('&', "&amp;")
            );
            let reply = format!(
                "HTTP/1.1 431 Bad\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
        }
    });
    (url, seen)
}

/// CloudStack's signature is computed by the host and never held by the guest: a server that
/// echoes the signed request hands the guest neither the API key nor the signature (which
/// would be replayable until `expires`).
#[tokio::test]
async fn an_echoed_signed_request_gives_the_guest_neither_key_nor_signature() {
    let (url, seen) = echo_server().await;
    let file = format!(
        "[Global]\napi-url = {url}/client/api\napi-key = {API_KEY}\nsecret-key = {SECRET_KEY}\n"
    );
    let sealed = Vault::seal(
        "cloudstack",
        &cloudstack(),
        file.as_bytes(),
        &[],
        &SecretOptions::default(),
    )
    .expect("sealed");
    let config = String::from_utf8(sealed.config).expect("utf-8");
    let key_ph = config
        .lines()
        .find_map(|l| l.strip_prefix("api-key = "))
        .expect("placeholder")
        .to_string();
    let policy = crate::egress::EgressPolicy::parse(std::slice::from_ref(&url)).expect("grant");
    let client = crate::capability::http::HttpCapability::new(policy, Default::default())
        .expect("client")
        .with_vault(sealed.vault);
    let expires = cloudstack::encode(&expires_in(600));
    let request = Request {
        method: Method::Get,
        url: format!(
            "{url}/client/api?command=listZones&apiKey={key_ph}&signatureversion=3&expires={expires}&response=xml"
        ),
        headers: Vec::new(),
        body: Vec::new(),
        timeout_ms: None,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (result, _) = client.send(request, deadline).await;
    let response = result.expect("answered");
    let line = seen.lock().map(|s| s.join("")).unwrap_or_default();
    // The attack fired: the server got the real key and a signature.
    assert!(line.contains(&format!("apiKey={API_KEY}")), "{line}");
    let signature = line
        .split(['?', '&', ' '])
        .find_map(|p| p.strip_prefix("signature="))
        .map(percent_encoding_decode)
        .expect("signed");
    let body = String::from_utf8_lossy(&response.body).into_owned();
    assert!(!body.contains(API_KEY), "{body}");
    assert!(body.contains(&key_ph), "{body}");
    assert!(body.contains(HOST_VALUE_MARK), "{body}");
    let scrubber = scrub::Scrubber::new([(signature.as_str(), "found")]);
    assert_eq!(scrubber.finds(&response.body), Ok(false), "{body}");
}

fn percent_encoding_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}
