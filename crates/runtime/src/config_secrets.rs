//! Credentials in the `--cloud-config` file, found by the host so that it can redact them.
//!
//! Every shipped cloud reads its credentials from that file or from the environment (upstream's
//! Secret formats: CloudStack's `api-key`/`secret-key` INI keys, PhoenixNAP's `clientSecret`
//! YAML key). The host already treats credential-named environment values as secrets; this module
//! does the same for the file, line by line, whatever its format (INI `key = value`, YAML
//! `key: value`, JSON `"key": "value",`), so that a driver which does not call `log.redact` — a
//! buggy or a hostile one — still cannot carry its credential out through an error, an event, a
//! log line or an answer the host writes. It is a net under the driver, not a parser: a value it
//! misses is one the driver must still `log.redact`.

/// Longest line scanned; a longer one is no `key = value` pair of a credential.
const MAX_LINE_BYTES: usize = 16 * 1024;

/// The values of credential-named keys in `config` (see the module doc), in file order.
pub(crate) fn secrets_in_config(config: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(config) else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.len() > MAX_LINE_BYTES {
            continue;
        }
        for value in pairs(line).into_iter().filter_map(credential_value) {
            if is_block_indicator(&value) {
                found.extend(block_scalar(line, &lines[i + 1..], value.starts_with('>')));
            } else {
                found.push(value);
            }
        }
    }
    found
}

/// A YAML block scalar's header (`|`, `>`, with a chomping `-`/`+` and an indentation digit in
/// either order): the value is on the indented lines that follow, not after the colon.
fn is_block_indicator(value: &str) -> bool {
    let mut rest = value.chars();
    matches!(rest.next(), Some('|' | '>'))
        && rest.as_str().len() <= 2
        && rest.all(|c| matches!(c, '-' | '+' | '1'..='9'))
}

/// The secrets of a block scalar under the key line `header`: each of its lines (a driver may
/// quote one) and the whole value as YAML reads it, lines joined by newlines (`|`) or spaces
/// (`>`, for lines without extra indentation).
fn block_scalar(header: &str, following: &[&str], folded: bool) -> Vec<String> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let key_indent = indent(header);
    let body: Vec<&str> = following
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) > key_indent)
        .map(|l| l.trim())
        .collect();
    let content: Vec<&str> = body.iter().copied().filter(|l| !l.is_empty()).collect();
    let mut secrets: Vec<String> = content.iter().map(|l| l.to_string()).collect();
    if content.len() > 1 {
        secrets.push(content.join(if folded { " " } else { "\n" }));
    }
    secrets
}

/// The `key: value` parts of one line: the line itself, or each comma-separated member of a
/// one-line JSON object.
fn pairs(line: &str) -> Vec<&str> {
    match line.trim().strip_prefix('{') {
        Some(object) => object.trim_end_matches('}').split(',').collect(),
        None => vec![line],
    }
}

/// The value of `line` when it is a `key = value` or `key: value` pair whose key names a
/// credential.
fn credential_value(line: &str) -> Option<String> {
    // A YAML list item (`- key: value`) is a pair too.
    let line = line.trim().trim_start_matches("- ").trim();
    if line.starts_with(['#', ';', '[']) {
        return None;
    }
    let split = line.find(['=', ':'])?;
    let key = unquote(line[..split].trim());
    let value = unquote(line[split + 1..].trim().trim_end_matches(',').trim());
    if value.is_empty() || !is_secret_env_name(&key_as_env_name(key)) {
        return None;
    }
    Some(value.to_string())
}

/// `api-key`, `clientSecret` and `tokenUrl` become `API_KEY`, `CLIENT_SECRET` and `TOKEN_URL`,
/// the shape [`is_secret_env_name`] judges (which knows an `_URL` is an address).
fn key_as_env_name(key: &str) -> String {
    let mut name = String::with_capacity(key.len() + 4);
    let mut previous_lower = false;
    for c in key.chars() {
        match c {
            '-' | '.' | ' ' => name.push('_'),
            c if c.is_ascii_uppercase() && previous_lower => {
                name.push('_');
                name.push(c);
            }
            c => name.push(c.to_ascii_uppercase()),
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    name
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// Environment variable names whose values the host treats as secrets without being told.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // Addresses are not credentials, even when their name says AUTH (`PNAP_AUTH_URL`).
    if ["_URL", "_URI", "_ENDPOINT", "_HOST"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
    {
        return false;
    }
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "KEY",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_in_ini_yaml_and_json() {
        let ini = b"[Global]\napi-url = https://cloud.example/client/api\napi-key = \"AK-123456\"\n; secret-key = commented\nsecret-key=SK-abcdef\nproject-id = p1\n";
        assert_eq!(secrets_in_config(ini), ["AK-123456", "SK-abcdef"]);
        let yaml = b"clientId: my-client\nclientSecret: 's3cr3t-value'\ntokenUrl: https://auth.example/token\n";
        assert_eq!(secrets_in_config(yaml), ["s3cr3t-value"]);
        let json = br#"{ "access_token": "tok-98765", "region": "rma" }"#;
        assert_eq!(secrets_in_config(json), ["tok-98765"]);
        let json = b"{\n  \"access_token\": \"tok-98765\",\n  \"region\": \"rma\"\n}\n";
        assert_eq!(secrets_in_config(json), ["tok-98765"]);
    }

    #[test]
    fn block_scalars_are_read_below_their_key() {
        let yaml =
            b"clientId: c\nclientSecret: |\n  line-one-secret\n  line-two-secret\nregion: r\n";
        assert_eq!(
            secrets_in_config(yaml),
            [
                "line-one-secret",
                "line-two-secret",
                "line-one-secret\nline-two-secret"
            ],
            "never the indicator `|` itself, which would redact every pipe"
        );
        let folded = b"auth:\n  clientSecret: >-\n    aaaa-bbbb\n    cccc\n\n  other: x\n";
        assert_eq!(
            secrets_in_config(folded),
            ["aaaa-bbbb", "cccc", "aaaa-bbbb cccc"]
        );
        let one = b"token: |2\n    only-line\n";
        assert_eq!(secrets_in_config(one), ["only-line"]);
        // A block that ends at once is empty; the next key is not its value.
        let empty = b"password: |\nzone: z\n";
        assert!(secrets_in_config(empty).is_empty());
        assert!(
            !is_block_indicator("|abc") && is_block_indicator("|+") && is_block_indicator(">2-")
        );
    }

    #[test]
    fn addresses_empty_values_and_other_keys_are_not_secrets() {
        let text = b"auth-url = https://a.example\npassword =\nzone = ch-gva-2\nnot a pair\n";
        assert!(secrets_in_config(text).is_empty());
        assert!(secrets_in_config(&[0xff, 0xfe]).is_empty(), "not UTF-8");
    }
}
