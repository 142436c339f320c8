//! What applying a driver's credentials to a request gives: the request as sent ([`Applied`])
//! or why it was refused ([`Refusal`]). A leaf.

use url::Url;

use super::tokens::TokenAsk;
use crate::model::http::Request;

/// A request with credentials applied, and what the response handling must know.
pub(crate) struct Applied {
    /// The request as it goes on the wire.
    pub wire: Request,
    /// Its URL.
    pub url: Url,
    /// A token request whose answer the host seals (and may answer from its cache).
    pub token: Option<TokenAsk>,
    /// Sealed tokens the request carried: a 401 drops them.
    pub sealed: Vec<String>,
    /// Values the host computed into the wire request that the guest never had (CloudStack's
    /// signature): the response is scanned for them too.
    pub host_values: Vec<String>,
}

/// Why a request was refused.
pub(crate) enum Refusal {
    /// A placeholder where its grant does not allow it (counted as misuse).
    Denied(String),
    /// A request the host cannot sign as asked.
    Invalid(String),
}
