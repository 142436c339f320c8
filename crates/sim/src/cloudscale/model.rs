//! The simulator's state: typed resources keyed by UUID, and what ties them together (public
//! address pools, known subnets, cascading deletes, the lazily computed LB status).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::error::ApiError;
use super::net::{Cidr, bits, from_bits};

/// Resource tags (`tags: {}` in every object).
pub(crate) type Tags = BTreeMap<String, String>;

/// Load balancer flavors the API accepts.
pub(crate) const LB_FLAVORS: &[&str] = &["lb-standard", "lb-large"];
/// Zones the simulator knows.
pub(crate) const ZONES: &[&str] = &["rma1", "lpg1"];
/// The zone of a load balancer created without one.
pub(crate) const DEFAULT_ZONE: &str = "rma1";
/// The network every public interface is on unless the seed names another.
pub(crate) const PUBLIC_NETWORK: &str = "a1e6c8f2-6b1d-4c3e-9f0a-000000000001";
/// The public IPv4 subnet load balancer VIPs come from.
pub(crate) const PUBLIC_V4_SUBNET: &str = "a1e6c8f2-6b1d-4c3e-9f0a-000000000004";
/// The public IPv6 subnet load balancer VIPs come from.
pub(crate) const PUBLIC_V6_SUBNET: &str = "a1e6c8f2-6b1d-4c3e-9f0a-000000000006";
/// The CIDR of [`PUBLIC_V4_SUBNET`].
pub(crate) const PUBLIC_V4_CIDR: &str = "5.102.151.0/24";
/// The CIDR of [`PUBLIC_V6_SUBNET`].
pub(crate) const PUBLIC_V6_CIDR: &str = "2a06:c01:1:1151::/64";

/// A random version-4 UUID, lowercase, the API's identifier format.
pub(crate) use crate::serving::new_uuid;

/// RFC 3339 "now" with microseconds, like the API's Django timestamps.
fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Microsecond)
        .unwrap_or(now)
        .to_string()
}

/// What every resource carries besides its identity.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    /// Creation order: lists are returned in it.
    pub seq: u64,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// Tags.
    pub tags: Tags,
}

/// Something with a [`Meta`], so lists can be ordered by creation.
pub(crate) trait HasMeta {
    /// The resource's metadata.
    fn meta(&self) -> &Meta;
}

macro_rules! has_meta {
    ($($t:ty),*) => {$(
        impl HasMeta for $t {
            fn meta(&self) -> &Meta {
                &self.meta
            }
        }
    )*};
}

/// A server (seeded, never created over the API).
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub flavor: String,
    pub vcpus: u32,
    pub memory_gb: u32,
    pub zone: String,
    pub status: String,
    pub interfaces: Vec<Interface>,
}

/// A server's network interface.
#[derive(Clone, Debug)]
pub(crate) struct Interface {
    pub public: bool,
    pub network: String,
    pub addresses: Vec<Address>,
}

/// An address of an interface.
#[derive(Clone, Debug)]
pub(crate) struct Address {
    pub ip: IpAddr,
    pub cidr: Cidr,
    /// The subnet's UUID; empty for public addresses the seed gave none for.
    pub subnet: String,
    pub gateway: Option<IpAddr>,
}

/// A network (the public one or a private one from the seed).
#[derive(Clone, Debug)]
pub(crate) struct Network {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub public: bool,
}

/// A subnet. Private subnets are "known": VIPs and members may be placed in them.
#[derive(Clone, Debug)]
pub(crate) struct Subnet {
    pub meta: Meta,
    pub uuid: String,
    pub cidr: Cidr,
    pub network: String,
    pub public: bool,
}

/// A load balancer.
#[derive(Clone, Debug)]
pub(crate) struct LoadBalancer {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub flavor: String,
    pub zone: String,
    pub vips: Vec<Vip>,
    /// When the status turns from `changing` to `running`.
    pub ready_at: Instant,
}

/// A VIP address of a load balancer.
#[derive(Clone, Debug)]
pub(crate) struct Vip {
    pub ip: IpAddr,
    pub subnet: String,
}

/// A pool of a load balancer.
#[derive(Clone, Debug)]
pub(crate) struct Pool {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub lb: String,
    pub algorithm: String,
    pub protocol: String,
}

/// A pool member.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub pool: String,
    pub enabled: bool,
    pub protocol_port: i64,
    pub monitor_port: i64,
    pub address: IpAddr,
    pub subnet: String,
}

