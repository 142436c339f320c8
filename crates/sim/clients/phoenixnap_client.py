"""The official PhoenixNAP SDKs (pnap-bmc-api, pnap-ip-api, pnap-network-api, pnap-tag-api,
generated from the published OpenAPI specs) call the PhoenixNAP simulator: every endpoint the
driver uses, so the SDKs decode every response against the published models (they raise on a
mismatch). Prints one line per result for crates/sim/tests/phoenixnap_client.rs to assert.

Usage: phoenixnap_client.py URL CLIENT_ID CLIENT_SECRET NETWORK_ID SERVER_ID
"""

import base64
import json
import sys
import urllib.parse
import urllib.request

import pnap_bmc_api
import pnap_ip_api
import pnap_network_api
import pnap_tag_api
from pnap_bmc_api.api.servers_api import ServersApi
from pnap_ip_api.api.ip_blocks_api import IPBlocksApi
from pnap_ip_api.models.ip_block_create import IpBlockCreate
from pnap_ip_api.models.ip_block_patch import IpBlockPatch
from pnap_ip_api.models.tag_assignment_request import TagAssignmentRequest
from pnap_network_api.api.public_networks_api import PublicNetworksApi
from pnap_network_api.models.public_network_ip_block_create import PublicNetworkIpBlockCreate
from pnap_tag_api.api.tags_api import TagsApi
from pnap_tag_api.models.tag_create import TagCreate

url, client_id, client_secret, network_id, server_id = sys.argv[1:6]


def token():
    """Client credentials (RFC 6749 §4.4), HTTP Basic with form-encoded parts (§2.3.1)."""
    creds = "%s:%s" % (urllib.parse.quote_plus(client_id), urllib.parse.quote_plus(client_secret))
    req = urllib.request.Request(
        url + "/auth/realms/BMC/protocol/openid-connect/token",
        data=urllib.parse.urlencode(
            {"grant_type": "client_credentials", "scope": "bmc bmc.read tags tags.read"}
        ).encode(),
        headers={
            "Authorization": "Basic " + base64.b64encode(creds.encode()).decode(),
            "Content-Type": "application/x-www-form-urlencoded",
        },
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = json.load(resp)
    assert body["token_type"].lower() == "bearer", body
    return body["access_token"]


access_token = token()
print("token ok")


def client(module, prefix):
    conf = module.Configuration(host=url + prefix, access_token=access_token)
    return module.ApiClient(conf)


servers = ServersApi(client(pnap_bmc_api, "/bmc/v1"))
ips = IPBlocksApi(client(pnap_ip_api, "/ips/v1"))
networks = PublicNetworksApi(client(pnap_network_api, "/networks/v1"))
tags = TagsApi(client(pnap_tag_api, "/tag-manager/v1"))

# bmcapi: GET /servers, GET /servers/{id}, and an unknown server.
listed = servers.servers_get()
print("servers listed %d" % len(listed))
server = servers.servers_server_id_get(server_id)
print(
    "server %s %s %s %s raid=%s"
    % (server.id, server.hostname, server.status, server.location,
       server.storage_configuration.root_partition.raid)
)
try:
    servers.servers_server_id_get("ffffffffffffffffffffffff")
    print("gone server answered 200")
except pnap_bmc_api.ApiException as e:
    print("gone server %d" % e.status)

# tagapi: POST /tags (and 409 for a taken name), GET /tags, GET /tags?name=.
for name in ["usage", "cluster", "serviceNamespace", "serviceName", "delete"]:
    created = tags.tags_post(TagCreate(name=name, is_billing_tag=False))
    print("tag created %s billing=%s" % (created.name, created.is_billing_tag))
try:
    tags.tags_post(TagCreate(name="usage", is_billing_tag=False))
    print("duplicate tag answered 201")
except pnap_tag_api.ApiException as e:
    print("duplicate tag %d" % e.status)
print("tags listed %d" % len(tags.tags_get()))
print("tags named usage %d" % len(tags.tags_get(name="usage")))

# ipapi: POST /ip-blocks, GET with tag filters, GET one, PATCH, PUT tags.
wanted = [
    TagAssignmentRequest(name="usage", value="cloud-provider-phoenixnap-auto"),
    TagAssignmentRequest(name="cluster", value="uid-1"),
    TagAssignmentRequest(name="serviceNamespace", value="default"),
    TagAssignmentRequest(name="serviceName", value="web"),
]
block = ips.ip_blocks_post(IpBlockCreate(location="PHX", cidr_block_size="/29", tags=wanted))
print("block created %s %s %s" % (block.location, block.cidr_block_size, block.status))
found = ips.ip_blocks_get(tag=["cluster.uid-1", "serviceName.web"])
print("blocks by tags %d" % len(found))
print("blocks by other tags %d" % len(ips.ip_blocks_get(tag=["serviceName.other"])))
got = ips.ip_blocks_ip_block_id_get(block.id)
print("block got %s tags=%d" % (got.status, len(got.tags)))
patched = ips.ip_blocks_ip_block_id_patch(block.id, IpBlockPatch(description="k8s"))
print("block patched %s" % patched.description)

# networkapi: GET /public-networks/{id}, POST .../ip-blocks (assign), DELETE (unassign).
network = networks.public_networks_network_id_get(network_id)
print("network %s %s" % (network.location, network.vlan_id))
assigned = networks.public_networks_network_id_ip_blocks_post(
    network_id, PublicNetworkIpBlockCreate(id=block.id)
)
print("assigned %s" % (assigned.id == block.id))
got = ips.ip_blocks_ip_block_id_get(block.id)
print("block %s to %s" % (got.status, got.assigned_resource_type))
print("network blocks %d" % len(networks.public_networks_network_id_get(network_id).ip_blocks))
retagged = ips.ip_blocks_ip_block_id_tags_put(
    block.id,
    [
        TagAssignmentRequest(name="usage", value="cloud-provider-phoenixnap-auto"),
        TagAssignmentRequest(name="cluster", value="uid-1"),
        TagAssignmentRequest(name="delete", value="true"),
    ],
)
print("block retagged %d" % len(retagged.tags))
unassigned = networks.public_networks_network_id_ip_blocks_ip_block_id_delete(network_id, block.id)
print("unassign answered %s" % type(unassigned).__name__)
print("block %s" % ips.ip_blocks_ip_block_id_get(block.id).status)
deleted = ips.ip_blocks_ip_block_id_delete(block.id)
print("block deleted %s" % (deleted.ip_block_id == block.id))
print("blocks left %d" % len(ips.ip_blocks_get()))
