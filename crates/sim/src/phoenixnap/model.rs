//! The simulator's state: servers, public networks, IP blocks and tags in creation order, the
//! asynchronous assignment of blocks to networks, the address pool new blocks come from, and how
//! each object renders as JSON.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use rand::Rng as _;
use serde_json::{Map, Value, json};

/// Locations (regions) the API knows.
pub(crate) const LOCATIONS: &[&str] = &["PHX", "ASH", "SGP", "NLD", "CHI", "SEA", "AUS"];
/// Every IP block status the API documents.
pub(crate) const BLOCK_STATUSES: &[&str] = &[
    "creating",
    "subnetted",
    "assigning",
    "error assigning",
    "assigned",
    "unassigning",
    "error unassigning",
    "unassigned",
];
/// Server network types: bmcapi.spec.yaml `#/components/schemas/Server` `networkType` ("should be
/// set to `PUBLIC_AND_PRIVATE`, `PRIVATE_ONLY`, `PUBLIC_ONLY` or `NONE`"; review finding S4).
pub(crate) const NETWORK_TYPES: &[&str] =
    &["PUBLIC_AND_PRIVATE", "PRIVATE_ONLY", "PUBLIC_ONLY", "NONE"];
/// `assignedResourceType` of blocks assigned to a public network, unless changed: the real API's
/// spelling, upstream's primary constant since its commit 86fc6c9 ("handle different names for
/// 'public network'"; `PUBLIC_NETWORK` is the alternative; review finding S3). ipapi.spec.yaml
/// only says `type: string`, example `server`.
pub(crate) const DEFAULT_NETWORK_RESOURCE_TYPE: &str = "public network";
/// What `GET /bmc/v1/servers/{id}` answers for an unknown or deleted server, unless changed: 403,
/// as the real API does (upstream commit d84a2c5 "handle 403 for deleted node"; bmcapi.spec.yaml
/// documents 200, 400, 401, 403, 500 there and no 404; review finding S2).
pub(crate) const DEFAULT_GONE_SERVER_STATUS: u16 = 403;
/// The private network every seeded server's private addresses are on.
pub(crate) const PRIVATE_NETWORK_ID: &str = "5f9c1e2d3b4a596877665544";
/// The /24s new IP blocks are carved from, in order (documentation ranges, RFC 5737).
const POOLS: [Ipv4Addr; 2] = [
    Ipv4Addr::new(198, 51, 100, 0),
    Ipv4Addr::new(203, 0, 113, 0),
];

/// A random 24-hex-digit identifier, the API's (MongoDB ObjectId-like) ID format.
pub(crate) fn new_id() -> String {
    let bytes: [u8; 12] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 3339 "now" with milliseconds, like the API's timestamps.
pub(crate) fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Millisecond)
        .unwrap_or(now)
        .to_string()
}

/// Parses a `cidrBlockSize` such as `/29` of an existing block: `/22` to `/31`, the sizes an
/// `IpBlock` may have (ipapi.spec.yaml `#/components/schemas/IpBlock` `cidrBlockSize`).
pub(crate) fn parse_block_size(text: &str) -> Result<u8, String> {
    text.strip_prefix('/')
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| (22..=31).contains(n))
        .ok_or_else(|| format!("{text:?} is not a block size from /22 to /31"))
}

/// Parses the `cidrBlockSize` of `POST /ip-blocks`: ipapi.spec.yaml
/// `#/components/schemas/IpBlockCreate` "V4 supported sizes: [`/31`, `/30`, `/29` or `/28`] …
/// For a larger Block Size contact support" (review finding S4).
pub(crate) fn parse_create_block_size(text: &str) -> Result<u8, String> {
    text.strip_prefix('/')
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| (28..=31).contains(n))
        .ok_or_else(|| {
            format!("{text:?} is not a supported V4 block size (/31, /30, /29 or /28); for a larger block size contact support")
        })
}

