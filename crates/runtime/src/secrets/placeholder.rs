//! The placeholders `init` gets in place of credentials: their form, minting, and finding one in
//! a text. A leaf of the secrets module.

/// What every placeholder starts with: reserved, and safe unencoded in a URL, a header and a
/// form body.
pub const PLACEHOLDER_PREFIX: &str = "wccm-secret.";

/// What replaces, in a response, a value the host computed for the request and the guest never
/// had (CloudStack's signature): it stands for nothing the guest could send.
pub(crate) const HOST_VALUE_MARK: &str = "wccm-host-value";

/// Hex digits after the prefix: 128 random bits.
const PLACEHOLDER_HEX: usize = 32;

/// A placeholder's full length.
pub const PLACEHOLDER_LEN: usize = PLACEHOLDER_PREFIX.len() + PLACEHOLDER_HEX;

/// A fresh placeholder: the prefix and 128 random bits. It names nothing, so a leaked one tells
/// nothing.
pub(crate) fn mint() -> String {
    format!("{PLACEHOLDER_PREFIX}{:032x}", rand::random::<u128>())
}

/// The placeholder starting at `text[at..]`, if one does.
pub(crate) fn placeholder_at(text: &[u8], at: usize) -> Option<&str> {
    let candidate = text.get(at..at + PLACEHOLDER_LEN)?;
    let (prefix, hex) = candidate.split_at(PLACEHOLDER_PREFIX.len());
    (prefix == PLACEHOLDER_PREFIX.as_bytes()
        && hex
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)))
    .then(|| std::str::from_utf8(candidate).ok())
    .flatten()
}
