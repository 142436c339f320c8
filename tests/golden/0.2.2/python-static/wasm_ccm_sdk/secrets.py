"""Constructors for `ProviderInfo.secrets`: the credentials a driver declares so that the host
keeps them out of the guest (`init` receives placeholders; the host applies the values to
requests for their origin, in the declared uses only).

    from wasm_ccm_sdk import secrets

    secrets.decl("access-token",
                 at=[secrets.env("EXAMPLE_API_TOKEN")],
                 origin=secrets.origin([secrets.env("EXAMPLE_API_URL")], "https://api.example.com"),
                 uses=[secrets.bearer()])

The values are the generated binding types (`SecretDecl`, `SecretLocation_Env`, …), so a driver
may also build them directly.
"""
from wit_world.imports import types as _t


def env(name):
    """The environment variable `name` (it must start with one of the driver's `env_prefixes`)."""
    return _t.SecretLocation_Env(name)


def ini(section, key):
    """The key `key` of section `section` of an INI `--cloud-config` file."""
    return _t.SecretLocation_Ini((section, key))


def json(pointer):
    """The string member at JSON Pointer `pointer` (e.g. `/clientSecret`) of a JSON config."""
    return _t.SecretLocation_Json(pointer)


def origin(settings, default_url=""):
    """Where the secret may go: the URL in the first present of `settings`, else `default_url`
    (empty: one of the settings is required)."""
    return _t.SecretOrigin(settings=list(settings), default_url=default_url)


def bearer():
    """`Authorization: Bearer <secret>`."""
    return _t.SecretUse_Bearer()


def header(name):
    """The whole value of header `name`."""
    return _t.SecretUse_Header(name)


def param(name):
    """Query parameter or form field `name`."""
    return _t.SecretUse_Param(name)


def basic_user():
    """The user of `Authorization: Basic`."""
    return _t.SecretUse_BasicUser()


def basic_password():
    """The password of `Authorization: Basic`."""
    return _t.SecretUse_BasicPassword()


def cloudstack_signature():
    """The key the host signs CloudStack requests with."""
    return _t.SecretUse_CloudstackSignature()


def oauth2_client(token_path, token_origins):
    """An OAuth2 client-credentials token endpoint at `token_path` on the origin; the host seals
    the access token and sends it only as a bearer token to `token_origins`."""
    return _t.SecretUse_Oauth2Client(
        _t.Oauth2Seal(token_path=token_path, token_origins=list(token_origins)))


def decl(name, at, origin, uses):
    """A secret named `name` (`[a-z0-9-]`), found at the locations `at`, sent only to `origin`,
    in the ways `uses` lists."""
    return _t.SecretDecl(name=name, at=list(at), origin=origin, uses=list(uses))
