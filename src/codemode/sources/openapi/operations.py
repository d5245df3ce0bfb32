"""A document's operations, each read as what one capability needs: its name, its
arguments with where each goes on the wire, its request body and its declared responses.

An operation's arguments are its path, query, header and cookie parameters and, for a
JSON (or form) object body, that body's properties, each named as the document spells it.
A name two locations share keeps its spelling in the first of path, query, header,
cookie, body and gets the location as a suffix in the others (`id`, `id_body`). Header
parameters that carry a credential (a security scheme's, `Authorization`) or that the
host sets are not arguments: the host's side sends them.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from codemode.sources.openapi.document import Document, Schemas, SpecError, resolve
from codemode.sources.schema import SchemaError, identifier, resolved

log = logging.getLogger("codemode.openapi")

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
Location = Literal["path", "query", "header", "cookie", "body"]
_ORDER: tuple[Location, ...] = ("path", "query", "header", "cookie", "body")
_STYLES = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
_JSON = re.compile(r"(?i)^application/(.+\+)?json$")
_FORM = "application/x-www-form-urlencoded"
_IGNORED_HEADERS = frozenset(
    [
        # OpenAPI's own: the client sets them
        *("accept", "content-type", "authorization"),
        # the request's framing, its connection and its hops
        *("host", "transfer-encoding", "connection", "keep-alive", "te", "trailer"),
        *("upgrade", "expect", "via", "max-forwards", "accept-encoding", "cookie"),
        # which part of the body is answered (a partial body is not the declared one)
        *("range", "if-range"),
        # where the request came from or was meant to go, as proxies tell an app
        *("forwarded", "x-host", "x-client-ip", "true-client-ip", "client-ip"),
        *("x-cluster-client-ip",),
        # which page sent it, which CSRF defenses trust (as they do a browser's `Sec-*`)
        *("origin", "referer"),
        *("x-http-method", "x-http-method-override", "x-method-override"),
    ]
)
_IGNORED_PREFIXES = (
    "content-",  # the body's framing: Content-Length, Content-Encoding, ...
    "proxy-",  # hop-by-hop: Proxy-Authorization, Proxy-Connection
    "sec-",  # a browser's own (Sec-Fetch-Site), which CSRF defenses trust
    # where the request came from or was meant to go, as proxies tell an app
    "x-forwarded-",  # X-Forwarded-For, -Host, -Proto, -Prefix, -Port, -User, ...
    "x-original-",  # X-Original-URL, X-Original-Method, ...
    "x-originating-",  # X-Originating-IP, X-Originating-URL
    "x-rewrite-",
    "x-real-",  # X-Real-IP
    # who the caller is, as an auth proxy in front of the API asserts it
    "remote-",  # Remote-User, Remote-Groups, Remote-Addr (Authelia, Authentik, Caddy)
    "x-remote-",  # X-Remote-User, X-Remote-Group, X-Remote-IP (Apache, Kubernetes)
    "x-auth-request-",  # oauth2-proxy's X-Auth-Request-User, -Email, -Access-Token
    "x-webauth-",  # Grafana's auth proxy
    "x-authentik-",
    "x-pomerium-",
    "x-ssl-client-",  # a client certificate a TLS-ending proxy checked
    "ssl-client-",
    "x-client-cert",
    # what a framework's own hops carry
    "x-middleware-",  # Next.js: X-Middleware-Subrequest skips its middleware
    "x-invoke-",
    "x-nextjs-",
    # the namespaces of the gateways, load balancers and CDNs in front of APIs
    "x-envoy-",  # X-Envoy-Original-Path, X-Envoy-Internal, ...
    "cf-",  # Cloudflare: CF-Connecting-IP, CF-Access-Jwt-Assertion, ...
    "fastly-",
    "akamai-",
    "x-akamai-",
    "x-azure-",  # Azure Front Door: X-Azure-FDID, X-Azure-ClientIP
    "x-arr-",  # Azure App Service: X-ARR-ClientCert
    "x-ms-client-principal",  # Azure App Service authentication
    "x-ms-token-",
    "x-amzn-oidc-",  # AWS load balancers' authentication
    "x-goog-iap-",  # Google's Identity-Aware Proxy
    "x-goog-authenticated-user-",
    "x-appengine-",
    "x-vercel-",
    "fly-",
)
"""Header parameters that are not arguments: those OpenAPI says the client sets, those
that frame the request, and those the infrastructure in front of an API sets and the API
trusts because that infrastructure does: where the request came from, was meant to go or
was sent by, who the caller is, and a gateway's, a load balancer's, a CDN's or a
framework's own (a program's `Host` or `Content-Length` would send the request elsewhere
or smuggle another; an `X-Forwarded-Prefix`, `X-Real-IP` or `X-Remote-User` would speak
for the proxies in front of the API). A whole family is refused by its prefix, as
proxies and frameworks keep adding members to each; a vendor's own namespace is refused
whole only where it is its infrastructure's (`CF-`, `X-Envoy-`), and by member where its
APIs use it for their arguments too (`X-Amz-`, `X-Goog-`, `X-MS-`)."""


def header_name(name: str) -> str:
    """A header's name as servers compare them: without case, and any character but a
    letter or a digit as `-` (CGI and WSGI servers read `X_Forwarded_For` as
    `X-Forwarded-For`)."""
    return re.sub(r"[^0-9a-z]", "-", name.lower())


def ignored_header(name: str) -> bool:
    """Whether a header parameter of this name is not an argument (see above)."""
    lower = header_name(name)
    return lower in _IGNORED_HEADERS or lower.startswith(_IGNORED_PREFIXES)


@dataclass(frozen=True)
class Argument:
    """One keyword argument, and where and how it is sent."""

    key: str
    """Its name in the argument document (the document's spelling, suffixed on a clash)."""
    wire: str
    """Its name on the wire."""
    location: Location
    style: str = "simple"
    explode: bool = False
    json: bool = False
    """Sent as JSON text (a parameter with `content: application/json`)."""
    segments: bool = False
    """A path parameter that may span segments (`x-multi-segment: true`, as GitHub's
    `path` of a file): its `/` stay, each segment between them encoded."""
    taken: frozenset[str] = frozenset()
    """For a query object sent as parameters of its own (`form`, exploded): the names
    none of its keys may have, `folded`: every other name the request may carry in its
    query, path, cookies or body fields (as servers that merge them into one set of
    parameters read them), the API keys', and the declared keys of the operation's other
    such objects, each whole and up to a `[` or `.` (as servers that read `a[b]` or `a.b`
    as part of `a` do)."""

    @property
    def spread(self) -> bool:
        """Whether an object's keys are sent as query parameters of their own."""
        return self.location == "query" and self.style == "form" and self.explode and not self.json


@dataclass(frozen=True)
class Media:
    """What a response (or request) body of one status holds."""

    kind: Literal["json", "text", "binary", "none"]
    schema: Any = None
    """Its converted schema, for `json` (None: undeclared)."""
    types: tuple[str, ...] = ()
    """The media types it declares, for `binary` (what a program is told it got)."""


@dataclass
class Operation:
    """One operation of the document, ready to become a capability."""

    leaf: str
    """The capability name's last part (`list_pets`)."""
    method: str
    path: str
    operation_id: str | None
    summary: str
    description: str
    tags: tuple[str, ...]
    arguments: list[Argument]
    input_schema: dict[str, Any]
    """The arguments as one object schema, by key, with the `$defs` it reaches."""
    body: Literal["json", "form", "text"] | None
    body_flat: bool
    """Whether the body's properties are arguments (else it is the `body` argument)."""
    body_required: bool
    responses: dict[str, Media]
    """By status as the document writes it (`200`, `2XX`, `default`)."""
    response_defs: dict[str, Any]
    security: list[dict[str, list[str]]] | None
    """Its own `security` (alternatives of schemes), None to use the document's."""
    hints: dict[str, Any] = field(default_factory=dict)

    @property
    def route(self) -> str:
        return f"{self.method.upper()} {self.path}"


def snake(name: str) -> str:
    """`listPets` -> `list_pets`, `getHTTPStatus` -> `get_http_status`, `pets/list` ->
    `pets_list`: a name as a Python programmer would write it."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text)
    text = re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower()
    return identifier(re.sub(r"_+", "_", text), lead="op_")


def default_name(method: str, path: str) -> str:
    """The name of an operation without an `operationId`: its method and its path's
    words, `GET /pets/{petId}/photos` -> `get_pets_pet_id_photos`."""
    return snake(f"{method} {path.replace('{', ' ').replace('}', ' ')}")


@dataclass(frozen=True)
class Reading:
    """A document's operations, and the schemas they share (one `$defs` per direction)."""

    operations: list[Operation]
    requests: Schemas
    responses: Schemas
    declared: int
    """How many operations the document declares, the skipped ones included."""


def operations(document: Document, credentials: set[tuple[str, str]], api: str = "") -> Reading:
    """Every operation the document declares; one that cannot be read is skipped with a
    warning naming the `api`, the operation and why. `credentials` are the (location,
    lower-case name) pairs the host's side sends, which are not arguments."""
    requests = Schemas(document, "request")
    responses = Schemas(document, "response")
    found: list[Operation] = []
    declared = 0
    paths = document.root.get("paths") or {}
    for path, item in paths.items():
        item, base = resolve(document, item, document.uri)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            spec = item.get(method)
            if not isinstance(spec, Mapping):
                continue
            declared += 1
            try:
                found.append(
                    _operation(
                        document,
                        requests,
                        responses,
                        method,
                        path,
                        spec,
                        shared,
                        base,
                        credentials,
                    )
                )
            except (SchemaError, SpecError) as exc:
                log.warning(
                    "REST API %s: operation %s %s skipped: %s", api, method.upper(), path, exc
                )
            except Exception as exc:  # a document of the wrong shape here (`responses: 5`)
                log.warning(
                    "REST API %s: operation %s %s skipped: it cannot be read (%s)",
                    api,
                    method.upper(),
                    path,
                    type(exc).__name__,
                )
    return Reading(found, requests, responses, declared)


def _operation(
    document: Document,
    requests: Schemas,
    responses: Schemas,
    method: str,
    path: str,
    spec: Mapping[str, Any],
    shared: Sequence[Any],
    base: str,
    credentials: set[tuple[str, str]],
) -> Operation:
    if not path.startswith("/"):
        raise SpecError(f"its path {path!r} does not start with /")
    hosts = {(w, header_name(n) if w == "header" else n) for w, n in credentials}
    """What the host's side sends, a header's name as servers compare them."""
    parameters: dict[tuple[str, str], tuple[Mapping[str, Any], str]] = {}
    for raw in [*shared, *(spec.get("parameters") or [])]:  # the operation's win
        parameter, where = resolve(document, raw, base)
        if not isinstance(parameter, Mapping) or not isinstance(parameter.get("name"), str):
            raise SpecError("a parameter has no name")
        parameters[(parameter["name"], str(parameter.get("in")))] = (parameter, where)
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []
    wanted: list[tuple[Location, str, Any, bool, dict[str, Any]]] = []
    """(location, wire name, converted schema, required, how it is sent)."""
    for (name, location), (parameter, where) in parameters.items():
        if location not in _STYLES:
            raise SpecError(f'parameter "{name}" is in {location!r}')
        spelled = header_name(name) if location == "header" else name.lower()
        if (location, spelled) in hosts or (location == "header" and ignored_header(name)):
            continue
        style = parameter.get("style", "form" if location in ("query", "cookie") else "simple")
        if style not in _STYLES[location]:
            raise SpecError(f'parameter "{name}" has style {style!r}, not one for {location}')
        how: dict[str, Any] = {
            "style": style,
            "explode": parameter.get("explode", style == "form") is True,
            "segments": location == "path" and parameter.get("x-multi-segment") is True,
        }
        schema = parameter.get("schema")
        content = parameter.get("content")
        if schema is None and isinstance(content, Mapping) and content:
            media, body = next(iter(content.items()))
            if not _JSON.match(str(media)):
                raise SpecError(f'parameter "{name}" is sent as {media}')
            schema, how["json"] = (body or {}).get("schema", {}), True
        converted = requests.convert(schema if schema is not None else {}, where)
        if isinstance(parameter.get("description"), str):
            converted = {**converted, "description": parameter["description"]}
        is_required = location == "path" or parameter.get("required") is True
        wanted.append((location, name, converted, is_required, how))  # type: ignore[arg-type]
    body_kind, body_flat, body_required = None, False, False
    raw_body = spec.get("requestBody")
    if raw_body is not None:
        body, where = resolve(document, raw_body, base)
        if not isinstance(body, Mapping):
            raise SpecError("its request body is not an object")
        media_type, media = _pick(body.get("content") or {})
        if media_type is None:
            kinds = ", ".join(body.get("content") or {}) or "nothing"
            raise SpecError(f"its request body is {kinds}, which is not sent")
        body_kind = "json" if _JSON.match(media_type) else "form" if media_type == _FORM else "text"
        body_required = body.get("required") is True
        schema = requests.convert((media or {}).get("schema", {}), where)
        fields, own_required = _object_fields(schema, {"$defs": requests.defs})
        if body_kind == "form" or fields is not None:
            body_flat = True
            for name, sub in (fields or {}).items():
                wanted.append(("body", name, sub, body_required and name in own_required, {}))
        else:
            if isinstance(body.get("description"), str) and isinstance(schema, Mapping):
                schema = {**schema, "description": body["description"]}
            wanted.append(("body", "body", schema, body_required, {}))
    taken: set[str] = set()
    for location in _ORDER:
        for where_, name, converted, is_required, how in wanted:
            if where_ != location:
                continue
            key = name if name not in taken else f"{name}_{location}"
            if key in taken:
                raise SchemaError(f'arguments named "{name}" clash')
            taken.add(key)
            properties[key] = converted
            if is_required:
                required.append(key)
            arguments.append(Argument(key, name, location, **how))
    names = [(n, where) for n, where in parameters if where in _MERGED]
    names += [(n, where) for where, n in credentials if where in _MERGED]
    names += [(a.wire, "body") for a in arguments if a.location == "body" and body_flat]
    arguments = _spread(arguments, properties, requests, names)
    templated = set(re.findall(r"\{([^{}]+)\}", path))
    declared_path = {a.wire for a in arguments if a.location == "path"}
    if templated != declared_path:
        missing = sorted(templated ^ declared_path)
        raise SpecError(f"its path and its path parameters differ ({', '.join(missing)})")
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    defs = requests.closure(list(properties.values()))
    if defs:
        input_schema["$defs"] = defs
    declared: dict[str, Media] = {}
    for status, raw_response in (spec.get("responses") or {}).items():
        response, where = resolve(document, raw_response, base)
        declared[str(status).upper()] = _media(responses, response, where)
    operation_id = spec.get("operationId")
    operation_id = operation_id if isinstance(operation_id, str) and operation_id else None
    security = spec.get("security")
    hints = spec.get("x-codemode-hints")
    return Operation(
        leaf=snake(operation_id) if operation_id else default_name(method, path),
        method=method,
        path=path,
        operation_id=operation_id,
        summary=str(spec.get("summary") or ""),
        description=str(spec.get("description") or ""),
        tags=tuple(str(tag) for tag in spec.get("tags") or ()),
        arguments=arguments,
        input_schema=input_schema,
        body=body_kind,  # type: ignore[arg-type]
        body_flat=body_flat,
        body_required=body_required,
        responses=declared,
        response_defs=responses.closure([m.schema for m in declared.values()]),
        security=list(security) if isinstance(security, list) else None,
        hints=dict(hints) if isinstance(hints, Mapping) else {},
    )


_MERGED = ("query", "path", "cookie", "body")
"""Where the names are that servers read as one set of parameters with the query's
(Spring's `@RequestParam`, Flask's `request.values`, Laravel's `input()`, Rails'
`params`, PHP's `$_REQUEST`)."""
_STEM = re.compile(r"[\[.]")


def folded(name: str) -> str:
    """A parameter's name as the loosest servers compare names: without case as Java's
    `equalsIgnoreCase` and .NET's `OrdinalIgnoreCase` do (by upper case, so `l\u0131mit` is
    `limit`), and `-`, `.`, `_` and a space as one, a leading space as none (as PHP reads
    ` a.b` as `a_b`)."""
    return re.sub(r"[-. ]", "_", name.upper().casefold().lstrip(" "))


def _taken(names: Sequence[tuple[str, str]]) -> set[str]:
    """The `folded` names, each whole and up to its first `[` or `.`."""
    return {folded(n) for name, _ in names for n in (name, _STEM.split(name, 1)[0]) if n}


def _spread(
    arguments: list[Argument],
    schemas: Mapping[str, Any],
    requests: Schemas,
    names: Sequence[tuple[str, str]],
) -> list[Argument]:
    """The arguments, each query object sent as parameters of its own knowing the names
    its keys may not have (`Argument.taken`); SpecError when one of its declared keys is
    one of them, as the server could not tell whose it reads."""
    root = {"$defs": requests.defs}
    keys = {
        a.key: {folded(k): k for k in _object_fields(schemas[a.key], root)[0] or ()}
        for a in arguments
        if a.spread
    }
    taken: dict[str, frozenset[str]] = {}
    for argument in arguments:
        if argument.key not in keys:
            continue
        others = _taken([n for n in names if n != (argument.wire, "query")])
        others.update(*(k for key, k in keys.items() if key != argument.key))
        taken[argument.key] = frozenset(others)
        clash = sorted(v for k, v in keys[argument.key].items() if k in others)
        if clash:
            raise SpecError(
                f'parameter "{argument.wire}" sends its key "{clash[0]}" as a query '
                "parameter, and another parameter has that name"
            )
    return [replace(a, taken=taken[a.key]) if a.key in keys else a for a in arguments]


def _pick(content: Mapping[str, Any]) -> tuple[str | None, Any]:
    """The request media codemode sends, by preference: JSON, a form, text."""
    for test in (
        lambda m: bool(_JSON.match(m)),
        lambda m: m == _FORM,
        lambda m: m.startswith("text/"),
    ):
        for media_type, media in content.items():
            if test(str(media_type).split(";")[0].strip().lower()):
                return str(media_type).split(";")[0].strip().lower(), media
    return None, None


def _media(schemas: Schemas, response: Any, base: str) -> Media:
    content = response.get("content") if isinstance(response, Mapping) else None
    if not isinstance(content, Mapping) or not content:
        return Media("none")
    for media_type, media in content.items():
        kind = str(media_type).split(";")[0].strip().lower()
        if _JSON.match(kind) or (kind == "*/*" and "schema" in (media or {})):
            schema = (media or {}).get("schema")
            return Media("json", None if schema is None else schemas.convert(schema, base))
    if any(str(m).lower().startswith("text/") for m in content):
        return Media("text")
    return Media("binary", types=tuple(str(m).split(";")[0].strip().lower() for m in content))


def _object_fields(schema: Any, root: Mapping[str, Any]) -> tuple[dict[str, Any] | None, set[str]]:
    """The properties and the required keys of a body that is an object with declared
    keys (its reference followed, its `allOf` members merged); no properties for any
    other body."""
    schema = resolved(schema, root)
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return None, set()
    if any(word in schema for word in ("anyOf", "oneOf", "if", "not")):
        return None, set()
    found: dict[str, Any] = {}
    required: set[str] = set()
    for member in [schema, *(resolved(m, root) for m in schema.get("allOf") or ())]:
        if not isinstance(member, Mapping) or (
            member is not schema
            and (
                member.get("type", "object") != "object"
                or any(w in member for w in ("anyOf", "oneOf", "allOf"))
            )
        ):
            return None, set()
        found.update(member.get("properties") or {})
        required.update(r for r in member.get("required") or () if isinstance(r, str))
    return found or None, required


def chosen(
    found: list[Operation],
    include: Sequence[str] | None,
    exclude: Sequence[str],
) -> list[Operation]:
    """The operations `include` and `exclude` leave. A pattern is an operation id, a tag,
    or `METHOD /path` (both may hold `*`); one with no wildcard that matches nothing is a
    registration error, as it is likely a typo."""

    def matches(pattern: str, operation: Operation) -> bool:
        if re.match(r"(?i)^[a-z*]+ /", pattern):
            method, _, path = pattern.partition(" ")
            return fnmatch.fnmatchcase(operation.method, method.lower()) and (
                fnmatch.fnmatchcase(operation.path, path)
            )
        return any(
            fnmatch.fnmatchcase(word, pattern)
            for word in (operation.operation_id, operation.leaf, *operation.tags)
            if word
        )

    for pattern in [*(include or ()), *exclude]:
        if not any(ch in pattern for ch in "*?[") and not any(matches(pattern, o) for o in found):
            raise SpecError(f'no operation, tag or "METHOD /path" matches "{pattern}"')
    return [
        operation
        for operation in found
        if (include is None or any(matches(p, operation) for p in include))
        and not any(matches(p, operation) for p in exclude)
    ]


__all__ = [
    "Argument",
    "Location",
    "Media",
    "Operation",
    "Reading",
    "chosen",
    "folded",
    "header_name",
    "ignored_header",
    "operations",
    "snake",
]
