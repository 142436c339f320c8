"""The static reference driver (drivers/static) written in Python: the same cloud-config, the
same behaviour, the same conformance scenario.

Build (see sdk/README.md, "Write a driver in Python"):
    pip install --target deps -r requirements.txt
    componentize-py -d ../../../wit -w full-driver componentize app \
        -p . -p ../../../sdk/python -p deps -o python_static.wasm
"""
import ipaddress
import itertools

import yaml  # PyYAML, pure-Python (the libyaml C extension is absent in the component)

from wit_world import exports
from wasm_ccm_sdk import (
    ADDRESS_TYPES, AddressType, EnsureResult, InstanceMetadata, InstancePage, InvalidConfig,
    IpFamily, ListedInstance, NodeAddress, NotFound, Permanent, PortProtocol, ProviderInfo, Route,
    cluster, export, hostname_ingress, http, log, lookup, vip,
)
# The `environment` export (0.2.1): this driver declares no secrets and no plain variables, so
# it keeps every STATIC_ variable, as the SDK's default says.
from wasm_ccm_sdk import Environment  # noqa: F401
# The `instance-listing` export (0.2.2): the SDK's answers with `Instances.list_instances`.
from wasm_ccm_sdk import InstanceListing  # noqa: F401

SCHEME = "static"
IP_ANNOTATION = "static.wasm-ccm.io/load-balancer-ip"
TOKEN_ENV = "STATIC_INVENTORY_TOKEN"
INVENTORY_TIMEOUT_MS = 5000
# Instances in one page of the listing, as the Rust driver (the contract allows 20,000).
PAGE_SIZE = 1000

# componentize-py creates a new export-class object for every call: state lives in the module
# (one copy per component instance), set by init.
CONFIG = None


# ---------------------------------------------------------------- configuration

class Invalid(Exception):
    """A validation message naming the path; turned into invalid-config by the caller."""


def _check_keys(obj, allowed, path):
    if not isinstance(obj, dict):
        raise Invalid(f"{path or 'cloud-config'}: expected a mapping, found {type(obj).__name__}")
    for k in obj:
        if k not in allowed:
            where = f"{path}: " if path else ""
            raise Invalid(f"{where}unknown field `{k}`, expected one of {', '.join(f'`{a}`' for a in allowed)}")


def _str(v, path, default=""):
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise Invalid(f"{path}: expected a string")
    return str(v)


def _list(v, path):
    if v is None:
        return []
    if not isinstance(v, list):
        raise Invalid(f"{path}: expected a sequence")
    return v


def _is_ip(s):
    try:
        ipaddress.ip_address(s)
        return True
    except ValueError:
        return False


def validate_instances(raw, defaults):
    names, ids, out = set(), set(), []
    for i, r in enumerate(_list(raw, "instances")):
        path = f"instances[{i}]"
        _check_keys(r, ["name", "id", "type", "zone", "region", "addresses", "shutdown", "labels"], path)
        if "name" not in r:
            raise Invalid(f"{path}: missing field `name`")
        name = _str(r["name"], f"{path}.name")
        if not name.strip():
            raise Invalid(f"{path}.name: must not be empty")
        if name in names:
            raise Invalid(f"{path}.name: duplicate instance name {name!r}")
        names.add(name)
        iid = _str(r.get("id"), f"{path}.id", name)
        if not iid or "/" in iid or any(c.isspace() for c in iid):
            raise Invalid(f"{path}.id: {iid!r} is not usable in a provider ID (non-empty, no spaces or slashes)")
        if iid in ids:
            raise Invalid(f"{path}.id: duplicate instance id {iid!r}")
        ids.add(iid)
        addresses = []
        for j, a in enumerate(_list(r.get("addresses"), f"{path}.addresses")):
            apath = f"{path}.addresses[{j}]"
            _check_keys(a, ["type", "address"], apath)
            kind_name = _str(a.get("type"), f"{apath}.type")
            kind = ADDRESS_TYPES.get(kind_name)
            if kind is None:
                raise Invalid(f"{apath}.type: unknown address type {kind_name!r}; use one of {', '.join(ADDRESS_TYPES)}")
            address = _str(a.get("address"), f"{apath}.address")
            if kind in (AddressType.INTERNAL_IP, AddressType.EXTERNAL_IP) and not _is_ip(address):
                raise Invalid(f"{apath}.address: {address!r} is not an IP address (type {kind_name})")
            if not address:
                raise Invalid(f"{apath}.address: must not be empty")
            addresses.append(NodeAddress(kind, address))
        shutdown = r.get("shutdown", False)
        if not isinstance(shutdown, bool):
            raise Invalid(f"{path}.shutdown: expected a boolean")
        labels = r.get("labels") or {}
        if not isinstance(labels, dict):
            raise Invalid(f"{path}.labels: expected a mapping")
        out.append({
            "name": name, "id": iid,
            "type": _str(r.get("type"), f"{path}.type"),
            "zone": _str(r.get("zone"), f"{path}.zone", defaults["zone"]),
            "region": _str(r.get("region"), f"{path}.region", defaults["region"]),
            "addresses": addresses, "shutdown": shutdown,
            "labels": sorted((str(k), _str(v, f"{path}.labels.{k}")) for k, v in labels.items()),
        })
    return out


