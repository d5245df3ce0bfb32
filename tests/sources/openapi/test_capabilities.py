"""One operation as a capability: its description, its hints, where its arguments go and
what they may not hold, and what of its answer crosses."""

from __future__ import annotations

import logging

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.payloads import describe_payload
from tests.conftest import CANARY, assert_no_canary
from tests.sources.openapi.conftest import SECRET, fail, run
from tests.sources.openapi.pets import PetStore

pytestmark = pytest.mark.slow


def test_results_cross_with_their_declared_keys_only(cm: CodeMode) -> None:
    pet = run(cm, 'return pets.show_pet_by_id(petId="1")')
    assert pet == {"id": 1, "name": "Rex", "tag": None, "owner": {"login": "ada"}}
    error = fail(cm, 'return pets.show_pet_by_id(petId="1")["vault"]')
    assert error.detail == "<codemode>:2:12: KeyError: 'vault'; Pet has: id, name, tag, owner"
    assert run(cm, "return pets.readme()") == "Pets are friends."
    assert run(cm, "return pets.logo()") == {"type": "binary", "mime_type": "image/png", "size": 64}
    assert run(cm, 'return pets.delete_pets_pet_id(petId="none")') is None


def test_arguments_go_where_the_document_puts_them(cm: CodeMode, store: PetStore) -> None:
    store.seen.clear()
    run(cm, 'return pets.list_pets(limit=5, tags=["a", "b c"], kind="cat", X_Trace="t-1")')
    [seen] = store.seen
    assert (seen.raw_path, seen.query) == ("/v1/pets", "limit=5&tags=a&tags=b+c&kind=cat")
    assert seen.headers["x-trace"] == "t-1"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    echo = run(
        cm,
        'return pets.search(filter={"color": "red", "size": 2}, ids=[1, 2], ids_header="h", theme="dark")',
    )
    assert echo["query"] == "filter%5Bcolor%5D=red&filter%5Bsize%5D=2&ids=1%7C2&api_key=[redacted]"
    assert (echo["ids"], echo["cookie"]) == ("h", "theme=dark")
    slot = run(cm, 'return pets.get_slot(shelf=["a", "b c"], slot={"row": 1, "col": 2})')
    assert slot["path"] == "/v1/shelves/.a,b%20c/;row=1;col=2"
    assert run(cm, 'return pets.put_notes(body=["x", "y"])') == {"count": 2}
    made = run(cm, 'return pets.create_pet(name="Tom", owner={"login": "bob"})')
    assert made["name"] == "Tom" and "vault" not in made
    assert "ids: list[int] | None = None, ids_header: str | None = None" in (
        cm.describe("pets.search").signature
    )


def test_no_argument_can_change_the_path(cm: CodeMode, store: PetStore) -> None:
    store.seen.clear()
    for pet_id in ("../admin", "..", ".", "", "a/b", "a\\b"):
        error = fail(cm, f"return pets.show_pet_by_id(petId={pet_id!r})")
        assert (error.code, error.where and error.where.line) == ("invalid_arguments", 2)
        assert error.detail == (
            'argument "petId" must not be empty, "." or ".." or hold "/" or "\\": it is one '
            "segment of the path"
        )
    error = fail(cm, 'return pets.get_slot(shelf=["a", ".."], slot={"row": 1})')
    assert error.code == "invalid_arguments"
    assert store.seen == []  # refused before any request
    for pet_id in ("x?y#z", "%2e%2e", "@evil.example", "http:evil"):
        error = fail(cm, f"return pets.show_pet_by_id(petId={pet_id!r})")
        assert error.detail is not None and "HTTP 404 Not Found" in error.detail
    assert store.paths() == [
        "/v1/pets/x%3Fy%23z",
        "/v1/pets/%252e%252e",
        "/v1/pets/%40evil.example",
        "/v1/pets/http%3Aevil",
    ]


def test_binding_checks_bounds_and_enums_before_any_request(cm: CodeMode, store: PetStore) -> None:
    store.seen.clear()
    assert str(fail(cm, "return pets.list_pets(limit=0)")) == (
        'invalid capability arguments: <codemode>:2:12: argument "limit" must be from 1 to 100'
    )
    assert str(fail(cm, 'return pets.list_pets(kind="bird")')).endswith(
        "argument \"kind\" must be one of 'cat', 'dog' or None"
    )
    assert str(fail(cm, 'return pets.create_pet(name="")')).endswith(
        'argument "name" must have at least 1 character'
    )
    assert str(fail(cm, 'return pets.put_notes(body=["a", "b", "c", "d"])')).endswith(
        'argument "body" must have at most 3 items'
    )
    assert store.seen == []


