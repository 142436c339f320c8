//! [`Lang`]: the languages `wasm-ccm-dev new` generates a driver project in.

/// The languages a project can be generated in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    /// Rust with `wasm-ccm-sdk`, built by cargo for wasm32-wasip2.
    Rust,
    /// Python with `wasm_ccm_sdk`, built by componentize-py.
    Python,
    /// JavaScript with `wasm-ccm-sdk`, built by jco (componentize-js).
    Js,
}

impl Lang {
    /// The SDK directory's name under `sdk/`, and the `--lang` value.
    pub(super) fn dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    /// The language's name in prose.
    pub(super) fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}