/// Whether a tag name or value is allowed (ipapi.spec.yaml
/// `#/components/schemas/TagAssignmentRequest` `name` and `value`, bmcapi.spec.yaml the same,
/// tagapi.spec.yaml `TagCreate.name`): "a maximum of 100 characters including UTF-8 Unicode
/// letters, numbers, and the following symbols: '-', '_'. Regex: [A-zÀ-ú0-9_-]{1,100}".
///
/// The regex is prose (no `pattern:` keyword) and unanchored; searched for as written it
/// matches any text holding one ASCII letter (`Zürich` included), and taken as a full match it
/// refuses letters the prose allows (`ü`, U+00FC, is after `ú`, U+00FA) and admits the
/// non-letters inside its ranges (`A-z` holds `[\]^` and the backtick, `À-ú` holds `×` and `÷`).
/// The rule here is the prose, which is stricter than the search and allows every letter the
/// full match allows: 1 to 100 characters, each a Unicode letter (`char::is_alphabetic`), an
/// ASCII digit (the regex's `0-9`), `_` or `-`.
pub(crate) fn valid_tag_text(value: &str) -> bool {
    let n = value.chars().count();
    (1..=100).contains(&n)
        && value
            .chars()
            .all(|c| c.is_alphabetic() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The refusal text for a tag name or value that [`valid_tag_text`] refuses.
pub(crate) const TAG_TEXT_RULE: &str =
    "1 to 100 Unicode letters, digits 0-9, '_' or '-' (the specs' [A-zÀ-ú0-9_-]{1,100})";

/// Whether the real API takes `hostname` for a server: bmcapi.spec.yaml
/// `#/components/schemas/ServerCreate` `hostname` (the same in `ServerProvision` and `Server`):
/// `minLength: 1`, `maxLength: 100`, `pattern: ^(?=.*[a-zA-Z])([a-zA-Z0-9().-])+$`. So ASCII
/// letters of either case (a Kubernetes Node named after `Node-E` is `node-e`: kubelet lower-cases
/// its name), digits, `(`, `)`, `.` and `-`, with at least one letter; no whitespace, no `_`, no
/// other letters. (`ServerPatch.hostname` has the unanchored `[a-zA-Z0-9().-]+`; the simulator
/// never renames a server, and seeds follow `ServerCreate`.)
pub(crate) fn valid_hostname(hostname: &str) -> bool {
    (1..=100).contains(&hostname.len())
        && hostname
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'(' | b')' | b'.' | b'-'))
        && hostname.bytes().any(|b| b.is_ascii_alphabetic())
}

/// The refusal text for a hostname that [`valid_hostname`] refuses.
pub(crate) const HOSTNAME_RULE: &str = "1 to 100 characters of A-Z, a-z, 0-9, '(', ')', \
     '.' and '-', at least one letter (bmcapi.spec.yaml ServerCreate.hostname: \
     ^(?=.*[a-zA-Z])([a-zA-Z0-9().-])+$)";

/// The statuses of a public network (networkapi.spec.yaml `#/components/schemas/PublicNetwork`
/// `status`: "`BUSY`, `READY`, `DELETING` or `ERROR`").
pub(crate) const NETWORK_STATUSES: &[&str] = &["BUSY", "READY", "DELETING", "ERROR"];

/// An IPv4 network (the simulator has IPv4 blocks only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr4 {
    /// The network address (no host bits set).
    pub network: Ipv4Addr,
    /// The prefix length, 0–32.
    pub prefix: u8,
}

impl Cidr4 {
    /// Parses `a.b.c.d/n`; host bits must be zero.
    pub(crate) fn parse(text: &str) -> Result<Cidr4, String> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not in CIDR notation (address/prefix)"))?;
        let network: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("{prefix:?} is not a prefix length (0-32)"))?;
        let cidr = Cidr4 { network, prefix };
        if u32::from(network) != cidr.first() {
            return Err(format!("{text} has host bits set"));
        }
        Ok(cidr)
    }

    fn mask(self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// The first address as an integer.
    fn first(self) -> u32 {
        u32::from(self.network) & self.mask()
    }

    /// The last address as an integer.
    fn last(self) -> u32 {
        self.first() | !self.mask()
    }

    /// Whether the two networks share an address.
    pub(crate) fn overlaps(self, other: Cidr4) -> bool {
        self.first() <= other.last() && other.first() <= self.last()
    }
}

impl fmt::Display for Cidr4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// A bare-metal server (seeded, never created over the API).
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub id: String,
    pub hostname: String,
    pub description: Option<String>,
    pub status: String,
    pub os: String,
    pub server_type: String,
    pub location: String,
    pub private_ips: Vec<IpAddr>,
    pub public_ips: Vec<IpAddr>,
    pub network_type: String,
    pub provisioned_on: String,
    /// Tags (bmcapi.spec.yaml `Server.tags`, `TagAssignment`), filtered by `GET /servers?tag=`.
    pub tags: Vec<TagValue>,
}

