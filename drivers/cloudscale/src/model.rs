//! The cloudscale API objects, as far as the driver reads them.
//!
//! Every field has a default so a response with fields missing or added still decodes; the
//! fields that the API sends as `null` are `Option`s.

use serde::{Deserialize, Serialize};

/// A reference to another object (`{uuid, href, name}`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Stub {
    /// The referenced object's UUID.
    pub uuid: String,
    /// The referenced object's API URL (`…/v1/<kind>/<uuid>`).
    pub href: String,
    /// The referenced object's name.
    pub name: String,
}

/// `{slug}` of a flavor or zone.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Slug {
    /// The slug, e.g. `flex-4-2` for a flavor or `rma1` for a zone.
    pub slug: String,
}

/// A subnet reference on an address.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct SubnetRef {
    /// The subnet's UUID.
    pub uuid: String,
    /// The subnet's CIDR, e.g. `10.0.0.0/24`.
    pub cidr: String,
}

/// `GET /v1/servers[/{uuid}]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Server {
    /// The server's UUID, the part after `cloudscale://` in a provider ID.
    pub uuid: String,
    /// The server's name; a node without a provider ID is looked up by it.
    pub name: String,
    /// `running`, `stopped`, …; `stopped` means the instance is shut down.
    pub status: String,
    /// The flavor; its slug is the node's instance type.
    pub flavor: Slug,
    /// The zone; its slug is the node's zone, without trailing digits its region.
    pub zone: Slug,
    /// The network interfaces, in API order (the node's addresses keep that order).
    pub interfaces: Vec<Interface>,
}

/// One network interface of a server.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Interface {
    /// `public` or `private`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The addresses on this interface, in API order.
    pub addresses: Vec<Address>,
}

/// One address of an interface.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Address {
    /// IP version: `4` or `6`.
    pub version: u8,
    /// The address, without a prefix length.
    pub address: String,
    /// The subnet of a private address; `None` on public interfaces.
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
    /// The load balancer's UUID, written back as the `loadbalancer-uuid` annotation.
    pub uuid: String,
    /// The load balancer's API URL; the driver deletes it by this URL.
    pub href: String,
    /// The load balancer's name: `k8s-service-<uid>` or the `loadbalancer-name` annotation for
    /// ours.
    pub name: String,
    /// `changing` while provisioning, then `running`.
    pub status: String,
    /// The flavor; its slug is compared with the `loadbalancer-flavor` annotation.
    pub flavor: Slug,
    /// The zone; its slug is written back as the `loadbalancer-zone` annotation.
    pub zone: Slug,
    /// The VIP addresses, listed in the Service's status.
    pub vip_addresses: Vec<Vip>,
}

/// A VIP address of a load balancer.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Vip {
    /// IP version: `4` or `6`.
    pub version: u8,
    /// The VIP address, without a prefix length.
    pub address: String,
    /// The subnet the VIP is in (a public subnet for the default VIPs).
    pub subnet: SubnetRef,
}

/// `GET /v1/load-balancers/pools`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Pool {
    /// The pool's UUID.
    pub uuid: String,
    /// The pool's API URL; the driver deletes it by this URL.
    pub href: String,
    /// The pool's name: the protocol, plus `/<port name>` when the port has one (`tcp`, `udp/dns`).
    pub name: String,
    /// The balancing algorithm, e.g. `round_robin` (`loadbalancer-pool-algorithm`).
    pub algorithm: String,
    /// The protocol to the members: `tcp`, `proxy`, `proxyv2` or `udp`
    /// (`loadbalancer-pool-protocol`).
    pub protocol: String,
    /// The load balancer the pool belongs to.
    pub load_balancer: Option<Stub>,
}

/// `GET /v1/load-balancers/pools/{pool}/members`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Member {
    /// The member's UUID.
    pub uuid: String,
    /// The member's API URL; the driver deletes it by this URL.
    pub href: String,
    /// The member's name: `<address>:<nodePort>`, IPv6 in brackets.
    pub name: String,
    /// Whether the member receives traffic; the driver's members are always enabled.
    pub enabled: bool,
    /// The port traffic goes to: the Service port's node port.
    pub protocol_port: u32,
    /// The port the health monitor checks: the node port, or the health-check node port with
    /// traffic policy `Local`.
    pub monitor_port: u32,
    /// The node's private address the traffic goes to.
    pub address: String,
    /// The private subnet of `address`.
    pub subnet: SubnetRef,
}

/// `GET /v1/load-balancers/listeners`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Listener {
    /// The listener's UUID.
    pub uuid: String,
    /// The listener's API URL; the driver deletes it by this URL.
    pub href: String,
    /// The listener's name: `<protocol>/<port>`.
    pub name: String,
    /// The pool the listener forwards to.
    pub pool: Option<Stub>,
    /// The load balancer the listener belongs to.
    pub load_balancer: Option<Stub>,
    /// The listener's protocol, e.g. `tcp` (`loadbalancer-listener-protocol`; `udp` for UDP ports).
    pub protocol: String,
    /// The public port: the Service port.
    pub protocol_port: u32,
    /// Source CIDRs allowed to connect; empty allows everyone
    /// (`loadbalancer-listener-allowed-cidrs`).
    pub allowed_cidrs: Vec<String>,
    /// Client inactivity timeout, in milliseconds.
    pub timeout_client_data_ms: u64,
    /// Timeout for connecting to a member, in milliseconds.
    pub timeout_member_connect_ms: u64,
    /// Member inactivity timeout, in milliseconds.
    pub timeout_member_data_ms: u64,
}

/// `GET /v1/load-balancers/health-monitors`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Monitor {
    /// The health monitor's UUID.
    pub uuid: String,
    /// The health monitor's API URL; the driver deletes it by this URL.
    pub href: String,
    /// The pool whose members the monitor checks.
    pub pool: Option<Stub>,
    /// Seconds between two checks.
    pub delay_s: u64,
    /// Seconds a check may take before it counts as failed.
    pub timeout_s: u64,
    /// Consecutive successful checks before a member counts as up.
    pub up_threshold: u64,
    /// Consecutive failed checks before a member counts as down.
    pub down_threshold: u64,
    /// The check type, e.g. `tcp`, `http` or `https` (`loadbalancer-health-monitor-type`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP check settings; `None` (`null` from the API) for non-HTTP types.
    pub http: Option<MonitorHttp>,
}

/// The HTTP part of a health monitor, as the API returns it (defaults filled in) and as the
/// driver sends it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct MonitorHttp {
    /// The HTTP method, e.g. `GET` (the API's default) or `HEAD`.
    pub method: String,
    /// The path requested, `/` by default.
    pub url_path: String,
    /// The HTTP version: `1.1` by default, `1.0` for the `Local` traffic policy's `/livez` check.
    pub version: String,
    /// Omitted when unset, as the SDK's `Host *string ,omitempty` (review finding 5); the PATCH
    /// that clears a host sends its own explicit `null` (plan.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The status codes that count as healthy, `["200"]` by default.
    pub expected_codes: Vec<String>,
}

/// `GET /v1/floating-ips`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct FloatingIp {
    /// The CIDR, e.g. `5.102.150.123/32`.
    pub network: String,
    /// The load balancer the floating IP points at; `None` when unassigned.
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