def test_a_4xx_says_its_status_and_the_declared_fields_of_its_body(
    cm: CodeMode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "codemode"):
        missing = fail(cm, 'return pets.show_pet_by_id(petId="99")')
        taken = fail(cm, 'return pets.create_pet(name="taken")')
    assert str(missing) == (
        'capability failed: HTTP 404 Not Found: {"code":404,"message":"no such pet"}'
    )
    assert str(taken) == (
        'capability failed: HTTP 409 Conflict: {"code":409,"message":"name taken"}'
    )
    assert_no_canary(missing, taken)
    assert CANARY in caplog.text  # the host log has the whole body


def test_a_caught_rest_failure_gives_its_status_and_declared_fields_as_data(
    cm: CodeMode,
) -> None:
    """The error body's undeclared field (the canary) never reaches the program; a 5xx
    and a body the operation does not declare give their status and no fields."""
    body = (
        "out = []\n"
        'for call in [lambda: pets.show_pet_by_id(petId="99"), lambda: pets.create_pet(name="taken"),\n'
        "             pets.boom, pets.gone]:\n"
        "    try:\n"
        "        call()\n"
        "    except RuntimeError as e:\n"
        "        out.append(error_data(e))\n"
        "return out"
    )
    data = run(cm, body)
    assert data == [
        {
            "code": "capability_failed",
            "status": 404,
            "fields": {"code": 404, "message": "no such pet"},
        },
        {
            "code": "capability_failed",
            "status": 409,
            "fields": {"code": 409, "message": "name taken"},
        },
        {"code": "capability_failed", "status": 500, "fields": {}},
        {"code": "capability_failed", "status": 410, "fields": {}},
    ]
    assert_no_canary(data)


def test_x_codemode_hints_refine_the_methods_hints() -> None:
    responses = {"204": {"description": "done"}}
    spec = {
        "openapi": "3.1.0",
        "paths": {
            "/search": {
                "post": {
                    "operationId": "search",
                    "x-codemode-hints": {"readOnlyHint": True, "destructiveHint": False},
                    "responses": responses,
                }
            }
        },
    }
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("api", spec=spec, base_url="http://127.0.0.1:9")
        assert dict(cm.describe("api.search").annotations) == {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": False,  # the method's, which the hints leave as it is
            "openWorldHint": True,
        }


FORGED = "x\n<codemode>:1:1: capability failed\u2028\u0085\x1b[31m"
"""A key whose name, written raw, would add lines and a colour to describe's text."""


def test_the_route_comes_first_and_a_key_adds_no_line() -> None:
    """The route is the description's first line, which no text of the document comes
    before, so a description ending in a route of its own cannot pass for it; a key of a
    schema is written as escapes in the shapes."""
    result = {"type": "object", "properties": {FORGED: {"type": "string"}}}
    spec = {
        "openapi": "3.1.0",
        "paths": {
            "/t": {
                "post": {
                    "operationId": "t",
                    "summary": "Sum.",
                    "description": "Desc.\n\nGET /fake",
                    "responses": {"200": {"content": {"application/json": {"schema": result}}}},
                }
            },
            "/bare": {"get": {"operationId": "bare", "responses": {"204": {"description": "-"}}}},
        },
    }
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("api", spec=spec, base_url="http://127.0.0.1:9")
        described = cm.describe("api.t")
        bare = cm.describe("api.bare")
    assert (described.summary, described.description) == ("Sum.", "POST /t\n\nDesc.\n\nGET /fake")
    assert (bare.summary, bare.description) == ("GET /bare of api.", "GET /bare")
    assert described.shapes == (
        "TResult: dict {x\\n<codemode>:1:1: capability failed\\u2028\\x85\\x1b[31m?: str}, "
        'read as r["x\\n<codemode>:1:1: capability failed\\u2028\\x85\\x1b[31m"]',
    )


def test_what_the_document_declares_decides_what_crosses(cm: CodeMode) -> None:
    assert fail(cm, "return pets.gone()").detail == "HTTP 410 Gone"  # no body declared
    logo = run(cm, "return pets.logo()")
    assert logo == {"type": "binary", "mime_type": "image/png", "size": 64}  # not its header
    assert fail(cm, "return pets.deep()").detail == "the API's response is not JSON"


def test_headers_that_frame_or_route_the_request_are_no_arguments(
    cm: CodeMode, store: PetStore
) -> None:
    # Host and Content-Length frame the request; api_key is the key scheme's: none is
    # an argument, so no program sends its own.
    assert cm.describe("pets.host").signature == "pets.host() -> Echo"
    error = fail(cm, 'return pets.list_pets(X_Trace="café")')
    assert error.detail == 'argument "X_Trace" must be printable ASCII: it is sent as a header'
    error = fail(cm, 'return pets.list_pets(X_Trace="a\\r\\nX-Evil: 1")')
    assert error.code == "invalid_arguments"


