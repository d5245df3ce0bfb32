"""A REST API described by an OpenAPI document as a source: `CodeMode.add_openapi`.

Each operation becomes `name.<operationId in snake_case>`, built as every capability is,
so describe, binding, policies, budgets and audit treat it as they treat the rest. The
API's credentials and the host's headers stay here, on the host's side of the boundary.
Its connection pool lives on the sources' loop, as every source's I/O does.

An operation's `x-codemode-hints` are what policies read to tell a read from a
destruction, so they are trusted only from a document the host gave (a file or a dict):
a document fetched from a URL is the API's own word about itself, and its operations get
their method's hints unless the host says `trust_hints=True`.
"""

from __future__ import annotations

import asyncio
import base64
import difflib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import anyio.to_thread

from codemode.capabilities import Capability
from codemode.errors import RegistrationError
from codemode.limits import Limits
from codemode.sources import remote
from codemode.sources.bulk import building
from codemode.sources.openapi import secrets
from codemode.sources.openapi.capabilities import Shared, operation_capability
from codemode.sources.openapi.client import Api, Credential
from codemode.sources.openapi.document import Document, SpecError, load, resolve
from codemode.sources.openapi.operations import Operation, Reading, chosen, operations
from codemode.sources.schema import Hints, camel

log = logging.getLogger("codemode.openapi")

Spec = str | os.PathLike[str] | Mapping[str, Any]
Secret = str | tuple[str, str]


