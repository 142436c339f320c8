"""The official Kubernetes Python client of one Kubernetes minor against the simulator serving it.

Run by bins/wasm-ccm-dev/tests/version_policy.rs with the venv of one of
tests/tools/pins/kubernetes-client-1.<minor>.txt:
    python kubernetes_version.py <simulator url> <node name>
Prints one line per observation; the Rust test compares them with what it expects of a server
of that minor: the client's own version, the served version, the nodes and services it lists,
and a node label it patched and read back.
"""

import sys

import kubernetes
from kubernetes import client

URL, NODE = sys.argv[1], sys.argv[2]

config = client.Configuration()
config.host = URL
api = client.ApiClient(config)
core = client.CoreV1Api(api)


def out(*parts):
    print(" ".join(str(p) for p in parts), flush=True)


out("client", kubernetes.__version__)
code = client.VersionApi(api).get_code()
out("server", code.major, code.minor, code.git_version)
out("nodes", sorted(n.metadata.name for n in core.list_node().items))
out(
    "services",
    sorted(
        "%s/%s" % (s.metadata.namespace, s.metadata.name)
        for s in core.list_service_for_all_namespaces().items
    ),
)
label = "python-client-" + kubernetes.__version__.split(".")[0]
core.patch_node(NODE, {"metadata": {"labels": {"example.com/checked-by": label}}})
node = core.read_node(NODE)
out("label", node.metadata.labels.get("example.com/checked-by"))
