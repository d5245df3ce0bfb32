"""The one HTTP security layer, driven through the real app: every route, the same checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from codemode import Limits
from codemode.http import SecurityMiddleware, host_names, is_loopback
from codemode.mcp.compat import PARSE_ERROR_MESSAGE
from codemode.mcp.server import body_limit
from codemode.serving import http_app
from tests.http.conftest import ADD, TOKENS, body, noting_host

JSON = {"Content-Type": "application/json"}
MCP_CALL = body(
    jsonrpc="2.0",
    id=1,
    method="tools/call",
    params={"name": "execute", "arguments": {"source": ADD}},
)
MCP_HEADERS = {
    **JSON,
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
ROUTES: list[tuple[str, str, dict[str, str], bytes]] = [
    ("GET", "/", {}, b""),
    ("GET", "/static/app.js", {}, b""),
    ("POST", "/api/search", JSON, body(query="notes")),
    ("POST", "/api/describe", JSON, body(name="notes.add")),
    ("POST", "/api/execute", JSON, body(source=ADD)),
    ("POST", "/mcp", MCP_HEADERS, MCP_CALL),
]
ROUTE_IDS = [path for _, path, _, _ in ROUTES]


def client(effects: list[str], **options: Any) -> TestClient:
    """A TestClient on the real served app (web page included), speaking from 127.0.0.1."""
    app = http_app(noting_host(effects), web=True, **options)
    return TestClient(app, base_url="http://127.0.0.1:8000")


@pytest.fixture
def open_client(effects: list[str]) -> Iterator[TestClient]:
    with client(effects) as test_client:
        yield test_client


class TestLoopback:
    @pytest.mark.parametrize(
        "host",
        [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "127.0.0.2",
            "127.255.255.254",
            "::1",
            "[::1]",
            "0:0:0:0:0:0:0:1",
            "::ffff:127.0.0.1",
            "[::ffff:127.0.0.2]",
        ],
    )
    def test_every_spelling_of_this_machine_is_loopback(self, host: str) -> None:
        assert is_loopback(host)

    @pytest.mark.parametrize(
        "host",
        ["0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "evil.example", "localhost.evil", ""],
    )
    def test_other_hosts_are_not(self, host: str) -> None:
        assert not is_loopback(host)


class TestHostsAndOrigins:
    @pytest.mark.parametrize(("method", "path", "headers", "content"), ROUTES, ids=ROUTE_IDS)
    def test_a_foreign_host_is_refused_on_every_route(
        self,
        open_client: TestClient,
        effects: list[str],
        method: str,
        path: str,
        headers: dict[str, str],
        content: bytes,
    ) -> None:
        """DNS rebinding: a page on evil.example that resolves to 127.0.0.1 gets nothing."""
        response = open_client.request(
            method, path, headers={**headers, "Host": "evil.example"}, content=content
        )
        assert (response.status_code, response.json()) == (421, {"error": "host_not_allowed"})
        assert effects == []

    @pytest.mark.parametrize(("method", "path", "headers", "content"), ROUTES, ids=ROUTE_IDS)
    def test_a_foreign_origin_is_refused_on_every_route(
        self,
        open_client: TestClient,
        effects: list[str],
        method: str,
        path: str,
        headers: dict[str, str],
        content: bytes,
    ) -> None:
        response = open_client.request(
            method, path, headers={**headers, "Origin": "https://evil.example"}, content=content
        )
        assert (response.status_code, response.json()) == (403, {"error": "origin_not_allowed"})
        assert effects == []

    @pytest.mark.parametrize("origin", ["null", "http://127.0.0.1.evil.example", "evil", ""])
    def test_an_origin_that_is_not_this_machine_is_refused(
        self, open_client: TestClient, origin: str
    ) -> None:
        response = open_client.get("/", headers={"Origin": origin})
        assert (response.status_code, response.json()) == (403, {"error": "origin_not_allowed"})

    def test_the_page_itself_may_post_to_the_api(
        self, open_client: TestClient, effects: list[str]
    ) -> None:
        """Same-origin requests from the playground carry its own origin: the host and
        port the request is sent to."""
        response = open_client.post(
            "/api/execute",
            content=body(source=ADD),
            headers={**JSON, "Origin": "http://127.0.0.1:8000"},
        )
        assert response.json()["result"] == 1
        assert effects == ["local:hi"]

    @pytest.mark.parametrize(("method", "path", "headers", "content"), ROUTES, ids=ROUTE_IDS)
    @pytest.mark.parametrize(
        "origin",
        [
            "http://127.0.0.1:3000",  # another program on this machine, another port
            "http://127.0.0.1",  # port 80
            "https://127.0.0.1",  # port 443
            "http://localhost:8000",  # another name: another origin to the browser
            "http://[::1]:8000",
        ],
    )
    def test_a_page_on_another_port_or_name_of_this_machine_is_refused(
        self,
        open_client: TestClient,
        effects: list[str],
        origin: str,
        method: str,
        path: str,
        headers: dict[str, str],
        content: bytes,
    ) -> None:
        """A page at localhost:3000 (a dev server, any local app) cannot drive the server
        at localhost:8000: loopback is one machine, not one origin."""
        response = open_client.request(
            method, path, headers={**headers, "Origin": origin}, content=content
        )
        assert (response.status_code, response.json()) == (403, {"error": "origin_not_allowed"})
        assert effects == []

    @pytest.mark.parametrize(
        ("host", "origin"),
        [
            ("localhost:8000", "http://LOCALHOST:8000"),
            ("[::1]:8000", "http://[0:0:0:0:0:0:0:1]:8000"),
            ("api.example.com", "https://api.example.com"),
            ("api.example.com", "https://api.example.com:443"),
            ("api.example.com:443", "https://api.example.com"),
            ("api.example.com", "http://api.example.com:80"),
        ],
    )
    def test_the_requests_own_origin_is_admitted_in_any_spelling(
        self, effects: list[str], host: str, origin: str
    ) -> None:
        with client(effects, allowed_hosts=["api.example.com"]) as test_client:
            response = test_client.get("/", headers={"Host": host, "Origin": origin})
            assert response.status_code == 200

    def test_a_default_port_is_the_origins_schemes(self, effects: list[str]) -> None:
        with client(effects, allowed_hosts=["api.example.com"]) as test_client:
            for host, origin in [
                ("api.example.com", "http://api.example.com:8443"),
                ("api.example.com:8443", "https://api.example.com"),
                ("api.example.com", "https://api.example.com:80"),
            ]:
                response = test_client.get("/", headers={"Host": host, "Origin": origin})
                assert (response.status_code, response.json()) == (
                    403,
                    {"error": "origin_not_allowed"},
                )

    @pytest.mark.parametrize(
        "bind", ["127.0.0.2", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1", "localhost", "::1"]
    )
    def test_every_loopback_bind_is_protected(self, effects: list[str], bind: str) -> None:
        with client(effects, host=bind) as test_client:
            refused = test_client.get("/", headers={"Host": "evil.example"})
            assert (refused.status_code, refused.json()) == (421, {"error": "host_not_allowed"})
            for host in ("127.0.0.1:8000", "localhost", "[::1]:9000", "127.0.0.2:8000"):
                assert test_client.get("/", headers={"Host": host}).status_code == 200

    def test_an_allowed_host_is_admitted_by_host_and_origin(self, effects: list[str]) -> None:
        """Behind a proxy the server answers to the proxy's public name, and no other."""
        with client(effects, allowed_hosts=["API.example.com"]) as test_client:
            admitted = test_client.post(
                "/api/execute",
                content=body(source=ADD),
                headers={
                    **JSON,
                    "Host": "api.example.com",
                    "Origin": "https://api.example.com",
                },
            )
            assert admitted.json()["result"] == 1
            other = test_client.get("/", headers={"Host": "www.example.com"})
            assert other.status_code == 421
        assert effects == ["local:hi"]

    def test_a_specific_bind_address_is_admitted_but_a_wildcard_is_not(
        self, effects: list[str]
    ) -> None:
        with client(effects, host="192.0.2.10") as test_client:
            assert test_client.get("/", headers={"Host": "192.0.2.10:8000"}).status_code == 200
        with client(effects, host="0.0.0.0") as test_client:
            assert test_client.get("/", headers={"Host": "192.0.2.10:8000"}).status_code == 421

    @pytest.mark.parametrize(
        "bad", ["api.example.com:443", "https://api.example.com", "api.example.com/", "*"]
    )
    def test_an_allowed_host_with_a_port_or_scheme_is_refused(self, bad: str) -> None:
        with pytest.raises(
            ValueError, match=r"must be a bare host name or address \(no scheme, no port\)"
        ):
            http_app(noting_host([]), allowed_hosts=[bad])

    def test_allowed_hosts_is_not_a_string(self) -> None:
        with pytest.raises(TypeError, match="not a string"):
            host_names("api.example.com")