/// A listener.
#[derive(Clone, Debug)]
pub(crate) struct Listener {
    pub meta: Meta,
    pub uuid: String,
    pub name: String,
    pub pool: Option<String>,
    pub lb: String,
    pub protocol: String,
    pub protocol_port: i64,
    pub allowed_cidrs: Vec<String>,
    pub timeout_client_data_ms: i64,
    pub timeout_member_connect_ms: i64,
    pub timeout_member_data_ms: i64,
}

/// A health monitor.
#[derive(Clone, Debug)]
pub(crate) struct Monitor {
    pub meta: Meta,
    pub uuid: String,
    pub pool: String,
    pub delay_s: i64,
    pub timeout_s: i64,
    pub up_threshold: i64,
    pub down_threshold: i64,
    pub kind: String,
    pub http: Option<Http>,
}

/// The `http` block of an http/https monitor.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Http {
    pub method: String,
    pub url_path: String,
    pub version: String,
    pub host: Option<String>,
    pub expected_codes: Vec<String>,
}

impl Default for Http {
    /// The API's defaults for fields a request leaves out.
    fn default() -> Self {
        Http {
            method: "GET".into(),
            url_path: "/".into(),
            version: "1.1".into(),
            host: None,
            expected_codes: vec!["200".into()],
        }
    }
}

/// A floating IP (keyed by its address; it has no UUID in the API).
#[derive(Clone, Debug)]
pub(crate) struct FloatingIp {
    pub meta: Meta,
    pub ip: IpAddr,
    pub prefix: u8,
    /// Region slug; None for a global floating IP.
    pub region: Option<String>,
    pub server: Option<String>,
    pub lb: Option<String>,
    pub reverse_ptr: Option<String>,
}

has_meta!(
    Server,
    Network,
    Subnet,
    LoadBalancer,
    Pool,
    Member,
    Listener,
    Monitor,
    FloatingIp
);

/// Per-request facts handlers and renderers need.
pub(crate) struct Ctx {
    /// `http://host:port`, the origin of every `href`.
    pub base: String,
    /// The time LB states are evaluated at.
    pub now: Instant,
    /// Whether mutations of a `changing` LB (and its children) are refused.
    pub refuse_changing: bool,
}

/// Everything the simulator holds.
#[derive(Clone, Debug)]
pub(crate) struct State {
    seq: u64,
    pub servers: BTreeMap<String, Server>,
    pub networks: BTreeMap<String, Network>,
    pub subnets: BTreeMap<String, Subnet>,
    pub load_balancers: BTreeMap<String, LoadBalancer>,
    pub pools: BTreeMap<String, Pool>,
    pub members: BTreeMap<String, Member>,
    pub listeners: BTreeMap<String, Listener>,
    pub monitors: BTreeMap<String, Monitor>,
    pub floating_ips: BTreeMap<IpAddr, FloatingIp>,
    /// How long a new LB stays `changing`.
    pub lb_ready_after: Duration,
    /// Where the search for the next public VIP starts (host index), so freed addresses are
    /// not handed out again right away, like a real allocator.
    next_public: [u128; 2],
    /// The network of private interfaces the seed gives no network for.
    pub default_private_network: Option<String>,
}

/// The values of a map in creation order.
pub(crate) fn ordered<T: HasMeta>(map: &BTreeMap<impl Ord, T>) -> Vec<&T> {
    let mut v: Vec<&T> = map.values().collect();
    v.sort_by_key(|x| x.meta().seq);
    v
}

impl State {
    /// An empty state with the public network and the two public VIP subnets.
    pub(crate) fn new(lb_ready_after: Duration) -> State {
        let mut s = State {
            seq: 0,
            servers: BTreeMap::new(),
            networks: BTreeMap::new(),
            subnets: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            pools: BTreeMap::new(),
            members: BTreeMap::new(),
            listeners: BTreeMap::new(),
            monitors: BTreeMap::new(),
            floating_ips: BTreeMap::new(),
            lb_ready_after,
            next_public: [0, 0],
            default_private_network: None,
        };
        let meta = s.new_meta(Tags::new());
        s.networks.insert(
            PUBLIC_NETWORK.into(),
            Network {
                meta,
                uuid: PUBLIC_NETWORK.into(),
                name: "public".into(),
                public: true,
            },
        );
        for (uuid, cidr) in [
            (PUBLIC_V4_SUBNET, PUBLIC_V4_CIDR),
            (PUBLIC_V6_SUBNET, PUBLIC_V6_CIDR),
        ] {
            if let Ok(cidr) = Cidr::parse(cidr) {
                let meta = s.new_meta(Tags::new());
                s.subnets.insert(
                    uuid.into(),
                    Subnet {
                        meta,
                        uuid: uuid.into(),
                        cidr,
                        network: PUBLIC_NETWORK.into(),
                        public: true,
                    },
                );
            }
        }
        s
    }

