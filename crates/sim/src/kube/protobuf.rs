//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded into the JSON the
//! simulator stores.
//!
//! client-go's typed clients of built-in kinds send protobuf: kubectl's generator commands
//! (`kubectl create service loadbalancer`, `create namespace`, `create configmap`) and
//! controllers configured with `ContentType: application/vnd.kubernetes.protobuf`. client-go
//! does not retry such a request as JSON after a 415 (its fallback covers CBOR only), so the
//! simulator has to read them. The body is apimachinery's envelope (`k8s\0`, then a
//! `runtime.Unknown` holding the type and the raw typed message); a small hand-written wire
//! reader and one table per message turn it into the object a JSON client would have sent, so
//! validation, defaulting and storage do not know the difference. Responses stay JSON: client-go
//! lists `application/json` in its `Accept` and decodes by the response's `Content-Type`.
//!
//! Field numbers come from the generated.proto files of k8s.io/api (`core/v1`,
//! `coordination/v1`, `events/v1`; master of July 2026, commit 10b39a3) and k8s.io/apimachinery
//! (`pkg/apis/meta/v1`, `pkg/runtime`, `pkg/util/intstr`, `pkg/api/resource`; commit eed236c);
//! each table names its message. JSON names and the treatment of zero values come from the Go
//! types' `json` tags: a non-pointer field with `omitempty` leaves its zero value out (gogo's
//! marshaller writes every non-pointer field, also when empty), pointer fields and fields
//! without `omitempty` keep it.
//!
//! Strict by design: a field number a table does not list, a wire type that does not match the
//! field, a truncated or overlong value, or bytes that are not UTF-8 where a string is expected
//! are 400 `BadRequest` naming the message and field number, rather than data dropped silently.
//! Kinds without a table are 415, as before.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::error::ApiError;

/// The media type of Kubernetes protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's magic number (`protobufPrefix` in k8s.io/apimachinery
/// pkg/runtime/serializer/protobuf/protobuf.go).
const MAGIC: &[u8] = b"k8s\0";

/// The largest field number protobuf allows (2^29 - 1).
const MAX_FIELD: u64 = (1 << 29) - 1;

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The bytes are not a well-formed message of the announced type: 400.
    Malformed(String),
    /// Well-formed, but of a kind or encoding the simulator does not decode: 415.
    Unsupported(String),
}

impl From<DecodeError> for ApiError {
    fn from(e: DecodeError) -> ApiError {
        match e {
            DecodeError::Malformed(m) => ApiError::bad_request(m),
            DecodeError::Unsupported(m) => ApiError::new(415, m),
        }
    }
}

/// Decodes an enveloped protobuf body into the JSON object of its kind, `apiVersion` and
/// `kind` included.
pub(crate) fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let unknown = body.strip_prefix(MAGIC).ok_or_else(|| {
        DecodeError::Malformed(
            "unable to decode protobuf body: it does not start with the envelope's magic number \"k8s\\x00\"".into(),
        )
    })?;
    let envelope = message(&UNKNOWN, unknown, "")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
    let type_meta = envelope.get("typeMeta");
    let api_version = text(type_meta.and_then(|t| t.get("apiVersion")));
    let kind = text(type_meta.and_then(|t| t.get("kind")));
    let encoding = text(envelope.get("contentEncoding"));
    let content_type = text(envelope.get("contentType"));
    if kind.is_empty() || api_version.is_empty() {
        // As the apiserver's decoder words it (runtime.NewMissingKindErr / NewMissingVersionErr).
        let missing = if kind.is_empty() { "Kind" } else { "Version" };
        return Err(DecodeError::Malformed(format!(
            "Object '{missing}' is missing in the protobuf envelope (apiVersion {api_version:?}, kind {kind:?})"
        )));
    }
    if !encoding.is_empty() || !(content_type.is_empty() || content_type == MEDIA_TYPE) {
        return Err(DecodeError::Unsupported(format!(
            "the protobuf envelope's content encoding {encoding:?} and content type {content_type:?} are not supported: the raw object must be protobuf, unencoded"
        )));
    }
    let Some(typed) = KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, m)| *m)
    else {
        let served = KINDS
            .iter()
            .map(|(v, k, _)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(DecodeError::Unsupported(format!(
            "the simulator decodes protobuf bodies of {served} only; send {api_version} {kind} as application/json"
        )));
    };
    // `raw` went through the table's `bytes` rule (base64, as in JSON) like any field: undone.
    let raw = match envelope.get("raw").and_then(Value::as_str) {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| DecodeError::Malformed(format!("unable to decode protobuf raw: {e}")))?,
        None => Vec::new(),
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    out.extend(message(typed, &raw, "")?);
    Ok(Value::Object(out))
}

/// The typed messages, by `apiVersion` and `kind` of the envelope.
static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Service", &SERVICE),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Node", &NODE),
    ("v1", "Event", &CORE_EVENT),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("events.k8s.io/v1", "Event", &EVENTS_EVENT),
    // kubectl auth can-i posts these as protobuf (typed clients of built-in kinds).
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &SELF_SUBJECT_ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        &SELF_SUBJECT_RULES_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &SUBJECT_ACCESS_REVIEW,
    ),
    // A delegating server's typed client (`TokenReviews().Create`) may send protobuf too.
    ("authentication.k8s.io/v1", "TokenReview", &TOKEN_REVIEW),
    // `kubectl create token` (ServiceAccounts().CreateToken) posts its TokenRequest as protobuf.
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
];

/// Whether a `Content-Type` header names the Kubernetes protobuf media type (parameters
/// ignored).
pub(crate) fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|mt| mt.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

// ---------------------------------------------------------------------------------------------
// The wire format.

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32,
}

impl Wire<'_> {
    fn name(&self) -> &'static str {
        match self {
            Wire::Varint(_) => "varint",
            Wire::Fixed64 => "fixed64",
            Wire::Bytes(_) => "length-delimited",
            Wire::Fixed32 => "fixed32",
        }
    }
}

/// Reads fields from one message's bytes; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(format!("truncated varint at byte {start}"));
            };
            self.pos += 1;
            // The tenth byte holds only the 64th bit.
            if i == 9 && b > 1 {
                break;
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("varint at byte {start} overflows 64 bits"))
    }

    /// The next `n` bytes; `what` and `at` describe them for the error.
    fn take(&mut self, n: u64, what: &str, at: usize) -> Result<&'a [u8], String> {
        let start = self.pos;
        let slice = usize::try_from(n)
            .ok()
            .and_then(|n| start.checked_add(n))
            .and_then(|end| self.buf.get(start..end));
        let Some(slice) = slice else {
            return Err(format!(
                "{what} at byte {at} runs past the end of the {}-byte message",
                self.buf.len()
            ));
        };
        self.pos += slice.len();
        Ok(slice)
    }

    /// The next field's number and value, or `None` at the end of the message.
    fn field(&mut self) -> Result<Option<(u32, Wire<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let key = self.varint()?;
        let num = key >> 3;
        if num == 0 || num > MAX_FIELD {
            return Err(format!("invalid field number {num} at byte {at}"));
        }
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            // No table field is fixed-width: these are read past (bounds-checked) only so that
            // the error names the field and its wire type.
            1 => {
                self.take(8, "fixed64 value", self.pos)?;
                Wire::Fixed64
            }
            2 => {
                let len_at = self.pos;
                let n = self.varint()?;
                Wire::Bytes(self.take(n, &format!("length {n}"), len_at)?)
            }
            5 => {
                self.take(4, "fixed32 value", self.pos)?;
                Wire::Fixed32
            }
            3 | 4 => {
                return Err(format!(
                    "field {num} at byte {at} uses a group wire type, which Kubernetes never writes"
                ));
            }
            t => {
                return Err(format!(
                    "field {num} at byte {at} has invalid wire type {t}"
                ));
            }
        };
        // MAX_FIELD fits in u32.
        Ok(Some((num as u32, wire)))
    }
}

// ---------------------------------------------------------------------------------------------
// Message tables.

