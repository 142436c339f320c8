//! Drivers as OCI artifacts.
//!
//! - [`Reference`]: `oci://REGISTRY/REPO:TAG` or `…@sha256:DIGEST`; the registry is always
//!   explicit.
//! - [`Client::push`] publishes a component in the CNCF TAG-Runtime Wasm layout: config
//!   `application/vnd.wasm.config.v0+json` (`os: wasip2`, layer digests, the component's
//!   exports and imports), one `application/wasm` layer.
//! - [`Client::pull`] accepts the common Wasm layouts (CNCF, oci-client/Kubewarden/Spin,
//!   Istio's and its tar+gzip "compat" image), refuses others naming the accepted media types,
//!   checks every manifest and blob against its descriptor's size and digest ([`fetch`], the
//!   one way content is read by digest), and serves a digest reference from the
//!   content-addressed [`BlobCache`] without touching the network.
//! - Credentials come from a dockerconfigjson file ([`DockerConfig`]); Basic and Bearer-token
//!   challenges are answered. Plain HTTP is used only for loopback registries and those named
//!   insecure.
//! - Signatures ([`signature`], [`keys`], [`policy`]): cosign's key-based signatures (simple
//!   signing, the `sha256-….sig` tag and the referrers API), checked against a Kubewarden-style
//!   [`Policy`] before the Wasm layer is fetched ([`Client::pull_verified`]), at most a bounded
//!   number of them read ([`candidates`]), made by
//!   [`Client::sign`]; blob signatures for file drivers ([`signature::blob_signature`]).
//!   Keyless signatures ([`keyless`]): a certificate from a CA of an operator-provided
//!   Sigstore [`TrustRoot`], its Rekor entry checked offline, its identity matched.

pub mod artifact;
pub mod auth;
pub mod cache;
pub mod candidates;
pub mod client;
pub mod fetch;
pub mod keyless;
pub mod keys;
mod limits;
mod object;
pub mod policy;
pub mod reference;
mod refusal;
pub mod sign;
pub mod signature;
pub mod trust_root;
pub mod verify;

pub use artifact::ComponentInfo;
pub use auth::DockerConfig;
pub use cache::BlobCache;
pub use client::{Client, ClientOptions, Pulled, Pushed};
pub use keys::{PublicKey, SigningKey};
pub use policy::{Policy, Verdict};
pub use reference::Reference;
pub use sign::SignedArtifact;
pub use trust_root::TrustRoot;
pub use verify::Verified;