    /// Metadata for a new resource: the next creation number and the current time.
    pub(crate) fn new_meta(&mut self, tags: Tags) -> Meta {
        self.seq += 1;
        Meta {
            seq: self.seq,
            created_at: now_rfc3339(),
            tags,
        }
    }

    /// `running` once the LB's ready time has passed, `changing` before.
    pub(crate) fn lb_status(lb: &LoadBalancer, now: Instant) -> &'static str {
        if now >= lb.ready_at {
            "running"
        } else {
            "changing"
        }
    }

    /// 400 when mutations of a changing LB are refused and `lb` is changing.
    pub(crate) fn ensure_not_changing(&self, ctx: &Ctx, lb: &str) -> Result<(), ApiError> {
        let changing = self
            .load_balancers
            .get(lb)
            .is_some_and(|lb| State::lb_status(lb, ctx.now) == "changing");
        if ctx.refuse_changing && changing {
            return Err(ApiError::detail(400, super::error::BUSY));
        }
        Ok(())
    }

    /// A known (private) subnet by UUID.
    pub(crate) fn private_subnet(&self, uuid: &str) -> Option<&Subnet> {
        self.subnets.get(uuid).filter(|s| !s.public)
    }

    /// Addresses in use: every server address and every VIP.
    pub(crate) fn used_addresses(&self) -> HashSet<IpAddr> {
        let servers = self
            .servers
            .values()
            .flat_map(|s| s.interfaces.iter())
            .flat_map(|i| i.addresses.iter().map(|a| a.ip));
        let vips = self
            .load_balancers
            .values()
            .flat_map(|lb| lb.vips.iter().map(|v| v.ip));
        servers.chain(vips).collect()
    }

    /// The next free public VIP of a family (`v6` picks IPv6), searching from where the last
    /// allocation stopped and wrapping around.
    pub(crate) fn allocate_public(&mut self, v6: bool, used: &HashSet<IpAddr>) -> Option<Vip> {
        let (subnet, cidr) = if v6 {
            (PUBLIC_V6_SUBNET, PUBLIC_V6_CIDR)
        } else {
            (PUBLIC_V4_SUBNET, PUBLIC_V4_CIDR)
        };
        let cidr = Cidr::parse(cidr).ok()?;
        let slot = usize::from(v6);
        // Host addresses from the second one on (the first is the gateway, IPv4's last is the
        // broadcast address); the IPv6 search is bounded instead of spanning 2^64 addresses.
        let first = bits(cidr.network) + 2;
        let count: u128 = if v6 {
            65_536
        } else {
            (1u128 << (32 - u32::from(cidr.prefix))) - 3
        };
        let start = self.next_public[slot] % count;
        let pick = (0..count)
            .map(|i| (start + i) % count)
            .find(|i| !used.contains(&from_bits(cidr.network, first + i)))?;
        self.next_public[slot] = pick + 1;
        Some(Vip {
            ip: from_bits(cidr.network, first + pick),
            subnet: subnet.into(),
        })
    }

    /// Deletes a load balancer and everything under it; floating IPs pointing at it are
    /// unassigned. Returns whether it existed.
    pub(crate) fn delete_lb(&mut self, uuid: &str) -> bool {
        if self.load_balancers.remove(uuid).is_none() {
            return false;
        }
        let pools: Vec<String> = self
            .pools
            .values()
            .filter(|p| p.lb == uuid)
            .map(|p| p.uuid.clone())
            .collect();
        for pool in pools {
            self.delete_pool(&pool);
        }
        // Listeners without a pool still belong to the LB.
        self.listeners.retain(|_, l| l.lb != uuid);
        for fip in self.floating_ips.values_mut() {
            if fip.lb.as_deref() == Some(uuid) {
                fip.lb = None;
            }
        }
        true
    }

    /// Deletes a pool with its members, monitor and listeners. Returns whether it existed.
    pub(crate) fn delete_pool(&mut self, uuid: &str) -> bool {
        if self.pools.remove(uuid).is_none() {
            return false;
        }
        self.members.retain(|_, m| m.pool != uuid);
        self.monitors.retain(|_, m| m.pool != uuid);
        self.listeners
            .retain(|_, l| l.pool.as_deref() != Some(uuid));
        true
    }
}