/// How a field's protobuf type becomes JSON.
#[derive(Debug, Clone, Copy)]
enum Ty {
    /// `string`.
    Str,
    /// `bytes`: base64, as Go's encoding/json writes `[]byte`.
    Bytes,
    /// `bytes` holding JSON (`FieldsV1.Raw`), embedded as JSON.
    Json,
    Bool,
    Int32,
    Int64,
    Msg(&'static Message),
    /// `map<string, V>`: each occurrence is one entry message (key = 1, value = 2).
    Map(&'static Ty),
    /// intstr.IntOrString: a number or a string in JSON.
    IntOrString,
    /// meta/v1 Time: RFC 3339 in seconds; the zero time (an empty message) is absent.
    Time,
    /// meta/v1 MicroTime: RFC 3339 with microseconds; the zero time is absent.
    MicroTime,
    /// resource.Quantity: its string.
    Quantity,
    /// meta/v1 FieldsV1: the JSON in its `Raw` bytes.
    FieldsV1,
}

impl Ty {
    fn wire_name(&self) -> &'static str {
        match self {
            Ty::Bool | Ty::Int32 | Ty::Int64 => "varint",
            _ => "length-delimited",
        }
    }
}

/// What a field's zero value and repetition become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Card {
    /// A non-pointer Go field with `omitempty`: "", 0 and false are absent in JSON.
    Omit,
    /// A pointer field, or one without `omitempty`: the value as sent, zero included.
    Keep,
    /// A repeated field: a JSON array.
    Repeated,
}

#[derive(Debug)]
struct Field {
    num: u32,
    json: &'static str,
    ty: Ty,
    card: Card,
}

/// One protobuf message: its name (for errors) and every field the simulator decodes.
#[derive(Debug)]
struct Message {
    name: &'static str,
    fields: &'static [Field],
}

const fn omit(num: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        num,
        json,
        ty,
        card: Card::Omit,
    }
}

const fn keep(num: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        num,
        json,
        ty,
        card: Card::Keep,
    }
}

const fn rep(num: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        num,
        json,
        ty,
        card: Card::Repeated,
    }
}

use Ty::{Bool, Bytes, Int32, Int64, IntOrString, Map as MapOf, MicroTime, Msg, Str, Time};

// apimachinery pkg/runtime/generated.proto: message Unknown, message TypeMeta (runtime's own,
// not meta/v1's: apiVersion = 1, kind = 2).
static UNKNOWN: Message = Message {
    name: "runtime.Unknown",
    fields: &[
        keep(1, "typeMeta", Msg(&RUNTIME_TYPE_META)),
        keep(2, "raw", Bytes),
        keep(3, "contentEncoding", Str),
        keep(4, "contentType", Str),
    ],
};
static RUNTIME_TYPE_META: Message = Message {
    name: "runtime.TypeMeta",
    fields: &[keep(1, "apiVersion", Str), keep(2, "kind", Str)],
};

// apimachinery pkg/util/intstr/generated.proto: message IntOrString.
static INT_OR_STRING: Message = Message {
    name: "intstr.IntOrString",
    fields: &[
        keep(1, "type", Int64),
        keep(2, "intVal", Int32),
        keep(3, "strVal", Str),
    ],
};

// apimachinery pkg/apis/meta/v1/generated.proto: messages Time and MicroTime (the same shape;
// the Timestamp they marshal through).
static TIMESTAMP: Message = Message {
    name: "v1.Time",
    fields: &[keep(1, "seconds", Int64), keep(2, "nanos", Int32)],
};

// apimachinery pkg/api/resource/generated.proto: message Quantity.
static QUANTITY: Message = Message {
    name: "resource.Quantity",
    fields: &[keep(1, "string", Str)],
};

// meta/v1 generated.proto: message FieldsV1.
static FIELDS_V1: Message = Message {
    name: "v1.FieldsV1",
    fields: &[keep(1, "Raw", Ty::Json)],
};

// meta/v1 generated.proto: message ObjectMeta.
static OBJECT_META: Message = Message {
    name: "v1.ObjectMeta",
    fields: &[
        omit(1, "name", Str),
        omit(2, "generateName", Str),
        omit(3, "namespace", Str),
        omit(4, "selfLink", Str),
        omit(5, "uid", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "generation", Int64),
        omit(8, "creationTimestamp", Time),
        keep(9, "deletionTimestamp", Time),
        keep(10, "deletionGracePeriodSeconds", Int64),
        omit(11, "labels", MapOf(&Str)),
        omit(12, "annotations", MapOf(&Str)),
        rep(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
        rep(17, "managedFields", Msg(&MANAGED_FIELDS_ENTRY)),
    ],
};

// meta/v1 generated.proto: message OwnerReference.
static OWNER_REFERENCE: Message = Message {
    name: "v1.OwnerReference",
    fields: &[
        keep(5, "apiVersion", Str),
        keep(1, "kind", Str),
        keep(3, "name", Str),
        keep(4, "uid", Str),
        keep(6, "controller", Bool),
        keep(7, "blockOwnerDeletion", Bool),
    ],
};

// meta/v1 generated.proto: message ManagedFieldsEntry.
static MANAGED_FIELDS_ENTRY: Message = Message {
    name: "v1.ManagedFieldsEntry",
    fields: &[
        omit(1, "manager", Str),
        omit(2, "operation", Str),
        omit(3, "apiVersion", Str),
        keep(4, "time", Time),
        omit(6, "fieldsType", Str),
        keep(7, "fieldsV1", Ty::FieldsV1),
        omit(8, "subresource", Str),
    ],
};

// meta/v1 generated.proto: message Condition.
static CONDITION: Message = Message {
    name: "v1.Condition",
    fields: &[
        keep(1, "type", Str),
        keep(2, "status", Str),
        omit(3, "observedGeneration", Int64),
        keep(4, "lastTransitionTime", Time),
        keep(5, "reason", Str),
        keep(6, "message", Str),
    ],
};

// core/v1 generated.proto: message Service.
static SERVICE: Message = Message {
    name: "v1.Service",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&SERVICE_SPEC)),
        keep(3, "status", Msg(&SERVICE_STATUS)),
    ],
};