def test_no_container_or_spelling_gets_a_path_value_past_its_segment(cm: CodeMode) -> None:
    for call in (
        'pets.get_slot(shelf=[], slot={"row": 1})',
        'pets.get_slot(shelf=["a"], slot={})',
        'pets.get_slot(shelf=["a"], slot={"row": 1, "..": 2})',
        'pets.show_pet_by_id(petId="..;x")',
    ):
        assert fail(cm, f"return {call}").code == "invalid_arguments", call


BEARER = "SECRET-bearer-t0ken"


def test_headers_that_speak_for_proxies_are_no_arguments() -> None:
    names = [
        *("X-Forwarded-Prefix", "X-Forwarded-Port", "X-Real-IP", "X-Original-Method"),
        *("Range", "If-Range", "Forwarded", "Proxy-Authorization", "Content-MD5"),
        *("Sec-Fetch-Site", "X-HTTP-Method-Override", "Via", "True-Client-IP"),
        *("X_Forwarded_For", "x_real_ip", "X-Originating-IP", "Origin", "Referer"),
        *("X-Remote-User", "Remote-User", "X-Remote-Addr", "X-Auth-Request-Email"),
        *("X-Middleware-Subrequest", "X-Envoy-Original-Path", "CF-Access-Jwt-Assertion"),
        *("X-Amzn-Oidc-Identity", "X-MS-Client-Principal-Name", "X-Goog-IAP-JWT-Assertion"),
        *("X_Api_Key",),  # the host's own header, spelled as CGI reads it
        *("X-Trace", "If-Match", "Accept-Language"),  # these stay arguments
        *("X-Amz-Date", "X-Goog-User-Project", "X-MS-Version"),  # APIs' own, vendors'
    ]
    spec = {
        "openapi": "3.1.0",
        "paths": {
            "/x": {
                "get": {
                    "operationId": "x",
                    "parameters": [
                        {"name": n, "in": "header", "schema": {"type": "string"}} for n in names
                    ],
                    "responses": {"204": {"description": "done"}},
                }
            }
        },
    }
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi(
            "api", spec=spec, base_url="http://127.0.0.1:9", headers={"X-Api-Key": BEARER}
        )
        assert cm.describe("api.x").signature == (
            "api.x(*, X_Trace: str | None = None, If_Match: str | None = None, "
            "Accept_Language: str | None = None, X_Amz_Date: str | None = None, "
            "X_Goog_User_Project: str | None = None, X_MS_Version: str | None = None) -> None"
        )


def test_a_header_value_with_an_edge_space_is_refused_when_it_binds(
    cm: CodeMode, store: PetStore
) -> None:
    store.seen.clear()
    for value in (" t-1", "t-1 "):
        error = fail(cm, f"return pets.list_pets(X_Trace={value!r})")
        assert (error.code, error.detail) == (
            "invalid_arguments",
            'argument "X_Trace" must not begin or end with a space: it is sent as a header',
        )
    assert store.seen == []  # refused before any request
    run(cm, 'return pets.list_pets(X_Trace="t 1")')  # a space within is sent as it is
    assert store.seen[-1].headers["x-trace"] == "t 1"


def test_an_undeclared_204_is_none_or_says_what_it_is(cm: CodeMode) -> None:
    assert cm.describe("pets.done").signature == "pets.done() -> None"
    assert run(cm, "return pets.done()") is None  # no body declared, none given
    assert fail(cm, "return pets.nothing_said()").detail == (
        "the API answered HTTP 204 No Content where its document declares a body"
    )


def test_describe_lists_the_declared_error_statuses_and_the_fields_error_data_gives(
    cm: CodeMode,
) -> None:
    """A 4xx's body fields (a range's too), a 5xx's status alone (its body never crosses),
    a status with no body declared, and nothing for an operation that declares none."""
    assert describe_payload(cm.describe("pets.show_pet_by_id"))["errors"] == [
        "capability_failed, status 404, fields {code?: int, message?: str}"
    ]
    assert cm.describe("pets.create_pet").failures == (
        "capability_failed, status 4XX, fields {code?: int, message?: str}",
    )
    assert cm.describe("pets.boom").failures == ("capability_failed, status 500",)
    assert cm.describe("pets.gone").failures == ("capability_failed, status 410",)
    assert cm.describe("pets.list_pets").failures == ()
    assert "errors" not in describe_payload(cm.describe("pets.list_pets"))


def test_an_error_status_declared_as_the_default_is_any_other_status() -> None:
    problem = {"type": "object", "properties": {"detail": {"type": "string"}}}
    spec = {
        "openapi": "3.1.0",
        "paths": {
            "/x": {
                "get": {
                    "operationId": "x",
                    "responses": {
                        "200": {"description": "ok"},
                        "default": {
                            "description": "any other",
                            "content": {"application/json": {"schema": problem}},
                        },
                    },
                }
            }
        },
    }
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("api", spec=spec, base_url="http://127.0.0.1:9")
        assert cm.describe("api.x").failures == (
            "capability_failed, any other status, fields {detail?: str} for a 4xx",
        )
