//! `wasm-ccm:provider@0.2.x`: its generated types ([`crate::bindings`]) to the host model and
//! back.
//!
//! Every record converts field by field in a struct literal, so a field added to either side
//! without the other fails to compile here, and every enum and variant converts in an
//! exhaustive `match`. [`Convert`] carries the conversions through lists, options and results,
//! so a typed call converts its whole answer (`Result<Vec<Route>, ProviderError>`) in one step.

use crate::bindings::{cluster as wc, http as wh, instance_listing as wi, log as wl, types as wt};
use crate::call::EventKind;
use crate::capability::log::Level;
use crate::model::{cluster as mc, http as mh, types as mt};

/// A value converted between the host model and this version's bindings, in either direction,
/// and through `list`, `option` and `result`.
pub(crate) trait Convert<T> {
    /// The value as a `T`.
    fn convert(self) -> T;
}

/// Types the model and the bindings share (scalars, strings, string pairs).
macro_rules! same {
    ($($t:ty),+ $(,)?) => {$(
        impl Convert<$t> for $t {
            fn convert(self) -> $t {
                self
            }
        }
    )+};
}

same!(bool, u8, u16, u32, u64, String, (), (String, String));

impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(self) -> Vec<B> {
        // Types of one layout (the byte and string-pair lists) are converted in place.
        self.into_iter().map(Convert::convert).collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(self) -> Option<B> {
        self.map(Convert::convert)
    }
}

impl<A: Convert<B>, B, E: Convert<F>, F> Convert<Result<B, F>> for Result<A, E> {
    fn convert(self) -> Result<B, F> {
        self.map(Convert::convert).map_err(Convert::convert)
    }
}

/// `From` both ways and [`Convert`] both ways for a type of both sides.
macro_rules! both_ways {
    ($m:ident :: $name:ident, $w:ident, |$v:ident| $to_wit:expr, |$u:ident| $to_model:expr) => {
        impl From<$m::$name> for $w::$name {
            fn from($v: $m::$name) -> Self {
                $to_wit
            }
        }

        impl From<$w::$name> for $m::$name {
            fn from($u: $w::$name) -> Self {
                $to_model
            }
        }

        impl Convert<$w::$name> for $m::$name {
            fn convert(self) -> $w::$name {
                self.into()
            }
        }

        impl Convert<$m::$name> for $w::$name {
            fn convert(self) -> $m::$name {
                self.into()
            }
        }
    };
}

/// Records: every field, by name, in both directions.
macro_rules! records {
    ($m:ident => $w:ident: $($name:ident { $($field:ident),+ $(,)? })+) => {$(
        both_ways!(
            $m::$name,
            $w,
            |v| $w::$name { $($field: v.$field.convert()),+ },
            |v| $m::$name { $($field: v.$field.convert()),+ }
        );
    )+};
}

/// Enums: every case, by name, in both directions.
macro_rules! enums {
    ($m:ident => $w:ident: $($name:ident { $($case:ident),+ $(,)? })+) => {$(
        both_ways!(
            $m::$name,
            $w,
            |v| match v { $($m::$name::$case => $w::$name::$case),+ },
            |v| match v { $($w::$name::$case => $m::$name::$case),+ }
        );
    )+};
}

/// Variants whose every case carries one payload (or none), by name, in both directions.
macro_rules! variants {
    ($m:ident => $w:ident: $($name:ident { $($case:ident $(($x:ident))?),+ $(,)? })+) => {$(
        both_ways!(
            $m::$name,
            $w,
            |v| match v { $($m::$name::$case $(($x))? => $w::$name::$case $(($x.convert()))?),+ },
            |v| match v { $($w::$name::$case $(($x))? => $m::$name::$case $(($x.convert()))?),+ }
        );
    )+};
}

records! { mt => wi:
    ListedInstance { node_name, metadata, shutdown }
    InstancePage { instances, next }
}

