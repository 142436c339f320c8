//! Finding the instance behind a Node.

use wasm_ccm_sdk::types::{InstanceMetadata, InstancePage, ListedInstance, Node, ProviderError};

use crate::config::Instance;

/// The provider-ID scheme of this driver.
pub const SCHEME: &str = "static";

/// `static://<id>`.
pub fn provider_id(id: &str) -> String {
    format!("{SCHEME}://{id}")
}

/// The instance behind `node`: by `spec.providerID` when the node has one, else by exact node
/// name. `Ok(None)` means "not in the inventory". A provider ID of another scheme is an
/// `invalid-config` error rather than "missing", because answering "does not exist" would make
/// the host delete a node that some other provider manages.
pub fn find<'a>(
    instances: &'a [Instance],
    node: &Node,
) -> Result<Option<&'a Instance>, ProviderError> {
    if node.provider_id.is_empty() {
        return Ok(instances.iter().find(|i| i.name == node.name));
    }
    let (scheme, id) = node.provider_id.split_once("://").ok_or_else(|| {
        ProviderError::InvalidConfig(format!(
            "node {} has provider ID {:?}, which is not of the form <scheme>://<id>",
            node.name, node.provider_id
        ))
    })?;
    if scheme != SCHEME {
        return Err(ProviderError::InvalidConfig(format!(
            "node {} has provider ID {:?}: it belongs to provider {scheme:?}, not to this {SCHEME} driver",
            node.name, node.provider_id
        )));
    }
    Ok(instances.iter().find(|i| i.id == id))
}

/// The metadata the host writes on the node.
pub fn metadata(instance: &Instance) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: provider_id(&instance.id),
        instance_type: instance.instance_type.clone(),
        zone: instance.zone.clone(),
        region: instance.region.clone(),
        addresses: instance.addresses.clone(),
        additional_labels: instance.labels.clone(),
    }
}

/// Instances in one page of `instance-listing.list-instances`: well under the contract's 20,000,
/// so a page of instances with many addresses and labels stays a modest copy across the boundary.
pub const PAGE_SIZE: usize = 1_000;

/// One page of the listing of `instances`, starting where `token` says: `None` for the first
/// page, else the `next` of the page before, the offset of its first instance in decimal. The
/// token is ours, so one that does not parse, or points past the end, is refused as
/// `permanent`: retrying the same token cannot help. Each entry is exactly what the per-node
/// functions answer: [`metadata`], the instance's `shutdown`, and its name, which [`find`]
/// matches against a node without a provider ID.
pub fn page(
    instances: &[Instance],
    token: Option<&str>,
    size: usize,
) -> Result<InstancePage, ProviderError> {
    let start = match token {
        None => 0,
        Some(token) => offset(token, instances.len())?,
    };
    let end = instances.len().min(start.saturating_add(size.max(1)));
    let listed = instances[start..end]
        .iter()
        .map(|i| ListedInstance {
            node_name: i.name.clone(),
            metadata: metadata(i),
            shutdown: i.shutdown,
        })
        .collect();
    Ok(InstancePage {
        instances: listed,
        next: (end < instances.len()).then(|| end.to_string()),
    })
}