// core/v1 generated.proto: message ServiceSpec.
static SERVICE_SPEC: Message = Message {
    name: "v1.ServiceSpec",
    fields: &[
        rep(1, "ports", Msg(&SERVICE_PORT)),
        omit(2, "selector", MapOf(&Str)),
        omit(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        omit(4, "type", Str),
        rep(5, "externalIPs", Str),
        omit(7, "sessionAffinity", Str),
        omit(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        omit(10, "externalName", Str),
        omit(11, "externalTrafficPolicy", Str),
        omit(12, "healthCheckNodePort", Int32),
        omit(13, "publishNotReadyAddresses", Bool),
        keep(14, "sessionAffinityConfig", Msg(&SESSION_AFFINITY_CONFIG)),
        rep(19, "ipFamilies", Str),
        keep(17, "ipFamilyPolicy", Str),
        keep(20, "allocateLoadBalancerNodePorts", Bool),
        keep(21, "loadBalancerClass", Str),
        keep(22, "internalTrafficPolicy", Str),
        keep(23, "trafficDistribution", Str),
    ],
};

// core/v1 generated.proto: message ServicePort.
static SERVICE_PORT: Message = Message {
    name: "v1.ServicePort",
    fields: &[
        omit(1, "name", Str),
        omit(2, "protocol", Str),
        keep(6, "appProtocol", Str),
        keep(3, "port", Int32),
        omit(4, "targetPort", IntOrString),
        omit(5, "nodePort", Int32),
    ],
};

// core/v1 generated.proto: messages SessionAffinityConfig, ClientIPConfig.
static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "v1.SessionAffinityConfig",
    fields: &[keep(1, "clientIP", Msg(&CLIENT_IP_CONFIG))],
};
static CLIENT_IP_CONFIG: Message = Message {
    name: "v1.ClientIPConfig",
    fields: &[keep(1, "timeoutSeconds", Int32)],
};

// core/v1 generated.proto: messages ServiceStatus, LoadBalancerStatus, LoadBalancerIngress,
// PortStatus.
static SERVICE_STATUS: Message = Message {
    name: "v1.ServiceStatus",
    fields: &[
        keep(1, "loadBalancer", Msg(&LOAD_BALANCER_STATUS)),
        rep(2, "conditions", Msg(&CONDITION)),
    ],
};
static LOAD_BALANCER_STATUS: Message = Message {
    name: "v1.LoadBalancerStatus",
    fields: &[rep(1, "ingress", Msg(&LOAD_BALANCER_INGRESS))],
};
static LOAD_BALANCER_INGRESS: Message = Message {
    name: "v1.LoadBalancerIngress",
    fields: &[
        omit(1, "ip", Str),
        omit(2, "hostname", Str),
        keep(3, "ipMode", Str),
        rep(4, "ports", Msg(&PORT_STATUS)),
    ],
};
static PORT_STATUS: Message = Message {
    name: "v1.PortStatus",
    fields: &[
        keep(1, "port", Int32),
        keep(2, "protocol", Str),
        keep(3, "error", Str),
    ],
};

// core/v1 generated.proto: messages Namespace, NamespaceSpec, NamespaceStatus,
// NamespaceCondition.
static NAMESPACE: Message = Message {
    name: "v1.Namespace",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&NAMESPACE_SPEC)),
        keep(3, "status", Msg(&NAMESPACE_STATUS)),
    ],
};
static NAMESPACE_SPEC: Message = Message {
    name: "v1.NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};
static NAMESPACE_STATUS: Message = Message {
    name: "v1.NamespaceStatus",
    fields: &[
        omit(1, "phase", Str),
        rep(2, "conditions", Msg(&NAMESPACE_CONDITION)),
    ],
};
static NAMESPACE_CONDITION: Message = Message {
    name: "v1.NamespaceCondition",
    fields: &[
        keep(1, "type", Str),
        keep(2, "status", Str),
        omit(4, "lastTransitionTime", Time),
        omit(5, "reason", Str),
        omit(6, "message", Str),
    ],
};

// core/v1 generated.proto: message ConfigMap.
static CONFIG_MAP: Message = Message {
    name: "v1.ConfigMap",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(4, "immutable", Bool),
        omit(2, "data", MapOf(&Str)),
        omit(3, "binaryData", MapOf(&Bytes)),
    ],
};

// core/v1 generated.proto: messages Node, NodeSpec, Taint, NodeConfigSource,
// ConfigMapNodeConfigSource, NodePodPreemptionPolicy.
static NODE: Message = Message {
    name: "v1.Node",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&NODE_SPEC)),
        keep(3, "status", Msg(&NODE_STATUS)),
    ],
};
static NODE_SPEC: Message = Message {
    name: "v1.NodeSpec",
    fields: &[
        omit(1, "podCIDR", Str),
        rep(7, "podCIDRs", Str),
        omit(3, "providerID", Str),
        omit(4, "unschedulable", Bool),
        rep(5, "taints", Msg(&TAINT)),
        keep(6, "configSource", Msg(&NODE_CONFIG_SOURCE)),
        omit(2, "externalID", Str),
        keep(8, "podPreemptionPolicy", Msg(&NODE_POD_PREEMPTION_POLICY)),
    ],
};
static TAINT: Message = Message {
    name: "v1.Taint",
    fields: &[
        keep(1, "key", Str),
        omit(2, "value", Str),
        keep(3, "effect", Str),
        keep(4, "timeAdded", Time),
    ],
};
static NODE_CONFIG_SOURCE: Message = Message {
    name: "v1.NodeConfigSource",
    fields: &[keep(2, "configMap", Msg(&CONFIG_MAP_NODE_CONFIG_SOURCE))],
};
static CONFIG_MAP_NODE_CONFIG_SOURCE: Message = Message {
    name: "v1.ConfigMapNodeConfigSource",
    fields: &[
        keep(1, "namespace", Str),
        keep(2, "name", Str),
        omit(3, "uid", Str),
        omit(4, "resourceVersion", Str),
        keep(5, "kubeletConfigKey", Str),
    ],
};
static NODE_POD_PREEMPTION_POLICY: Message = Message {
    name: "v1.NodePodPreemptionPolicy",
    fields: &[rep(1, "disableResizePreemption", Str)],
};

// core/v1 generated.proto: messages NodeStatus, NodeCondition, NodeAddress,
// NodeDaemonEndpoints, DaemonEndpoint, NodeSystemInfo, NodeSwapStatus, ContainerImage,
// AttachedVolume, NodeConfigStatus, NodeRuntimeHandler, NodeRuntimeHandlerFeatures,
// NodeFeatures.
static NODE_STATUS: Message = Message {
    name: "v1.NodeStatus",
    fields: &[
        omit(1, "capacity", MapOf(&Ty::Quantity)),
        omit(2, "allocatable", MapOf(&Ty::Quantity)),
        omit(3, "phase", Str),
        rep(4, "conditions", Msg(&NODE_CONDITION)),
        rep(5, "addresses", Msg(&NODE_ADDRESS)),
        keep(6, "daemonEndpoints", Msg(&NODE_DAEMON_ENDPOINTS)),
        keep(7, "nodeInfo", Msg(&NODE_SYSTEM_INFO)),
        rep(8, "images", Msg(&CONTAINER_IMAGE)),
        rep(9, "volumesInUse", Str),
        rep(10, "volumesAttached", Msg(&ATTACHED_VOLUME)),
        keep(11, "config", Msg(&NODE_CONFIG_STATUS)),
        rep(12, "runtimeHandlers", Msg(&NODE_RUNTIME_HANDLER)),
        keep(13, "features", Msg(&NODE_FEATURES)),
        rep(14, "declaredFeatures", Str),
    ],
};
static NODE_CONDITION: Message = Message {
    name: "v1.NodeCondition",
    fields: &[
        keep(1, "type", Str),
        keep(2, "status", Str),
        omit(3, "lastHeartbeatTime", Time),
        omit(4, "lastTransitionTime", Time),
        omit(5, "reason", Str),
        omit(6, "message", Str),
    ],
};
static NODE_ADDRESS: Message = Message {
    name: "v1.NodeAddress",
    fields: &[keep(1, "type", Str), keep(2, "address", Str)],
};
static NODE_DAEMON_ENDPOINTS: Message = Message {
    name: "v1.NodeDaemonEndpoints",
    fields: &[keep(1, "kubeletEndpoint", Msg(&DAEMON_ENDPOINT))],
};
static DAEMON_ENDPOINT: Message = Message {
    name: "v1.DaemonEndpoint",
    // `Port`, capitalised: the Go type's json tag is `json:"Port"` for backwards compatibility.
    fields: &[keep(1, "Port", Int32)],
};
static NODE_SYSTEM_INFO: Message = Message {
    name: "v1.NodeSystemInfo",
    fields: &[
        keep(1, "machineID", Str),
        keep(2, "systemUUID", Str),
        keep(3, "bootID", Str),
        keep(4, "kernelVersion", Str),
        keep(5, "osImage", Str),
        keep(6, "containerRuntimeVersion", Str),
        keep(7, "kubeletVersion", Str),
        keep(8, "kubeProxyVersion", Str),
        keep(9, "operatingSystem", Str),
        keep(10, "architecture", Str),
        keep(11, "swap", Msg(&NODE_SWAP_STATUS)),
    ],
};
static NODE_SWAP_STATUS: Message = Message {
    name: "v1.NodeSwapStatus",
    fields: &[keep(1, "capacity", Int64)],
};
static CONTAINER_IMAGE: Message = Message {
    name: "v1.ContainerImage",
    fields: &[rep(1, "names", Str), omit(2, "sizeBytes", Int64)],
};
static ATTACHED_VOLUME: Message = Message {
    name: "v1.AttachedVolume",
    fields: &[keep(1, "name", Str), keep(2, "devicePath", Str)],
};
static NODE_CONFIG_STATUS: Message = Message {
    name: "v1.NodeConfigStatus",
    fields: &[
        keep(1, "assigned", Msg(&NODE_CONFIG_SOURCE)),
        keep(2, "active", Msg(&NODE_CONFIG_SOURCE)),
        keep(3, "lastKnownGood", Msg(&NODE_CONFIG_SOURCE)),
        omit(4, "error", Str),
    ],
};
static NODE_RUNTIME_HANDLER: Message = Message {
    name: "v1.NodeRuntimeHandler",
    fields: &[
        keep(1, "name", Str),
        keep(2, "features", Msg(&NODE_RUNTIME_HANDLER_FEATURES)),
    ],
};
static NODE_RUNTIME_HANDLER_FEATURES: Message = Message {
    name: "v1.NodeRuntimeHandlerFeatures",
    fields: &[
        keep(1, "recursiveReadOnlyMounts", Bool),
        keep(2, "userNamespaces", Bool),
    ],
};
static NODE_FEATURES: Message = Message {
    name: "v1.NodeFeatures",
    fields: &[keep(1, "supplementalGroupsPolicy", Bool)],
};

