"""The official Kubernetes Python client against the simulator.

Run by crates/sim/tests/kube_clients.rs with the venv of crates/sim/clients/kubernetes.txt:
    python kubernetes_client.py <simulator url> <compacted resourceVersion>
Prints one line per observation (no uids, timestamps or resourceVersions); the Rust test
compares them with what a real apiserver answers.
"""

import json
import sys
import urllib.request

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

URL, COMPACTED = sys.argv[1], sys.argv[2]
NS = "default"

config = client.Configuration()
config.host = URL
api = client.ApiClient(config)
core = client.CoreV1Api(api)
coord = client.CoordinationV1Api(api)
events = client.EventsV1Api(api)


def out(*parts):
    print(" ".join(str(p) for p in parts), flush=True)


def error(fn, *args, **kwargs):
    """Calls fn expecting an ApiException; returns (status, reason, causes)."""
    try:
        fn(*args, **kwargs)
    except ApiException as e:
        body = json.loads(e.body) if e.body else {}
        causes = ",".join(
            "%s:%s" % (c.get("field", ""), c.get("reason", ""))
            for c in body.get("details", {}).get("causes", [])
        )
        return "%s %s %s %s" % (
            e.status,
            body.get("reason", ""),
            body.get("details", {}).get("kind", ""),
            causes or "-",
        )
    return "no error"


# CRUD on ConfigMaps.
cm = client.V1ConfigMap(
    metadata=client.V1ObjectMeta(name="cfg", labels={"app": "demo"}), data={"a": "1"}
)
created = core.create_namespaced_config_map(NS, cm)
out("create", created.metadata.name, created.data["a"], created.metadata.uid is not None)
read = core.read_namespaced_config_map("cfg", NS)
read.data["a"] = "2"
replaced = core.replace_namespaced_config_map("cfg", NS, read)
out("replace", replaced.data["a"])
listed = core.list_namespaced_config_map(NS, label_selector="app=demo")
out("list", [i.metadata.name for i in listed.items])

# Errors: AlreadyExists, NotFound, Invalid with causes, Conflict on a stale write.
out("already-exists", error(core.create_namespaced_config_map, NS, cm))
out("not-found", error(core.read_namespaced_config_map, "missing", NS))
bad = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))
out("invalid", error(core.create_namespaced_config_map, NS, bad))
out("conflict", error(core.replace_namespaced_config_map, "cfg", NS, read))
out(
    "field-selector",
    error(core.list_namespaced_config_map, NS, field_selector="data.a=2"),
)

# Patch types: strategic merge (the client's default for a dict), merge, JSON patch.
p = core.patch_namespaced_config_map("cfg", NS, {"data": {"b": "x"}})
out("strategic", sorted(p.data.items()))
p = core.patch_namespaced_config_map(
    "cfg", NS, {"data": {"b": None}}, _content_type="application/merge-patch+json"
)
out("merge", sorted(p.data.items()))
p = core.patch_namespaced_config_map(
    "cfg", NS, [{"op": "replace", "path": "/data/a", "value": "3"}]
)
out("json-patch", sorted(p.data.items()))
out(
    "json-patch-test",
    error(
        core.patch_namespaced_config_map,
        "cfg",
        NS,
        [{"op": "test", "path": "/data/a", "value": "nope"}],
    ),
)

# Dry run: answered, validated, not stored or deleted.
dry = core.create_namespaced_config_map(
    NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dry")), dry_run="All"
)
out("dry-create", dry.metadata.name, error(core.read_namespaced_config_map, "dry", NS))
core.delete_namespaced_config_map("cfg", NS, dry_run="All")
out("dry-delete", core.read_namespaced_config_map("cfg", NS).metadata.name)

# Finalizers: DELETE marks the object; removing the last finalizer removes it.
fin = client.V1ConfigMap(
    metadata=client.V1ObjectMeta(name="held", finalizers=["example.com/hold"])
)
core.create_namespaced_config_map(NS, fin)
core.delete_namespaced_config_map("held", NS)
held = core.read_namespaced_config_map("held", NS)
out("terminating", held.metadata.deletion_timestamp is not None, held.metadata.finalizers)
core.patch_namespaced_config_map(
    "held", NS, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
)
out("finalized", error(core.read_namespaced_config_map, "held", NS))
deleted = core.delete_namespaced_config_map("cfg", NS)
# Generated clients differ on the declared type (V1Status or a plain dict): read either.
out("deleted", deleted["status"] if isinstance(deleted, dict) else deleted.status)