/// The offset a page token names, at most `len` (an inventory served over HTTP may shrink
/// between two pages down to exactly the offset: that page is empty and the last).
fn offset(token: &str, len: usize) -> Result<usize, ProviderError> {
    // Digits only: `usize::from_str` would also take a leading `+`, which this driver never
    // writes.
    let parsed = if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
        token.parse::<usize>().ok()
    } else {
        None
    };
    match parsed {
        Some(n) if n <= len => Ok(n),
        Some(n) => Err(ProviderError::Permanent(format!(
            "page token {token:?} starts at instance {n}, past the end of the {len} in the inventory (did the inventory shrink while it was listed?)"
        ))),
        None => Err(ProviderError::Permanent(format!(
            "page token {token:?} is not one this driver wrote: it writes the offset of the page's first instance in decimal"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_sdk::types::{AddressType, NodeAddress};

    fn instance(name: &str, id: &str) -> Instance {
        Instance {
            name: name.into(),
            id: id.into(),
            instance_type: "s1".into(),
            zone: "z".into(),
            region: "r".into(),
            addresses: vec![NodeAddress::new(AddressType::InternalIp, "10.0.0.1")],
            shutdown: false,
            labels: vec![("k".into(), "v".into())],
        }
    }

    fn node(name: &str, provider_id: &str) -> Node {
        Node {
            name: name.into(),
            uid: "uid".into(),
            provider_id: provider_id.into(),
            labels: vec![],
            annotations: vec![],
            addresses: vec![],
            taints: vec![],
            ready: true,
        }
    }

    #[test]
    fn by_provider_id_then_by_name() {
        let inv = vec![instance("node-a", "a"), instance("node-b", "b")];
        assert_eq!(
            find(&inv, &node("x", "static://b")).unwrap().unwrap().name,
            "node-b"
        );
        assert_eq!(find(&inv, &node("node-a", "")).unwrap().unwrap().id, "a");
        // The provider ID wins over the name.
        assert!(
            find(&inv, &node("node-a", "static://zzz"))
                .unwrap()
                .is_none()
        );
        assert!(find(&inv, &node("nope", "")).unwrap().is_none());
    }

    #[test]
    fn foreign_provider_ids_are_errors() {
        let inv = vec![instance("node-a", "a")];
        let e = find(&inv, &node("node-a", "aws:///eu-1/i-1")).unwrap_err();
        assert!(matches!(e, ProviderError::InvalidConfig(m) if m.contains("\"aws\"")));
        assert!(find(&inv, &node("node-a", "garbage")).is_err());
    }

    #[test]
    fn metadata_maps_fields() {
        let m = metadata(&instance("node-a", "a"));
        assert_eq!(m.provider_id, "static://a");
        assert_eq!(
            m.additional_labels,
            vec![("k".to_string(), "v".to_string())]
        );
        assert_eq!(m.addresses.len(), 1);
    }

    /// `n` instances named `node-0`, `node-1`, … (ids `i-0`, …), every third one shut down.
    fn inventory(n: usize) -> Vec<Instance> {
        (0..n)
            .map(|k| Instance {
                shutdown: k % 3 == 0,
                ..instance(&format!("node-{k}"), &format!("i-{k}"))
            })
            .collect()
    }

    fn names(page: &InstancePage) -> Vec<&str> {
        page.instances
            .iter()
            .map(|i| i.node_name.as_str())
            .collect()
    }

    #[test]
    fn pages_walk_the_inventory_in_order_and_end_with_no_next() {
        let inv = inventory(5);
        let first = page(&inv, None, 2).unwrap();
        assert_eq!(names(&first), ["node-0", "node-1"]);
        assert_eq!(first.next.as_deref(), Some("2"));
        let middle = page(&inv, first.next.as_deref(), 2).unwrap();
        assert_eq!(names(&middle), ["node-2", "node-3"]);
        assert_eq!(middle.next.as_deref(), Some("4"));
        let last = page(&inv, middle.next.as_deref(), 2).unwrap();
        assert_eq!(names(&last), ["node-4"]);
        assert_eq!(last.next, None);
    }

    #[test]
    fn an_inventory_that_fills_its_last_page_exactly_has_no_empty_page_after_it() {
        let inv = inventory(4);
        let first = page(&inv, None, 2).unwrap();
        let last = page(&inv, first.next.as_deref(), 2).unwrap();
        assert_eq!(names(&last), ["node-2", "node-3"]);
        assert_eq!(last.next, None);
        // One page holds everything at the driver's own size.
        let all = page(&inv, None, PAGE_SIZE).unwrap();
        assert_eq!(all.instances.len(), 4);
        assert_eq!(all.next, None);
    }

    #[test]
    fn an_empty_inventory_is_one_empty_last_page() {
        let empty = page(&[], None, PAGE_SIZE).unwrap();
        assert!(empty.instances.is_empty());
        assert_eq!(empty.next, None);
    }

    #[test]
    fn a_listed_instance_is_what_the_per_node_lookup_answers() {
        let inv = inventory(4);
        let listed = page(&inv, None, PAGE_SIZE).unwrap();
        for entry in &listed.instances {
            // A node without a provider ID is matched by the listed name, and one with the
            // listed provider ID finds the same instance.
            let by_name = find(&inv, &node(&entry.node_name, "")).unwrap().unwrap();
            let by_id = find(&inv, &node("other", &entry.metadata.provider_id))
                .unwrap()
                .unwrap();
            assert_eq!(by_name, by_id);
            assert_eq!(metadata(by_name), entry.metadata);
            assert_eq!(by_name.shutdown, entry.shutdown);
        }
        assert!(listed.instances.iter().any(|i| i.shutdown));
        assert!(listed.instances.iter().any(|i| !i.shutdown));
    }

    #[test]
    fn a_token_this_driver_did_not_write_is_refused_as_permanent() {
        let inv = inventory(5);
        for bad in [
            "",
            "x",
            "-1",
            "+2",
            "2 ",
            "1.5",
            "99999999999999999999999",
            "6",
        ] {
            let e = page(&inv, Some(bad), 2).unwrap_err();
            assert!(
                matches!(&e, ProviderError::Permanent(m) if m.contains(&format!("{bad:?}"))),
                "{bad:?}: {e:?}"
            );
        }
        // The end itself is a (last, empty) page: an inventory served over HTTP may have shrunk
        // to it between two pages.
        let at_end = page(&inv, Some("5"), 2).unwrap();
        assert!(at_end.instances.is_empty());
        assert_eq!(at_end.next, None);
    }
}