/// A public network (seeded).
#[derive(Clone, Debug)]
pub(crate) struct PublicNetwork {
    pub id: String,
    pub name: String,
    pub location: String,
    pub vlan_id: u32,
    pub description: Option<String>,
    pub created_on: String,
    /// One of [`NETWORK_STATUSES`]; only a `READY` network takes IP blocks.
    pub status: String,
}

/// What an IP block is assigned to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// `assignedResourceId`.
    pub resource_id: String,
    /// `assignedResourceType`, e.g. `PUBLIC_NETWORK` or `server`.
    pub resource_type: String,
}

/// A tag on an IP block: a tag name from the tag manager and an optional value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TagValue {
    pub name: String,
    pub value: Option<String>,
}

/// An IP block.
#[derive(Clone, Debug)]
pub(crate) struct IpBlock {
    pub id: String,
    pub location: String,
    pub cidr: Cidr4,
    /// One of [`BLOCK_STATUSES`] (or what a test set).
    pub status: String,
    /// Kept from the start of `assigning` until `unassigning` completes.
    pub assignment: Option<Assignment>,
    /// When the running `assigning`/`unassigning` transition completes.
    pub due: Option<Instant>,
    pub description: Option<String>,
    pub tags: Vec<TagValue>,
    pub bring_your_own: bool,
    pub created_on: String,
}

impl IpBlock {
    /// Whether the block is (being) assigned to this public network.
    pub(crate) fn on_network(&self, network: &str) -> bool {
        self.assignment.as_ref().is_some_and(|a| {
            a.resource_id == network && !a.resource_type.eq_ignore_ascii_case("server")
        })
    }
}

/// A tag name in the tag manager.
#[derive(Clone, Debug)]
pub(crate) struct Tag {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub billing: bool,
}

/// A change another client makes between a client's read and its assignment request
/// (`POST /networks/v1/public-networks/{id}/ip-blocks`): applied just before that request is
/// handled, so the request meets the changed state, as it would in a real race.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Race {
    /// The block is assigned (completed at once) to `resource_type` `resource_id`, e.g. a
    /// `public network` or a `server`.
    Assign {
        /// The block's ID.
        block: String,
        /// `assignedResourceType`, e.g. `public network` or `server`.
        resource_type: String,
        /// `assignedResourceId`.
        resource_id: String,
    },
    /// The public network's status changes, e.g. to `ERROR`.
    NetworkStatus {
        /// The network's ID.
        network: String,
        /// One of `BUSY`, `READY`, `DELETING`, `ERROR`.
        status: String,
    },
}

impl State {
    /// Applies and clears the pending [`Race`], if any.
    pub(crate) fn run_race(&mut self) {
        match self.race.take() {
            Some(Race::Assign {
                block,
                resource_type,
                resource_id,
            }) => {
                if let Some(b) = self.block_mut(&block) {
                    b.status = "assigned".into();
                    b.due = None;
                    b.assignment = Some(Assignment {
                        resource_id,
                        resource_type,
                    });
                }
            }
            Some(Race::NetworkStatus { network, status }) => {
                if let Some(n) = self.networks.iter_mut().find(|n| n.id == network) {
                    n.status = status;
                }
            }
            None => {}
        }
    }
}

/// Everything the simulator holds; lists are in creation order.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub servers: Vec<Server>,
    pub networks: Vec<PublicNetwork>,
    pub blocks: Vec<IpBlock>,
    pub tags: Vec<Tag>,
    /// How long `assigning`/`unassigning` last for transitions started from now on.
    pub assign_after: Duration,
    /// `assignedResourceType` given to blocks assigned to a public network over the API.
    pub network_resource_type: String,
    /// What `GET /bmc/v1/servers/{id}` answers for an unknown server: 403 or 404.
    pub gone_server_status: u16,
    /// Another client's change, applied just before the next assignment request is handled.
    pub race: Option<Race>,
    /// Next-fit allocation cursor: an offset into the concatenated pools.
    cursor: u32,
}

impl State {
    pub(crate) fn new(assign_after: Duration) -> State {
        State {
            servers: Vec::new(),
            networks: Vec::new(),
            blocks: Vec::new(),
            tags: Vec::new(),
            assign_after,
            network_resource_type: DEFAULT_NETWORK_RESOURCE_TYPE.to_string(),
            gone_server_status: DEFAULT_GONE_SERVER_STATUS,
            race: None,
            cursor: 0,
        }
    }

