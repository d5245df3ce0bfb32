"""One REST API's side of the boundary: its connection pools, its credentials, and how
a call's request is sent and its response read.

Credentials never enter an argument, a result or an error: they are added here, to the
request, after the authorizer has decided on the arguments, and again to each redirect's
request on the API's own origin (no request goes to another). A response crosses only as
its operation declares it, every form of every credential blanked out of it (`secrets`);
everything else the server wrote (an undeclared error body, a 5xx page, a reason phrase,
headers) goes to the host log alone.
"""

from __future__ import annotations

import asyncio
import base64
import http
import http.cookiejar
import json
import logging
import weakref
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2

from codemode.errors import AgentError
from codemode.sources.openapi import wire
from codemode.sources.openapi.operations import Operation
from codemode.sources.openapi.secrets import Redactor
from codemode.types import JSONObject

log = logging.getLogger("codemode.openapi")

TIMED_OUT = "the API did not answer within {seconds:g} s"
UNREACHABLE = "the connection to the API failed"
TOO_LARGE = "the API's response is too large"
UNREADABLE_BODY = "the API's response cannot be read"
NOT_JSON = "the API's response is not JSON"
UNDECLARED = "the API's response does not match its declared schema"
REDIRECTED = "the API redirected to another origin"
NO_CONTENT = "the API answered {status} where its document declares a body"
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class Credential:
    """How one security scheme's secret is sent."""

    scheme: str
    kind: Literal["bearer", "basic", "header", "query", "cookie"]
    name: str = ""
    """The header, query parameter or cookie an API key goes in."""
    secret: str = ""

    def __repr__(self) -> str:  # the secret never shows, not even in a traceback's locals
        return f"Credential({self.scheme!r}, {self.kind!r})"


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """Keeps no cookie an API sets: one pool serves every subject and execution, so a
    cookie set for one caller's call would go with the next caller's."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


_NO_COOKIES = _NoCookies()


class Redirected(Exception):
    """The API redirected a request to another origin: it is not sent there."""


class TooLarge(Exception):
    """A response body past the bound."""


class Unreadable(Exception):
    """A response body in an encoding that cannot be read, or broken in it."""


_ENCODINGS = {"identity": 0, "gzip": 31, "x-gzip": 31, "deflate": 15}
"""The content encodings read (asked for in `Accept-Encoding`), as zlib's window bits."""


@dataclass(frozen=True)
class _Again:
    """What a redirect's request must carry again: HTTP clients drop the `Cookie` header
    of a redirect (it is the jar's to make, and the jar keeps nothing, see `_NoCookies`),
    its `Location` replaces the query an API key rode in, and a `user:password@` in it
    would replace the `Authorization` (as HTTP basic's)."""

    cookie: str | None = None
    query: list[tuple[str, str]] = field(default_factory=list)
    authorization: str | None = None