# Services: the status subresource, ipMode defaulting, status validation, DELETE answers the
# object (the client deserialises it as a V1Service).
svc = client.V1Service(
    metadata=client.V1ObjectMeta(name="lb"),
    spec=client.V1ServiceSpec(type="LoadBalancer", ports=[client.V1ServicePort(port=80)]),
)
s = core.create_namespaced_service(NS, svc)
out("service", s.spec.type, s.spec.ports[0].protocol, s.spec.ports[0].node_port is not None)
s = core.patch_namespaced_service_status(
    "lb", NS, {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
)
ing = s.status.load_balancer.ingress[0]
out("status", ing.ip, ing.ip_mode)
s = core.patch_namespaced_service("lb", NS, {"metadata": {"labels": {"x": "y"}}})
out("main-keeps-status", s.status.load_balancer.ingress[0].ip)
out(
    "status-invalid",
    error(
        core.patch_namespaced_service_status,
        "lb",
        NS,
        {"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip", "ipMode": "vip"}]}}},
    ),
)
gone = core.delete_namespaced_service("lb", NS)
out("service-deleted", type(gone).__name__, gone.metadata.name)

# Leases: create, update with the lock, a stale update, an invalid duration.
lease = client.V1Lease(
    metadata=client.V1ObjectMeta(name="leader"),
    spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
)
l1 = coord.create_namespaced_lease(NS, lease)
l1.spec.holder_identity = "b"
l2 = coord.replace_namespaced_lease("leader", NS, l1)
out("lease", l2.spec.holder_identity, l2.spec.lease_duration_seconds)
out("lease-stale", error(coord.replace_namespaced_lease, "leader", NS, l1))
zero = client.V1Lease(
    metadata=client.V1ObjectMeta(name="zero"),
    spec=client.V1LeaseSpec(lease_duration_seconds=0),
)
out("lease-invalid", error(coord.create_namespaced_lease, NS, zero))

# Events: written through events.k8s.io/v1, read through core/v1; validated.
# eventTime is a metav1.MicroTime: Go parses it with exactly six fractional digits, and this
# client writes a whole second without any, so that event is refused (400) as by an apiserver.
ev = client.EventsV1Event(
    metadata=client.V1ObjectMeta(name="ev0"),
    event_time="2026-01-01T00:00:00.000000Z",
    action="Sync",
    reason="Synced",
    type="Normal",
    regarding=client.V1ObjectReference(kind="Node", name="n1"),
    reporting_controller="wasm-ccm",
    reporting_instance="wasm-ccm-1",
)
out("event-whole-second", error(events.create_namespaced_event, NS, ev))
ev = client.EventsV1Event(
    metadata=client.V1ObjectMeta(name="ev1"),
    event_time="2026-01-01T00:00:00.123456Z",
    action="Sync",
    reason="Synced",
    note="node synced",
    type="Normal",
    regarding=client.V1ObjectReference(kind="Node", name="n1"),
    reporting_controller="wasm-ccm",
    reporting_instance="wasm-ccm-1",
)
events.create_namespaced_event(NS, ev)
legacy = core.list_namespaced_event(NS, field_selector="involvedObject.kind=Node")
out("event-core-view", [(e.metadata.name, e.message, e.reason) for e in legacy.items])
# events.k8s.io/v1 selects on `regarding.*` and `reportingController`; the core labels are not
# its own (pkg/apis/events/v1/conversion.go).
selected = events.list_namespaced_event(
    NS, field_selector="regarding.kind=Node,regarding.name=n1,reportingController=wasm-ccm"
)
out("event-regarding", [e.metadata.name for e in selected.items])
out(
    "event-regarding-other",
    [e.metadata.name for e in events.list_namespaced_event(NS, field_selector="regarding.name=n2").items],
)
out(
    "event-core-label",
    error(events.list_namespaced_event, NS, field_selector="involvedObject.kind=Node"),
)
ev.metadata.name = "ev2"
ev.type = "Sometimes"
ev.action = ""
out("event-invalid", error(events.create_namespaced_event, NS, ev))

# Paging: a later page is read from the first page's snapshot; once that snapshot is compacted
# the continue is 410 Expired with a token that goes on at the latest version
# (k8s.io/apiserver pkg/storage/etcd3/store.go `GetList`, errors.go).
for name in ["p1", "p2", "p3", "p4"]:
    core.create_namespaced_config_map(
        NS,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels={"paged": "yes"}), data={"v": "old"}
        ),
    )
