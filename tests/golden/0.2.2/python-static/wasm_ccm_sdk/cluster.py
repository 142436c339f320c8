"""The read-only view of the cluster the host gives drivers, and Kubernetes events."""
from wit_world.imports import cluster as _c

load_balancer_services = _c.load_balancer_services
"""Every LoadBalancer Service (each call copies all of them; prefer the two queries below)."""

services_with_annotation = _c.services_with_annotation
"""`services_with_annotation(key, values)`: the LoadBalancer Services carrying annotation `key`
(with one of `values`, when not empty)."""

services_with_address = _c.services_with_address
"""`services_with_address(ips)`: the LoadBalancer Services using one of `ips` as
`spec.loadBalancerIP` or as an ingress IP (compared as addresses)."""

address_claims = _c.address_claims
"""`address_claims(ips, annotation)`: which of `ips` the LoadBalancer Services hold (as
`spec.loadBalancerIP`, an ingress IP or the value of `annotation`), as `AddressClaim(ip,
service_uid, used_as)`: addresses and UIDs only, for an address pool asking about many at once."""

# The nodes of the last node-set generation fetched: an instance lives for many calls, so an
# unchanged set is copied in once, not once per Service.
_nodes = (None, [])


def nodes_of(node_set):
    """The nodes of an `ensure`/`update` node set, fetched once per generation. `@export` calls
    it, so a driver's `ensure` and `update` receive the list of nodes."""
    global _nodes
    if _nodes[0] != node_set.generation:
        _nodes = (node_set.generation, _c.nodes())
    return _nodes[1]


def normal(reason, message):
    """A Normal event on the object of the current call."""
    _c.event(_c.EventType.NORMAL, reason, message)


def warning(reason, message):
    """A Warning event on the object of the current call."""
    _c.event(_c.EventType.WARNING, reason, message)