def parse_cidr(s):
    try:
        return ipaddress.ip_network(s, strict=True)
    except ValueError as e:
        if "/" not in s:
            raise Invalid(f"{s!r} is not a CIDR (address/prefix-length)")
        try:
            loose = ipaddress.ip_network(s, strict=False)
        except ValueError:
            raise Invalid(f"{s!r}: {e}")
        raise Invalid(f"{s!r} has host bits set; did you mean {loose}?")


def validate_routes(raw):
    names, out = set(), []
    for i, r in enumerate(_list(raw, "routes")):
        _check_keys(r, ["name", "targetNode", "destinationCidr", "blackhole"], f"routes[{i}]")
        name = _str(r.get("name"), f"routes[{i}].name")
        if not name:
            raise Invalid(f"routes[{i}].name: must not be empty")
        if name in names:
            raise Invalid(f"routes[{i}].name: duplicate route name {name!r}")
        names.add(name)
        cidr = _str(r.get("destinationCidr"), f"routes[{i}].destinationCidr")
        try:
            parse_cidr(cidr)
        except Invalid as e:
            raise Invalid(f"routes[{i}].destinationCidr: {e}")
        out.append(Route(name, _str(r.get("targetNode"), f"routes[{i}].targetNode"), [], cidr,
                         bool(r.get("blackhole", False))))
    return out


class Pool:
    """Address ranges in configuration order; IPv4 networks of /30 and larger lose their
    network and broadcast addresses."""

    def __init__(self, entries):
        self.ranges = []
        for i, e in enumerate(_list(entries, "loadBalancer.addresses")):
            e = _str(e, f"loadBalancer.addresses[{i}]").strip()
            try:
                if "/" in e:
                    net = parse_cidr(e)
                    first, last = int(net.network_address), int(net.broadcast_address)
                    if net.version == 4 and net.prefixlen <= 30:
                        first, last = first + 1, last - 1
                    self.ranges.append((net.version, first, last))
                else:
                    try:
                        ip = ipaddress.ip_address(e)
                    except ValueError:
                        raise Invalid(f"{e!r} is not an IP address or a CIDR")
                    self.ranges.append((ip.version, int(ip), int(ip)))
            except Invalid as err:
                raise Invalid(f"loadBalancer.addresses[{i}]: {err}")

    def __bool__(self):
        return bool(self.ranges)

    def contains(self, ip):
        return any(v == ip.version and a <= int(ip) <= b for v, a, b in self.ranges)

    def addresses(self, family=None):
        """Every address of the pool in configuration order, of `family` (4 or 6) if given."""
        for v, a, b in self.ranges:
            if family and v != family:
                continue
            for n in range(a, b + 1):
                yield ipaddress.ip_address(n) if v == 4 else ipaddress.IPv6Address(n)


def _is_dns_name(s):
    return 0 < len(s) <= 253 and all(
        0 < len(label) <= 63 and not label.startswith("-") and not label.endswith("-")
        and all(c.isascii() and (c.isalnum() or c == "-") for c in label)
        for label in s.split("."))