first = core.list_namespaced_config_map(NS, label_selector="paged=yes", limit=2)
core.delete_namespaced_config_map("p3", NS)
core.patch_namespaced_config_map("p4", NS, {"data": {"v": "new"}})
core.create_namespaced_config_map(
    NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="p5", labels={"paged": "yes"}))
)
second = core.list_namespaced_config_map(
    NS, label_selector="paged=yes", limit=2, _continue=first.metadata._continue
)
out(
    "page-snapshot",
    [i.metadata.name for i in first.items],
    [(i.metadata.name, i.data["v"]) for i in second.items],
    second.metadata.resource_version == first.metadata.resource_version,
)
first = core.list_namespaced_config_map(NS, label_selector="paged=yes", limit=1)
core.patch_namespaced_config_map("p2", NS, {"data": {"v": "newer"}})
urllib.request.urlopen(urllib.request.Request(URL + "/sim/compact", method="POST"))
try:
    core.list_namespaced_config_map(
        NS, label_selector="paged=yes", limit=1, _continue=first.metadata._continue
    )
    out("continue-compacted unexpected success")
except ApiException as e:
    body = json.loads(e.body)
    again = body["metadata"]["continue"]
    out("continue-compacted", e.status, body["reason"], again != first.metadata._continue)
    rest = core.list_namespaced_config_map(NS, label_selector="paged=yes", _continue=again)
    out("continue-latest", [(i.metadata.name, (i.data or {}).get("v")) for i in rest.items])

for name in ["p1", "p2", "p4", "p5"]:
    core.delete_namespaced_config_map(name, NS)

# Server-side apply is refused (415), not approximated.
out(
    "server-side-apply",
    error(
        core.patch_namespaced_config_map,
        "cfg-applied",
        NS,
        {"data": {"v": "applied"}},
        field_manager="py",
        _content_type="application/apply-patch+yaml",
    ),
)

# A deleted namespace is Terminating while content has finalizers; it takes no new content.
core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="doomed")))
core.create_namespaced_config_map(
    "doomed",
    client.V1ConfigMap(metadata=client.V1ObjectMeta(name="kept", finalizers=["example.com/hold"])),
)
core.delete_namespace("doomed")
doomed = core.read_namespace("doomed")
out("namespace-deleting", doomed.status.phase, doomed.metadata.deletion_timestamp is not None)
out(
    "namespace-no-new-content",
    error(
        core.create_namespaced_config_map,
        "doomed",
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="late")),
    ),
)
core.patch_namespaced_config_map(
    "kept", "doomed", {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
)
out("namespace-gone", error(core.read_namespace, "doomed"))

# Watches: from a version (replay), initial events ending in a bookmark, 410 when compacted.
start = core.list_namespaced_config_map(NS).metadata.resource_version
core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="w1")))
core.patch_namespaced_config_map("w1", NS, {"data": {"k": "v"}})
seen = []
w = watch.Watch()
for e in w.stream(core.list_namespaced_config_map, NS, resource_version=start, timeout_seconds=10):
    seen.append("%s %s" % (e["type"], e["object"].metadata.name))
    if len(seen) == 2:
        w.stop()
out("watch-from", seen)
seen = []
w = watch.Watch()
for e in w.stream(
    core.list_namespaced_config_map,
    NS,
    send_initial_events=True,
    allow_watch_bookmarks=True,
    resource_version_match="NotOlderThan",
    resource_version="",
    timeout_seconds=10,
):
    if e["type"] == "BOOKMARK":
        annotations = e["raw_object"]["metadata"].get("annotations", {})
        seen.append("BOOKMARK %s" % annotations.get("k8s.io/initial-events-end"))
        w.stop()
    else:
        seen.append("%s %s" % (e["type"], e["object"].metadata.name))
out("watch-initial", seen)
out(
    "watch-initial-without-bookmarks",
    error(
        core.list_namespaced_config_map,
        NS,
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        _preload_content=False,
    ),
)
try:
    for e in watch.Watch().stream(
        core.list_namespaced_config_map, NS, resource_version=COMPACTED, timeout_seconds=10
    ):
        out("watch-compacted unexpected", e["type"])
        break
except ApiException as e:
    out("watch-compacted", e.status)
out(
    "list-compacted",
    error(
        core.list_namespaced_config_map,
        NS,
        resource_version=COMPACTED,
        resource_version_match="Exact",
    ),
)
