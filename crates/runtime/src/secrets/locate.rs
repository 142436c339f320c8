//! Finding a declared credential in what the operator gives `init`, and putting a placeholder in
//! its place: only the value's bytes change, so the driver's own parser reads the file as before
//! and every other setting is byte-for-byte the operator's.
//!
//! - an environment variable: the whole value;
//! - an INI key (the gcfg dialect of upstream CloudStack CCM's file): the value after `=` up to
//!   an unquoted `;`/`#` comment, trimmed; quoted parts and escapes are decoded as gcfg does, and
//!   the placeholder replaces the whole value (it needs no quotes);
//! - a JSON Pointer: the contents of the string member it names (a placeholder needs no JSON
//!   escaping).

use std::ops::Range;

use crate::model::types::SecretLocation;

/// One place a value was found: its bytes in the config (or the index of the variable in the
/// environment) and the value as the driver reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// The value of `env[index]`.
    Env { index: usize, value: String },
    /// `config[span]`, decoded to `value`.
    Config { span: Range<usize>, value: String },
}

impl Found {
    /// The value the driver would read there.
    pub(crate) fn value(&self) -> &str {
        match self {
            Found::Env { value, .. } | Found::Config { value, .. } => value,
        }
    }
}

/// Every occurrence of `at` in `config` and `env`. A config that is not text (or, for a JSON
/// location, not JSON) has none; the error says so only when the location needs it parsed and
/// the file is not empty.
pub(crate) fn find(
    at: &SecretLocation,
    config: &[u8],
    env: &[(String, String)],
) -> Result<Vec<Found>, String> {
    match at {
        SecretLocation::Env(name) => Ok(env
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| k == name)
            .map(|(index, (_, v))| Found::Env {
                index,
                value: v.clone(),
            })
            .collect()),
        SecretLocation::Ini((section, key)) => {
            let Ok(text) = std::str::from_utf8(config) else {
                return Err("the cloud-config is not UTF-8 text".into());
            };
            Ok(ini(text, section, key))
        }
        SecretLocation::Json(pointer) => {
            if config.iter().all(u8::is_ascii_whitespace) {
                return Ok(Vec::new());
            }
            json(config, pointer)
        }
    }
}

/// The values of `key` in `[section]` (names compared as gcfg does, ignoring ASCII case).
fn ini(text: &str, section: &str, key: &str) -> Vec<Found> {
    let mut found = Vec::new();
    let mut in_section = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim();
        if trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let name = rest.split(']').next().unwrap_or_default();
            in_section = name.trim().eq_ignore_ascii_case(section);
            continue;
        }
        if !in_section {
            continue;
        }
        let Some(eq) = line.find('=') else { continue };
        if !line[..eq].trim().eq_ignore_ascii_case(key) {
            continue;
        }
        if let Some((span, value)) = ini_value(&line[eq + 1..]) {
            let base = start + eq + 1;
            found.push(Found::Config {
                span: base + span.start..base + span.end,
                value,
            });
        }
    }
    found
}

/// The span of a gcfg value in `raw` (what follows `=`) and the value decoded; `None` for a
/// value gcfg refuses (an unknown escape, an open quote), which the driver refuses too.
fn ini_value(raw: &str) -> Option<(Range<usize>, String)> {
    let begin = raw.len() - raw.trim_start().len();
    let mut end = begin;
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = raw[begin..].char_indices();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some((_, '"')) => out.push('"'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                _ => return None,
            },
            ';' | '#' if !quoted => break,
            '\r' | '\n' if !quoted => break,
            c => out.push(c),
        }
        end = match chars.clone().next() {
            Some((j, _)) => begin + j,
            None => raw.len(),
        };
    }
    if quoted {
        return None;
    }
    // The span ends after the last character that is not trailing white space.
    let text = &raw[begin..end];
    let trimmed_end = begin + text.trim_end().len();
    Some((begin..trimmed_end, out.trim_end().to_string()))
}