class TestJsonOnly:
    @pytest.mark.parametrize(
        "content_type",
        [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            None,
        ],
    )
    def test_a_cross_site_simple_post_never_runs(
        self, open_client: TestClient, effects: list[str], content_type: str | None
    ) -> None:
        """A web page may send these without a preflight; the handler must not run."""
        headers = {} if content_type is None else {"Content-Type": content_type}
        response = open_client.post("/api/execute", content=body(source=ADD), headers=headers)
        assert (response.status_code, response.json()) == (415, {"error": "json_required"})
        assert effects == []

    def test_mcp_needs_json_too(self, open_client: TestClient, effects: list[str]) -> None:
        headers = {**MCP_HEADERS, "Content-Type": "text/plain"}
        response = open_client.post("/mcp", content=MCP_CALL, headers=headers)
        assert (response.status_code, response.json()) == (415, {"error": "json_required"})
        assert effects == []

    def test_json_with_parameters_passes(self, open_client: TestClient, effects: list[str]) -> None:
        response = open_client.post(
            "/api/execute",
            content=body(source=ADD),
            headers={"Content-Type": "Application/JSON; charset=utf-8"},
        )
        assert response.json()["result"] == 1


class TestBodyLimit:
    def test_a_declared_length_over_the_limit_is_refused_up_front(
        self, open_client: TestClient, effects: list[str]
    ) -> None:
        response = open_client.post(
            "/api/execute", content=b" " * (body_limit(Limits()) + 1), headers=JSON
        )
        assert (response.status_code, response.json()) == (413, {"error": "body_too_large"})
        assert effects == []

    @pytest.mark.anyio
    async def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit(
        self, effects: list[str]
    ) -> None:
        """A 50 MB chunked body without Content-Length: reading stops just past the limit
        (3 MiB: room for a program and for a paused program's sealed state)."""
        chunk = b" " * (64 * 1024)
        pulled = 0

        async def fifty_megabytes() -> AsyncIterator[bytes]:
            nonlocal pulled
            for _ in range(50 * 16):
                pulled += 1
                yield chunk

        transport = httpx.ASGITransport(app=http_app(noting_host(effects), web=True))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            response = await http.post("/api/execute", content=fifty_megabytes(), headers=JSON)
        assert (response.status_code, response.json()) == (413, {"error": "body_too_large"})
        assert pulled == body_limit(Limits()) // len(chunk) + 1
        assert effects == []

    @pytest.mark.anyio
    async def test_a_body_within_the_limit_reaches_the_route_whole(self) -> None:
        """Chunks read ahead by the middleware are replayed in order, then the stream ends."""
        seen: list[bytes] = []

        async def route(scope: Any, receive: Any, send: Any) -> None:
            while True:
                message = await receive()
                seen.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        async def chunks() -> AsyncIterator[bytes]:
            for part in (b'{"a":', b' "b"', b"}"):
                yield part

        app = SecurityMiddleware(route)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            response = await http.post("/x", content=chunks(), headers=JSON)
        assert response.status_code == 204
        assert b"".join(seen) == b'{"a": "b"}'


