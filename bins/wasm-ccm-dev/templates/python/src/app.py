"""The {{name}} wasm-ccm driver: node initialisation and lifecycle over an inventory API.

As generated, the "cloud" is the inventory API of wasm-ccm-dev's `static` simulator
(`GET /instances`, bearer token), so the driver passes `wasm-ccm-dev conformance` as it is. Make
it yours: replace `fetch_instances` and the instance fields with your cloud's API and keep the
rest: the configuration checks in `init`, the lookup rules and the error mapping are what the
conformance checks expect.

Build: ./build.sh (componentize-py packs this module, the SDK and CPython into one component).
"""
from wit_world import exports
from wasm_ccm_sdk import (
    ADDRESS_TYPES, InstanceMetadata, InstancePage, InvalidConfig, ListedInstance, NodeAddress,
    NotFound, Permanent, ProviderInfo, Transient, export, http, log,
)
# Every world exports `instance-listing` (contract 0.2.2): the SDK's answers with
# `Instances.list_instances` below.
from wasm_ccm_sdk import InstanceListing  # noqa: F401

# Provider IDs are `{{name}}://<id>`: the scheme is stored on every Node, so choose it once.
SCHEME = "{{name}}"
# One request may take this long; well inside the host's 30 s call deadline.
TIMEOUT_MS = 5000

# componentize-py makes a new object of each exported class per call: state lives in the module
# (one copy per component instance), set by init.
STATE = None


def fetch_instances():
    """Every instance, as the API returns it. The SDK maps transport failures and HTTP errors to
    the provider errors the host acts on (429 → rate-limited with Retry-After, 401/403 →
    unauthorized, 5xx → transient) and a body that is not JSON to transient."""
    url = f"{STATE['url']}/instances"
    doc = http.get(url, bearer=STATE["token"], timeout_ms=TIMEOUT_MS).error_for_status().json()
    instances = doc.get("instances") if isinstance(doc, dict) else None
    if not isinstance(instances, list) or not all(
            isinstance(i, dict) and isinstance(i.get("name"), str) for i in instances):
        # A cloud answering nonsense is failing, not empty: never "not found" here.
        raise Transient(f"unexpected answer from {http.display_url(url)}: "
                        "expected {\"instances\": [{\"name\": …}, …]}")
    return instances


def instance_id(node):
    """The instance ID in the node's provider ID; None when it has none yet (look it up by name
    then). Another provider's ID is an error, never "not found": False from instance_exists
    makes the host delete the Node."""
    if not node.provider_id:
        return None
    prefix = f"{SCHEME}://"
    iid = node.provider_id[len(prefix):] if node.provider_id.startswith(prefix) else ""
    if not iid:
        raise InvalidConfig(f"node {node.name} has provider ID {node.provider_id!r}, "
                            f"which is not {SCHEME}://<id>")
    return iid


def find(node):
    """The instance behind the node: by provider ID when it has one, else by name. None only
    when the cloud answered and the instance is not there."""
    wanted = instance_id(node)
    for i in fetch_instances():
        if wanted is None and i["name"] == node.name:
            return i
        if wanted is not None and (i.get("id") or i["name"]) == wanted:
            return i
    return None


def require(node):
    i = find(node)
    if i is None:
        raise NotFound(f"no instance for node {node.name} in the inventory")
    return i


def metadata(i):
    """What instance_metadata answers for the instance; an address of a type Kubernetes does not
    know is permanent, since asking again brings the same answer."""
    addresses = []
    for a in i.get("addresses") or []:
        kind = ADDRESS_TYPES.get(a.get("type")) if isinstance(a, dict) else None
        if kind is None or not isinstance(a.get("address"), str):
            raise Permanent(f"instance {i['name']} has an address the driver cannot read: {a!r}")
        addresses.append(NodeAddress(kind, a["address"]))
    return InstanceMetadata(
        provider_id=f"{SCHEME}://{i.get('id') or i['name']}",
        instance_type=str(i.get("type") or ""), zone=str(i.get("zone") or ""),
        region=str(i.get("region") or ""), addresses=addresses, additional_labels=[])


def listed(i):
    """The instance as the listing shows it, or None when the driver cannot describe it: the host
    then asks about its node on its own, and instance_metadata answers with the error."""
    try:
        return ListedInstance(node_name=i["name"], metadata=metadata(i),
                              shutdown=i.get("shutdown") is True)
    except Permanent:
        return None


@export
class Provider(exports.Provider):
    def info(self):
        return ProviderInfo(
            # The operator's --cloud-provider value.
            name="{{name}}", version="0.1.0", provider_id_scheme=SCHEME,
            # Your API's address. The operator's --allow-egress replaces it (the conformance
            # scenario points the driver at a simulator that way).
            default_egress=["https://api.example.com"],
            # Only environment variables with these prefixes reach init.
            env_prefixes=["{{ENV}}_"],
            # Service annotation keys the driver may set or remove (its own domain).
            annotation_prefixes=["{{name}}.example.com/"],
            # The credentials the driver reads. Declared, the host keeps them out of the guest
            # (init sees a placeholder; the host applies the value to requests), e.g.
            # secrets.decl("api-token", at=[secrets.env("{{ENV}}_API_TOKEN")],
            #              origin=secrets.origin([secrets.env("{{ENV}}_API_URL")],
            #                                    "https://api.example.com"),
            #              uses=[secrets.bearer()]).
            # Left empty, the driver receives its credentials in clear.
            secrets=[])

    def init(self, ctx, config, env):
        global STATE
        values = {k: v.strip() for k, v in env if v.strip()}
        url = values.get("{{ENV}}_API_URL", "https://api.example.com")
        if not url.startswith(("https://", "http://")):
            raise InvalidConfig(f"{{ENV}}_API_URL {url!r} is not an http(s):// URL; "
                                "set it to the API's address")
        token = values.get("{{ENV}}_API_TOKEN")
        if not token:
            raise InvalidConfig("{{ENV}}_API_TOKEN is not set; put the API token in it")
        # Never let the token reach a log line.
        log.redact(token)
        STATE = {"url": url.rstrip("/"), "token": token}

    def housekeeping(self):
        pass


@export
class Environment(exports.Environment):
    def plain_variables(self):
        # The variables init reads, by exact name (contract 0.2.1). Named here, init gets only
        # these and the places of declared secrets: a credential the operator keeps under the
        # prefix by another name never reaches the driver. None: every {{ENV}}_ variable.
        return ["{{ENV}}_API_URL", "{{ENV}}_API_TOKEN"]


@export
class Instances(exports.Instances):
    def instance_exists(self, node):
        return find(node) is not None

    def instance_shutdown(self, node):
        return require(node).get("shutdown") is True

    def instance_metadata(self, node):
        return metadata(require(node))

    def list_instances(self, page):
        # Every instance in one listing (contract 0.2.2), so the host asks the API once per pass
        # instead of once per node; each entry is what the two methods above answer, under the
        # name `find` matches a node without a provider ID by. This API answers in one response,
        # so the listing is one page; with an API that pages, return its cursor as `next` (the
        # host passes it back as `page`; at most 20,000 instances a page).
        if page is not None:
            raise Permanent(f"page token {page!r} is not one this driver wrote: its listing is one page")
        return InstancePage(instances=[e for e in map(listed, fetch_instances()) if e is not None],
                            next=None)