records! { mt => wt:
    Retry { seconds, reason }
    NodeAddress { kind, address }
    Taint { key, value, effect }
    Node { name, uid, provider_id, labels, annotations, addresses, taints, ready }
    NodeSet { generation, count }
    InstanceMetadata { provider_id, instance_type, zone, region, addresses, additional_labels }
    ServicePort { name, protocol, port, node_port }
    Ingress { ip, hostname, ip_mode }
    Service {
        namespace, name, uid, labels, annotations, ports, external_traffic_policy,
        health_check_node_port, load_balancer_ip, load_balancer_source_ranges, session_affinity,
        session_affinity_timeout, ip_families, load_balancer_class, ingress,
    }
    EnsureResult { ingress, set_annotations, remove_annotations }
    Route { name, target_node, target_node_addresses, destination_cidr, blackhole }
    Context { cluster_name, cluster_id, kubernetes_version }
    ProviderInfo {
        name, version, provider_id_scheme, default_egress, env_prefixes, annotation_prefixes,
        secrets,
    }
    SecretOrigin { settings, default_url }
    Oauth2Seal { token_path, token_origins }
    SecretDecl { name, at, origin, uses }
}

enums! { mt => wt:
    AddressType { Hostname, InternalIp, ExternalIp, InternalDns, ExternalDns }
    Protocol { Tcp, Udp, Sctp }
    TrafficPolicy { Cluster, Local }
    SessionAffinity { None, ClientIp }
    IpFamily { Ipv4, Ipv6 }
    IpMode { Vip, Proxy }
}

variants! { mt => wt:
    ProviderError {
        NotFound(m), NotImplemented, ImplementedElsewhere, InvalidConfig(m), Unauthorized(m),
        RateLimited(s), RetryAfter(r), Transient(m), Permanent(m),
    }
    SecretLocation { Env(n), Ini(k), Json(p) }
    SecretUse {
        Bearer, Header(n), Param(n), BasicUser, BasicPassword, CloudstackSignature,
        Oauth2Client(s),
    }
}

records! { mc => wc:
    AddressClaim { ip, service_uid, used_as }
}

enums! { mc => wc:
    AddressUse { LoadBalancerIp, Annotation, Ingress }
}

records! { mh => wh:
    Request { method, url, headers, body, timeout_ms }
    Response { status, headers, body }
}

enums! { mh => wh:
    Method { Get, Head, Post, Put, Patch, Delete, Options }
}

variants! { mh => wh:
    HttpError { Denied(m), Timeout(m), Connect(m), TooLarge(m), Invalid(m) }
}

/// The host's own types for what only ever comes from the guest.
impl From<wc::EventType> for EventKind {
    fn from(kind: wc::EventType) -> Self {
        match kind {
            wc::EventType::Normal => EventKind::Normal,
            wc::EventType::Warning => EventKind::Warning,
        }
    }
}

impl From<wl::Level> for Level {
    fn from(level: wl::Level) -> Self {
        match level {
            wl::Level::Trace => Level::Trace,
            wl::Level::Debug => Level::Debug,
            wl::Level::Info => Level::Info,
            wl::Level::Warn => Level::Warn,
            wl::Level::Error => Level::Error,
        }
    }
}

/// An argument of a typed call, as the generated guest function takes it.
pub(crate) trait ToWit {
    /// The generated type.
    type Wit;
    /// A copy for the guest.
    fn to_wit(&self) -> Self::Wit;
}

macro_rules! to_wit_by_clone {
    ($($t:ty => $w:ty),+ $(,)?) => {$(
        impl ToWit for $t {
            type Wit = $w;
            fn to_wit(&self) -> $w {
                self.clone().into()
            }
        }
    )+};
}

to_wit_by_clone!(
    mt::Node => wt::Node,
    mt::Service => wt::Service,
    mt::Route => wt::Route,
    mt::Context => wt::Context,
);

impl ToWit for str {
    type Wit = String;
    fn to_wit(&self) -> String {
        self.to_owned()
    }
}
