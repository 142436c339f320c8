"""Signs requests with CloudStack's own Python client (`cs` from PyPI), for
crates/runtime/tests/cloudstack_signing_fidelity.rs:

    python cloudstack_sign.py REQUESTS_JSON

REQUESTS_JSON holds a list of {"secret": str, "params": [[name, value], ...]}. Each request is
signed by `cs.CloudStack._sign` itself (the method `cs` calls before every request), and one line
per request is printed: the signature `cs` put into the parameters. Nothing is sent anywhere.
"""

import json
import sys

from cs import CloudStack


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    for request in requests:
        # No request is made: the endpoint is never contacted, only the signer is used.
        client = CloudStack(endpoint="http://127.0.0.1:9/client/api", secret=request["secret"])
        data = dict(request["params"])
        client._sign(data)
        print(data["signature"], flush=True)


if __name__ == "__main__":
    main()
