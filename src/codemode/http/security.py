"""One HTTP security layer for every route: hosts, origins, tokens, content type, body size.

A browser on the same machine is the attacker this layer is about: any web page can make
it send a "simple" cross-site POST (`text/plain`, no preflight) or rebind a name of its
own to 127.0.0.1. So every route, `/mcp` and the playground alike, goes through the same
checks before anything else sees the request, and `is_loopback` is the one definition
of "this machine" that both the checks and the CLI's token rule use.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemode.http.tokens import StaticTokens
from codemode.limits import MIB

MAX_BODY_BYTES = 1 * MIB
"""Default limit of one request body, in bytes."""

SUBJECT_KEY = "codemode.subject"
"""The scope key under which the middleware leaves the request's subject for routes."""

_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
_DNS_NAME = re.compile(r"[a-z0-9._-]+")
_NAME = r"\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+)"
_PORT = r"(?::(?P<port>[0-9]{1,5}))?"
_HOST = re.compile(rf"(?:{_NAME}){_PORT}", re.IGNORECASE)
_ORIGIN = re.compile(rf"https?://(?:{_NAME}){_PORT}", re.IGNORECASE)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, brackets allowed) can only mean this machine.

    True for "localhost", all of 127.0.0.0/8, `::1` in any spelling and IPv4-mapped
    loopback (`::ffff:127.0.0.1`).
    """
    name = _canonical(host)
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _canonical(name: str) -> str:
    """One spelling per host: lowercase, no brackets, addresses in their short form."""
    name = name.strip().lower().removeprefix("[").removesuffix("]")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@dataclass(frozen=True, slots=True)
class _Address:
    """A host and the port written with it (None when the header leaves it out)."""

    name: str
    port: int | None


def _address(pattern: re.Pattern[str], value: str) -> _Address | None:
    """The host and port named by a Host or Origin header value, or None when malformed."""
    match = pattern.fullmatch(value)
    if match is None:
        return None
    port = None if match["port"] is None else int(match["port"])
    return _Address(_canonical(match["ipv6"] or match["name"]), port)


@functools.lru_cache(maxsize=64)
def _host(value: str) -> tuple[_Address | None, bool]:
    """The host and port a Host header value names (None when malformed), and whether
    that host is this machine. Every request of a client names the same host, and
    parsing it as an address was most of what the checks cost a request; a client that
    varies the header only makes the small cache parse again."""
    address = _address(_HOST, value)
    return address, address is not None and is_loopback(address.name)


def _same_origin(origin: str, host: _Address) -> bool:
    """Whether a browser's `Origin` is the origin the request was sent to: the Host
    header's host and port (a port left out is the scheme's default). A page on another
    port of the same machine is another origin, and another program: it is refused."""
    found = _address(_ORIGIN, origin)
    if found is None:
        return False
    default = _DEFAULT_PORTS[origin.partition(":")[0].lower()]
    port = default if found.port is None else found.port
    return found.name == host.name and port == (default if host.port is None else host.port)


def host_names(values: Iterable[str]) -> frozenset[str]:
    """Host names or addresses to allow, in canonical form.

    Raises ValueError for an entry with a scheme, a port or anything else but a name.
    """
    if isinstance(values, str):
        raise TypeError("allowed hosts must be a collection of host names, not a string")
    names = set()
    for value in values:
        name = _canonical(value)
        if _DNS_NAME.fullmatch(name) is None and not _is_address(name):
            raise ValueError(
                f"allowed host {value!r} must be a bare host name or address (no scheme, no port)"
            )
        names.add(name)
    return frozenset(names)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class SecurityMiddleware:
    """The checks every HTTP request passes before any route sees it.

    In order: the Host header names this server (else 421), a browser's Origin is the
    origin the request was sent to, its host and port (else 403), a non-public path
    carries a valid bearer token (else 401, with `WWW-Authenticate: Bearer`), a POST
    says `Content-Type: application/json` (else 415), and the body stays within
    `max_body_bytes`, counted as it arrives (else 413, sent as soon as the running total
    passes the limit). Each rejection is a fixed JSON body; none echoes the request. A
    passing request reaches the app with its subject under `SUBJECT_KEY` in the scope
    (read it with `subject_of`) and its body already read.

    **Parameters:**

    - `host`: the address the server binds. Loopback names (any port) are always
      allowed; so is a specific non-loopback bind address, but not a wildcard one.
    - `allowed_hosts`: further host names or addresses (no port) that clients use,
      e.g. the public name of a proxy in front of the server.
    - `tokens`: the bearer tokens; without them every request runs as `subject`.
    - `public_paths`: paths served without a token (the page and its assets); an
      entry ending in `*` is a prefix.
    - `max_body_bytes`: the largest request body accepted.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = "127.0.0.1",
        allowed_hosts: Iterable[str] = (),
        tokens: StaticTokens | None = None,
        subject: str = "local",
        public_paths: Iterable[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.app = app
        self._names = host_names(allowed_hosts)
        bind = _canonical(host)
        if bind not in _WILDCARD_BINDS and not is_loopback(bind):
            self._names |= {bind}
        self._tokens = tokens
        self._subject = subject
        paths = tuple(public_paths)
        self._public = frozenset(p for p in paths if not p.endswith("*"))
        self._public_prefixes = tuple(p[:-1] for p in paths if p.endswith("*"))
        self._max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Lifespan has no request; no route serves a websocket.
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        rejection = self._check(scope, headers)
        if rejection is None:
            messages = await self._read_body(receive)
            if messages is None:
                rejection = _BODY_TOO_LARGE
            else:
                await self.app(scope, _replay(messages, receive), send)
                return
        await rejection(scope, receive, send)

    def _check(self, scope: Scope, headers: Headers) -> _Rejection | None:
        host, loopback = _host(headers.get("host", ""))
        if host is None or not (loopback or host.name in self._names):
            return _HOST_NOT_ALLOWED
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return _ORIGIN_NOT_ALLOWED
        if not self._is_public(scope):
            subject = self._authenticate(headers.get("authorization", ""))
            if subject is None:
                return _INVALID_TOKEN
            scope[SUBJECT_KEY] = subject
        if scope["method"] == "POST" and not _is_json(headers.get("content-type", "")):
            return _JSON_REQUIRED
        if _declared_length(headers) > self._max_body_bytes:
            return _BODY_TOO_LARGE
        return None

    def _is_public(self, scope: Scope) -> bool:
        path = route_path(scope)
        return path in self._public or path.startswith(self._public_prefixes)

    def _authenticate(self, authorization: str) -> str | None:
        if self._tokens is None:
            return self._subject
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self._tokens.subject(token.strip())

    async def _read_body(self, receive: Receive) -> list[Message] | None:
        """The request's messages up to its last body chunk, or None past the limit."""
        messages: list[Message] = []
        total = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            total += len(message.get("body", b""))
            if total > self._max_body_bytes:
                return None
            if not message.get("more_body", False):
                return messages


def route_path(scope: Mapping[str, Any]) -> str:
    """The request's path below the prefix a proxy serves this under (`--root-path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def subject_of(scope: Mapping[str, Any]) -> str | None:
    """The subject `SecurityMiddleware` authenticated for this request, if any."""
    subject = scope.get(SUBJECT_KEY)
    return subject if isinstance(subject, str) else None


def _declared_length(headers: Headers) -> int:
    """The Content-Length, or 0 when absent or malformed (the streamed count still holds)."""
    try:
        return int(headers.get("content-length", "0"))
    except ValueError:
        return 0


def _is_json(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = deque(messages)

    async def replay() -> Message:
        return pending.popleft() if pending else await receive()

    return replay


@dataclass(frozen=True, slots=True)
class _Rejection:
    """A fixed answer: a status and a short JSON body that names the rule, nothing else."""

    status: int
    error: str

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        response = JSONResponse({"error": self.error}, status_code=self.status, headers=headers)
        await response(scope, receive, send)


_HOST_NOT_ALLOWED = _Rejection(421, "host_not_allowed")
_ORIGIN_NOT_ALLOWED = _Rejection(403, "origin_not_allowed")
_INVALID_TOKEN = _Rejection(401, "invalid_token")
_JSON_REQUIRED = _Rejection(415, "json_required")
_BODY_TOO_LARGE = _Rejection(413, "body_too_large")


__all__ = [
    "MAX_BODY_BYTES",
    "SUBJECT_KEY",
    "SecurityMiddleware",
    "host_names",
    "is_loopback",
    "route_path",
    "subject_of",
]