/// The string member `pointer` names in the JSON document `config`.
fn json(config: &[u8], pointer: &str) -> Result<Vec<Found>, String> {
    let path = parse_pointer(pointer)?;
    // serde_json's error says where the file breaks (it quotes no value); the scanner below
    // only finds the spans.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(config) {
        return Err(format!(
            "the cloud-config is not valid JSON ({e}); it must be strict JSON: no trailing commas, no comments"
        ));
    }
    let mut scanner = Scanner {
        bytes: config,
        at: 0,
    };
    let mut current = Vec::new();
    let mut found = Vec::new();
    scanner
        .value(&mut current, &path, &mut found)
        .ok_or_else(|| "the cloud-config is not valid JSON".to_string())?;
    scanner.skip_ws();
    if scanner.at != config.len() {
        return Err("the cloud-config is not valid JSON (text after the document)".into());
    }
    Ok(found)
}

/// RFC 6901: `/a/b~1c` → `["a", "b/c"]`.
fn parse_pointer(pointer: &str) -> Result<Vec<String>, String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON Pointer {pointer:?} does not start with /"));
    };
    rest.split('/')
        .map(|token| {
            let mut out = String::with_capacity(token.len());
            let mut chars = token.chars();
            while let Some(c) = chars.next() {
                match (c, c == '~') {
                    (_, true) => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return Err(format!("JSON Pointer {pointer:?} has a bad ~ escape")),
                    },
                    (c, false) => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

/// A minimal JSON reader that knows where each string lies; `None` for anything that is not
/// JSON.
struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Deepest nesting read; deeper documents are no cloud config.
const MAX_DEPTH: usize = 64;

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn value(
        &mut self,
        path: &mut Vec<String>,
        want: &[String],
        found: &mut Vec<Found>,
    ) -> Option<()> {
        if path.len() > MAX_DEPTH {
            return None;
        }
        self.skip_ws();
        match *self.bytes.get(self.at)? {
            b'{' => {
                self.at += 1;
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.skip_ws();
                    let (_, key) = self.string()?;
                    self.skip_ws();
                    (self.bytes.get(self.at) == Some(&b':')).then_some(())?;
                    self.at += 1;
                    path.push(key);
                    self.value(path, want, found)?;
                    path.pop();
                    self.skip_ws();
                    match self.bytes.get(self.at)? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.at += 1;
                self.skip_ws();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Some(());
                }
                let mut index = 0usize;
                loop {
                    path.push(index.to_string());
                    self.value(path, want, found)?;
                    path.pop();
                    index += 1;
                    self.skip_ws();
                    match self.bytes.get(self.at)? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => {
                let (span, value) = self.string()?;
                if path.as_slice() == want {
                    found.push(Found::Config { span, value });
                }
                Some(())
            }
            _ => {
                // A number or a literal: up to the next delimiter, checked by serde_json.
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| {
                    !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                }) {
                    self.at += 1;
                }
                serde_json::from_slice::<serde_json::Value>(&self.bytes[start..self.at])
                    .ok()
                    .filter(|v| !v.is_object() && !v.is_array() && !v.is_string())
                    .map(|_| ())
            }
        }
    }

    /// A string token at `self.at`: the span of its contents (inside the quotes) and its value.
    fn string(&mut self) -> Option<(Range<usize>, String)> {
        (self.bytes.get(self.at) == Some(&b'"')).then_some(())?;
        let start = self.at;
        self.at += 1;
        loop {
            match *self.bytes.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => break,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        let value: String = serde_json::from_slice(self.bytes.get(start..self.at)?).ok()?;
        Some((start + 1..self.at - 1, value))
    }
}

/// `config` with each span replaced by its placeholder (spans do not overlap).
pub(crate) fn rewrite(config: &[u8], mut spans: Vec<(Range<usize>, &str)>) -> Vec<u8> {
    spans.sort_by_key(|(span, _)| span.start);
    let mut out = Vec::with_capacity(config.len() + spans.len() * 48);
    let mut at = 0;
    for (span, placeholder) in spans {
        if span.start < at || span.end > config.len() {
            continue;
        }
        out.extend_from_slice(&config[at..span.start]);
        out.extend_from_slice(placeholder.as_bytes());
        at = span.end;
    }
    out.extend_from_slice(&config[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(found: &[Found]) -> Vec<&str> {
        found.iter().map(Found::value).collect()
    }

    fn replaced(config: &str, found: &[Found]) -> String {
        let spans = found
            .iter()
            .filter_map(|f| match f {
                Found::Config { span, .. } => Some((span.clone(), "PH")),
                Found::Env { .. } => None,
            })
            .collect();
        String::from_utf8(rewrite(config.as_bytes(), spans)).unwrap_or_default()
    }

    /// The CloudStack driver's own test file: quotes, a comment after the value, other keys.
    #[test]
    fn an_ini_value_is_replaced_and_nothing_else() {
        let file = "[Global]\napi-url = https://cloud.example/client/api\napi-key = KEY\nsecret-key = \"se;cret\" ; a comment\nzone = zone1\n";
        let at = |k: &str| SecretLocation::Ini(("Global".into(), k.into()));
        let key = find(&at("api-key"), file.as_bytes(), &[]).unwrap_or_default();
        assert_eq!(values(&key), ["KEY"]);
        let secret = find(&at("SECRET-KEY"), file.as_bytes(), &[]).unwrap_or_default();
        assert_eq!(values(&secret), ["se;cret"]);
        let both: Vec<Found> = key.into_iter().chain(secret).collect();
        assert_eq!(
            replaced(file, &both),
            "[Global]\napi-url = https://cloud.example/client/api\napi-key = PH\nsecret-key = PH ; a comment\nzone = zone1\n"
        );
    }

    #[test]
    fn ini_keys_outside_the_section_comments_and_crlf_are_respected() {
        let file =
            "; secret-key = no\n[Other]\nsecret-key = other\n[global]\r\nsecret-key=a\\\"b  \r\n";
        let at = SecretLocation::Ini(("Global".into(), "secret-key".into()));
        let found = find(&at, file.as_bytes(), &[]).unwrap_or_default();
        assert_eq!(values(&found), ["a\"b"]);
        assert_eq!(
            replaced(file, &found),
            "; secret-key = no\n[Other]\nsecret-key = other\n[global]\r\nsecret-key=PH  \r\n"
        );
    }

    #[test]
    fn a_json_member_is_replaced_inside_its_quotes() {
        let file = "{\n  \"clientID\": \"id-1\",\n  \"clientSecret\": \"s\\u00e9cret\\\"x\",\n  \"n\": [1, {\"clientSecret\": \"nested\"}], \"b\": true\n}";
        let found = find(
            &SecretLocation::Json("/clientSecret".into()),
            file.as_bytes(),
            &[],
        )
        .unwrap_or_default();
        assert_eq!(values(&found), ["sécret\"x"]);
        assert_eq!(
            replaced(file, &found),
            "{\n  \"clientID\": \"id-1\",\n  \"clientSecret\": \"PH\",\n  \"n\": [1, {\"clientSecret\": \"nested\"}], \"b\": true\n}"
        );
        let nested = find(
            &SecretLocation::Json("/n/1/clientSecret".into()),
            file.as_bytes(),
            &[],
        )
        .unwrap_or_default();
        assert_eq!(values(&nested), ["nested"]);
    }

    #[test]
    fn json_that_is_not_json_is_an_error_and_an_empty_file_has_nothing() {
        let at = SecretLocation::Json("/a".into());
        assert!(find(&at, b"{\"a\": \"x\",}", &[]).is_err());
        assert!(find(&at, b"{\"a\": 1} x", &[]).is_err());
        assert_eq!(find(&at, b"  \n", &[]), Ok(Vec::new()));
        assert!(find(&SecretLocation::Json("a".into()), b"{}", &[]).is_err());
    }

    #[test]
    fn env_values_are_found_by_exact_name() {
        let env = [
            ("CLOUDSCALE_ACCESS_TOKEN".to_string(), "t0ken".to_string()),
            ("CLOUDSCALE_API_URL".to_string(), "http://x".to_string()),
        ];
        let found = find(
            &SecretLocation::Env("CLOUDSCALE_ACCESS_TOKEN".into()),
            b"",
            &env,
        )
        .unwrap_or_default();
        assert_eq!(
            found,
            [Found::Env {
                index: 0,
                value: "t0ken".into()
            }]
        );
    }
}
