//! `cloudscale://<server-uuid>` provider IDs, parsed as strictly as upstream.
//!
//! A provider ID that is not ours is an error, never "not found": a foreign ID says nothing about
//! whether the server exists, and "not found" would make the lifecycle controller delete the node.

use wasm_ccm_sdk::types::ProviderError;

/// The scheme of every provider ID this driver returns.
pub const SCHEME: &str = "cloudscale";

/// `cloudscale://<uuid>` for a server UUID (kept as the API spells it: canonical lowercase).
pub fn format(uuid: &str) -> String {
    format!("{SCHEME}://{uuid}")
}

/// The server UUID in a provider ID, in canonical lowercase form.
///
/// Like upstream: the ID must contain `://`, both sides are trimmed of spaces, the scheme must be
/// exactly `cloudscale` and the rest must parse as a UUID (the forms Go's `uuid.Parse` accepts).
pub fn parse(provider_id: &str) -> Result<String, ProviderError> {
    let invalid = |why: &str| {
        ProviderError::permanent(format!(
            "provider ID {provider_id:?} is not a cloudscale provider ID ({why}); expected \
             {SCHEME}://<server-uuid>"
        ))
    };
    let (scheme, rest) = provider_id
        .split_once("://")
        .ok_or_else(|| invalid("no `://`"))?;
    if scheme.trim_matches(' ') != SCHEME {
        return Err(invalid("wrong scheme"));
    }
    parse_uuid(rest.trim_matches(' ')).ok_or_else(|| invalid("not a UUID"))
}

/// Parses a UUID in any form Go's `uuid.Parse` accepts (`xxxxxxxx-xxxx-…`, `{…}`, `urn:uuid:…`,
/// 32 hex digits) and returns it canonical and lowercase.
pub fn parse_uuid(s: &str) -> Option<String> {
    let body = match s.len() {
        36 => s,
        38 if s.starts_with('{') && s.ends_with('}') => &s[1..37],
        45 if s
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("urn:uuid:")) =>
        {
            &s[9..]
        }
        32 => {
            if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let l = s.to_ascii_lowercase();
            return Some(format!(
                "{}-{}-{}-{}-{}",
                &l[..8],
                &l[8..12],
                &l[12..16],
                &l[16..20],
                &l[20..]
            ));
        }
        _ => return None,
    };
    let ok = body.bytes().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => b == b'-',
        _ => b.is_ascii_hexdigit(),
    });
    ok.then(|| body.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "2f7b1e3c-8f0a-4b5e-9c1d-0123456789ab";

    #[test]
    fn accepts_what_upstream_accepts() {
        assert_eq!(parse(&format(U)).unwrap(), U);
        assert_eq!(parse(&format!(" cloudscale :// {U} ")).unwrap(), U);
        assert_eq!(
            parse(&format!("cloudscale://{}", U.to_uppercase())).unwrap(),
            U
        );
        assert_eq!(parse(&format!("cloudscale://{{{U}}}")).unwrap(), U);
        assert_eq!(parse(&format!("cloudscale://urn:uuid:{U}")).unwrap(), U);
        assert_eq!(
            parse(&format!("cloudscale://{}", U.replace('-', ""))).unwrap(),
            U
        );
    }

    #[test]
    fn refuses_everything_else_as_an_error() {
        for bad in [
            "",
            U,
            "cloudscale:/x",
            "aws://i-123",
            "Cloudscale://2f7b1e3c-8f0a-4b5e-9c1d-0123456789ab",
            "cloudscale://2f7b1e3c-8f0a-4b5e-9c1d-0123456789",
            "cloudscale://2f7b1e3c_8f0a_4b5e_9c1d_0123456789ab",
            "cloudscale://zz7b1e3c-8f0a-4b5e-9c1d-0123456789ab",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(&e, ProviderError::Permanent(m) if m.contains("cloudscale://<server-uuid>")),
                "{bad}: {e}"
            );
        }
    }
}
