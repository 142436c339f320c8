//! The scanner judged as a property (any value, any encoding a server applies, any position)
//! and against the reflections of real servers. The oracle is independent of the scanner: the
//! guest's own way back (the inverse of the encoding, done with other code), applied to what
//! the scanner lets through.

use base64::Engine as _;
use proptest::prelude::*;

use super::*;

const PLACEHOLDER: &str = "wccm-secret.0123456789abcdef0123456789abcdef";

fn scrubbed(value: &str, text: &[u8]) -> Vec<u8> {
    let scrubber = Scrubber::new([(value, PLACEHOLDER)]);
    match scrubber.scrub(text) {
        Ok(Some(out)) => out,
        Ok(None) => text.to_vec(),
        Err(e) => panic!("refused: {e}"),
    }
}

/// Percent-encoding with a chosen safe set (Python's `quote(safe=…)`), upper or lower hex.
fn percent(value: &[u8], safe: &[u8], lower: bool) -> String {
    let mut out = String::new();
    for &b in value {
        if b.is_ascii_alphanumeric() || safe.contains(&b) {
            out.push(b as char);
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Go's `encoding/json` default: `&`, `<`, `>` (and U+2028/9) as `\\u00XX`.
fn go_json(text: &str) -> String {
    let json = serde_json::to_string(text).unwrap_or_default();
    json.replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

fn xml_entities(text: &str, numeric: bool) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match (c, numeric) {
            ('&', false) => out.push_str("&amp;"),
            ('<', false) => out.push_str("&lt;"),
            ('>', false) => out.push_str("&gt;"),
            ('"', false) => out.push_str("&quot;"),
            ('\'', false) => out.push_str("&apos;"),
            (c, true) if !c.is_ascii_alphanumeric() => out.push_str(&format!("&#{};", c as u32)),
            (c, _) => out.push(c),
        }
    }
    out
}

/// The encodings a server may reflect a text in, each with the guest's way back.
#[derive(Debug, Clone, Copy)]
enum Encoding {
    Raw,
    PercentAll,
    PythonQuote,
    FormPlus,
    DoublePercent,
    GoJson,
    JsonAllEscaped,
    XmlNamed,
    XmlNumeric,
    HexLower,
    HexUpperSpaced,
    Base64Std,
    Base64Url,
    Base64OfPercent,
    PercentOfJson,
    Utf16Le,
}

const ALL: &[Encoding] = &[
    Encoding::Raw,
    Encoding::PercentAll,
    Encoding::PythonQuote,
    Encoding::FormPlus,
    Encoding::DoublePercent,
    Encoding::GoJson,
    Encoding::JsonAllEscaped,
    Encoding::XmlNamed,
    Encoding::XmlNumeric,
    Encoding::HexLower,
    Encoding::HexUpperSpaced,
    Encoding::Base64Std,
    Encoding::Base64Url,
    Encoding::Base64OfPercent,
    Encoding::PercentOfJson,
    Encoding::Utf16Le,
];

fn encode(e: Encoding, text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let b64 = |t: &[u8], url: bool| {
        if url {
            base64::engine::general_purpose::URL_SAFE.encode(t)
        } else {
            base64::engine::general_purpose::STANDARD.encode(t)
        }
    };
    match e {
        Encoding::Raw => b.to_vec(),
        Encoding::PercentAll => percent(b, b"", false).into_bytes(),
        Encoding::PythonQuote => percent(b, b"/_.-~", false).into_bytes(),
        Encoding::FormPlus => url::form_urlencoded::byte_serialize(b)
            .collect::<String>()
            .into_bytes(),
        Encoding::DoublePercent => {
            percent(percent(b, b"", true).as_bytes(), b"", false).into_bytes()
        }
        Encoding::GoJson => go_json(text).into_bytes(),
        Encoding::JsonAllEscaped => text
            .encode_utf16()
            .map(|u| format!("\\u{u:04x}"))
            .collect::<String>()
            .into_bytes(),
        Encoding::XmlNamed => xml_entities(text, false).into_bytes(),
        Encoding::XmlNumeric => xml_entities(text, true).into_bytes(),
        Encoding::HexLower => hex::encode(b).into_bytes(),
        Encoding::HexUpperSpaced => b
            .iter()
            .map(|x| format!("{x:02X}"))
            .collect::<Vec<_>>()
            .join(" ")
            .into_bytes(),
        Encoding::Base64Std => b64(b, false).into_bytes(),
        Encoding::Base64Url => b64(b, true).into_bytes(),
        Encoding::Base64OfPercent => b64(percent(b, b"/", false).as_bytes(), false).into_bytes(),
        Encoding::PercentOfJson => percent(go_json(text).as_bytes(), b"", false).into_bytes(),
        Encoding::Utf16Le => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
    }
}

/// What the guest recovers from `text` for encoding `e`: the inverse applied leniently (what
/// does not decode stays as it is), by code other than the scanner's.
fn recover(e: Encoding, text: &[u8]) -> Vec<u8> {
    let lossy = String::from_utf8_lossy(text).into_owned();
    let pct = |t: &[u8]| percent_encoding::percent_decode(t).collect::<Vec<u8>>();
    let b64_pieces = |t: &str, url: bool| -> Vec<u8> {
        // As lenient as a guest can be: any padding, any trailing bits.
        let config = base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent);
        let alphabet_of = if url {
            &base64::alphabet::URL_SAFE
        } else {
            &base64::alphabet::STANDARD
        };
        let engine = &base64::engine::GeneralPurpose::new(alphabet_of, config);
        let alphabet = |c: char| {
            c.is_ascii_alphanumeric()
                || if url {
                    c == '-' || c == '_'
                } else {
                    c == '+' || c == '/'
                }
        };
        let mut out = Vec::new();
        for piece in t.split(|c: char| !alphabet(c)) {
            for skip in 0..4 {
                let p = piece.get(skip..).unwrap_or_default();
                let p = if p.len() % 4 == 1 {
                    &p[..p.len() - 1]
                } else {
                    p
                };
                out.extend(engine.decode(p).unwrap_or_default());
                out.push(0);
            }
        }
        out
    };
    match e {
        Encoding::Raw => text.to_vec(),
        Encoding::PercentAll | Encoding::PythonQuote => pct(text),
        Encoding::FormPlus => url::form_urlencoded::parse(&[b"x=", text].concat())
            .next()
            .map(|(_, v)| v.into_owned().into_bytes())
            .unwrap_or_default(),
        Encoding::DoublePercent => pct(&pct(text)),
        Encoding::GoJson => serde_json::from_str::<String>(&lossy)
            .unwrap_or(lossy)
            .into_bytes(),
        Encoding::JsonAllEscaped => serde_json::from_str::<String>(&format!("\"{lossy}\""))
            .unwrap_or(lossy)
            .into_bytes(),
        Encoding::XmlNamed | Encoding::XmlNumeric => {
            let mut out = lossy;
            for (from, to) in [
                ("&lt;", "<"),
                ("&gt;", ">"),
                ("&quot;", "\""),
                ("&apos;", "'"),
            ] {
                out = out.replace(from, to);
            }
            let mut decoded = String::new();
            let mut rest = out.as_str();
            while let Some(at) = rest.find("&#") {
                decoded.push_str(&rest[..at]);
                let tail = &rest[at + 2..];
                match tail.find(';').and_then(|end| {
                    tail[..end]
                        .parse::<u32>()
                        .ok()
                        .and_then(char::from_u32)
                        .map(|c| (c, end))
                }) {
                    Some((c, end)) => {
                        decoded.push(c);
                        rest = &tail[end + 1..];
                    }
                    None => {
                        decoded.push_str("&#");
                        rest = tail;
                    }
                }
            }
            decoded.push_str(rest);
            decoded.replace("&amp;", "&").into_bytes()
        }
        Encoding::HexLower => {
            let mut out = Vec::new();
            for skip in 0..2 {
                let t = lossy.get(skip..).unwrap_or_default();
                for piece in t.split(|c: char| !c.is_ascii_hexdigit()) {
                    let p = &piece[..piece.len() - piece.len() % 2];
                    out.extend(hex::decode(p).unwrap_or_default());
                    out.push(0);
                }
            }
            out
        }
        Encoding::HexUpperSpaced => {
            let joined: String = lossy.split(' ').collect();
            recover(Encoding::HexLower, joined.as_bytes())
        }
        Encoding::Base64Std => b64_pieces(&lossy, false),
        Encoding::Base64Url => b64_pieces(&lossy, true),
        Encoding::Base64OfPercent => pct(&b64_pieces(&lossy, false)),
        Encoding::PercentOfJson => recover(Encoding::GoJson, &pct(text)),
        Encoding::Utf16Le => {
            let mut out = Vec::new();
            for skip in 0..2 {
                let units: Vec<u16> = text
                    .get(skip..)
                    .unwrap_or_default()
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                out.extend(String::from_utf16_lossy(&units).into_bytes());
            }
            out
        }
    }
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Credentials as clouds issue them: Base64 keys and passwords with `& < > / + = %` and more.
fn value() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[A-Za-z0-9&<>/+=%:;?#@!$'\"\\\\ ._~-]{8,40}")
        .unwrap_or_else(|e| panic!("regex: {e}"))
}

/// Text around the value: ordinary characters and the ones each encoding treats specially.
fn around() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[A-Za-z0-9 &%+/=<>\"\\\\:,{}.-]{0,24}")
        .unwrap_or_else(|e| panic!("regex: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the value, the encoding and the text around it, the guest cannot get the value
    /// back from what the scanner lets through, and the scanner did replace something.
    #[test]
    fn no_encoding_at_any_position_gives_the_value_back(
        value in value(),
        before in around(),
        after in around(),
        which in 0..ALL.len(),
    ) {
        let e = ALL[which];
        let reflected = encode(e, &format!("{before}{value}{after}"));
        // Positive control: without scrubbing, the guest gets the value back.
        prop_assert!(holds(&recover(e, &reflected), &value), "{e:?} control");
        let out = scrubbed(&value, &reflected);
        prop_assert!(!holds(&recover(e, &out), &value), "{e:?}: {:?}", String::from_utf8_lossy(&out));
        prop_assert!(!holds(&out, &value), "{e:?} raw");
        prop_assert!(holds(&out, PLACEHOLDER), "{e:?}: nothing replaced");
    }
}

const KEY: &str = "AKIA/x+y=z&w<v>u%t";

#[test]
fn go_json_error_echoing_a_query() {
    // What a Go API answers with `json.NewEncoder(w).Encode(map[string]string{"error": …})`.
    let body = format!(
        "{{\"error\":\"invalid request: {}\"}}\n",
        go_json(&format!("GET /v1/servers?apikey={KEY}&x=1")).trim_matches('"')
    );
    assert!(body.contains("\\u0026w\\u003cv\\u003e"), "{body}");
    let out = String::from_utf8_lossy(&scrubbed(KEY, body.as_bytes())).into_owned();
    assert!(
        out.contains(PLACEHOLDER) && !out.contains("\\u0026w\\u003cv"),
        "{out}"
    );
}

#[test]
fn python_quote_keeps_the_slash() {
    // urllib.parse.quote(key) keeps `/` (its default safe set): "AKIA/x%2By%3Dz%26w%3Cv%3Eu%25t".
    let reflected = format!(
        "not found: /api?key={}",
        percent(KEY.as_bytes(), b"/_.-~", false)
    );
    assert!(reflected.contains("AKIA/x%2By"), "{reflected}");
    let out = String::from_utf8_lossy(&scrubbed(KEY, reflected.as_bytes())).into_owned();
    assert_eq!(out, format!("not found: /api?key={PLACEHOLDER}"));
}

#[test]
fn cloudstack_xml_error_quoting_the_request() {
    // CloudStack answers `response=xml` errors with the command's parameters entity-escaped.
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><listvirtualmachinesresponse cloud-stack-version=\"4.19.0\"><errorcode>401</errorcode><errortext>unable to verify user credentials and/or request signature: apikey={}&amp;command=listVirtualMachines</errortext></listvirtualmachinesresponse>",
        xml_entities(KEY, false)
    );
    let out = String::from_utf8_lossy(&scrubbed(KEY, body.as_bytes())).into_owned();
    assert!(
        out.contains(&format!("apikey={PLACEHOLDER}&amp;command")),
        "{out}"
    );
}

#[test]
fn sso_redirect_quoting_the_original_url_twice() {
    // An SSO proxy sends the browser to its login page with the original URL (whose query held
    // the key, form-encoded) percent-encoded again in `return_to`.
    let original = format!(
        "https://api.example/v1/servers?api_key={}",
        url::form_urlencoded::byte_serialize(KEY.as_bytes()).collect::<String>()
    );
    let location = format!(
        "https://sso.example/login?return_to={}",
        url::form_urlencoded::byte_serialize(original.as_bytes()).collect::<String>()
    );
    assert!(location.contains("%252F"), "{location}");
    let out = String::from_utf8_lossy(&scrubbed(KEY, location.as_bytes())).into_owned();
    assert!(out.contains(PLACEHOLDER), "{out}");
    let once = percent_encoding::percent_decode_str(&out)
        .decode_utf8_lossy()
        .into_owned();
    let twice = percent_encoding::percent_decode_str(&once)
        .decode_utf8_lossy()
        .into_owned();
    assert!(!twice.contains(KEY), "{twice}");
}

#[test]
fn aws_style_string_to_sign_in_hex_bytes() {
    let sts = format!("AWS4-HMAC-SHA256\n20261128T000000Z\n{KEY}");
    let bytes: Vec<String> = sts.bytes().map(|b| format!("{b:02x}")).collect();
    let body = format!(
        "<Error><StringToSignBytes>{}</StringToSignBytes></Error>",
        bytes.join(" ")
    );
    let out = String::from_utf8_lossy(&scrubbed(KEY, body.as_bytes())).into_owned();
    assert!(out.contains(PLACEHOLDER), "{out}");
}

#[test]
fn clean_text_is_not_copied_and_short_values_are_ignored() {
    let scrubber = Scrubber::new([("s3cr3t/key+with space", "[P]"), ("short", "[S]")]);
    assert_eq!(scrubber.scrub(b"nothing here, short"), Ok(None));
    assert_eq!(
        scrubber.scrub(b"{\"a\":\"x\\n%41&amp;QUJDREVGR0hJSktM\"}"),
        Ok(None)
    );
    assert!(Scrubber::new([("short", "[S]")]).is_empty());
}

#[test]
fn a_text_escaped_deeper_than_the_host_checks_is_refused() {
    let scrubber = Scrubber::new([(KEY, PLACEHOLDER)]);
    let mut text = KEY.to_string();
    for _ in 0..=MAX_SAME_KIND_ROUNDS {
        text = percent(text.as_bytes(), b"", false);
    }
    assert!(scrubber.scrub(text.as_bytes()).is_err());
    // Three layers, as real redirects nest them, are read.
    let mut three = format!("x={KEY}");
    for _ in 0..3 {
        three = percent(three.as_bytes(), b"", false);
    }
    let out = scrubber.scrub(three.as_bytes()).ok().flatten();
    assert!(out.is_some_and(|o| holds(&o, PLACEHOLDER)));
}
