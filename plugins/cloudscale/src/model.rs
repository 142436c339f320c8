//! The cloudscale API objects, as far as the driver reads them.
//!
//! Every field has a default so a response with fields missing or added still decodes; the
//! fields that the API sends as `null` are `Option`s.

use serde::{Deserialize, Serialize};

/// A reference to another object (`{uuid, href, name}`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Stub {
    pub uuid: String,
    pub href: String,
    pub name: String,
}

/// `{slug}` of a flavor or zone.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Slug {
    pub slug: String,
}

/// A subnet reference on an address.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct SubnetRef {
    pub uuid: String,
    pub cidr: String,
}

/// `GET /v1/servers[/{uuid}]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Server {
    pub uuid: String,
    pub name: String,
    pub status: String,
    pub flavor: Slug,
    pub zone: Slug,
    pub interfaces: Vec<Interface>,
}

/// One network interface of a server.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Interface {
    /// `public` or `private`.
    #[serde(rename = "type")]
    pub kind: String,
    pub addresses: Vec<Address>,
}

/// One address of an interface.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Address {
    pub version: u8,
    pub address: String,
    pub subnet: Option<SubnetRef>,
}

impl Address {
    /// The subnet UUID, or `""` when the address has none (public addresses).
    pub fn subnet_uuid(&self) -> &str {
        self.subnet.as_ref().map_or("", |s| s.uuid.as_str())
    }
}

/// `GET /v1/load-balancers[/{uuid}]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct LoadBalancer {
    pub uuid: String,
    pub href: String,
    pub name: String,
    /// `changing` while provisioning, then `running`.
    pub status: String,
    pub flavor: Slug,
    pub zone: Slug,
    pub vip_addresses: Vec<Vip>,
}

/// A VIP address of a load balancer.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Vip {
    pub version: u8,
    pub address: String,
    pub subnet: SubnetRef,
}

/// `GET /v1/load-balancers/pools`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Pool {
    pub uuid: String,
    pub href: String,
    pub name: String,
    pub algorithm: String,
    pub protocol: String,
    pub load_balancer: Option<Stub>,
}

/// `GET /v1/load-balancers/pools/{pool}/members`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Member {
    pub uuid: String,
    pub href: String,
    pub name: String,
    pub enabled: bool,
    pub protocol_port: u32,
    pub monitor_port: u32,
    pub address: String,
    pub subnet: SubnetRef,
}

/// `GET /v1/load-balancers/listeners`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Listener {
    pub uuid: String,
    pub href: String,
    pub name: String,
    pub pool: Option<Stub>,
    pub load_balancer: Option<Stub>,
    pub protocol: String,
    pub protocol_port: u32,
    pub allowed_cidrs: Vec<String>,
    pub timeout_client_data_ms: u64,
    pub timeout_member_connect_ms: u64,
    pub timeout_member_data_ms: u64,
}

/// `GET /v1/load-balancers/health-monitors`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Monitor {
    pub uuid: String,
    pub href: String,
    pub pool: Option<Stub>,
    pub delay_s: u64,
    pub timeout_s: u64,
    pub up_threshold: u64,
    pub down_threshold: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub http: Option<MonitorHttp>,
}

/// The HTTP part of a health monitor, as the API returns it (defaults filled in) and as the
/// driver sends it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct MonitorHttp {
    pub method: String,
    pub url_path: String,
    pub version: String,
    /// Omitted when unset, as the SDK's `Host *string ,omitempty` (review finding 5); the PATCH
    /// that clears a host sends its own explicit `null` (plan.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub expected_codes: Vec<String>,
}

/// `GET /v1/floating-ips`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct FloatingIp {
    /// The CIDR, e.g. `5.102.150.123/32`.
    pub network: String,
    pub load_balancer: Option<Stub>,
}

impl Pool {
    /// Whether the pool belongs to the load balancer `uuid`.
    pub fn belongs_to(&self, uuid: &str) -> bool {
        self.load_balancer.as_ref().is_some_and(|l| l.uuid == uuid)
    }
}

/// The UUID of the pool an object points at, `""` for none.
pub fn pool_uuid(pool: &Option<Stub>) -> &str {
    pool.as_ref().map_or("", |p| p.uuid.as_str())
}