class Api:
    """A REST API's pools (one per event loop that calls it: its source sends every
    request on the sources' loop) and what every request carries: its base URL, the
    host's headers and the credentials."""

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        headers: Mapping[str, str],
        credentials: Mapping[str, Credential],
        security: Sequence[Mapping[str, Any]],
        timeout: float | None,
        max_bytes: int,
        secrets: Iterable[str] = (),
        authorization: str | None = None,
    ) -> None:
        self.name = name
        self.base = httpx2.URL(base_url)
        self.headers = dict(headers)
        self.authorization = authorization
        """The `Authorization` of `base_url`'s `user:password@` (which `base_url` no longer
        holds), sent unless a header or a security scheme gives one."""
        self.credentials = dict(credentials)
        self.security = list(security)
        """The document's own `security`, for operations that give none."""
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx2.AsyncClient]
        self._clients = weakref.WeakKeyDictionary()
        self.redactor = Redactor(secrets)
        """Every secret a request may carry (`secrets.py` says which), blanked out of
        whatever the API answers and of the host log."""
        _REDACT.redactors[id(self)] = self.redactor

    def _client(self) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx2.AsyncClient(
                cookies=http.cookiejar.CookieJar(policy=_NO_COOKIES),  # see _NoCookies
                timeout=httpx2.Timeout(self.timeout),
                follow_redirects=False,  # followed in `call`, each with its credentials again
                event_hooks={"request": [self._same_origin]},
                limits=httpx2.Limits(max_connections=32, max_keepalive_connections=16),
                trust_env=False,
            )
            self._clients[loop] = client
        return client

    async def _same_origin(self, request: httpx2.Request) -> None:
        """Every request, each redirect's included, goes to the API's own origin only."""
        url = request.url
        if (url.scheme, url.host, url.port) != (self.base.scheme, self.base.host, self.base.port):
            raise Redirected()

    async def call(self, operation: Operation, document: JSONObject) -> tuple[int, str, bytes]:
        """Send one call; its status, media type and body, or AgentError for a failure
        that is not the API's answer (the detail is logged)."""
        request, again = self._request(operation, document)
        try:
            async with asyncio.timeout(self.timeout):  # the whole exchange, not each read
                response = await self._followed(request, again)
                try:
                    body = await self._read(response)
                finally:
                    await response.aclose()
        except (httpx2.TimeoutException, TimeoutError) as exc:
            self._log(operation, f"timed out ({type(exc).__name__})")
            raise AgentError(TIMED_OUT.format(seconds=self.timeout or 0)) from None
        except Redirected:
            self._log(operation, "redirected to another origin; not followed")
            raise AgentError(REDIRECTED) from None
        except TooLarge:
            self._log(operation, f"a response of more than {self.max_bytes} bytes")
            raise AgentError(TOO_LARGE) from None
        except Unreadable as exc:
            self._log(operation, f"an unreadable response ({exc})")
            raise AgentError(UNREADABLE_BODY) from None
        except httpx2.HTTPError as exc:
            self._log(operation, f"{type(exc).__name__}: {exc}")
            raise AgentError(UNREACHABLE) from None
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        return response.status_code, media, body

    async def _followed(self, request: httpx2.Request, again: _Again) -> httpx2.Response:
        """The response to `request`, its redirects followed on the API's origin, each
        with the request's cookies, query credentials and `Authorization` again, and none
        a `Location`'s `user:password@` would give (`_Again`)."""
        client = self._client()
        response = await client.send(request, stream=True)
        for _ in range(MAX_REDIRECTS):
            following = response.next_request
            if following is None:
                return response
            await response.aclose()
            await self._same_origin(following)  # before anything is added to it
            if following.url.userinfo:  # the host's credentials, not the Location's
                following.url = following.url.copy_with(userinfo=b"")
            following.headers.pop("Authorization", None)
            if again.authorization is not None:
                following.headers["Authorization"] = again.authorization
            if again.cookie is not None:
                following.headers["Cookie"] = again.cookie
            for name, secret in again.query:
                following.url = following.url.copy_set_param(name, secret)
            response = await client.send(following, stream=True)
        if response.next_request is None:
            return response
        await response.aclose()
        raise httpx2.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)

    def _log(self, operation: Operation, detail: str) -> None:
        log.warning("REST API %s: %s failed: %s", self.name, operation.route, self.redact(detail))

    def redact(self, text: str) -> str:
        """`text` with every credential blanked out (an API may echo one in an error)."""
        return self.redactor.redact(text)

    def scrub(self, value: Any) -> Any:
        """A parsed body with every credential it echoes blanked out (see `Redactor`):
        what the API answers reaches the program, the host's secrets never do."""
        return self.redactor.scrub(value)

    def loggable(self, body: bytes) -> str:
        """A body as the host log gets it: its credentials blanked out (in its JSON, read
        as JSON), then cut to 2 KiB."""
        try:
            text = json.dumps(self.scrub(json.loads(body)), ensure_ascii=False)
        except (ValueError, RecursionError):
            text = self.redact(body.decode("utf-8", "replace"))
        return text[:2048]

    async def _read(self, response: httpx2.Response) -> bytes:
        """The body, decoded, never more than the bound: a compressed body is inflated
        here with the bound as the limit of its output, so a small bomb stays small."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise TooLarge()
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in _ENCODINGS:
            raise Unreadable(f"content encoding {encoding!r}")
        inflater = zlib.decompressobj(_ENCODINGS[encoding]) if _ENCODINGS[encoding] else None
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                if inflater is None:
                    body += chunk
                while chunk and inflater is not None:
                    body += inflater.decompress(chunk, self.max_bytes + 1 - len(body))
                    chunk = inflater.unconsumed_tail
                    if len(body) > self.max_bytes:
                        break
                if len(body) > self.max_bytes:
                    raise TooLarge()
            if inflater is not None:
                body += inflater.flush()
        except zlib.error as exc:
            raise Unreadable(f"{encoding}: {exc}") from None
        if len(body) > self.max_bytes:
            raise TooLarge()
        return bytes(body)

    def _request(self, operation: Operation, document: JSONObject) -> tuple[httpx2.Request, _Again]:
        """The request for bound arguments: each where the document puts it, then the
        host's headers and the credentials, which no argument can override; and what a
        redirect's request must carry again."""
        by_key = {a.key: a for a in operation.arguments}
        given = {  # binding has left out every None that no JSON carries
            k: (by_key[k], v)
            for k, v in document.items()
            if k in by_key and (v is not None or wire.carries_null(operation, by_key[k]))
        }
        path_values = {a.wire: (a, v) for a, v in given.values() if a.location == "path"}
        params: list[tuple[str, str | int | float | bool | None]] = []
        headers: dict[str, str] = {}
        if self.authorization is not None:  # base_url's, unless a header or scheme says
            headers["Authorization"] = self.authorization
        cookies: list[str] = []
        body: Any = _NO_BODY
        for argument, value in given.values():
            if argument.location == "query":
                params += wire.query(argument, value)
            elif argument.location == "header":  # binding has refused what HTTP cannot carry
                _put(headers, argument.wire, wire.header(argument, value))
            elif argument.location == "cookie":
                cookies.append(wire.cookie(argument, value))
            elif argument.location == "body":
                if operation.body_flat:
                    body = {} if body is _NO_BODY else body
                    body[argument.wire] = value
                else:
                    body = value  # a JSON body's null too
        if body is _NO_BODY and operation.body_flat and operation.body_required:
            body = {}
        for name, text in self.headers.items():
            _put(headers, name, text)
        again_query: list[tuple[str, str]] = []
        if self.credentials:
            for credential in self._chosen(operation):
                if credential.kind == "bearer":
                    _put(headers, "Authorization", f"Bearer {credential.secret}")
                elif credential.kind == "basic":
                    token = base64.b64encode(credential.secret.encode()).decode()
                    _put(headers, "Authorization", f"Basic {token}")
                elif credential.kind == "header":
                    _put(headers, credential.name, credential.secret)
                elif credential.kind == "query":  # the host's key, never the program's
                    params = [pair for pair in params if pair[0] != credential.name]
                    params.append((credential.name, credential.secret))
                    again_query.append((credential.name, credential.secret))
                else:
                    prefix = f"{credential.name}="
                    cookies = [c for c in cookies if not c.startswith(prefix)]
                    cookies.append(prefix + credential.secret)
        host_cookie = next((v for k, v in self.headers.items() if k.lower() == "cookie"), None)
        if host_cookie is not None:  # the host's own cookies win over an argument's
            names = {part.split("=", 1)[0].strip() for part in host_cookie.split(";")}
            cookies = [c for c in cookies if c.split("=", 1)[0] not in names] + [host_cookie]
            headers = {k: v for k, v in headers.items() if k.lower() != "cookie"}
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        again = _Again(headers.get("Cookie"), again_query, authorization)
        if not any(k.lower() == "accept" for k in headers):  # the host's, else the media's
            headers["Accept"] = _accept(operation)
        headers["Accept-Encoding"] = "gzip, deflate"
        content: bytes | None = None
        form: dict[str, str | list[str]] | None = None
        if body is not _NO_BODY:
            if operation.body == "json":
                content = json.dumps(body, separators=(",", ":")).encode()
                headers["Content-Type"] = "application/json"
            elif operation.body == "form":  # a list is its field repeated, as OpenAPI's default
                form = {
                    k: [wire.scalar(i) for i in v] if isinstance(v, list) else wire.scalar(v)
                    for k, v in body.items()
                }
            else:
                content = str(body).encode()
                headers["Content-Type"] = "text/plain; charset=utf-8"
        raw_path = self.base.raw_path.split(b"?")[0].rstrip(b"/")
        target = raw_path + wire.path(operation.path, path_values).encode("ascii")
        url = self.base.copy_with(raw_path=target)
        request = self._client().build_request(
            operation.method.upper(),
            url,
            params=params or None,
            headers=headers,
            content=content,
            data=form,
        )
        return request, again

    def _chosen(self, operation: Operation) -> list[Credential]:
        """The credentials of the first of the operation's security alternatives the host
        holds every secret of; none when it holds no alternative whole."""
        alternatives = operation.security if operation.security is not None else self.security
        for alternative in alternatives:
            if isinstance(alternative, Mapping) and all(k in self.credentials for k in alternative):
                return [self.credentials[k] for k in alternative]
        return []

    async def aclose(self) -> None:
        """Close the pool of the loop this runs on."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Close every pool: each on its own loop while that still runs."""
        _REDACT.redactors.pop(id(self), None)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, client in list(self._clients.items()):
            if loop.is_closed():
                continue
            if loop is running:  # closed from its own loop: it cannot be waited for here
                loop.create_task(client.aclose())
                continue
            future = asyncio.run_coroutine_threadsafe(client.aclose(), loop)
            try:
                future.result(timeout=2)
            except Exception:  # a loop that no longer runs its tasks: the sockets go with it
                future.cancel()
        self._clients.clear()