    pub(crate) fn server(&self, id: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.id == id)
    }

    pub(crate) fn network(&self, id: &str) -> Option<&PublicNetwork> {
        self.networks.iter().find(|n| n.id == id)
    }

    pub(crate) fn block(&self, id: &str) -> Option<&IpBlock> {
        self.blocks.iter().find(|b| b.id == id)
    }

    pub(crate) fn block_mut(&mut self, id: &str) -> Option<&mut IpBlock> {
        self.blocks.iter_mut().find(|b| b.id == id)
    }

    pub(crate) fn tag_named(&self, name: &str) -> Option<&Tag> {
        self.tags.iter().find(|t| t.name == name)
    }

    /// Whether an ID is taken by any object (IDs are unique across kinds, as ObjectIds are).
    pub(crate) fn id_taken(&self, id: &str) -> bool {
        self.server(id).is_some()
            || self.network(id).is_some()
            || self.block(id).is_some()
            || self.tags.iter().any(|t| t.id == id)
    }

    /// Completes every transition that is due at `now`: `assigning` → `assigned`,
    /// `unassigning` → `unassigned` (dropping the assignment).
    pub(crate) fn advance(&mut self, now: Instant) {
        for block in &mut self.blocks {
            if block.due.is_some_and(|due| due <= now) {
                block.due = None;
                match block.status.as_str() {
                    "assigning" => block.status = "assigned".into(),
                    "unassigning" => {
                        block.status = "unassigned".into();
                        block.assignment = None;
                    }
                    _ => {}
                }
            }
        }
    }

    /// Completes every pending transition now.
    pub(crate) fn settle(&mut self) {
        let now = Instant::now();
        for block in &mut self.blocks {
            block.due = block.due.map(|d| d.min(now));
        }
        self.advance(now);
    }

    /// When a transition started now completes.
    pub(crate) fn due(&self, now: Instant) -> Instant {
        now.checked_add(self.assign_after).unwrap_or(now)
    }

    /// Whether no existing block overlaps `cidr`.
    pub(crate) fn is_free(&self, cidr: Cidr4) -> bool {
        !self.blocks.iter().any(|b| b.cidr.overlaps(cidr))
    }

    /// A free block of `prefix` bits from the pools, next-fit (a freed range is not handed out
    /// again until the pools wrap around); None when the size does not fit a pool or nothing
    /// is free.
    pub(crate) fn allocate(&mut self, prefix: u8) -> Option<Cidr4> {
        if !(24..=32).contains(&prefix) {
            return None;
        }
        let size = 1u32 << (32 - u32::from(prefix));
        let total = 256 * POOLS.len() as u32;
        let start = self.cursor.div_ceil(size) * size % total;
        for i in 0..total / size {
            let offset = (start + i * size) % total;
            let pool = POOLS[(offset / 256) as usize];
            let cidr = Cidr4 {
                network: Ipv4Addr::from(u32::from(pool) + offset % 256),
                prefix,
            };
            if self.is_free(cidr) {
                self.cursor = (offset + size) % total;
                return Some(cidr);
            }
        }
        None
    }
}

/// Hardware of a server type: (cpu, cpuCount, coresPerCpu, cpuFrequency, ram, storage).
fn hardware(server_type: &str) -> (&'static str, u32, u32, f64, &'static str, &'static str) {
    match server_type {
        "s0.d1.small" => ("Intel Xeon E3-1230v6", 1, 4, 3.5, "32GB", "1x 1TB SSD"),
        "s1.c1.small" => ("Intel Xeon E-2276G", 1, 6, 3.8, "32GB", "1x 960GB NVMe"),
        "s2.c1.medium" => (
            "Intel Xeon Silver 4210R",
            2,
            10,
            2.4,
            "128GB",
            "2x 960GB NVMe",
        ),
        "d1.c1.small" => ("Intel Xeon Silver 4110", 2, 8, 2.1, "64GB", "1x 960GB SSD"),
        _ => ("Intel Xeon E-2278G", 1, 8, 3.4, "64GB", "2x 960GB NVMe"),
    }
}

/// Sets `key` when `value` is Some.
fn put_opt(map: &mut Map<String, Value>, key: &str, value: Option<&String>) {
    if let Some(v) = value {
        map.insert(key.to_string(), Value::String(v.clone()));
    }
}

