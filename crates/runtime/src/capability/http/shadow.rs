//! Shadow mode's cloud side: which requests would change the cloud, and what to say about one.
//!
//! A shadow run (`wasm-ccm run --shadow`) lets a driver read the cloud but refuses every request
//! that could change it before it leaves the host, so a shadow beside the CCM in charge can be
//! trusted to change nothing even when its driver is buggy or hostile. Reads are judged by the
//! method (GET, HEAD and OPTIONS are safe by RFC 9110 §9.2.1) with two refinements:
//!
//! - an OAuth2 token request (a form POST with `grant_type`) exchanges credentials and changes
//!   nothing, so it goes through (PhoenixNAP's driver needs one before any read);
//! - a request naming a CloudStack-style `command` (query or form) is a read only when the
//!   command is `list*`, `query*` or `get*` (CloudStack's API naming: every other command acts,
//!   and CloudStack accepts any command over GET as well as POST), so a driver cannot slip a
//!   `deployVirtualMachine` through a GET.

use crate::model::http::{Method, Request, method_name, strip_query};

/// Longest command name quoted in a summary (CloudStack's longest is well under this).
const MAX_COMMAND_BYTES: usize = 64;
/// Longest URL quoted in a summary.
const MAX_SUMMARY_URL_BYTES: usize = 512;

/// What a shadow run says about a request that would change the cloud (`POST
/// https://api.example/v1/load-balancers`, with ` command=createX` for a CloudStack-style
/// request); `None` for a read. The URL loses its query (queries may carry signatures or keys)
/// and is cut short; a command name is kept only when it is plain letters and digits.
pub(crate) fn would_write(req: &Request) -> Option<String> {
    if !is_write(req) {
        return None;
    }
    let command = command_of(req);
    let url = strip_query(crate::text::cut(&req.url, MAX_SUMMARY_URL_BYTES));
    let mut summary = format!("{} {url}", method_name(req.method));
    if let Some(c) = command {
        let plain = c.len() <= MAX_COMMAND_BYTES && c.chars().all(|ch| ch.is_ascii_alphanumeric());
        summary.push_str(" command=");
        summary.push_str(if plain { &c } else { "(unprintable)" });
    }
    Some(summary)
}

/// Whether `req` would change the cloud (see the module doc), without building a summary: every
/// request asks this, shadow mode or not (`HttpExchange::mutating`).
pub(crate) fn is_write(req: &Request) -> bool {
    match command_of(req) {
        Some(c) => !is_read_command(&c),
        None => {
            !matches!(req.method, Method::Get | Method::Head | Method::Options)
                && !is_token_request(req)
        }
    }
}

/// The message a driver gets for a refused write.
pub fn refusal(summary: &str) -> String {
    format!(
        "shadow mode: {summary} was not sent (wasm-ccm runs with --shadow and changes nothing in \
         the cloud; the request is recorded in the shadow report)"
    )
}

/// An OAuth2 token request (a form POST with `grant_type`): it exchanges credentials and
/// changes nothing in the cloud.
pub(crate) fn is_token_request(req: &Request) -> bool {
    req.method == Method::Post
        && std::str::from_utf8(&req.body).is_ok_and(|body| {
            url::form_urlencoded::parse(body.as_bytes()).any(|(k, _)| k == "grant_type")
                && !body.trim_start().starts_with('{')
        })
}

/// The CloudStack-style `command` a request names, in its query or its form body.
fn command_of(req: &Request) -> Option<String> {
    let from_pairs = |pairs: url::form_urlencoded::Parse<'_>| {
        pairs
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("command"))
            .map(|(_, v)| v.into_owned())
    };
    let query = req.url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    if let Some(c) = from_pairs(url::form_urlencoded::parse(query.as_bytes())) {
        return Some(c);
    }
    let form = req.headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("content-type")
            && v.to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
    });
    if form && let Ok(body) = std::str::from_utf8(&req.body) {
        return from_pairs(url::form_urlencoded::parse(body.as_bytes()));
    }
    None
}

/// CloudStack's read-only commands: `list*`, `query*` (`queryAsyncJobResult`) and `get*`
/// (`getVMPassword`, `getUser`), by the API's naming convention.
fn is_read_command(command: &str) -> bool {
    ["list", "query", "get"]
        .iter()
        .any(|p| command.len() > p.len() && command[..p.len()].eq_ignore_ascii_case(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, url: &str, headers: &[(&str, &str)], body: &str) -> Request {
        Request {
            method,
            url: url.to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            timeout_ms: None,
        }
    }

    const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

    #[test]
    fn reads_pass_and_writes_are_summarised_without_their_query() {
        let get = req(Method::Get, "https://api.example/v1/servers?tag=a", &[], "");
        assert_eq!(would_write(&get), None);
        assert_eq!(
            would_write(&req(Method::Head, "https://a/x", &[], "")),
            None
        );
        let post = req(
            Method::Post,
            "https://api.example/v1/load-balancers?key=SECRET",
            &[],
            r#"{"name":"x"}"#,
        );
        let summary = would_write(&post).expect("a POST writes");
        assert_eq!(summary, "POST https://api.example/v1/load-balancers?…");
        assert!(!refusal(&summary).contains("SECRET"));
        for m in [Method::Put, Method::Patch, Method::Delete] {
            assert!(would_write(&req(m, "https://a/x", &[], "")).is_some());
        }
    }

    #[test]
    fn token_requests_pass_but_json_posts_with_grant_type_do_not() {
        let token = req(
            Method::Post,
            "https://auth.example/token",
            &[FORM],
            "grant_type=client_credentials",
        );
        assert_eq!(would_write(&token), None);
        let json = req(
            Method::Post,
            "https://a/x",
            &[],
            r#"{"grant_type":"client_credentials"}"#,
        );
        assert!(would_write(&json).is_some());
    }

    #[test]
    fn cloudstack_commands_are_judged_by_name_whatever_the_method() {
        let list = req(
            Method::Get,
            "https://cs/client/api?command=listVirtualMachines&apiKey=K",
            &[],
            "",
        );
        assert_eq!(would_write(&list), None);
        let sneaky = req(
            Method::Get,
            "https://cs/client/api?command=deployVirtualMachine&apiKey=K",
            &[],
            "",
        );
        assert_eq!(
            would_write(&sneaky).as_deref(),
            Some("GET https://cs/client/api?… command=deployVirtualMachine")
        );
        let form = req(
            Method::Post,
            "https://cs/client/api",
            &[FORM],
            "command=createLoadBalancerRule&apiKey=K&signature=S",
        );
        let summary = would_write(&form).expect("a create writes");
        assert_eq!(
            summary,
            "POST https://cs/client/api command=createLoadBalancerRule"
        );
        let read_post = req(
            Method::Post,
            "https://cs/client/api",
            &[FORM],
            "command=queryAsyncJobResult&jobid=1",
        );
        assert_eq!(would_write(&read_post), None);
        // A bare prefix is not a read command, and odd names are not quoted.
        let bare = req(Method::Get, "https://cs/api?command=list", &[], "");
        assert!(would_write(&bare).is_some());
        let odd = req(Method::Get, "https://cs/api?command=de%0Aploy", &[], "");
        assert!(would_write(&odd).is_some_and(|s| s.ends_with("(unprintable)")));
    }
}
