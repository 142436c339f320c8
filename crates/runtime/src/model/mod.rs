//! The host model: the records, variants and enums the host exchanges with drivers, written by
//! hand, with serde in WIT's own names.
//!
//! The controllers, the kit and the runtime's own API use these types; the bindings that
//! `bindgen!` generates from `wit/` stay private to the runtime (`crate::bindings`) and are
//! converted at the boundary, one module per WIT version (`crate::wit`). A new WIT version is
//! absorbed there: what a type means to the host changes here only when the host needs it to.
//!
//! Each type keeps the Rust name, field names and field types of its generated counterpart,
//! so the two convert field by field (`crate::wit::v0_2` fails to compile when one gains a
//! field the other lacks).
//!
//! - [`types`]: the `types` interface (nodes, Services, routes, `provider-error`, …), reachable
//!   as `wasm_ccm_runtime::types`;
//! - [`cluster`]: the records of the `cluster` import (`address-claim`, `address-use`);
//! - [`http`]: the records of the `http` import, reachable as `wasm_ccm_runtime::http`;
//! - [`json`]: reading and writing them as JSON, with the encoding below.
//!
//! # The JSON encoding
//!
//! The same for `wasm-ccm-dev call` arguments and answers, `--cluster-services` and conformance
//! scenario files. Records are objects with the WIT field names (`provider-id`); a missing field
//! takes its zero value (empty string, 0, false, empty list, none, an enum's first case), the one
//! exception being `node.ready`, which is true unless given (a node is ready unless said
//! otherwise); `null` is the same as a missing field; an unknown field is an error.
//! `list<tuple<string, string>>` (labels, annotations) is an object `{"key": "value"}` (an array
//! of `[key, value]` pairs is accepted too); `list<u8>` is an array of numbers (a string is
//! accepted too, as its UTF-8 bytes); enums are their case name (`"internal-ip"`); variants are
//! `{"case": payload}` or `"case"` without payload; options are `null` or the value.

pub(crate) mod cluster;
pub(crate) mod http;
pub mod json;
pub mod types;

/// Serde for `list<tuple<string, string>>`: an object on output; an object or an array of
/// `[key, value]` pairs on input.
pub(crate) mod pairs {
    use std::fmt;

    use serde::de::{MapAccess, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    /// Writes the pairs as an object, in their order (a repeated key is written twice; a
    /// `serde_json::Value` keeps the last, as a map does).
    pub(crate) fn serialize<S: Serializer>(
        pairs: &[(String, String)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
    }

    /// Reads an object of strings or an array of pairs.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, String)>, D::Error> {
        d.deserialize_any(PairsVisitor)
    }

    struct PairsVisitor;

    impl<'de> Visitor<'de> for PairsVisitor {
        type Value = Vec<(String, String)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of strings or an array of [key, value] pairs")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
            while let Some(entry) = map.next_entry::<String, String>()? {
                out.push(entry);
            }
            Ok(out)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            while let Some(pair) = seq.next_element::<(String, String)>()? {
                out.push(pair);
            }
            Ok(out)
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
    }
}

/// Serde for `list<u8>`: an array of numbers on output; that or a string (its UTF-8 bytes) on
/// input, so a configuration can be written as text.
pub(crate) mod bytes {
    use std::fmt;

    use serde::Deserializer;
    use serde::de::{SeqAccess, Visitor};

    /// Reads an array of bytes or a string.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_any(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of bytes or a string")
        }

        fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
            Ok(s.as_bytes().to_vec())
        }

        fn visit_bytes<E>(self, b: &[u8]) -> Result<Self::Value, E> {
            Ok(b.to_vec())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }
    }
}

/// Defines an enum of the WIT with its case names: serde uses them, and so do
/// `wit_name` and `Display`.
macro_rules! wit_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$case_meta:meta])* $case:ident = $wit:literal,)+ }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $($(#[$case_meta])* #[serde(rename = $wit)] $case,)+
        }

        impl $name {
            /// The case's name in the WIT.
            pub fn wit_name(self) -> &'static str {
                match self {
                    $(Self::$case => $wit,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.wit_name())
            }
        }
    };
}
pub(crate) use wit_enum;

#[cfg(test)]
mod tests;
