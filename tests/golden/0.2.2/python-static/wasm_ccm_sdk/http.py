"""A `requests`-like client over the host's `http` import (the only way out of the sandbox: the
host checks every request against the egress grants). Statuses map to provider errors as in the
Rust SDK: 404 NotFound, 401/403 Unauthorized, 429 RateLimited, 5xx Transient, other 4xx
Permanent."""
import json as _json

from componentize_py_types import Err
from wit_world.imports import http as _h

from .errors import InvalidConfig, NotFound, Permanent, RateLimited, Transient, Unauthorized

BODY_SNIPPET_LIMIT = 512
_METHODS = {m.name: m for m in _h.Method}


def display_url(url):
    """`url` without query, fragment or credentials, for messages."""
    url = url.split("?", 1)[0].split("#", 1)[0]
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rsplit('@', 1)[-1]}{slash}{path}"


def body_snippet(body):
    text = " ".join(bytes(body).decode("utf-8", "replace").split())
    return text if len(text) <= BODY_SNIPPET_LIMIT else text[:BODY_SNIPPET_LIMIT] + "…"


def encode_path_segment(s):
    """Percent-encodes everything but RFC 3986's unreserved characters."""
    safe = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~"
    return "".join(chr(b) if b in safe else f"%{b:02X}" for b in s.encode())


class Response:
    """A response: `status`, `headers` (pairs), `body` (bytes)."""

    def __init__(self, url, r):
        self.url, self.status, self.headers, self.body = url, r.status, r.headers, bytes(r.body)

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise Transient(
                f"unexpected response from {display_url(self.url)}: expected JSON: {e}; body: {body_snippet(self.body)}")

    def error_for_status(self):
        """Itself for a status below 400; else raises the provider error the status means."""
        if self.status < 400:
            return self
        snippet = body_snippet(self.body)
        msg = f"HTTP {self.status} from {display_url(self.url)}" + (f": {snippet}" if snippet else "")
        if self.status == 404:
            raise NotFound(msg)
        if self.status in (401, 403):
            raise Unauthorized(msg)
        if self.status == 429:
            ra = (self.header("retry-after") or "").strip()
            raise RateLimited(int(ra) if ra.isdigit() else None)
        if 500 <= self.status <= 599:
            raise Transient(msg)
        raise Permanent(msg)


def send(method, url, headers=(), body=b"", json=None, bearer=None, timeout_ms=None):
    """Sends a request; `json` is serialised as the body, `bearer` becomes the Authorization
    header. Transport failures raise Transient (timeouts, connections) or InvalidConfig (a
    destination outside the egress grants)."""
    headers = list(headers)
    if json is not None:
        body = _json.dumps(json, separators=(",", ":")).encode()
        headers.append(("content-type", "application/json"))
    if bearer:
        headers.append(("authorization", f"Bearer {bearer}"))
    req = _h.Request(_METHODS[method.upper()], url, headers, body, timeout_ms)
    try:
        return Response(url, _h.send(req))
    except Err as e:
        v = e.value  # the WIT http-error
        if isinstance(v, _h.HttpError_Timeout):
            raise Transient(f"HTTP timeout: {v.value}")
        if isinstance(v, _h.HttpError_Connect):
            raise Transient(f"HTTP connect: {v.value}")
        if isinstance(v, _h.HttpError_Denied):
            raise InvalidConfig(v.value)
        if isinstance(v, _h.HttpError_TooLarge):
            # The request body or the response: the host's text says which.
            raise Permanent(f"HTTP too large: {v.value}")
        raise Permanent(f"invalid HTTP request: {v.value}")


def get(url, **kw):
    return send("GET", url, **kw)


def put(url, **kw):
    return send("PUT", url, **kw)


def post(url, **kw):
    return send("POST", url, **kw)


def delete(url, **kw):
    return send("DELETE", url, **kw)