// core/v1 generated.proto: messages Event, EventSource, EventSeries, ObjectReference.
static CORE_EVENT: Message = Message {
    name: "v1.Event",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "involvedObject", Msg(&OBJECT_REFERENCE)),
        omit(3, "reason", Str),
        omit(4, "message", Str),
        keep(5, "source", Msg(&EVENT_SOURCE)),
        omit(6, "firstTimestamp", Time),
        omit(7, "lastTimestamp", Time),
        omit(8, "count", Int32),
        omit(9, "type", Str),
        omit(10, "eventTime", MicroTime),
        keep(11, "series", Msg(&CORE_EVENT_SERIES)),
        omit(12, "action", Str),
        keep(13, "related", Msg(&OBJECT_REFERENCE)),
        keep(14, "reportingComponent", Str),
        keep(15, "reportingInstance", Str),
    ],
};
static EVENT_SOURCE: Message = Message {
    name: "v1.EventSource",
    fields: &[omit(1, "component", Str), omit(2, "host", Str)],
};
static CORE_EVENT_SERIES: Message = Message {
    name: "v1.EventSeries",
    fields: &[
        omit(1, "count", Int32),
        omit(2, "lastObservedTime", MicroTime),
    ],
};
static OBJECT_REFERENCE: Message = Message {
    name: "v1.ObjectReference",
    fields: &[
        omit(1, "kind", Str),
        omit(2, "namespace", Str),
        omit(3, "name", Str),
        omit(4, "uid", Str),
        omit(5, "apiVersion", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "fieldPath", Str),
    ],
};

// events/v1 generated.proto: messages Event, EventSeries (the latter's fields have no
// omitempty, unlike core/v1's).
static EVENTS_EVENT: Message = Message {
    name: "events.v1.Event",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "eventTime", MicroTime),
        keep(3, "series", Msg(&EVENTS_EVENT_SERIES)),
        omit(4, "reportingController", Str),
        omit(5, "reportingInstance", Str),
        omit(6, "action", Str),
        omit(7, "reason", Str),
        keep(8, "regarding", Msg(&OBJECT_REFERENCE)),
        keep(9, "related", Msg(&OBJECT_REFERENCE)),
        omit(10, "note", Str),
        omit(11, "type", Str),
        keep(12, "deprecatedSource", Msg(&EVENT_SOURCE)),
        omit(13, "deprecatedFirstTimestamp", Time),
        omit(14, "deprecatedLastTimestamp", Time),
        omit(15, "deprecatedCount", Int32),
    ],
};
static EVENTS_EVENT_SERIES: Message = Message {
    name: "events.v1.EventSeries",
    fields: &[
        keep(1, "count", Int32),
        keep(2, "lastObservedTime", MicroTime),
    ],
};

// coordination/v1 generated.proto: messages Lease, LeaseSpec.
static LEASE: Message = Message {
    name: "coordination.v1.Lease",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&LEASE_SPEC)),
    ],
};
static LEASE_SPEC: Message = Message {
    name: "coordination.v1.LeaseSpec",
    fields: &[
        keep(1, "holderIdentity", Str),
        keep(2, "leaseDurationSeconds", Int32),
        keep(3, "acquireTime", MicroTime),
        keep(4, "renewTime", MicroTime),
        keep(5, "leaseTransitions", Int32),
        keep(6, "strategy", Str),
        keep(7, "preferredHolder", Str),
    ],
};

// authorization/v1 generated.proto (k8s.io/api): messages SelfSubjectAccessReview,
// SelfSubjectRulesReview, SubjectAccessReview and what they hold. `SubjectAccessReviewSpec.extra`
// (5, a map of ExtraValue) is not in the table, so a body carrying it is refused as unknown.
static SELF_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "authorization.v1.SelfSubjectAccessReview",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        keep(3, "status", Msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};
static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "authorization.v1.SelfSubjectAccessReviewSpec",
    fields: &[
        keep(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        keep(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
};
static SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "authorization.v1.SubjectAccessReview",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&SUBJECT_ACCESS_REVIEW_SPEC)),
        keep(3, "status", Msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};
static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "authorization.v1.SubjectAccessReviewSpec",
    fields: &[
        keep(1, "resourceAttributes", Msg(&RESOURCE_ATTRIBUTES)),
        keep(2, "nonResourceAttributes", Msg(&NON_RESOURCE_ATTRIBUTES)),
        omit(3, "user", Str),
        rep(4, "groups", Str),
        omit(6, "uid", Str),
    ],
};
static RESOURCE_ATTRIBUTES: Message = Message {
    name: "authorization.v1.ResourceAttributes",
    fields: &[
        omit(1, "namespace", Str),
        omit(2, "verb", Str),
        omit(3, "group", Str),
        omit(4, "version", Str),
        omit(5, "resource", Str),
        omit(6, "subresource", Str),
        omit(7, "name", Str),
        keep(8, "fieldSelector", Msg(&FIELD_SELECTOR_ATTRIBUTES)),
        keep(9, "labelSelector", Msg(&LABEL_SELECTOR_ATTRIBUTES)),
    ],
};
static FIELD_SELECTOR_ATTRIBUTES: Message = Message {
    name: "authorization.v1.FieldSelectorAttributes",
    fields: &[
        omit(1, "rawSelector", Str),
        rep(2, "requirements", Msg(&SELECTOR_REQUIREMENT)),
    ],
};
static LABEL_SELECTOR_ATTRIBUTES: Message = Message {
    name: "authorization.v1.LabelSelectorAttributes",
    fields: &[
        omit(1, "rawSelector", Str),
        rep(2, "requirements", Msg(&SELECTOR_REQUIREMENT)),
    ],
};
// FieldSelectorRequirement and meta/v1 LabelSelectorRequirement: key = 1, operator = 2,
// values = 3 in both.
static SELECTOR_REQUIREMENT: Message = Message {
    name: "SelectorRequirement",
    fields: &[
        keep(1, "key", Str),
        keep(2, "operator", Str),
        rep(3, "values", Str),
    ],
};
static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "authorization.v1.NonResourceAttributes",
    fields: &[omit(1, "path", Str), omit(2, "verb", Str)],
};
static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "authorization.v1.SubjectAccessReviewStatus",
    fields: &[
        keep(1, "allowed", Bool),
        omit(4, "denied", Bool),
        omit(2, "reason", Str),
        omit(3, "evaluationError", Str),
    ],
};
static SELF_SUBJECT_RULES_REVIEW: Message = Message {
    name: "authorization.v1.SelfSubjectRulesReview",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
        keep(3, "status", Msg(&SUBJECT_RULES_REVIEW_STATUS)),
    ],
};
static SELF_SUBJECT_RULES_REVIEW_SPEC: Message = Message {
    name: "authorization.v1.SelfSubjectRulesReviewSpec",
    fields: &[omit(1, "namespace", Str)],
};
static SUBJECT_RULES_REVIEW_STATUS: Message = Message {
    name: "authorization.v1.SubjectRulesReviewStatus",
    fields: &[
        rep(1, "resourceRules", Msg(&RESOURCE_RULE)),
        rep(2, "nonResourceRules", Msg(&NON_RESOURCE_RULE)),
        keep(3, "incomplete", Bool),
        omit(4, "evaluationError", Str),
    ],
};
static RESOURCE_RULE: Message = Message {
    name: "authorization.v1.ResourceRule",
    fields: &[
        rep(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
    ],
};
static NON_RESOURCE_RULE: Message = Message {
    name: "authorization.v1.NonResourceRule",
    fields: &[rep(1, "verbs", Str), rep(2, "nonResourceURLs", Str)],
};

// authentication/v1 generated.proto (k8s.io/api, commit 10b39a3): TokenReview and what it
// holds; JSON names and `omitempty` from authentication/v1 types.go. `UserInfo.extra` (4, a map
// of ExtraValue) is not in the table, so a body carrying it is refused as unknown.
static TOKEN_REVIEW: Message = Message {
    name: "authentication.v1.TokenReview",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&TOKEN_REVIEW_SPEC)),
        keep(3, "status", Msg(&TOKEN_REVIEW_STATUS)),
    ],
};
static TOKEN_REVIEW_SPEC: Message = Message {
    name: "authentication.v1.TokenReviewSpec",
    fields: &[omit(1, "token", Str), rep(2, "audiences", Str)],
};
static TOKEN_REVIEW_STATUS: Message = Message {
    name: "authentication.v1.TokenReviewStatus",
    fields: &[
        omit(1, "authenticated", Bool),
        keep(2, "user", Msg(&USER_INFO)),
        omit(3, "error", Str),
        rep(4, "audiences", Str),
    ],
};
static USER_INFO: Message = Message {
    name: "authentication.v1.UserInfo",
    fields: &[
        omit(1, "username", Str),
        omit(2, "uid", Str),
        rep(3, "groups", Str),
    ],
};

