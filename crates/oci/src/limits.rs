//! How much of what a registry lists is read for one driver, and what was left unread.
//!
//! A registry chooses how many signatures and signature manifests it lists; reading them is
//! bounded here. The bounds are shared by the reader ([`crate::candidates`]) and by the
//! refusal that says what was not checked ([`crate::refusal`]), so they live in this leaf.

/// At most this many signatures are checked for one driver (cosign stores a few; a hostile
/// registry may list thousands, each a fetch and a verification).
pub(crate) const MAX_CANDIDATES: usize = 64;
/// At most this many signature manifests are read for one driver (the `.sig` tag's and
/// referrers'), each a fetch even when it holds no signature.
pub(crate) const MAX_SIGNATURE_MANIFESTS: usize = 16;

/// What a registry listed that was not read: the bounds were reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Unchecked {
    /// Signature layers (or bundles) seen and not checked.
    pub(crate) candidates: usize,
    /// Signature manifests listed and not read (how many signatures they hold is unknown).
    pub(crate) manifests: usize,
}

impl Unchecked {
    /// Whether everything listed was read.
    pub(crate) fn is_none(&self) -> bool {
        *self == Unchecked::default()
    }
}