/// A server as `GET /bmc/v1/servers/{id}` renders it: bmcapi.spec.yaml
/// `#/components/schemas/Server`, with the required `storageConfiguration` (`StorageConfiguration`:
/// `rootPartition` `raid` default `NO_RAID`, `size` default -1) and without the `writeOnly`
/// (request-only) `configurationType` of `PrivateNetworkConfiguration` and
/// `IpBlocksConfiguration` (review finding S1).
pub(crate) fn render_server(state: &State, s: &Server) -> Value {
    let (cpu, cpu_count, cores, frequency, ram, storage) = hardware(&s.server_type);
    let ips = |list: &[IpAddr]| list.iter().map(ToString::to_string).collect::<Vec<_>>();
    let private_networks = if s.private_ips.is_empty() {
        json!([])
    } else {
        json!([{
            "id": PRIVATE_NETWORK_ID,
            "ips": ips(&s.private_ips),
            "dhcp": false,
            "statusDescription": "assigned",
        }])
    };
    let mut v = json!({
        "id": s.id,
        "status": s.status,
        "hostname": s.hostname,
        "os": s.os,
        "type": s.server_type,
        "location": s.location,
        "cpu": cpu,
        "cpuCount": cpu_count,
        "coresPerCpu": cores,
        "cpuFrequency": frequency,
        "ram": ram,
        "storage": storage,
        "privateIpAddresses": ips(&s.private_ips),
        "publicIpAddresses": ips(&s.public_ips),
        "pricingModel": "HOURLY",
        "networkType": s.network_type,
        "tags": render_tags(state, &s.tags),
        "provisionedOn": s.provisioned_on,
        "storageConfiguration": {"rootPartition": {"raid": "NO_RAID", "size": -1}},
        "networkConfiguration": {
            "privateNetworkConfiguration": {
                "privateNetworks": private_networks,
            },
            "ipBlocksConfiguration": {
                "ipBlocks": [],
            },
            "publicNetworkConfiguration": {"publicNetworks": []},
        },
    });
    if let Value::Object(map) = &mut v {
        put_opt(map, "description", s.description.as_ref());
    }
    v
}

/// A block as listed in a public network's `ipBlocks`.
pub(crate) fn render_network_block(b: &IpBlock) -> Value {
    json!({"id": b.id, "cidr": b.cidr.to_string(), "usedIpsCount": "0"})
}

/// A public network as `GET /networks/v1/public-networks/{id}` renders it.
pub(crate) fn render_network(state: &State, n: &PublicNetwork) -> Value {
    let blocks: Vec<Value> = state
        .blocks
        .iter()
        .filter(|b| b.on_network(&n.id))
        .map(render_network_block)
        .collect();
    let mut v = json!({
        "id": n.id,
        "vlanId": n.vlan_id,
        "memberships": [],
        "name": n.name,
        "location": n.location,
        "status": n.status,
        "createdOn": n.created_on,
        "ipBlocks": blocks,
    });
    if let Value::Object(map) = &mut v {
        put_opt(map, "description", n.description.as_ref());
    }
    v
}

/// An IP block as `GET /ips/v1/ip-blocks/{id}` renders it (ipapi.spec.yaml
/// `#/components/schemas/IpBlock`). The assigned resource shows once assignment has completed
/// (not while `assigning`): the real behaviour is undocumented (review finding S4, last point),
/// and the driver handles both.
pub(crate) fn render_block(state: &State, b: &IpBlock) -> Value {
    let tags = render_tags(state, &b.tags);
    let mut v = json!({
        "id": b.id,
        "location": b.location,
        "cidrBlockSize": format!("/{}", b.cidr.prefix),
        "cidr": b.cidr.to_string(),
        "ipVersion": "V4",
        "status": b.status,
        "tags": tags,
        "isBringYourOwn": b.bring_your_own,
        "createdOn": b.created_on,
    });
    if let Value::Object(map) = &mut v {
        if let Some(a) = &b.assignment
            && b.status != "assigning"
        {
            put_opt(map, "assignedResourceId", Some(&a.resource_id));
            put_opt(map, "assignedResourceType", Some(&a.resource_type));
        }
        put_opt(map, "description", b.description.as_ref());
    }
    v
}

/// Tags on a resource as the specs' `TagAssignment` (ipapi.spec.yaml and bmcapi.spec.yaml:
/// `id`, `name`, `isBillingTag` required; `value`, `createdBy`).
fn render_tags(state: &State, tags: &[TagValue]) -> Vec<Value> {
    tags.iter()
        .map(|t| {
            let tag = state.tag_named(&t.name);
            let mut v = json!({
                "id": tag.map_or("", |tag| tag.id.as_str()),
                "name": t.name,
                "isBillingTag": tag.is_some_and(|tag| tag.billing),
                "createdBy": "USER",
            });
            if let Value::Object(map) = &mut v {
                put_opt(map, "value", t.value.as_ref());
            }
            v
        })
        .collect()
}