def _put(headers: dict[str, str], name: str, value: str) -> None:
    """Set a header, in place of any of its name however it is spelled (`authorization`
    and `Authorization` are one header, which must not be sent twice)."""
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]
    headers[name] = value


_NO_BODY: Any = object()
"""No body argument was given (a JSON body may be null)."""


def _accept(operation: Operation) -> str:
    kinds = {m.kind for m in operation.responses.values()}
    if kinds <= {"json", "none"}:
        return "application/json"
    return "application/json, text/plain;q=0.9, */*;q=0.8"


_RFC_9110 = {
    413: "Content Too Large",
    414: "URI Too Long",
    416: "Range Not Satisfiable",
    422: "Unprocessable Content",
}
"""The phrases RFC 9110 renamed, which older Pythons' `http.HTTPStatus` spell the old way."""


def status_text(code: int) -> str:
    """`HTTP 404 Not Found`: the status and the standard phrase, never the server's."""
    try:
        return f"HTTP {code} {_RFC_9110.get(code) or http.HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def declared(operation: Operation, code: int) -> str | None:
    """Which response the operation declares for a status: the code's own, its class's
    (`4XX`), or `DEFAULT`; None when it declares none of them."""
    for key in (str(code), f"{str(code)[0]}XX", "DEFAULT"):
        if key in operation.responses:
            return key
    return None


class _Redact(logging.Filter):
    """Blanks out credentials in the HTTP client's own log lines (it logs each request's
    URL at INFO, and an API key may ride in the query)."""

    def __init__(self) -> None:
        super().__init__()
        self.redactors: dict[int, Redactor] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        redactors = list(self.redactors.values())
        if redactors:
            message = blanked = record.getMessage()
            for redactor in redactors:
                blanked = redactor.redact(blanked)
            if blanked != message:
                record.msg, record.args = blanked, None
        return True


_REDACT = _Redact()
logging.getLogger("httpx2").addFilter(_REDACT)


__all__ = [
    "MAX_REDIRECTS",
    "NOT_JSON",
    "NO_CONTENT",
    "REDIRECTED",
    "TIMED_OUT",
    "TOO_LARGE",
    "UNDECLARED",
    "UNREACHABLE",
    "UNREADABLE_BODY",
    "Api",
    "Credential",
    "declared",
    "status_text",
]