def parse_config(data, env):
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Invalid(f"cloud-config is not UTF-8: {e}")
    if text.strip():
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise Invalid(f"cloud-config: {e}")
    else:
        raw = {}
    raw = raw or {}
    _check_keys(raw, ["region", "zone", "instances", "loadBalancer", "inventoryUrl", "inventoryToken", "routes"], "")
    defaults = {"region": _str(raw.get("region"), "region"), "zone": _str(raw.get("zone"), "zone")}
    env_token = lookup(env, TOKEN_ENV) or None
    cfg = {"defaults": defaults, "url": None, "token": None, "instances": [], "routes": []}
    if raw.get("inventoryUrl") is not None:
        if raw.get("instances"):
            raise Invalid("instances: not allowed together with inventoryUrl (the inventory serves the instances)")
        if raw.get("routes"):
            raise Invalid("routes: not allowed together with inventoryUrl (the inventory serves the routes)")
        url = _str(raw["inventoryUrl"], "inventoryUrl").rstrip("/")
        if not (url.startswith("http://") or url.startswith("https://")):
            raise Invalid(f"inventoryUrl: {url!r} is not an http:// or https:// URL")
        cfg["url"] = url
        cfg["token"] = env_token or _str(raw.get("inventoryToken"), "inventoryToken") or None
    else:
        if raw.get("inventoryToken") is not None:
            raise Invalid("inventoryToken: only meaningful with inventoryUrl")
        cfg["instances"] = validate_instances(raw.get("instances"), defaults)
        cfg["routes"] = validate_routes(raw.get("routes"))
    lb = raw.get("loadBalancer") or {}
    _check_keys(lb, ["addresses", "hostnameSuffix"], "loadBalancer")
    cfg["pool"] = Pool(lb.get("addresses"))
    suffix = lb.get("hostnameSuffix")
    if suffix is not None:
        suffix = _str(suffix, "loadBalancer.hostnameSuffix").strip(".")
        if not _is_dns_name(suffix):
            raise Invalid(f"loadBalancer.hostnameSuffix: {suffix!r} is not a DNS name")
    cfg["suffix"] = suffix
    return cfg


# ---------------------------------------------------------------- instances

def current_instances():
    if CONFIG["url"] is None:
        return CONFIG["instances"]
    url = CONFIG["url"] + "/instances"
    doc = http.get(url, bearer=CONFIG["token"], timeout_ms=INVENTORY_TIMEOUT_MS).error_for_status().json()
    try:
        _check_keys(doc, ["instances"], "")
        return validate_instances(doc.get("instances"), CONFIG["defaults"])
    except Invalid as e:
        raise InvalidConfig(f"inventory {http.display_url(url)}: {e}")


def find(node):
    instances = current_instances()
    if not node.provider_id:
        return next((i for i in instances if i["name"] == node.name), None)
    if "://" not in node.provider_id:
        raise InvalidConfig(
            f"node {node.name} has provider ID {node.provider_id!r}, which is not of the form <scheme>://<id>")
    scheme, iid = node.provider_id.split("://", 1)
    if scheme != SCHEME:
        raise InvalidConfig(
            f"node {node.name} has provider ID {node.provider_id!r}: it belongs to provider {scheme!r}, "
            f"not to this {SCHEME} driver")
    return next((i for i in instances if i["id"] == iid), None)


def not_found(node):
    if node.provider_id:
        return NotFound(f"no instance with provider ID {node.provider_id!r} in the static inventory")
    return NotFound(f"no instance named {node.name!r} in the static inventory")


def metadata(i):
    """What instance_metadata answers for the instance, and the listing carries for it."""
    return InstanceMetadata(f"{SCHEME}://{i['id']}", i["type"], i["zone"], i["region"],
                            list(i["addresses"]), list(i["labels"]))