class TestTokens:
    @pytest.fixture
    def guarded(self, effects: list[str]) -> Iterator[TestClient]:
        with client(effects, tokens=TOKENS) as test_client:
            yield test_client

    @pytest.mark.parametrize(
        "authorization", [None, "Bearer wrong", "tok-alice", "Basic tok-alice", "Bearer "]
    )
    def test_mcp_and_the_api_answer_a_bad_token_the_same_way(
        self, guarded: TestClient, effects: list[str], authorization: str | None
    ) -> None:
        auth = {} if authorization is None else {"Authorization": authorization}
        answers = []
        for method, path, headers, content in ROUTES[2:]:
            response = guarded.request(method, path, headers={**headers, **auth}, content=content)
            answers.append(
                (response.status_code, response.headers["www-authenticate"], response.json())
            )
        assert answers == [(401, "Bearer", {"error": "invalid_token"})] * 4
        assert effects == []

    def test_the_page_and_its_assets_need_no_token(self, guarded: TestClient) -> None:
        assert guarded.get("/").status_code == 200
        assert guarded.get("/static/app.js").status_code == 200

    def test_the_token_names_the_subject_on_the_api(
        self, guarded: TestClient, effects: list[str]
    ) -> None:
        response = guarded.post(
            "/api/execute",
            content=body(source=ADD),
            headers={**JSON, "Authorization": "Bearer tok-alice"},
        )
        assert response.json()["result"] == 1
        assert effects == ["alice:hi"]


class TestBadInput:
    def test_a_lone_surrogate_in_a_search_is_an_invalid_request(
        self, open_client: TestClient
    ) -> None:
        response = open_client.post("/api/search", content=b'{"query": "\\ud800"}', headers=JSON)
        assert response.json() == {
            "ok": False,
            "error": {
                "code": "invalid_request",
                "message": 'invalid request: property "query" must be valid Unicode text',
                "where": None,
                "traceback": [],
                "model_text": 'invalid request: property "query" must be valid Unicode text',
            },
            "printed": "",
        }

    def test_a_lone_surrogate_in_an_mcp_body_is_a_parse_error(
        self, open_client: TestClient
    ) -> None:
        """Both eras refuse it before the SDK reads the body (the SDK's 2026-era transport
        would let it in, its 2025-era one would answer with its parser's text)."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        call = body(
            jsonrpc="2.0",
            id=1,
            method="tools/call",
            params={"name": "search_api", "arguments": {"query": "\ud800"}, "_meta": meta},
        )
        response = open_client.post(
            "/mcp",
            content=call,
            headers={
                **MCP_HEADERS,
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "search_api",
            },
        )
        assert response.status_code == 400
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": PARSE_ERROR_MESSAGE},
        }
