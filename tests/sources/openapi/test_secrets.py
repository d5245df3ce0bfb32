"""Credentials stay on the host's side: never in a result, an error, an event or the log, in any
spelling an API may echo them, and carried again on a redirect to the API's own origin."""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.errors import RegistrationError
from codemode.sources.openapi.secrets import Redactor
from tests.conftest import assert_no_canary
from tests.sources.openapi.conftest import SECRET, fail, run
from tests.sources.openapi.pets import PetStore, pet_store, served
from tests.sources.openapi.records import ECHO as _ECHOED

pytestmark = pytest.mark.slow


def test_no_credential_reaches_the_model_events_or_the_log(
    cm: CodeMode, store: PetStore, events: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        outcomes = [
            fail(cm, 'return pets.show_pet_by_id(petId="99")'),
            fail(cm, "return pets.boom()"),
            cm.execute("def main():\n    return pets.search(ids=[1])", subject="a"),
            cm.execute('def main():\n    return pets.delete_pets_pet_id(petId="9")', subject="a"),
        ]
    [*_, search, _] = store.seen
    assert "api_key=" + SECRET in search.query  # it was sent (and echoed back, blanked)...
    basic = store.seen[-1].headers["authorization"]
    assert basic.startswith("Basic ")
    texts = [repr(o) for o in outcomes[2:]] + [repr(e) for e in events]
    texts += [json.dumps(cm.describe(n).__repr__()) for n in cm.catalog.names()]
    texts += [caplog.text]
    for text in texts:  # ...and appears nowhere else, not even its encoding
        assert SECRET not in text and basic.removeprefix("Basic ") not in text
    assert_no_canary(*outcomes[:2])
    assert "api_key=[redacted]" in caplog.text  # the HTTP client's own line, blanked


def test_a_credential_the_api_echoes_is_blanked_out(
    cm: CodeMode, events: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        error = fail(cm, 'return pets.create_pet(name="echo")')
    assert error.detail == (
        'HTTP 400 Bad Request: {"code":400,"message":"bad token Bearer [redacted]"}'
    )
    assert SECRET not in repr(events) + caplog.text


def test_an_echo_in_any_json_spelling_is_blanked_out() -> None:
    from codemode.sources.openapi.client import Api, Credential

    api = Api(
        "x",
        "http://127.0.0.1:9",
        headers={},
        credentials={"b": Credential("b", "bearer", secret="tok/Ab+Cd=9f3e")},
        security=[{"b": []}],
        timeout=None,
        max_bytes=1024,
        secrets=["tok/Ab+Cd=9f3e"],
    )
    try:
        escaped = json.loads(
            '{"said": "Bearer tok\\/Ab+Cd=9f3e", "url": "?k=tok%2FAb%2BCd%3D9f3e"}'
        )
        assert api.scrub(escaped) == {"said": "Bearer [redacted]", "url": "?k=[redacted]"}
        assert "tok" not in api.loggable(b'{"a": "tok\\/Ab+Cd=9f3e"}')
    finally:
        api.close()


KEY = "SECRET q/+=&é-key"
"""A query API key whose every character a URL encodes, as an API may echo it."""


PASSWORD = "SECRET/pw+x"


COOKIE = "SECRET-cookie-v4lue"


HEADER_KEY = "SECRET-hdr/key+1"


BEARER = "SECRET-bearer-t0ken"


def _spellings(secret: str) -> set[str]:
    """What an API that echoes `secret` may answer with, as a leak would show it."""
    quoted = {quote(secret, safe=""), quote_plus(secret), quote(secret)}
    return {secret} | quoted | {q.lower() for q in quoted} | {json.dumps(secret)[1:-1]}


@pytest.fixture
def mirror(store: PetStore, events: list[Any]) -> Iterator[CodeMode]:
    """The pet store as a host may register it: the password in `base_url`, a cookie, an
    API key header, public headers, and a query key."""
    port = store.url.rsplit(":", 1)[1]
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as host:
        host.add_openapi(
            "pets",
            spec=store.spec_url,
            base_url=f"http://ada:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/v1",
            headers={
                "Cookie": f"sid={COOKIE}; lang=en",
                "X-Api-Key": HEADER_KEY,
                "Accept": "application/json",
                "X-Tenant": "42",
            },
            auth={"key": KEY},
            include=["mirror", "hop"],
        )
        yield host


def test_every_form_of_every_credential_is_blanked_and_nothing_else(
    mirror: CodeMode, store: PetStore, events: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        said = run(mirror, "return pets.mirror()")
        error = fail(mirror, "return pets.mirror(fail=True)")
    sent = store.seen[-1]
    assert (
        sent.headers["authorization"]
        == "Basic " + base64.b64encode(f"ada:{PASSWORD}".encode()).decode()
    )  # base_url's user and password, which its URL no longer holds
    assert (sent.headers["cookie"], sent.headers["x-api-key"]) == (
        f"sid={COOKIE}; lang=en",
        HEADER_KEY,
    )
    assert said == {
        "authorization": "Basic [redacted]",
        "token": "[redacted]",
        "pair": "[redacted]",
        "password": "[redacted]",
        "sid": "[redacted]",
        "lang": "en",  # a cookie too short to be a secret, named as none
        "api_key": "[redacted]",
        "query": "api_key=[redacted]",
        "query_lower": "api_key=[redacted]",
        "key": "[redacted]",
        "key_unquoted": "[redacted]",
        "key_quoted_lower": "[redacted]",
        "key_quote_plus": "[redacted]",
        "accept": "application/json",  # public headers are no secrets
        "tenant": "42",
    }
    assert error.detail == (
        'HTTP 400 Bad Request: {"code":400,"message":'
        '"refused [redacted] [redacted] \\"[redacted]\\" [redacted]"}'
    )
    assert "refused" in caplog.text and "api_key=[redacted]" in caplog.text  # logged, blanked
    texts = [repr(said), str(error), repr(events), caplog.text]
    basic = base64.b64encode(f"ada:{PASSWORD}".encode()).decode()
    canaries = {basic, f"ada:{PASSWORD}"}
    for secret in (KEY, PASSWORD, COOKIE, HEADER_KEY):
        canaries |= _spellings(secret)
    for text in texts:
        assert [c for c in canaries if c in text] == []


SPELLED = "SECRET-t~k*(n)!'&<x>"
"""A bearer token holding the characters encoders and escapers disagree on."""


QUOTED = "SECRET-quoted-c00kie"


def _java(text: str) -> str:
    """Java's `URLEncoder.encode`: `*` left alone, `~` encoded, a space as `+`."""
    return "".join(
        ch
        if ch.isascii() and (ch.isalnum() or ch in ".-*_")
        else "+"
        if ch == " "
        else "".join(f"%{byte:02X}" for byte in ch.encode())
        for ch in text
    )


def _spelling_app(received: list[dict[str, Any]]) -> FastAPI:
    """An API that echoes the credentials it read as servers in other languages write
    them: Java's and JavaScript's URL encoders, and HTML's escapes (Python's named ones,
    and every character but a letter or a digit as a decimal or a hex reference, as
    OWASP's ESAPI writes them)."""
    app = FastAPI()

    def read(request: Request) -> tuple[str, str]:
        received.append(dict(request.headers))
        return request.headers["authorization"].partition(" ")[2], request.cookies["sid"]

    @app.get("/echo")
    def echo(request: Request) -> dict[str, str]:
        token, sid = read(request)
        return {
            "java": _java(token),
            "javascript": quote(token, safe="-_.!~*'()"),
            "html": html.escape(token),
            "decimal": "".join(ch if ch.isalnum() else f"&#{ord(ch)};" for ch in token),
            "hex": "".join(ch if ch.isalnum() else f"&#X{ord(ch):x}" for ch in token),
            "sid": sid,
            "sid_java": _java(sid),
            "lang": request.cookies["lang"],
        }

    @app.get("/page", response_class=PlainTextResponse)
    def page(request: Request) -> str:
        read(request)
        said = f"{request.headers['authorization']} {request.headers['cookie']}"
        return f"<p>{html.escape(said)}</p>"

    return app


SPELLING_SPEC = {
    "openapi": "3.1.0",
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/echo": {"get": {"operationId": "echo", "responses": _ECHOED}},
        "/page": {
            "get": {
                "operationId": "page",
                "responses": {
                    "200": {"description": "x", "content": {"text/plain": {"schema": {}}}}
                },
            }
        },
    },
}


def test_a_credential_is_blanked_in_other_encoders_and_escapers_spellings() -> None:
    received: list[dict[str, Any]] = []
    with (
        served(_spelling_app, received) as url,
        CodeMode(authorizer=AllowAll()) as cm,
    ):
        cm.add_openapi(
            "api",
            spec=SPELLING_SPEC,
            base_url=url,
            auth={"bearer": SPELLED},
            headers={"Cookie": f'sid="{QUOTED}"; lang=en'},  # read without its quotes
        )
        said = run(cm, "return api.echo()")
        page = run(cm, "return api.page()")
    assert [r["authorization"] for r in received] == [f"Bearer {SPELLED}"] * 2
    assert said == {
        "java": "[redacted]",
        "javascript": "[redacted]",
        "html": "[redacted]",
        "decimal": "[redacted]",
        "hex": "[redacted]",
        "sid": "[redacted]",
        "sid_java": "[redacted]",
        "lang": "en",
    }
    assert page == "<p>Bearer [redacted] sid=&quot;[redacted]&quot;; lang=en</p>"


def test_every_spelling_of_each_character_is_matched() -> None:
    """Each character in any of its spellings, whichever the others have: percent-encoded
    in either case, `+` for a space, JSON's `\\u` (a surrogate pair past the BMP), `\\/`,
    and HTML's references; an echo of anything else stays as it is."""
    secret = "SECRET é/😀 &x"
    redactor = Redactor([secret])
    for echoed in (
        "SECRET%20%C3%A9%2F%F0%9F%98%80%20%26x",
        "SECRET+%c3%a9/%f0%9f%98%80+&x",
        "SECRET \\u00E9\\/\\ud83d\\uDE00 \\u0026x",
        "SECRET &eacute;&sol;&#128512;&#x20;&amp;x",
        "SECRET &#233;&#x2F;😀 &AMP;x",
    ):
        assert redactor.redact(f"<{echoed}>") == "<[redacted]>", echoed
    for other in ("SECRET é/😀 &y", "SECRET e/😀 &x", "SECRET%2 é/😀 &x"):
        assert redactor.redact(other) == other


def test_a_bearer_token_in_headers_is_blanked_alone_too(store: PetStore) -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi(
            "pets",
            spec=store.spec_url,
            headers={"Authorization": f"Bearer {BEARER}"},
            auth={"key": KEY},
            include=["mirror"],
        )
        said = run(cm, "return pets.mirror()")
    assert (said["authorization"], said["token"]) == ("Bearer [redacted]", "[redacted]")
    assert store.seen[-1].headers["authorization"] == f"Bearer {BEARER}"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"auth": {"bearer": "short"}}, 'auth "bearer"'),
        ({"auth": {"basic": ("ada", "pw")}}, 'auth "basic"'),
        ({"auth": {"basic": ("key", "")}}, 'auth "basic"'),  # the user is the secret
        ({"base_url": "http://ada:pw@127.0.0.1:9/v1"}, "base_url"),
        ({"headers": {"Authorization": "Bearer abc"}}, 'header "Authorization"'),
        ({"headers": {"Authorization": "Basic YWRhOnB3"}}, 'header "Authorization"'),  # ada:pw
        ({"headers": {"X-Api-Key": "abc"}}, 'header "X-Api-Key"'),
        ({"headers": {"Cookie": "lang=en; sid=X"}}, 'cookie "sid" in header "Cookie"'),
        ({"headers": {"Cookie": 'sid="1234567"'}}, 'cookie "sid" in header "Cookie"'),
    ],
)
def test_a_secret_too_short_to_blank_out_is_refused_at_registration(
    store: PetStore, options: dict[str, Any], problem: str
) -> None:
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_openapi("pets", **{"spec": store.spec_url, **options})
    assert str(info.value) == (
        f'REST API "pets": {problem} holds a secret shorter than 8 characters, too short to '
        "blank out of what the API answers"
    )
    assert "pw" not in str(info.value) and "abc" not in str(info.value)


