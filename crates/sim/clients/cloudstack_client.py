"""CloudStack's own Python client (`cs` from PyPI) against the CloudStack simulator.

Run by crates/sim/tests/cloudstack_client.rs with the venv of crates/sim/clients/cloudstack.txt:

    python cloudstack_client.py API_URL API_KEY SECRET_KEY NETWORK_ID

It signs as `cs` does (`signatureVersion=3`, `expires` with a `+0000` offset), lists with
`fetch_list=True` (`page`/`pagesize` until `count`), waits on async jobs with `fetch_result=True`
(`queryAsyncJobResult`), and prints one line per result; the Rust test compares the lines. Errors
the simulator answers are printed too (status, errorcode, errortext), as `cs` reports them.
"""

import sys

import requests
from cs import CloudStack, CloudStackApiException


def address_key(address):
    """Sorts IPv4 addresses numerically."""
    return tuple(int(part) for part in address.split("."))


def show(*words):
    print(" ".join(str(w) for w in words), flush=True)


def main():
    url, key, secret, network = sys.argv[1:5]
    # The simulator is on loopback: no proxy from the environment may take the requests.
    session = requests.Session()
    session.trust_env = False
    # Short polls: the simulator completes a job at its first poll; bounded in any case.
    api = CloudStack(
        endpoint=url,
        key=key,
        secret=secret,
        poll_interval=0.05,
        job_timeout=30,
        timeout=10,
        session=session,
    )

    for vm in sorted(api.listVirtualMachines(fetch_list=True), key=lambda v: v["name"]):
        nic = next((n for n in vm.get("nic", []) if n.get("isdefault")), {})
        show("vm", vm["name"], vm["state"], nic.get("ipaddress", "-"))

    address = api.associateIpAddress(networkid=network, fetch_result=True)["ipaddress"]
    show("associated", address["ipaddress"], address["state"])
    for ip in sorted(
        api.listPublicIpAddresses(fetch_list=True),
        key=lambda i: address_key(i["ipaddress"]),
    ):
        show("ip", ip["ipaddress"], ip["state"], "sourcenat=%s" % ip["issourcenat"])

    # Resource tags: `cs` sends a list of dicts as `tags[0].key=…&tags[0].value=…`, the MAP
    # parameter form, both to createTags (an async job) and to a list's tag filter.
    owner = [{"key": "wasm-ccm/load-balancer", "value": "a0123"}]
    api.createTags(
        resourcetype="PublicIpAddress",
        resourceids=address["id"],
        tags=owner,
        fetch_result=True,
    )
    tagged = api.listPublicIpAddresses(fetch_list=True, tags=owner)
    show(
        "tagged",
        ",".join(i["ipaddress"] for i in tagged),
        ",".join("%s=%s" % (t["key"], t["value"]) for i in tagged for t in i["tags"]),
    )
    try:
        api.createTags(
            resourcetype="PublicIp",
            resourceids=address["id"],
            tags=owner,
            fetch_result=True,
        )
        show("bad resource type accepted")
    except CloudStackApiException as e:
        show("tag job failed", e.error["errorcode"], e.error["errortext"])

    firewall = api.createFirewallRule(
        ipaddressid=address["id"],
        protocol="tcp",
        startport=80,
        endport=80,
        cidrlist=["10.0.0.0/8", "192.168.0.0/16"],
        fetch_result=True,
    )["firewallrule"]
    show("firewall created", firewall["protocol"], firewall["startport"], firewall["state"])
    for rule in api.listFirewallRules(fetch_list=True, ipaddressid=address["id"]):
        show(
            "fw",
            rule["protocol"],
            "%s-%s" % (rule["startport"], rule["endport"]),
            rule["cidrlist"],
            rule["state"],
        )

    rule = api.createLoadBalancerRule(
        name="web-tcp-80",
        algorithm="roundrobin",
        privateport=30080,
        publicport=80,
        networkid=network,
        publicipid=address["id"],
        protocol="tcp",
        openfirewall=False,
        fetch_result=True,
    )["loadbalancer"]
    show(
        "lb created",
        rule["name"],
        "%s:%s" % (rule["publicip"], rule["publicport"]),
        rule["privateport"],
        rule["protocol"],
        rule["state"],
        "cidrlist=%r" % rule["cidrlist"],
    )
    for lb in api.listLoadBalancerRules(fetch_list=True, publicipid=address["id"]):
        show("lb", lb["name"], lb["publicport"], lb["state"])

    # UDP on the same IP and port: CloudStack refuses it (537), whatever the protocol.
    try:
        api.createLoadBalancerRule(
            name="web-udp-80",
            algorithm="roundrobin",
            privateport=30053,
            publicport=80,
            networkid=network,
            publicipid=address["id"],
            protocol="udp",
            fetch_result=True,
        )
        show("conflict not refused")
    except CloudStackApiException as e:
        error = e.error
        show(
            "conflict",
            e.response.status_code,
            error["errorcode"],
            error["errortext"].split(", conflicts")[0],
        )

    # A failing job (the simulator's control API marks the next one): `cs` raises "Job failure"
    # with the job's `jobresult`.
    base = url.split("/client/api")[0]
    marked = session.post(
        base + "/sim/fail-jobs",
        json={"command": "createLoadBalancerRule", "count": 1},
        timeout=10,
    )
    marked.raise_for_status()
    try:
        api.createLoadBalancerRule(
            name="web-tcp-81",
            algorithm="roundrobin",
            privateport=30081,
            publicport=81,
            networkid=network,
            publicipid=address["id"],
            fetch_result=True,
        )
        show("failing job succeeded")
    except CloudStackApiException as e:
        show("job failed", e.args[0], sorted(e.error), e.error["errorcode"])

    deleted = api.deleteLoadBalancerRule(id=rule["id"], fetch_result=True)
    show("lb deleted", "success=%s" % deleted["success"])
    left = api.listLoadBalancerRules(fetch_list=True, publicipid=address["id"])
    show("lb left", len(left))
    api.deleteFirewallRule(id=firewall["id"], fetch_result=True)
    api.disassociateIpAddress(id=address["id"], fetch_result=True)
    show("tags left", len(api.listTags(fetch_list=True)))
    allocated = api.listPublicIpAddresses(fetch_list=True)
    show(
        "ips left",
        ",".join(sorted((i["ipaddress"] for i in allocated), key=address_key)),
    )


if __name__ == "__main__":
    main()
