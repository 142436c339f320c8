//! [`ObjKey`]: where an object lives inside its resource's map (a leaf the store and the
//! Service admission both key by).

use super::resources::ResourceType;

/// Where an object lives inside its resource's map; cluster-scoped objects use an empty namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjKey {
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    /// The key of `name` in `namespace` (ignored for cluster-scoped resources).
    pub(super) fn new(rt: &ResourceType, namespace: Option<&str>, name: &str) -> ObjKey {
        ObjKey {
            namespace: if rt.namespaced {
                namespace.unwrap_or("").to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }
}
