//! Credentials never enter the guest (issue 31): the driver declares where its credentials sit
//! (`provider-info.secrets`); the host reads them, gives `init` opaque placeholders in their
//! place, and applies the real values only to requests toward each secret's origin, in the
//! positions its declaration names.
//!
//! This file only declares and re-exports; the parts depend on each other in one direction
//! (`vault` on the leaves `placeholder`, `tokens`, `misuse`, `outcome`, `locate`, `scrub`;
//! `apply` and `oauth` add methods to the vault):
//!
//! - `locate`: finding a value in the config or the environment, and rewriting only its bytes;
//! - [`Vault`] (`vault.rs`): the table of placeholders, values and grants of one driver, built
//!   at load and rotated in place (placeholders never change, so the driver is not
//!   re-initialised);
//! - `apply`: per request, the placement check (a placeholder anywhere its grant does not name
//!   refuses the request) and the substitution, with CloudStack's signature computed here;
//! - `oauth` and `tokens`: OAuth2 client-credentials tokens sealed behind placeholders, cached
//!   per driver;
//! - `scrub`: every value and its encodings replaced in responses, and handed to the redactor.

mod apply;
pub mod cloudstack;
mod locate;
mod misuse;
mod oauth;
mod outcome;
mod placeholder;
pub(crate) mod scrub;
mod tokens;
mod vault;

pub(crate) use outcome::{Applied, Refusal};
pub(crate) use placeholder::HOST_VALUE_MARK;
pub use placeholder::{PLACEHOLDER_LEN, PLACEHOLDER_PREFIX};
pub use scrub::Unscrubbable;
pub use vault::*;

#[cfg(test)]
mod tests;