// authentication/v1 generated.proto (k8s.io/api): TokenRequest and what it holds (field 2 of
// TokenRequestSpec is retired); JSON names and `omitempty` from authentication/v1 types.go
// (`expirationSeconds` and `boundObjectRef` are pointers).
static TOKEN_REQUEST: Message = Message {
    name: "authentication.v1.TokenRequest",
    fields: &[
        keep(1, "metadata", Msg(&OBJECT_META)),
        keep(2, "spec", Msg(&TOKEN_REQUEST_SPEC)),
        keep(3, "status", Msg(&TOKEN_REQUEST_STATUS)),
    ],
};
static TOKEN_REQUEST_SPEC: Message = Message {
    name: "authentication.v1.TokenRequestSpec",
    fields: &[
        rep(1, "audiences", Str),
        keep(3, "boundObjectRef", Msg(&BOUND_OBJECT_REFERENCE)),
        keep(4, "expirationSeconds", Int64),
    ],
};
static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "authentication.v1.BoundObjectReference",
    fields: &[
        omit(1, "kind", Str),
        omit(2, "apiVersion", Str),
        omit(3, "name", Str),
        omit(4, "uid", Str),
    ],
};
static TOKEN_REQUEST_STATUS: Message = Message {
    name: "authentication.v1.TokenRequestStatus",
    fields: &[omit(1, "token", Str), keep(2, "expirationTimestamp", Time)],
};

// ---------------------------------------------------------------------------------------------
// Decoding by table.

/// Where a field is, for error messages.
struct Ctx<'p> {
    msg: &'static str,
    num: u32,
    path: &'p str,
}

