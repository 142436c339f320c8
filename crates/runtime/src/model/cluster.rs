//! The records of the WIT's `cluster` import that the host builds: the answer of
//! `cluster.address-claims`.

use serde::{Deserialize, Serialize};

use super::wit_enum;

wit_enum! {
    /// Where a Service holds an address (`address-use`).
    AddressUse {
        /// `spec.loadBalancerIP`: asked for, not necessarily granted.
        #[default]
        LoadBalancerIp = "load-balancer-ip",
        /// The value of the annotation the query named.
        Annotation = "annotation",
        /// `status.loadBalancer.ingress[].ip`: published.
        Ingress = "ingress",
    }
}

/// An address a LoadBalancer Service holds (`address-claim`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct AddressClaim {
    /// The address as the query spelled it.
    pub ip: String,
    /// The Service's UID.
    pub service_uid: String,
    /// Where the Service holds it.
    pub used_as: AddressUse,
}