class OpenApi:
    """A REST API whose operations are capabilities `name.<operationId in snake_case>`
    (`listPets` -> `pets.list_pets`; `CodeMode.add_openapi` adds one).

    `spec` is a path, an `http(s)` URL, or a parsed dict, in JSON or YAML (OpenAPI 3.0 or
    3.1). Requests go to `base_url`, else the document's one server, else the origin it
    was fetched from. `headers` go with every request, and `auth` maps a security scheme
    of the document to its secret (a `(user, password)` pair for HTTP basic): neither
    ever reaches a program, an error or the log. `include` and `exclude` take operation
    ids, tags or `"METHOD /path"` patterns (`*` matches anything). `timeout` bounds one
    request in seconds (a `capability failed` the program can catch).
    `x-codemode-hints` in the document refine the method's hints policies read only when
    `trust_hints` (by default, for a file or a dict, not a fetched URL). A 4xx answer fails
    the call with its status and the fields of the error body the document declares;
    nothing else the API writes reaches the model. `max_bytes` is the most one response
    may hold (`Limits.max_total_result_bytes` by default). The options are checked here
    (RegistrationError); the document is read when it opens (fetched once, for a URL), on
    a worker thread, and its operations never change after.
    """

    kind = "REST API"

    def __init__(
        self,
        name: str,
        *,
        spec: Spec,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Mapping[str, Secret] | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        timeout: float | None = None,
        trust_hints: bool | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.name = name = remote.namespace(name, self.kind)
        remote.check_options(f'REST API "{name}"', timeout, include=include, exclude=exclude)
        self._read: Callable[..., Read] | None = functools.partial(
            read,
            name,
            spec=spec,
            base_url=base_url,
            headers=headers,
            auth=auth,
            include=tuple(include) if include is not None else None,
            exclude=tuple(exclude or ()),
            timeout=timeout,
            max_bytes=Limits().max_total_result_bytes if max_bytes is None else max_bytes,
            trust_hints=trust_hints,
        )
        self._api: Api | None = None
        self._capabilities: list[Capability] = []

    def __repr__(self) -> str:
        return f"OpenApi({self.name!r})"

    async def open(self) -> None:
        """Read the document and build its operations' capabilities; RegistrationError
        naming the API for anything that cannot be used."""
        loop = asyncio.get_running_loop()
        reading, self._read = self._read, None  # the document is not kept once read
        if reading is None:
            raise RegistrationError(f'REST API "{self.name}": it is open already')
        found = await anyio.to_thread.run_sync(lambda: _built(reading, loop))
        self._api, self._capabilities = found.api, found.capabilities
        log.info(
            "REST API %s: %d operations as capabilities (%d left out)",
            self.name,
            len(found.capabilities),
            found.left_out,
        )

    def capabilities(self) -> list[Capability]:
        """Every operation's capability that could be read."""
        return list(self._capabilities)

    def changes(self) -> AsyncIterator[Sequence[Capability] | None] | None:
        """None: a document is read once."""
        return None

    async def close(self) -> None:
        """Close the API's connection pools."""
        api, self._api = self._api, None
        if api is not None:
            await anyio.to_thread.run_sync(api.close)


def _built(reading: Callable[..., Read], loop: asyncio.AbstractEventLoop) -> Read:
    with building():  # thousands of operations at once
        return reading(loop=loop)


@dataclass(frozen=True)
class Read:
    """A REST API's document, read: its client and the capabilities of its operations."""

    api: Api
    capabilities: list[Capability]
    left_out: int
    """Operations of the document that are not capabilities (excluded, or skipped)."""


def read(
    name: str,
    *,
    spec: Spec,
    base_url: str | None,
    headers: Mapping[str, str] | None,
    auth: Mapping[str, Secret] | None,
    include: Sequence[str] | None,
    exclude: Sequence[str],
    timeout: float | None,
    max_bytes: int,
    trust_hints: bool | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Read:
    """Read the document and build its operations' capabilities (not yet in a catalog);
    RegistrationError naming the API for anything that cannot be used. `trust_hints`:
    whether the operations' `x-codemode-hints` count; None trusts a file's or a dict's,
    not a fetched document's. `loop`: where the requests go out (None: the caller's)."""
    try:
        document = load(spec)
        schemes = _schemes(document)
        credentials = _credentials(schemes, auth or {})
        url, userinfo = _userinfo(_base_url(document, base_url))
        host_headers = {str(k): str(v) for k, v in (headers or {}).items()}
        keys = {
            (str(s.get("in")), str(s.get("name", "")).lower())
            for s in schemes.values()
            if s.get("type") == "apiKey"
        }
        sent = {("header", k.lower()) for k in host_headers} | keys
        found_secrets = _secrets(credentials, host_headers, userinfo, keys)
        sent |= {  # the host's own cookies, which win over an argument's of the same name
            ("cookie", part.split("=", 1)[0].strip().lower())
            for k, v in host_headers.items()
            if k.lower() == "cookie"
            for part in v.split(";")
        }
        reading = operations(document, sent, name)
        found = chosen(reading.operations, include, exclude)
    except SpecError as exc:
        raise RegistrationError(f'REST API "{name}": {exc}') from None
    except (RecursionError, ValueError) as exc:  # a document too deep, a path with a NUL
        raise RegistrationError(
            f'REST API "{name}": the document cannot be read ({type(exc).__name__})'
        ) from None
    if trust_hints is None and document.origin is not None:
        _distrust(name, found, "the document was fetched from a URL (trust_hints=True trusts it)")
    elif trust_hints is False:
        _distrust(name, found, "the host does not trust them (trust_hints=False)")
    security = document.root.get("security")
    authorization = None
    if userinfo is not None:
        pair = f"{userinfo[0]}:{userinfo[1]}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode()
    api = Api(
        name,
        url,
        headers=host_headers,
        credentials=credentials,
        security=security if isinstance(security, list) else [],
        timeout=timeout,
        max_bytes=max_bytes,
        secrets=found_secrets,
        authorization=authorization,
    )
    try:
        built = _capabilities(name, found, api, reading, loop)
        return Read(api, built, reading.declared - len(built))
    except BaseException:
        api.close()
        raise


def _distrust(name: str, found: list[Operation], why: str) -> None:
    """Drop the operations' own hints: each gets its method's (see the module docstring)."""
    hinted = [operation for operation in found if operation.hints]
    for operation in hinted:
        operation.hints = {}
    if hinted:
        log.warning(
            "REST API %s: x-codemode-hints not used (%d operation%s): %s; their methods' "
            "hints apply",
            name,
            len(hinted),
            "" if len(hinted) == 1 else "s",
            why,
        )


def _userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` without its `user:password@`, and the user and password it held (decoded,
    as HTTP basic sends them), which become the requests' `Authorization`."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    written, _, where = parts.netloc.rpartition("@")
    user, _, password = written.partition(":")
    return urlunsplit(parts._replace(netloc=where)), (unquote(user), unquote(password))


def _secrets(
    credentials: Mapping[str, Credential],
    headers: Mapping[str, str],
    userinfo: tuple[str, str] | None,
    keys: set[tuple[str, str]],
) -> list[str]:
    """Every credential a request may carry (`secrets` says which); SpecError for one too
    short to blank out, naming where it is (never the secret)."""
    found: list[str] = []
    for credential in credentials.values():
        what = f'auth "{credential.scheme}"'
        if credential.kind == "basic":
            user, _, password = credential.secret.partition(":")
            found += secrets.basic(user, password, what)
        else:
            found += secrets.token(credential.secret, what)
    if userinfo is not None:
        found += secrets.basic(*userinfo, "base_url")
    declared = frozenset(name for where, name in keys if where in ("header", "cookie"))
    for key, value in headers.items():
        found += secrets.header(key, value, declared)
    return found


def _capabilities(
    name: str,
    found: list[Operation],
    api: Api,
    reading: Reading,
    loop: asyncio.AbstractEventLoop | None,
) -> list[Capability]:
    """The operations' capabilities, their shapes shared: a schema many operations refer
    to is one type, read once (its keywords were checked as it was converted)."""
    shared = Shared(
        requests=Hints({"$defs": reading.requests.defs}, camel(name)),
        responses=Hints({"$defs": reading.responses.defs}, camel(name)),
        loop=loop,
    )
    leaves: dict[str, Operation] = {}
    built: list[Capability] = []
    for operation in found:
        other = leaves.get(operation.leaf)
        if other is not None:
            raise RegistrationError(
                f'REST API "{name}": operations {other.route} and {operation.route} both '
                f'become "{name}.{operation.leaf}"; exclude one of them'
            )
        leaves[operation.leaf] = operation
        capability = remote.readable(
            functools.partial(operation_capability, name, operation, api, shared),
            functools.partial(
                log.warning, "REST API %s: operation %s skipped: %s", name, operation.route
            ),
            projection=False,  # made at its first call: a thousand operations register fast
        )
        if capability is not None:
            built.append(capability)
    return built


def _schemes(document: Document) -> dict[str, Mapping[str, Any]]:
    components = document.root.get("components") or {}
    schemes = components.get("securitySchemes") if isinstance(components, Mapping) else None
    if not isinstance(schemes, Mapping):
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    for key, scheme in schemes.items():
        target, _ = resolve(document, scheme, document.uri)
        if isinstance(target, Mapping):
            found[str(key)] = target
    return found


def _credentials(
    schemes: Mapping[str, Mapping[str, Any]], auth: Mapping[str, Secret]
) -> dict[str, Credential]:
    """Each `auth` entry as how its scheme sends it; SpecError for a scheme the document
    does not declare or a secret of the wrong form (never with the secret in it)."""
    found: dict[str, Credential] = {}
    for key, secret in auth.items():
        scheme = schemes.get(key)
        if scheme is None:
            close = difflib.get_close_matches(key, list(schemes), n=1, cutoff=0.6)
            hint = (
                f'did you mean "{close[0]}"?'
                if close
                else "it has: " + (", ".join(schemes) or "none")
            )
            raise SpecError(
                f'auth names the security scheme "{key}", which is not declared; {hint}'
            )
        kind, where = scheme.get("type"), scheme.get("in")
        http_scheme = str(scheme.get("scheme", "")).lower()
        if kind == "http" and http_scheme == "basic":
            if not (
                isinstance(secret, tuple | list)
                and len(secret) == 2
                and all(isinstance(part, str) for part in secret)
            ):
                raise SpecError(
                    f'auth "{key}" is HTTP basic: give a (user, password) pair '
                    '(["user", "password"] in a config file)'
                )
            if ":" in secret[0]:
                raise SpecError(f'auth "{key}": the user of HTTP basic must not hold ":"')
            found[key] = Credential(key, "basic", secret=f"{secret[0]}:{secret[1]}")
            continue
        if not isinstance(secret, str) or not secret:
            raise SpecError(f'auth "{key}" must be a non-empty string')
        if any(ch in secret for ch in "\r\n\0"):
            raise SpecError(f'auth "{key}" holds a line break')
        if kind == "apiKey" and where in ("header", "query", "cookie"):
            name = scheme.get("name")
            if not isinstance(name, str) or not name:
                raise SpecError(f'security scheme "{key}" names no {where} to send the key in')
            found[key] = Credential(key, where, name=name, secret=secret)
        elif (kind == "http" and http_scheme == "bearer") or kind in ("oauth2", "openIdConnect"):
            found[key] = Credential(key, "bearer", secret=secret)
        else:
            raise SpecError(
                f'security scheme "{key}" ({kind} {http_scheme or where}) is not supported'
            )
    return found


def _base_url(document: Document, given: str | None) -> str:
    """Where requests go: `base_url`, else the document's one server (relative to where
    it was fetched), else the origin it was fetched from."""
    if given is not None:
        url = given
    else:
        listed = document.root.get("servers")
        named = isinstance(listed, list) and bool(listed)
        servers: list[Any] = listed if isinstance(listed, list) and listed else [{"url": "/"}]
        if len(servers) > 1:
            raise SpecError("the document names several servers; give base_url")
        server = servers[0] if isinstance(servers[0], Mapping) else {}
        url = _filled(str(server.get("url", "/")), server.get("variables"))
        if not urlsplit(url).scheme:
            if document.origin is None:
                raise SpecError(
                    f"the document's server is {url!r}, relative to no URL; give base_url"
                    if named
                    else "the document names no server; give base_url"
                )
            url = urljoin(document.uri, url)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        shown = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        raise SpecError(f"base_url must be an http(s) URL, not {shown!r}")
    if parts.query or parts.fragment:
        raise SpecError("base_url must not hold a query or a fragment")
    return url


def _filled(url: str, variables: Any) -> str:
    """A server URL with each `{variable}` as its default."""
    for key, variable in (variables or {}).items() if isinstance(variables, Mapping) else ():
        if isinstance(variable, Mapping) and "default" in variable:
            url = url.replace("{" + str(key) + "}", str(variable["default"]))
    return url


__all__ = ["OpenApi", "Read", "Secret", "Spec", "read"]