impl Ctx<'_> {
    fn err(&self, what: impl std::fmt::Display) -> DecodeError {
        DecodeError::Malformed(format!(
            "unable to decode protobuf field {} of {} ({}): {what}",
            self.num, self.msg, self.path
        ))
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Decodes one message by its table. `path` is the JSON path of the message, for errors.
fn message(
    msg: &'static Message,
    buf: &[u8],
    path: &str,
) -> Result<Map<String, Value>, DecodeError> {
    let mut out = Map::new();
    let mut reader = Reader::new(buf);
    let shown = if path.is_empty() { "top level" } else { path };
    loop {
        let (num, wire) = match reader.field() {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(out),
            Err(e) => {
                return Err(DecodeError::Malformed(format!(
                    "unable to decode protobuf message {} ({shown}): {e}",
                    msg.name
                )));
            }
        };
        let Some(field) = msg.fields.iter().find(|f| f.num == num) else {
            // A field added to the API after the tables were written, or garbage: refused
            // rather than dropped, so a test never passes on data the simulator lost.
            return Err(DecodeError::Malformed(format!(
                "unable to decode protobuf field {num} of {} (in {shown}): the simulator does not know this field",
                msg.name
            )));
        };
        let here = join(path, field.json);
        let ctx = Ctx {
            msg: msg.name,
            num,
            path: &here,
        };
        let value = value(&field.ty, wire, &ctx)?;
        let key = field.json;
        match (field.card, value) {
            (Card::Repeated, Some(v)) => match out.get_mut(key) {
                Some(Value::Array(items)) => items.push(v),
                _ => {
                    out.insert(key.into(), Value::Array(vec![v]));
                }
            },
            (Card::Repeated, None) => {}
            // Zero values of `omitempty` fields (and the zero Time, zero IntOrString) are absent;
            // a later occurrence replaces an earlier one, as in protobuf.
            (_, None) => {
                out.remove(key);
            }
            (Card::Omit, Some(v)) if is_zero(&v) => {
                out.remove(key);
            }
            // Map entries accumulate; a repeated embedded message merges into the earlier one
            // (protobuf's rule for a non-repeated message field seen twice).
            (_, Some(v)) => match (out.get_mut(key), v) {
                (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
                (_, v) => {
                    out.insert(key.into(), v);
                }
            },
        }
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// Protobuf's merge of a message seen twice: nested messages merge, lists append, the rest
/// is replaced.
fn merge(old: &mut Map<String, Value>, new: Map<String, Value>) {
    for (k, v) in new {
        match (old.get_mut(&k), v) {
            (Some(Value::Object(o)), Value::Object(n)) => merge(o, n),
            (Some(Value::Array(o)), Value::Array(n)) => o.extend(n),
            (_, v) => {
                old.insert(k, v);
            }
        }
    }
}

fn utf8(bytes: &[u8], ctx: &Ctx) -> Result<String, DecodeError> {
    std::str::from_utf8(bytes)
        .map(str::to_string)
        .map_err(|e| ctx.err(format!("the string is not UTF-8: {e}")))
}

/// One field's JSON value; `None` for a value whose JSON form is absent (the zero time).
fn value(ty: &Ty, wire: Wire, ctx: &Ctx) -> Result<Option<Value>, DecodeError> {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    let v = match (ty, wire) {
        (Ty::Str, Wire::Bytes(b)) => Value::String(utf8(b, ctx)?),
        (Ty::Bytes, Wire::Bytes(b)) => b64(b),
        (Ty::Json, Wire::Bytes(b)) => serde_json::from_slice(b)
            .map_err(|e| ctx.err(format!("the bytes are not JSON: {e}")))?,
        (Ty::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        // int32 is sign-extended to 64 bits on the wire; truncating recovers it, as Go does.
        (Ty::Int32, Wire::Varint(v)) => json!(v as i32),
        (Ty::Int64, Wire::Varint(v)) => json!(v as i64),
        (Ty::Msg(m), Wire::Bytes(b)) => Value::Object(message(m, b, ctx.path)?),
        (Ty::Map(value_ty), Wire::Bytes(b)) => map_entry(value_ty, b, ctx)?,
        (Ty::IntOrString, Wire::Bytes(b)) => return int_or_string(b, ctx),
        (Ty::Time, Wire::Bytes(b)) => return time(b, false, ctx),
        (Ty::MicroTime, Wire::Bytes(b)) => return time(b, true, ctx),
        (Ty::Quantity, Wire::Bytes(b)) => {
            let q = message(&QUANTITY, b, ctx.path)?;
            q.get("string").cloned().unwrap_or_else(|| json!("0"))
        }
        (Ty::FieldsV1, Wire::Bytes(b)) => {
            let f = message(&FIELDS_V1, b, ctx.path)?;
            match f.get("Raw") {
                Some(raw) => raw.clone(),
                None => return Ok(None),
            }
        }
        (ty, wire) => {
            return Err(ctx.err(format!(
                "wire type {}, expected {}",
                wire.name(),
                ty.wire_name()
            )));
        }
    };
    Ok(Some(v))
}

/// One entry of a `map<string, V>` (key = 1, value = 2), as a one-key JSON object.
fn map_entry(value_ty: &Ty, buf: &[u8], ctx: &Ctx) -> Result<Value, DecodeError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(buf);
    loop {
        match reader.field() {
            Ok(None) => break,
            Ok(Some((1, Wire::Bytes(b)))) => key = utf8(b, ctx)?,
            Ok(Some((2, wire))) => value = self::value(value_ty, wire, ctx)?,
            Ok(Some((num, wire))) => {
                return Err(ctx.err(format!(
                    "map entry field {num} ({}) is not a key (1, length-delimited) or a value (2)",
                    wire.name()
                )));
            }
            Err(e) => return Err(ctx.err(format!("map entry: {e}"))),
        }
    }
    // A missing value is the type's zero value, as Go's unmarshaller leaves it.
    let value = value.unwrap_or_else(|| match value_ty {
        Ty::Quantity => json!("0"),
        _ => json!(""),
    });
    let mut entry = Map::new();
    entry.insert(key, value);
    Ok(Value::Object(entry))
}

/// intstr.IntOrString: type 0 is `intVal`, type 1 is `strVal`. The zero value (0 or "") is
/// absent: the apiserver defaults both the same way as a missing one (e.g. a Service port's
/// targetPort becomes its port), and the simulator defaults only a missing one.
fn int_or_string(buf: &[u8], ctx: &Ctx) -> Result<Option<Value>, DecodeError> {
    let m = message(&INT_OR_STRING, buf, ctx.path)?;
    let v = match m.get("type").and_then(Value::as_i64).unwrap_or(0) {
        0 => m.get("intVal").cloned().unwrap_or_else(|| json!(0)),
        1 => m.get("strVal").cloned().unwrap_or_else(|| json!("")),
        t => {
            return Err(ctx.err(format!(
                "IntOrString type {t} is neither 0 (int) nor 1 (string)"
            )));
        }
    };
    Ok((!is_zero(&v)).then_some(v))
}

/// meta/v1 Time (whole seconds: its Unmarshal drops the nanoseconds) or MicroTime
/// (microseconds: its Unmarshal truncates to them), formatted as their MarshalJSON does, in
/// UTC. An empty message is the zero time, `null` in Go's JSON: absent here.
fn time(buf: &[u8], micro: bool, ctx: &Ctx) -> Result<Option<Value>, DecodeError> {
    // Go's zero time.Time (0001-01-01T00:00:00Z) in Unix seconds.
    const GO_ZERO: i64 = -62_135_596_800;
    if buf.is_empty() {
        return Ok(None);
    }
    let m = message(&TIMESTAMP, buf, ctx.path)?;
    let seconds = m.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = m.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(ctx.err(format!("nanos {nanos} out of range")));
    }
    let micros = if micro { nanos / 1000 } else { 0 };
    if seconds == GO_ZERO && micros == 0 {
        return Ok(None);
    }
    let ts = jiff::Timestamp::from_second(seconds)
        .map_err(|e| ctx.err(format!("seconds {seconds} out of range: {e}")))?;
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(Some(Value::String(if micro {
        format!("{base}.{micros:06}Z")
    } else {
        format!("{base}Z")
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A minimal encoder, for building test bodies by hand.
    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn key(num: u32, wire: u8) -> Vec<u8> {
        varint((u64::from(num) << 3) | u64::from(wire))
    }
    fn int(num: u32, v: u64) -> Vec<u8> {
        [key(num, 0), varint(v)].concat()
    }
    fn ld(num: u32, bytes: &[u8]) -> Vec<u8> {
        [key(num, 2), varint(bytes.len() as u64), bytes.to_vec()].concat()
    }
    fn s(num: u32, text: &str) -> Vec<u8> {
        ld(num, text.as_bytes())
    }
    fn entry(num: u32, k: &str, v: &str) -> Vec<u8> {
        ld(num, &[s(1, k), s(2, v)].concat())
    }
    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [s(1, api_version), s(2, kind)].concat();
        [
            MAGIC.to_vec(),
            ld(1, &type_meta),
            ld(2, raw),
            s(3, ""),
            s(4, ""),
        ]
        .concat()
    }

    #[test]
    fn self_reviews_as_kubectl_auth_can_i_sends_them() {
        // gogo-protobuf writes every non-nullable embedded message, empty or not.
        let attrs = [s(2, "patch"), s(5, "nodes"), s(6, "status")].concat();
        let raw = [ld(1, &[]), ld(2, &ld(1, &attrs)), ld(3, &int(1, 0))].concat();
        let v = decode(&envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &raw,
        ))
        .expect("decodes");
        assert_eq!(
            v["spec"],
            json!({"resourceAttributes": {"verb": "patch", "resource": "nodes", "subresource": "status"}})
        );
        assert_eq!(v["status"], json!({"allowed": false}));
        let rules = [ld(1, &[]), ld(2, &s(1, "team-a"))].concat();
        let v = decode(&envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectRulesReview",
            &rules,
        ))
        .expect("decodes");
        assert_eq!(v["spec"], json!({"namespace": "team-a"}));
        // SubjectAccessReviewSpec.extra (5) is not decoded: refused, never dropped.
        let sar = ld(2, &[s(3, "alice"), ld(5, &s(1, "k"))].concat());
        let err = decode(&envelope(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            &sar,
        ))
        .expect_err("extra is refused");
        assert!(matches!(err, DecodeError::Malformed(_)), "{err:?}");
    }

    #[test]
    fn token_reviews_as_a_typed_client_sends_them() {
        // metadata, spec {token, audiences}, and the empty status gogo writes.
        let spec = [
            s(1, "abc"),
            s(2, "https://kubernetes.default.svc"),
            s(2, "x"),
        ]
        .concat();
        let raw = [ld(1, &[]), ld(2, &spec), ld(3, &ld(2, &[]))].concat();
        let v =
            decode(&envelope("authentication.k8s.io/v1", "TokenReview", &raw)).expect("decodes");
        assert_eq!(v["kind"], "TokenReview");
        assert_eq!(
            v["spec"],
            json!({"token": "abc", "audiences": ["https://kubernetes.default.svc", "x"]})
        );
        assert_eq!(v["status"], json!({"user": {}}));
        // A status as a server writes it: every field known.
        let user = [s(1, "alice"), s(2, "u-1"), s(3, "g1"), s(3, "g2")].concat();
        let status = [int(1, 1), ld(2, &user), s(3, ""), s(4, "aud")].concat();
        let v = decode(&envelope(
            "authentication.k8s.io/v1",
            "TokenReview",
            &ld(3, &status),
        ))
        .expect("decodes");
        assert_eq!(
            v["status"],
            json!({"authenticated": true, "audiences": ["aud"],
                "user": {"username": "alice", "uid": "u-1", "groups": ["g1", "g2"]}})
        );
        // UserInfo.extra (4) is not decoded: refused, never dropped.
        let extra = ld(3, &ld(2, &entry(4, "k", "v")));
        let m = malformed(&envelope("authentication.k8s.io/v1", "TokenReview", &extra));
        assert!(m.contains("field 4 of authentication.v1.UserInfo"), "{m}");
    }
    fn malformed(body: &[u8]) -> String {
        match decode(body) {
            Err(DecodeError::Malformed(m)) => m,
            other => panic!("expected a malformed body, got {other:?}"),
        }
    }

    /// What `kubectl create service loadbalancer web --tcp=80:8080` sends (gogo writes every
    /// non-pointer field, empty ones included).
    fn kubectl_service() -> Vec<u8> {
        let meta = [
            s(1, "web"),
            s(2, ""),
            s(3, ""),
            s(4, ""),
            s(5, ""),
            s(6, ""),
            int(7, 0),
            ld(8, &[]),
            entry(11, "app", "web"),
        ]
        .concat();
        let target = [int(1, 0), int(2, 8080), s(3, "")].concat();
        let port = [
            s(1, "80-8080"),
            s(2, "TCP"),
            int(3, 80),
            ld(4, &target),
            int(5, 0),
        ]
        .concat();
        let spec = [
            ld(1, &port),
            entry(2, "app", "web"),
            s(3, ""),
            s(4, "LoadBalancer"),
            s(7, ""),
            s(8, ""),
            s(10, ""),
            s(11, ""),
            int(12, 0),
            int(13, 0),
        ]
        .concat();
        let status = ld(1, &[]);
        let svc = [ld(1, &meta), ld(2, &spec), ld(3, &status)].concat();
        envelope("v1", "Service", &svc)
    }

    #[test]
    fn service_from_kubectl_create() {
        let v = decode(&kubectl_service()).expect("decodes");
        assert_eq!(
            v,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "web"},
                    "type": "LoadBalancer"
                },
                "status": {"loadBalancer": {}}
            })
        );
    }

    /// Bodies kubectl 1.32 sent for `create service loadbalancer web --tcp=80:8080`,
    /// `create namespace team-a` and `create configmap cfg --from-literal=a=b -n team-a`
    /// (captured from its requests to a local listener).
    #[test]
    fn real_kubectl_bodies() {
        const SERVICE: &[u8] = &[
            0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0d, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x07, 0x53, 0x65,
            0x72, 0x76, 0x69, 0x63, 0x65, 0x12, 0x6c, 0x0a, 0x1f, 0x0a, 0x03, 0x77, 0x65, 0x62,
            0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00,
            0x5a, 0x0a, 0x0a, 0x03, 0x61, 0x70, 0x70, 0x12, 0x03, 0x77, 0x65, 0x62, 0x12, 0x45,
            0x0a, 0x1b, 0x0a, 0x07, 0x38, 0x30, 0x2d, 0x38, 0x30, 0x38, 0x30, 0x12, 0x03, 0x54,
            0x43, 0x50, 0x18, 0x50, 0x22, 0x07, 0x08, 0x00, 0x10, 0x90, 0x3f, 0x1a, 0x00, 0x28,
            0x00, 0x12, 0x0a, 0x0a, 0x03, 0x61, 0x70, 0x70, 0x12, 0x03, 0x77, 0x65, 0x62, 0x1a,
            0x00, 0x22, 0x0c, 0x4c, 0x6f, 0x61, 0x64, 0x42, 0x61, 0x6c, 0x61, 0x6e, 0x63, 0x65,
            0x72, 0x3a, 0x00, 0x42, 0x00, 0x52, 0x00, 0x5a, 0x00, 0x60, 0x00, 0x68, 0x00, 0x1a,
            0x02, 0x0a, 0x00, 0x1a, 0x00, 0x22, 0x00,
        ];
        const NAMESPACE: &[u8] = &[
            0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x4e, 0x61,
            0x6d, 0x65, 0x73, 0x70, 0x61, 0x63, 0x65, 0x12, 0x1e, 0x0a, 0x16, 0x0a, 0x06, 0x74,
            0x65, 0x61, 0x6d, 0x2d, 0x61, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32,
            0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x00, 0x1a, 0x02, 0x0a, 0x00, 0x1a, 0x00, 0x22,
            0x00,
        ];
        const CONFIG_MAP: &[u8] = &[
            0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x43, 0x6f,
            0x6e, 0x66, 0x69, 0x67, 0x4d, 0x61, 0x70, 0x12, 0x23, 0x0a, 0x19, 0x0a, 0x03, 0x63,
            0x66, 0x67, 0x12, 0x00, 0x1a, 0x06, 0x74, 0x65, 0x61, 0x6d, 0x2d, 0x61, 0x22, 0x00,
            0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x06, 0x0a, 0x01, 0x61, 0x12,
            0x01, 0x62, 0x1a, 0x00, 0x22, 0x00,
        ];
        assert_eq!(
            decode(SERVICE).expect("decodes"),
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "web"},
                    "type": "LoadBalancer"
                },
                "status": {"loadBalancer": {}}
            })
        );
        assert_eq!(
            decode(NAMESPACE).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "spec": {}, "status": {}})
        );
        assert_eq!(
            decode(CONFIG_MAP).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cfg", "namespace": "team-a"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn service_pointer_fields_and_lists() {
        let named = [int(1, 1), int(2, 0), s(3, "http")].concat();
        let zero = [int(1, 0), int(2, 0), s(3, "")].concat();
        let spec = [
            ld(
                1,
                &[s(1, "a"), int(3, 443), ld(4, &named), s(6, "")].concat(),
            ),
            ld(1, &[int(3, 80), ld(4, &zero), int(5, 30080)].concat()),
            s(18, "10.0.0.1"),
            s(18, "fd00::1"),
            s(19, "IPv4"),
            s(19, "IPv6"),
            s(17, "PreferDualStack"),
            int(20, 0),
            s(21, ""),
            s(22, "Local"),
            s(5, "192.0.2.1"),
            s(9, "10.0.0.0/8"),
            s(11, "Local"),
            s(7, "ClientIP"),
            ld(14, &ld(1, &int(1, 60))),
        ]
        .concat();
        let v = decode(&envelope("v1", "Service", &ld(2, &spec))).expect("decodes");
        assert_eq!(
            v["spec"],
            json!({
                "ports": [
                    {"name": "a", "port": 443, "targetPort": "http", "appProtocol": ""},
                    {"port": 80, "nodePort": 30080}
                ],
                "clusterIPs": ["10.0.0.1", "fd00::1"],
                "ipFamilies": ["IPv4", "IPv6"],
                "ipFamilyPolicy": "PreferDualStack",
                "allocateLoadBalancerNodePorts": false,
                "loadBalancerClass": "",
                "internalTrafficPolicy": "Local",
                "externalIPs": ["192.0.2.1"],
                "loadBalancerSourceRanges": ["10.0.0.0/8"],
                "externalTrafficPolicy": "Local",
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}
            })
        );
    }

    #[test]
    fn namespace_configmap_and_metadata() {
        let ns = [
            ld(1, &s(1, "team-a")),
            ld(2, &s(1, "kubernetes")),
            ld(3, &[]),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("v1", "Namespace", &ns)).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {}})
        );
        let owner = [s(1, "Node"), s(3, "n1"), s(4, "u-1"), s(5, "v1"), int(6, 1)].concat();
        let created = [int(1, 1_767_225_600), int(2, 5)].concat();
        let meta = [
            s(1, "cfg"),
            s(2, "cfg-"),
            s(3, "team-a"),
            s(5, "uid-1"),
            s(6, "42"),
            ld(8, &created),
            entry(12, "note", ""),
            ld(13, &owner),
            s(14, "example.com/keep"),
        ]
        .concat();
        let cm = [
            ld(1, &meta),
            entry(2, "a", "b"),
            entry(2, "c", "d"),
            ld(3, &[s(1, "bin"), ld(2, &[0, 1, 255])].concat()),
            int(4, 1),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("v1", "ConfigMap", &cm)).expect("decodes"),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": "cfg", "generateName": "cfg-", "namespace": "team-a", "uid": "uid-1",
                    "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z",
                    "annotations": {"note": ""},
                    "ownerReferences": [{"kind": "Node", "name": "n1", "uid": "u-1", "apiVersion": "v1", "controller": true}],
                    "finalizers": ["example.com/keep"]
                },
                "data": {"a": "b", "c": "d"},
                "binaryData": {"bin": "AAH/"},
                "immutable": true
            })
        );
    }

    #[test]
    fn lease_node_and_events() {
        let renew = [int(1, 1_767_225_600), int(2, 123_456_789)].concat();
        let spec = [s(1, "ccm-1"), int(2, 15), ld(4, &renew), int(5, 0)].concat();
        let lease = [ld(1, &s(1, "ccm")), ld(2, &spec)].concat();
        assert_eq!(
            decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)).expect("decodes")["spec"],
            json!({"holderIdentity": "ccm-1", "leaseDurationSeconds": 15,
                   "renewTime": "2026-01-01T00:00:00.123456Z", "leaseTransitions": 0})
        );

        let taint = [
            s(1, "node.cloudprovider.kubernetes.io/uninitialized"),
            s(2, "true"),
            s(3, "NoSchedule"),
        ]
        .concat();
        let status = [
            ld(1, &[s(1, "cpu"), ld(2, &s(1, "4"))].concat()),
            ld(5, &[s(1, "InternalIP"), s(2, "10.0.0.5")].concat()),
            ld(
                4,
                &[s(1, "Ready"), s(2, "True"), ld(3, &[]), s(5, "")].concat(),
            ),
            ld(6, &ld(1, &int(1, 10250))),
        ]
        .concat();
        let node = [
            ld(1, &s(1, "n1")),
            ld(
                2,
                &[s(3, "sim://n1"), ld(5, &taint), s(7, "10.244.0.0/24")].concat(),
            ),
            ld(3, &status),
        ]
        .concat();
        let v = decode(&envelope("v1", "Node", &node)).expect("decodes");
        assert_eq!(
            v["spec"],
            json!({"providerID": "sim://n1", "podCIDRs": ["10.244.0.0/24"],
                   "taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]})
        );
        assert_eq!(
            v["status"],
            json!({"capacity": {"cpu": "4"}, "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}})
        );

        let reference = [s(1, "Node"), s(3, "n1")].concat();
        let event = [
            ld(1, &[s(1, "n1.1"), s(3, "default")].concat()),
            ld(2, &reference),
            s(3, "Synced"),
            ld(5, &[]),
            int(8, 1),
            ld(10, &[]),
            s(14, ""),
            s(15, ""),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("v1", "Event", &event)).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "Event",
                   "metadata": {"name": "n1.1", "namespace": "default"},
                   "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "Synced",
                   "source": {}, "count": 1, "reportingComponent": "", "reportingInstance": ""})
        );
        let event = [
            ld(1, &s(1, "e")),
            ld(8, &reference),
            s(10, "hello"),
            s(11, "Normal"),
        ]
        .concat();
        assert_eq!(
            decode(&envelope("events.k8s.io/v1", "Event", &event)).expect("decodes"),
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
                   "regarding": {"kind": "Node", "name": "n1"}, "note": "hello", "type": "Normal"})
        );
    }

    #[test]
    fn managed_fields_and_negative_numbers() {
        let entry = [
            s(1, "kubectl"),
            s(2, "Update"),
            s(6, "FieldsV1"),
            ld(7, &s(1, r#"{"f:metadata":{}}"#)),
        ]
        .concat();
        // A negative int64 is ten bytes of sign extension.
        let meta = [s(1, "x"), ld(17, &entry), int(10, (-1i64) as u64)].concat();
        let v = decode(&envelope("v1", "Namespace", &ld(1, &meta))).expect("decodes");
        assert_eq!(
            v["metadata"],
            json!({"name": "x", "deletionGracePeriodSeconds": -1,
                   "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]})
        );
    }

    #[test]
    fn repeated_message_fields_merge() {
        // Two occurrences of `spec` merge, as protobuf's decoders do.
        let svc = [ld(2, &s(4, "NodePort")), ld(2, &s(3, "None"))].concat();
        let v = decode(&envelope("v1", "Service", &svc)).expect("decodes");
        assert_eq!(v["spec"], json!({"type": "NodePort", "clusterIP": "None"}));
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        // No magic number (a JSON body sent with the protobuf content type).
        let m = malformed(b"{\"kind\":\"Service\"}");
        assert!(m.contains("magic number"), "{m}");
        let m = malformed(b"k8s");
        assert!(m.contains("magic number"), "{m}");

        // Only the magic number: no kind.
        let m = malformed(MAGIC);
        assert!(m.starts_with("Object 'Kind' is missing"), "{m}");

        // A truncated varint: field 7 (generation) of ObjectMeta ends mid-number.
        let meta = [s(1, "x"), vec![0x38, 0x80]].concat();
        let m = malformed(&envelope("v1", "Namespace", &ld(1, &meta)));
        assert_eq!(
            m,
            "unable to decode protobuf message v1.ObjectMeta (metadata): truncated varint at byte 4"
        );

        // A length past the end: ServiceSpec's type says 10 bytes, 2 follow.
        let spec = [key(4, 2), vec![10], b"LB".to_vec()].concat();
        let m = malformed(&envelope("v1", "Service", &ld(2, &spec)));
        assert_eq!(
            m,
            "unable to decode protobuf message v1.ServiceSpec (spec): length 10 at byte 1 runs past the end of the 4-byte message"
        );

        // An overlong varint.
        let spec = [key(12, 0), vec![0xff; 10]].concat();
        let m = malformed(&envelope("v1", "Service", &ld(2, &spec)));
        assert!(m.ends_with("varint at byte 1 overflows 64 bits"), "{m}");

        // An unknown field number is refused, not dropped.
        let spec = [s(4, "LoadBalancer"), s(99, "future")].concat();
        let m = malformed(&envelope("v1", "Service", &ld(2, &spec)));
        assert_eq!(
            m,
            "unable to decode protobuf field 99 of v1.ServiceSpec (in spec): the simulator does not know this field"
        );
        let m = malformed(&envelope("v1", "Service", &s(9, "x")));
        assert!(m.contains("field 9 of v1.Service (in top level)"), "{m}");

        // A wire type that does not match the field: port (3) as a string, fixed32, fixed64.
        for bad in [
            s(3, "80"),
            [key(3, 5), vec![0; 4]].concat(),
            [key(3, 1), vec![0; 8]].concat(),
        ] {
            let port = ld(1, &bad);
            let m = malformed(&envelope("v1", "Service", &ld(2, &port)));
            assert!(
                m.starts_with("unable to decode protobuf field 3 of v1.ServicePort (spec.ports.port): wire type "),
                "{m}"
            );
        }
        // Group wire types and field number 0.
        let m = malformed(&envelope("v1", "Service", &key(2, 3)));
        assert!(m.contains("group wire type"), "{m}");
        let m = malformed(&envelope("v1", "Service", &[0, 0]));
        assert!(m.contains("invalid field number 0"), "{m}");

        // A string that is not UTF-8, and an IntOrString of an unknown type.
        let m = malformed(&envelope("v1", "Namespace", &ld(1, &ld(1, &[0xff, 0xfe]))));
        assert!(
            m.contains("field 1 of v1.ObjectMeta (metadata.name): the string is not UTF-8"),
            "{m}"
        );
        let port = [int(3, 80), ld(4, &int(1, 7))].concat();
        let m = malformed(&envelope("v1", "Service", &ld(2, &ld(1, &port))));
        assert!(m.contains("IntOrString type 7"), "{m}");

        // Unknown fields of the envelope itself.
        let body = [MAGIC.to_vec(), s(5, "x")].concat();
        let m = malformed(&body);
        assert!(m.contains("field 5 of runtime.Unknown"), "{m}");
    }

    #[test]
    fn unsupported_kinds_and_encodings() {
        let Err(DecodeError::Unsupported(m)) = decode(&envelope("v1", "Pod", &[])) else {
            panic!("a Pod is not decoded");
        };
        assert!(m.contains("send v1 Pod as application/json"), "{m}");
        assert!(m.contains("v1 Service"), "{m}");
        let body = [
            MAGIC.to_vec(),
            ld(1, &[s(1, "v1"), s(2, "Service")].concat()),
            s(3, "gzip"),
        ]
        .concat();
        assert!(matches!(decode(&body), Err(DecodeError::Unsupported(_))));
        let api: ApiError = DecodeError::Unsupported("x".into()).into();
        assert_eq!(api.code, 415);
        let api: ApiError = DecodeError::Malformed("x".into()).into();
        assert_eq!(api.code, 400);
    }
}
