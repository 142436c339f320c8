//! Helpers for `instance-listing` (contract 0.2.2): the node names a listing may give, the page
//! handed to the host, and the page token of a cloud that answers in one page.

use std::collections::BTreeMap;

use crate::log;
use crate::types::{InstanceMetadata, InstancePage, ListedInstance, ProviderError};

/// One page of a listing as a driver builds it: what it lists and what it leaves out.
#[derive(Debug, Default)]
pub struct Listed {
    /// The instances the per-node functions would answer for, with their answers.
    pub instances: Vec<ListedInstance>,
    /// The instances left out, each with why; the host asks about their nodes one by one
    /// (absence from a listing never deletes a Node).
    pub left_out: Vec<String>,
}

impl Listed {
    /// Lists `items` (every instance the per-node by-name lookup would search, those the
    /// listing leaves out included): `describe` gives an item's `instance-metadata` and
    /// `instance-shutdown` answers, or why it is left out; `node_name` its name as the lookup
    /// compares it. The listed `node-name` is that name where exactly one item has it, else
    /// empty ([`NodeNames`]).
    pub fn of<T>(
        items: &[T],
        node_name: impl Fn(&T) -> String,
        describe: impl Fn(&T) -> Result<(InstanceMetadata, bool), String>,
    ) -> Listed {
        let names = NodeNames::count(items.iter().map(&node_name));
        let mut out = Listed::default();
        for item in items {
            match describe(item) {
                Ok((metadata, shutdown)) => out.instances.push(ListedInstance {
                    node_name: names.node_name(node_name(item)),
                    metadata,
                    shutdown,
                }),
                Err(why) => out.left_out.push(why),
            }
        }
        out
    }

    /// The page for the host, `next` where the next page starts; logs the instances left out
    /// (one warning naming them all), so an operator sees why their nodes cost a request each.
    pub fn into_page(self, next: Option<String>) -> InstancePage {
        if !self.left_out.is_empty() {
            log::warn(
                "instances left out of the listing; their nodes are asked about one by one",
                &[("left-out", &self.left_out.join("; "))],
            );
        }
        InstancePage {
            instances: self.instances,
            next,
        }
    }
}

/// Refuses a page token in a driver whose cloud lists everything in one answer: it never hands
/// out a `next`, so a token is none of its own, and reading it as the first page could list
/// the same instances twice.
pub fn first_page_only(page: Option<String>, cloud: &str) -> Result<(), ProviderError> {
    match page {
        None => Ok(()),
        Some(token) => Err(ProviderError::permanent(format!(
            "{cloud} lists every instance in one page, so page token {token:?} was not issued by \
             this driver"
        ))),
    }
}

/// The Node names of every instance a by-name lookup could bind, counted, so that a listing
/// names a node only where the per-node lookup binds exactly one instance to it.
///
/// Count every instance the per-node lookup would see, including those the listing leaves out
/// (a server it cannot describe, a VM being deleted): a name one of them shares makes the
/// per-node lookup ambiguous, and an ambiguous answer must not become a definite one in the
/// listing. Names shared across pages need nothing here: the host matches a node by a
/// `node-name` only when exactly one listed instance carries it.
#[derive(Clone, Debug, Default)]
pub struct NodeNames(BTreeMap<String, usize>);

impl NodeNames {
    /// Counts `names`, each already made into a Node name the way the driver's lookup compares.
    pub fn count(names: impl IntoIterator<Item = String>) -> Self {
        let mut counts = BTreeMap::new();
        for name in names {
            *counts.entry(name).or_insert(0_usize) += 1;
        }
        NodeNames(counts)
    }

    /// `name` when exactly one counted instance has it, else empty (the listing's "cannot say").
    pub fn node_name(&self, name: String) -> String {
        if self.0.get(&name) == Some(&1) {
            name
        } else {
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeNames, first_page_only};

    #[test]
    fn one_page_clouds_refuse_page_tokens() {
        assert!(first_page_only(None, "cloud").is_ok());
        let e = first_page_only(Some("2".into()), "cloud").unwrap_err();
        assert!(
            matches!(e, crate::types::ProviderError::Permanent(_)),
            "{e}"
        );
    }

    #[test]
    fn only_names_counted_once_are_given() {
        let names = NodeNames::count(["a", "b", "a", "c"].map(String::from));
        assert_eq!(names.node_name("b".into()), "b");
        assert_eq!(names.node_name("a".into()), "");
        assert_eq!(
            names.node_name("z".into()),
            "",
            "a name not counted binds nothing"
        );
    }
}
