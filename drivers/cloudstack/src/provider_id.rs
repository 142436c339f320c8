//! Provider IDs: `external-cloudstack://<vm-uuid>`. A bare ID is accepted, as upstream does; a
//! different scheme is refused rather than ignored.

use wasm_ccm_sdk::types::ProviderError;

/// The scheme (upstream's provider name).
pub const SCHEME: &str = "external-cloudstack";

/// `external-cloudstack://<id>`.
pub fn format(id: &str) -> String {
    format!("{SCHEME}://{id}")
}

/// The VM ID in a provider ID; another scheme or an empty ID is an error (never "not found":
/// that would delete a node another provider manages).
pub fn parse(provider_id: &str) -> Result<String, ProviderError> {
    let id = match provider_id.split_once("://") {
        None => provider_id,
        Some((SCHEME, id)) => id,
        Some((scheme, _)) => {
            return Err(ProviderError::InvalidConfig(format!(
                "provider ID {provider_id:?} belongs to provider {scheme:?}, not to {SCHEME}"
            )));
        }
    };
    if id.trim().is_empty() || id.contains('/') {
        return Err(ProviderError::InvalidConfig(format!(
            "provider ID {provider_id:?} is not {SCHEME}://<vm-uuid>"
        )));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let id = "915653c4-298b-4d74-bdee-4ced67a6a1c7";
        assert_eq!(parse(&format(id)).unwrap(), id);
        assert_eq!(parse(id).unwrap(), id);
        assert!(parse("").is_err());
        assert!(parse("external-cloudstack://").is_err());
        assert!(parse("aws://i-1").is_err());
        assert!(parse("external-cloudstack://a://b").is_err());
    }
}
