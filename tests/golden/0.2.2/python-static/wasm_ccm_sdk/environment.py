"""The `environment` export (contract 0.2.1): which environment variables the driver reads.

Every world exports it since 0.2.1, so every Python driver defines `Environment` in its app
module. This default declares nothing (`None`): `init` then gets every variable with one of the
driver's `env_prefixes`, as in 0.2.0. To get an allow-list instead (only the named variables, the
places of the declared secrets and their origins' settings), define your own:

    @export
    class Environment(exports.Environment):
        def plain_variables(self):
            return ["EXAMPLE_REGION", "EXAMPLE_TIMEOUT"]

and import this one only when you declare nothing (`from wasm_ccm_sdk import Environment`).
"""
from wit_world import exports

from .export import export


@export
class Environment(exports.Environment):
    def plain_variables(self):
        return None
