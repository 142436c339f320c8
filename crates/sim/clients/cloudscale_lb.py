"""Load balancer objects through cloudscale's own Python SDK (`cloudscale-sdk`, installed with
`cloudscale-cli` from crates/sim/clients/cloudscale.txt).

cloudscale-cli 1.5.0 and cloudscale-sdk 0.7.0 have no load balancer commands or classes, so this
script gives the SDK's generic resource class (`cloudscale.lib.CloudscaleMutable`: its HTTP client,
its URL building and its response checks, which accept only 200/201/204) the load balancer paths of
the API documentation ("Load Balancers", "Pools", "Pool Members", "Listeners", "Health Monitors").

Usage: python cloudscale_lb.py API_URL TOKEN COMMAND [ARGS]
  build SUBNET_UUID ADDRESS   create lb "cli-lb" with a pool, a member at ADDRESS, a listener and
                              a health monitor; prints one "created <kind> <uuid>" line each
  list                        prints one line per object (see `describe`)
  assign-fip IP LB_UUID       points the floating IP at the load balancer
  teardown NAME               deletes the load balancer NAME child by child, then itself
"""

import os
import sys

API_URL, TOKEN, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]
# The SDK reads its API URL from the environment when it is imported.
os.environ["CLOUDSCALE_API_URL"] = API_URL

from cloudscale import Cloudscale  # noqa: E402
from cloudscale.lib import CloudscaleMutable  # noqa: E402


class LoadBalancers(CloudscaleMutable):
    resource = "load-balancers"


class Pools(CloudscaleMutable):
    resource = "load-balancers/pools"


class Listeners(CloudscaleMutable):
    resource = "load-balancers/listeners"


class HealthMonitors(CloudscaleMutable):
    resource = "load-balancers/health-monitors"


class FloatingIps(CloudscaleMutable):
    resource = "floating-ips"


cs = Cloudscale(api_token=TOKEN)
lbs, pools, listeners, monitors, fips = (
    LoadBalancers(cs),
    Pools(cs),
    Listeners(cs),
    HealthMonitors(cs),
    FloatingIps(cs),
)


def members_path(pool_uuid):
    return f"/{pool_uuid}/members"


def name_of(stub):
    return stub["name"] if stub else "-"


def describe():
    for lb in lbs.get_all():
        vips = ",".join(v["address"] for v in lb["vip_addresses"])
        print(f"lb {lb['name']} {lb['status']} {lb['flavor']['slug']} {lb['zone']['slug']} {vips}")
    for pool in pools.get_all():
        print(
            f"pool {pool['name']} lb={name_of(pool['load_balancer'])} "
            f"{pool['algorithm']} {pool['protocol']}"
        )
        for m in pools.get_all(path=members_path(pool["uuid"])):
            print(
                f"member {m['name']} pool={name_of(m['pool'])} {m['address']} "
                f"port={m['protocol_port']} monitor={m['monitor_port']} "
                f"enabled={m['enabled']} status={m['monitor_status']}"
            )
    for li in listeners.get_all():
        print(
            f"listener {li['name']} pool={name_of(li['pool'])} {li['protocol']} "
            f"port={li['protocol_port']} cidrs={','.join(li['allowed_cidrs']) or '-'}"
        )
    for mon in monitors.get_all():
        http = mon["http"]
        path = http["url_path"] if http else "-"
        host = (http or {}).get("host") or "-"
        print(
            f"monitor pool={name_of(mon['pool'])} {mon['type']} delay={mon['delay_s']} "
            f"path={path} host={host}"
        )
    for fip in fips.get_all():
        print(f"fip {fip['network']} lb={name_of(fip['load_balancer'])}")


def build(subnet, address):
    lb = lbs.create(
        {
            "name": "cli-lb",
            "flavor": "lb-standard",
            "zone": "rma1",
            "vip_addresses": [{"subnet": subnet}],
            "tags": {"made-by": "cloudscale-sdk"},
        }
    )
    print(f"created lb {lb['uuid']}")
    pool = pools.create(
        {
            "name": "tcp",
            "load_balancer": lb["uuid"],
            "algorithm": "round_robin",
            "protocol": "tcp",
        }
    )
    print(f"created pool {pool['uuid']}")
    member = pools.create(
        {
            "name": f"{address}:30080",
            "protocol_port": 30080,
            "address": address,
            "subnet": subnet,
        },
        path=members_path(pool["uuid"]),
    )
    print(f"created member {member['uuid']}")
    listener = listeners.create(
        {"pool": pool["uuid"], "name": "tcp/80", "protocol": "tcp", "protocol_port": 80}
    )
    print(f"created listener {listener['uuid']}")
    monitor = monitors.create(
        {"pool": pool["uuid"], "type": "http", "http": {"url_path": "/livez"}}
    )
    print(f"created monitor {monitor['uuid']}")
    # An update through the SDK (PATCH answers 204, the SDK returns {}), read back.
    pools.update(pool["uuid"], {"tags": {"role": "web"}})
    print(f"updated pool tags={pools.get_by_uuid(pool['uuid'])['tags']}")


def teardown(name):
    lb = next(lb for lb in lbs.get_all() if lb["name"] == name)
    for pool in [p for p in pools.get_all() if name_of(p["load_balancer"]) == name]:
        for mon in [m for m in monitors.get_all() if m["pool"]["uuid"] == pool["uuid"]]:
            monitors.delete(mon["uuid"])
            print(f"deleted monitor {mon['uuid']}")
        for li in [x for x in listeners.get_all() if (x["pool"] or {}).get("uuid") == pool["uuid"]]:
            listeners.delete(li["uuid"])
            print(f"deleted listener {li['name']}")
        for m in pools.get_all(path=members_path(pool["uuid"])):
            pools.delete(f"{pool['uuid']}/members/{m['uuid']}")
            print(f"deleted member {m['name']}")
        pools.delete(pool["uuid"])
        print(f"deleted pool {pool['name']}")
    lbs.delete(lb["uuid"])
    print(f"deleted lb {name}")


if COMMAND == "list":
    describe()
elif COMMAND == "build":
    build(*ARGS)
elif COMMAND == "assign-fip":
    fips.update(ARGS[0], {"load_balancer": ARGS[1]})
    print(f"assigned {ARGS[0]}")
elif COMMAND == "teardown":
    teardown(*ARGS)
else:
    sys.exit(f"unknown command {COMMAND!r}")
