"""wasm-ccm driver SDK for Python, over the bindings componentize-py generates from `wit/`.

    from wit_world import exports
    from wasm_ccm_sdk import export, InvalidConfig, NotFound, ProviderInfo, http, log

    @export
    class Provider(exports.Provider):
        def info(self):
            return ProviderInfo(name="example", version="0.1.0", provider_id_scheme="example",
                                default_egress=["https://api.example.com"], env_prefixes=["EXAMPLE_"],
                                annotation_prefixes=["example.com/"], secrets=[])
        ...

Records are the generated dataclasses (`Node`, `Service`, `InstanceMetadata`, …), re-exported
here; `http` is a small `requests`-like client over the host's `http` import; `log` writes to
the host's log; `cluster` reads the cluster view and records events; `secrets` builds the
declarations of `ProviderInfo.secrets`. Raise the errors of
`wasm_ccm_sdk.errors` and decorate every exported class with `@export`. Every world exports
`environment` since 0.2.1: define `Environment` (the variables `init` reads, so the host hands it
an allow-list) or import the default that declares none (`environment.py`). Every world exports
`instance-listing` since 0.2.2: import `InstanceListing`, which answers with your `Instances`
class's `list_instances(page)` (records `InstancePage`, `ListedInstance`) and with
not-implemented when it has none (`listing.py`).
"""
# The contract this SDK is written against. componentize-py generates `wit_world` from the WIT
# given with `-d` and its modules carry no version, so nothing else in a Python driver says which
# contract it was built for; build it against this version's `wit/` (`wit/README.md`,
# "Versioning"). tests/tools (contract.rs) holds it equal to `wit/provider.wit`.
CONTRACT_VERSION = "0.2.2"

from wit_world.imports import types  # noqa: F401,E402
from wit_world.imports.types import (  # noqa: F401
    AddressType, Context, EnsureResult, Ingress, InstanceMetadata, IpFamily, IpMode, Node,
    NodeAddress, Oauth2Seal, ProviderInfo, Route, SecretDecl, SecretOrigin, Service, ServicePort,
    SessionAffinity, Taint, TrafficPolicy,
)
# The records of `instance-listing` (contract 0.2.2) belong to that exported interface.
from wit_world.exports.instance_listing import InstancePage, ListedInstance  # noqa: F401,E402
# The WIT enum `protocol` would shadow `typing.Protocol` in driver code.
from wit_world.imports.types import Protocol as PortProtocol  # noqa: F401

from . import cluster, errors, http, log, secrets  # noqa: F401
from .errors import (  # noqa: F401
    ImplementedElsewhere, InvalidConfig, NotFound, Permanent, ProviderError, RateLimited,
    RetryAfter, Transient, Unauthorized, Unimplemented,
)
from .export import export  # noqa: F401
# The default `environment` export (declares no plain variables); see `environment.py`.
from .environment import Environment  # noqa: F401,E402
# The default `instance-listing` export (the `Instances` class's `list_instances`, else
# not-implemented); see `listing.py`.
from .listing import InstanceListing  # noqa: F401,E402

ADDRESS_TYPES = {
    "Hostname": AddressType.HOSTNAME,
    "InternalIP": AddressType.INTERNAL_IP,
    "ExternalIP": AddressType.EXTERNAL_IP,
    "InternalDNS": AddressType.INTERNAL_DNS,
    "ExternalDNS": AddressType.EXTERNAL_DNS,
}
"""Kubernetes' address type names → the WIT enum."""


def lookup(pairs, key):
    """The value of `key` in a WIT `list<tuple<string, string>>` (labels, annotations), or None."""
    for k, v in pairs:
        if k == key:
            return v
    return None


def vip(ip):
    """An ingress entry for an IP that is a VIP (traffic to it goes through the load balancer)."""
    return Ingress(ip=ip, hostname=None, ip_mode=IpMode.VIP)


def hostname_ingress(name):
    """An ingress entry for a DNS name."""
    return Ingress(ip=None, hostname=name, ip_mode=None)