def test_a_same_origin_redirect_carries_the_credentials_again(
    mirror: CodeMode, store: PetStore
) -> None:
    said = run(mirror, 'return pets.hop(to="/v1/mirror?page=2")')
    hop, landed = store.seen[-2:]
    assert (hop.raw_path, landed.raw_path) == ("/v1/hop", "/v1/mirror")
    assert landed.query == "page=2&api_key=SECRET+q%2F%2B%3D%26%C3%A9-key"
    assert landed.headers["cookie"] == f"sid={COOKIE}; lang=en"
    assert landed.headers["authorization"] == hop.headers["authorization"]
    assert (said["sid"], said["key"], said["password"]) == ("[redacted]",) * 3
    with pet_store() as other:  # another origin: not followed, nothing sent there
        error = fail(mirror, f"return pets.hop(to={other.url + '/v1/mirror'!r})")
        assert error.detail == "the API redirected to another origin"
        assert other.seen == []


def test_a_redirects_user_and_password_never_replace_the_hosts_credentials(
    mirror: CodeMode, store: PetStore
) -> None:
    """An API's open redirect to `http://x:y@its-own-host/...` would make an HTTP client
    send `Basic x:y` (the program's) in place of the host's `Authorization`."""
    port = store.url.rsplit(":", 1)[1]
    landing = f"http://x:y@127.0.0.1:{port}/v1/mirror"
    said = run(mirror, f"return pets.hop(to={landing!r})")
    hop, landed = store.seen[-2:]
    assert (hop.raw_path, landed.raw_path) == ("/v1/hop", "/v1/mirror")
    assert landed.headers["authorization"] == hop.headers["authorization"]  # the host's
    assert landed.headers["authorization"] != "Basic " + base64.b64encode(b"x:y").decode()
    assert said["password"] == "[redacted]"
    with CodeMode(authorizer=AllowAll()) as cm:  # no Authorization of the host's: none
        cm.add_openapi("pets", spec=store.spec_url, auth={"key": KEY}, include=["hop"])
        said = run(cm, f"return pets.hop(to={landing!r})")
    assert "authorization" not in store.seen[-1].headers
    assert said["authorization"] is None