def page_start(token, count):
    """The offset a page token names (this driver writes the offset of the page's first
    instance in decimal), at most `count`: an inventory served over HTTP may shrink between two
    pages down to exactly the offset. Any other token is not ours, and retrying it cannot help."""
    if token.isascii() and token.isdigit() and int(token) <= count:
        return int(token)
    raise Permanent(f"page token {token!r} is not one this driver wrote for its {count} instances: "
                    "it writes the offset of the page's first instance in decimal")


@export
class Provider(exports.Provider):
    def info(self):
        return ProviderInfo(name="static-python", version="0.1.0", provider_id_scheme=SCHEME,
                            default_egress=[], env_prefixes=["STATIC_"],
                            annotation_prefixes=["static.wasm-ccm.io/"],
                            # The inventory token may sit in the YAML config, which no secret
                            # location names: it stays in the guest, redacted from the log.
                            secrets=[])

    def init(self, ctx, config, env):
        global CONFIG
        try:
            CONFIG = parse_config(config, env)
        except Invalid as e:
            raise InvalidConfig(str(e))
        if CONFIG["token"]:
            log.redact(CONFIG["token"])
        log.info("static driver configured", cluster=ctx.cluster_name,
                 mode="inventory" if CONFIG["url"] else "static",
                 instances=http.display_url(CONFIG["url"]) if CONFIG["url"] else len(CONFIG["instances"]),
                 **{"pool-empty": str(not CONFIG["pool"]).lower()})

    def housekeeping(self):
        pass


@export
class Instances(exports.Instances):
    def instance_exists(self, node):
        return find(node) is not None

    def instance_shutdown(self, node):
        i = find(node)
        if i is None:
            raise not_found(node)
        return i["shutdown"]

    def instance_metadata(self, node):
        i = find(node)
        if i is None:
            raise not_found(node)
        return metadata(i)

    def list_instances(self, page):
        # The same answers as the per-node functions, under the name `find` matches a node
        # without a provider ID by; an inventory served over HTTP is fetched again per page.
        instances = current_instances()
        start = 0 if page is None else page_start(page, len(instances))
        end = min(start + PAGE_SIZE, len(instances))
        return InstancePage(
            [ListedInstance(i["name"], metadata(i), i["shutdown"]) for i in instances[start:end]],
            str(end) if end < len(instances) else None)


# ---------------------------------------------------------------- load balancers

def _parse_ip(s):
    try:
        return ipaddress.ip_address(s.strip())
    except (ValueError, AttributeError):
        return None


def _ingress_ips(svc):
    return {ip for ip in (_parse_ip(i.ip) for i in svc.ingress if i.ip) if ip}


def lb_ingress(svc, ip):
    if CONFIG["suffix"]:
        return [hostname_ingress(f"{svc.namespace}-{svc.name}.{CONFIG['suffix']}")]
    return [vip(str(ip))] if ip is not None else []


# How many pool addresses the first query asks about, doubling up to the largest, so a fresh
# address deep in a busy pool takes few host calls.
FIRST_CANDIDATES, MAX_CANDIDATES = 256, 4096


def _claims(ips):
    """The Services that may claim one of `ips`: only those are copied in, never every Service."""
    texts = [str(ip) for ip in ips]
    return (cluster.services_with_address(texts)
            + cluster.services_with_annotation(IP_ANNOTATION, texts))


def _taken_by_others(svc, others):
    taken = set()
    for o in others:
        if o.uid == svc.uid:
            continue
        a = _parse_ip(lookup(o.annotations, IP_ANNOTATION) or "")
        if a:
            taken.add(a)
        taken |= _ingress_ips(o)
    return taken


