//! Drivers as OCI artifacts.
//!
//! - [`Reference`]: `oci://REGISTRY/REPO:TAG` or `…@sha256:DIGEST`; the registry is always
//!   explicit.
//! - [`Client::push`] publishes a component in the CNCF TAG-Runtime Wasm layout: config
//!   `application/vnd.wasm.config.v0+json` (`os: wasip2`, layer digests, the component's
//!   exports and imports), one `application/wasm` layer ([`pack`]).
//! - [`Client::pull`] accepts the common Wasm layouts (CNCF, oci-client/Kubewarden/Spin,
//!   Istio's and its tar+gzip "compat" image), refuses others naming the accepted media types,
//!   checks every manifest and blob against its descriptor's size and digest (`fetch.rs`, the
//!   one way content is read by digest), and serves a digest reference from the
//!   content-addressed [`BlobCache`] without touching the network.
//! - Credentials come from a dockerconfigjson file ([`DockerConfig`]); Basic and Bearer-token
//!   challenges are answered. Plain HTTP is used only for loopback registries and those named
//!   insecure.
//! - Signatures ([`signature`], [`SigningKey`], [`PublicKey`], [`Policy`]): cosign's key-based
//!   signatures (simple signing, the `sha256-….sig` tag and the referrers API), checked against
//!   a Kubewarden-style [`Policy`] before the Wasm layer is fetched ([`Client::pull_verified`]),
//!   at most a bounded number of them read (`candidates.rs`), made by [`Client::sign`]; blob
//!   signatures for file drivers ([`signature::blob_signature`]). Keyless signatures
//!   ([`keyless`]): a certificate from a CA of an operator-provided Sigstore [`TrustRoot`], its
//!   Rekor entry checked offline, its identity matched.
//!
//! The modules are private; what the binaries and tests use is re-exported here, except two
//! groups of names kept under their module (see the comments on `keyless` and `signature`).

mod artifact;
mod auth;
mod cache;
mod candidates;
mod client;
mod fetch;
// Public as a group: its annotation names and `Material` read as `keyless::CHAIN_ANNOTATION`,
// beside `signature::SIGNATURE_ANNOTATION`, which a root-level name would not say.
pub mod keyless;
mod keys;
mod limits;
mod object;
mod policy;
mod reference;
mod refusal;
mod sign;
// Public as a group: cosign's format (its media type, annotation and tag names, the payload,
// blob signatures) reads as `signature::…`, apart from the client and the policy.
pub mod signature;
mod trust_root;
mod verify;

pub use artifact::{
    ComponentInfo, Descriptor, Manifest, OCI_INDEX, OCI_MANIFEST, Packed, Platform, digest_of,
    pack, wasm_from_tar_gzip,
};
pub use auth::DockerConfig;
pub use cache::BlobCache;
pub use client::{Client, ClientOptions, Pulled, Pushed};
pub use keys::{PublicKey, SigningKey, encrypt_cosign_key, pkcs8_pem};
pub use policy::{Policy, Verdict};
pub use reference::{Reference, SCHEME};
pub use sign::SignedArtifact;
pub use trust_root::TrustRoot;
pub use verify::Verified;
