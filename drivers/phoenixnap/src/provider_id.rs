//! Provider IDs: `phoenixnap://<server-id>`; a bare ID is accepted, as upstream does.

use wasm_ccm_sdk::types::ProviderError;

/// The scheme.
pub const SCHEME: &str = "phoenixnap";

/// `phoenixnap://<id>`.
pub fn format(id: &str) -> String {
    format!("{SCHEME}://{id}")
}

/// The server ID in a provider ID: `phoenixnap://<id>` or a bare `<id>`; another scheme, an
/// empty ID or more than one `://` is an error (never "not found": that would delete a node
/// another provider manages).
pub fn parse(provider_id: &str) -> Result<String, ProviderError> {
    let parts: Vec<&str> = provider_id.split("://").collect();
    let id = match parts[..] {
        [id] => id,
        [SCHEME, id] => id,
        [scheme, _] => {
            return Err(ProviderError::InvalidConfig(format!(
                "provider ID {provider_id:?} belongs to provider {scheme:?}, not to phoenixnap"
            )));
        }
        _ => {
            return Err(ProviderError::InvalidConfig(format!(
                "provider ID {provider_id:?} is not phoenixnap://<server-id>"
            )));
        }
    };
    if id.trim().is_empty() || id.contains('/') {
        return Err(ProviderError::InvalidConfig(format!(
            "provider ID {provider_id:?} has no server ID"
        )));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(
            parse("phoenixnap://5ff5cc9bc1acf144d9106233").unwrap(),
            "5ff5cc9bc1acf144d9106233"
        );
        assert_eq!(
            parse("5ff5cc9bc1acf144d9106233").unwrap(),
            "5ff5cc9bc1acf144d9106233"
        );
        assert!(parse("").is_err());
        assert!(parse("phoenixnap://").is_err());
        assert!(parse("aws://i-1").is_err());
        assert!(parse("a://b://c").is_err());
        assert_eq!(format("x"), "phoenixnap://x");
    }
}