def choose_ip(svc):
    pool = CONFIG["pool"]
    if not pool:
        raise InvalidConfig("no load-balancer addresses configured: set loadBalancer.addresses in the cloud-config")
    requested = (svc.load_balancer_ip or "").strip()
    if requested:
        ip = _parse_ip(requested)
        if ip is None:
            raise InvalidConfig(f"spec.loadBalancerIP {requested!r} is not an IP address")
        if not pool.contains(ip):
            raise InvalidConfig(f"spec.loadBalancerIP {ip} is not in the address pool (loadBalancer.addresses)")
        if ip in _taken_by_others(svc, _claims([ip])):
            raise InvalidConfig(f"spec.loadBalancerIP {ip} is already used by another service")
        return ip
    current = _parse_ip(lookup(svc.annotations, IP_ANNOTATION) or "")
    if current is not None:
        published = set()
        for o in _claims([current]):
            if o.uid != svc.uid:
                published |= _ingress_ips(o)
        if pool.contains(current) and current not in published:
            return current
    family = {IpFamily.IPV4: 4, IpFamily.IPV6: 6}.get(svc.ip_families[0]) if svc.ip_families else None
    candidates, asked, claimed = pool.addresses(family), FIRST_CANDIDATES, 0
    while True:
        chunk = list(itertools.islice(candidates, asked))
        if not chunk:
            break
        taken = _taken_by_others(svc, _claims(chunk))
        for ip in chunk:
            if ip not in taken:
                return ip
        claimed += len(chunk)
        asked = min(asked * 2, MAX_CANDIDATES)
    msg = (f"no free address left in the load-balancer pool for {svc.namespace}/{svc.name} "
           f"({claimed} claimed by other services)")
    cluster.warning("AddressPoolExhausted", msg)
    raise Permanent(msg)


@export
class LoadBalancer(exports.LoadBalancer):
    def get(self, svc):
        ip = _parse_ip(lookup(svc.annotations, IP_ANNOTATION) or "")
        if ip is not None:
            return lb_ingress(svc, ip)
        suffix = CONFIG["suffix"]
        if suffix and not CONFIG["pool"]:
            expected = f"{svc.namespace}-{svc.name}.{suffix}"
            if any(i.hostname == expected for i in svc.ingress):
                return [hostname_ingress(expected)]
        return None

    def name(self, svc):
        return ("a" + svc.uid.replace("-", ""))[:32]

    def ensure(self, svc, nodes):
        for p in svc.ports:
            if p.protocol == PortProtocol.SCTP:
                raise InvalidConfig(
                    f"port {p.port} ({p.name or 'unnamed'}) uses SCTP, which static load balancers do not support; use TCP or UDP")
        if CONFIG["suffix"] and not CONFIG["pool"]:
            return EnsureResult(lb_ingress(svc, None), [], [])
        ip = choose_ip(svc)
        result = EnsureResult(lb_ingress(svc, ip), [], [])
        if lookup(svc.annotations, IP_ANNOTATION) != str(ip):
            result.set_annotations.append((IP_ANNOTATION, str(ip)))
        return result

    def update(self, svc, nodes):
        log.debug("backend nodes changed; static load balancers have nothing to reconfigure",
                  service=f"{svc.namespace}/{svc.name}", nodes=len(nodes))

    def delete(self, svc):
        pass


# ---------------------------------------------------------------- routes

def _inventory_for_routes():
    if CONFIG["url"] is None:
        raise InvalidConfig(
            "routes from the cloud-config are read-only: creating or deleting routes needs an inventoryUrl")
    return CONFIG["url"], CONFIG["token"]


@export
class Routes(exports.Routes):
    def list(self):
        if CONFIG["url"] is None:
            return list(CONFIG["routes"])
        url = CONFIG["url"] + "/routes"
        doc = http.get(url, bearer=CONFIG["token"], timeout_ms=INVENTORY_TIMEOUT_MS).error_for_status().json()
        try:
            _check_keys(doc, ["routes"], "")
            return validate_routes(doc.get("routes"))
        except Invalid as e:
            raise InvalidConfig(f"inventory {http.display_url(url)}: {e}")

    def create(self, name_hint, route):
        base, token = _inventory_for_routes()
        body = {"name": name_hint, "targetNode": route.target_node, "destinationCidr": route.destination_cidr}
        http.put(f"{base}/routes/{http.encode_path_segment(name_hint)}", json=body, bearer=token,
                 timeout_ms=INVENTORY_TIMEOUT_MS).error_for_status()

    def delete(self, route):
        base, token = _inventory_for_routes()
        try:
            http.delete(f"{base}/routes/{http.encode_path_segment(route.name)}", bearer=token,
                        timeout_ms=INVENTORY_TIMEOUT_MS).error_for_status()
        except NotFound:
            pass  # already gone
