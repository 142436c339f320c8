"""The `instance-listing` export (contract 0.2.2): the cluster's instances in one paged listing.

Every world exports it since 0.2.2, so every Python driver has an `InstanceListing` class in its
app module. Import this one (`from wasm_ccm_sdk import InstanceListing`): it answers with the
`list_instances(page)` method of the driver's `@export`ed `Instances` class, and with
not-implemented when that class has none, which tells the host to keep asking per node.

    @export
    class Instances(exports.Instances):
        ...
        def list_instances(self, page):
            # page: None for the first page, else the `next` of the page before.
            return InstancePage(
                instances=[ListedInstance(node_name=..., metadata=..., shutdown=...)],
                next=None)  # or the token of the next page

Each `ListedInstance` carries exactly what `instance_metadata` and `instance_shutdown` answer
for the instance, and the node name the per-node lookup matches it to when the node has no
provider ID yet ("" when the driver cannot say): `wasm-ccm-dev conformance` compares the two.
"""
from componentize_py_types import Err
from wit_world import exports

from .errors import Unimplemented
from .export import exported_instances


class InstanceListing(exports.InstanceListing):
    # Not decorated with `@export`: the method it calls is, so a driver error arrives here as
    # the WIT error already and a bug has been logged once; wrapping again would log it twice.
    def list_instances(self, page):
        instances = exported_instances()
        method = getattr(instances, "list_instances", None) if instances else None
        if method is None:
            raise Err(Unimplemented().to_wit())
        # componentize-py makes a new object of an exported class per call; so does this.
        return method(instances(), page)
