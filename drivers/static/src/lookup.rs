//! Finding the instance behind a Node.

use wasm_ccm_sdk::types::{InstanceMetadata, Node, ProviderError};

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
}