@pytest.mark.parametrize("prefix", ["", "Bearer ", "Bearer  ", "x"])
@pytest.mark.parametrize("alphabet", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_secret_echoed_inside_base64_is_blanked_wherever_it_sits(
    prefix: str, alphabet: Any
) -> None:
    """An API that echoes the whole `Authorization` value base64-encoded (`Bearer <token>`)
    carries the token's bytes at any place in a group of three: each is found."""
    token = "tok-CANARY-7f3a91b2c4"
    echoed = alphabet(f"{prefix}{token}".encode()).decode()
    redacted = Redactor([token]).redact(f"seen: {echoed}")
    assert "[redacted]" in redacted
    for piece in redacted.removeprefix("seen: ").split("[redacted]"):
        for offset in range(4):  # whatever is left decodes to nothing of the token
            left = piece.translate(str.maketrans("-_", "+/"))[offset:]
            decoded = base64.b64decode(left[: len(left) // 4 * 4])
            assert b"CANARY" not in decoded and b"7f3a91b2" not in decoded


def test_text_that_only_looks_like_base64_is_left_alone() -> None:
    assert Redactor(["tok-CANARY-7f3a91b2c4"]).redact("dG9rZW4gb2YgYW5vdGhlcg==") == (
        "dG9rZW4gb2YgYW5vdGhlcg=="
    )