/// A tag as `GET /tag-manager/v1/tags` renders it: the values in use and the blocks carrying it.
pub(crate) fn render_tag(state: &State, t: &Tag) -> Value {
    let mut values = BTreeSet::new();
    let mut assignments = Vec::new();
    for b in &state.blocks {
        for tv in b.tags.iter().filter(|tv| tv.name == t.name) {
            if let Some(value) = &tv.value {
                values.insert(value.clone());
            }
            let mut a = json!({"resourceName": format!("/ips/ip-blocks/{}", b.id)});
            if let Value::Object(map) = &mut a {
                put_opt(map, "value", tv.value.as_ref());
            }
            assignments.push(a);
        }
    }
    let mut v = json!({
        "id": t.id,
        "name": t.name,
        "values": values.into_iter().collect::<Vec<_>>(),
        "isBillingTag": t.billing,
        "resourceAssignments": assignments,
        "createdBy": "USER",
    });
    if let Value::Object(map) = &mut v {
        put_opt(map, "description", t.description.as_ref());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr4 {
        Cidr4::parse(s).expect("test network")
    }

    fn block(state: &State, c: Cidr4) -> IpBlock {
        IpBlock {
            id: format!("b{}", state.blocks.len()),
            location: "PHX".into(),
            cidr: c,
            status: "unassigned".into(),
            assignment: None,
            due: None,
            description: None,
            tags: Vec::new(),
            bring_your_own: false,
            created_on: now_rfc3339(),
        }
    }

    #[test]
    fn cidrs_parse_and_overlap() {
        assert_eq!(cidr("198.51.100.8/29").to_string(), "198.51.100.8/29");
        assert!(Cidr4::parse("198.51.100.9/29").is_err());
        assert!(Cidr4::parse("2001:db8::/64").is_err());
        assert!(Cidr4::parse("10.0.0.0/33").is_err());
        assert!(cidr("10.0.0.0/24").overlaps(cidr("10.0.0.8/29")));
        assert!(!cidr("10.0.0.0/29").overlaps(cidr("10.0.0.8/29")));
        assert!(cidr("0.0.0.0/0").overlaps(cidr("10.0.0.8/32")));
    }

    #[test]
    fn allocation_is_next_fit_and_skips_used_ranges() {
        let mut state = State::new(Duration::ZERO);
        let seeded = cidr("198.51.100.8/29");
        let b = block(&state, seeded);
        state.blocks.push(b);
        let first = state.allocate(29).expect("free");
        assert_eq!(first.to_string(), "198.51.100.0/29");
        let b = block(&state, first);
        state.blocks.push(b);
        let second = state.allocate(29).expect("free");
        assert_eq!(second.to_string(), "198.51.100.16/29");
        // Freeing the first does not hand it out again right away.
        state.blocks.retain(|b| b.cidr != first);
        assert_eq!(
            state.allocate(29).map(|c| c.to_string()),
            Some("198.51.100.24/29".into())
        );
        assert_eq!(state.allocate(23), None, "larger than a pool");
        // The pools hold 64 /29s; only the seeded one is in use.
        let mut n = 0;
        while let Some(c) = state.allocate(29) {
            let b = block(&state, c);
            state.blocks.push(b);
            n += 1;
        }
        assert_eq!(n, 63, "everything but the seeded block");
    }

    #[test]
    fn transitions_complete_when_due() {
        let mut state = State::new(Duration::from_secs(3600));
        let mut b = block(&state, cidr("198.51.100.0/29"));
        b.status = "assigning".into();
        b.assignment = Some(Assignment {
            resource_id: "n".into(),
            resource_type: DEFAULT_NETWORK_RESOURCE_TYPE.into(),
        });
        b.due = Some(state.due(Instant::now()));
        state.blocks.push(b);
        state.advance(Instant::now());
        assert_eq!(state.blocks[0].status, "assigning");
        assert!(render_block(&state, &state.blocks[0])["assignedResourceId"].is_null());
        state.settle();
        assert_eq!(state.blocks[0].status, "assigned");
        assert_eq!(
            render_block(&state, &state.blocks[0])["assignedResourceId"],
            "n"
        );
        assert!(state.blocks[0].on_network("n"));
    }
}
