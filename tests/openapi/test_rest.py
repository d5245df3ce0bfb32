"""A REST API behind code mode, against the tests' own pet store on loopback: what the
model sees, what goes on the wire, and what never crosses (the canary)."""

from __future__ import annotations

import base64
import html
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

import codemode
from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.errors import RegistrationError
from codemode.openapi.secrets import Redactor
from tests.conftest import CANARY, assert_no_canary, run_error
from tests.openapi.pets import COMMON, SPEC, PetStore, pet_store, served
from tests.openapi.records import ECHO as _ECHOED

pytestmark = pytest.mark.slow

SECRET = "SECRET-api-token-7f3a"
"""The credentials' canary (the server plants CANARY in what it writes)."""
TOKEN = "policy-token-1"
"""A bearer token for the tests that are not about credentials."""


@pytest.fixture(scope="module")
def store() -> Iterator[PetStore]:
    with pet_store() as running:
        yield running


@pytest.fixture
def events() -> list[Any]:
    return []


@pytest.fixture
def cm(store: PetStore, events: list[Any]) -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as host:
        host.add_openapi(
            "pets",
            spec=store.spec_url,
            auth={"bearer": SECRET, "key": SECRET + "-q", "basic": ("ada", SECRET + "-b")},
            timeout=2,
        )
        yield host


def run(cm: CodeMode, body: str) -> Any:
    source = "def main():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return cm.execute(source, subject="alice").value


def fail(cm: CodeMode, body: str) -> codemode.CodeModeError:
    return run_error(cm, "def main():\n" + "".join(f"    {line}\n" for line in body.splitlines()))


def test_each_operation_is_a_capability_named_by_its_operation_id(cm: CodeMode) -> None:
    assert sorted(cm.catalog.names()) == [
        "pets.away",
        "pets.bomb",
        "pets.boom",
        "pets.broken",
        "pets.create_pet",
        "pets.deep",
        "pets.delete_pets_pet_id",
        "pets.done",
        "pets.drip",
        "pets.get_slot",
        "pets.gone",
        "pets.hop",
        "pets.host",
        "pets.huge",
        "pets.list_pets",
        "pets.login",
        "pets.logo",
        "pets.mirror",
        "pets.nothing_said",
        "pets.put_notes",
        "pets.readme",
        "pets.search",
        "pets.show_pet_by_id",
        "pets.slow",
        "pets.whoami",
    ]
    assert cm.describe("pets.list_pets").signature == (
        "pets.list_pets(*, limit: int | None = None, tags: list[str] | None = None, "
        "kind: Literal['cat', 'dog'] | None = None, X_Trace: str | None = None) -> list[Pet]"
    )
    create = cm.describe("pets.create_pet")
    assert create.signature == (  # the body's properties, without the read-only id
        "pets.create_pet(*, name: str, tag: str | None = None, owner: Owner | None = None) -> Pet"
    )
    assert create.description == "POST /pets\n\nAdd a pet."
    assert create.annotations == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": True,
    }
    assert cm.describe("pets.show_pet_by_id").annotations["readOnlyHint"] is True
    assert cm.describe("pets.show_pet_by_id").shapes == (
        "Pet: dict {id: int, name: str (What the pet answers to.), tag?: str | None, "
        'owner?: Owner}, read as r["id"]',
        'Owner: dict {login?: str}, read as r["login"]',  # from common.yaml
    )
    assert cm.describe("pets.put_notes").signature == (
        "pets.put_notes(*, body: list[str] | None = None) -> PutNotesResult"
    )


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


def test_failures_that_are_not_the_apis_answer_say_their_kind_only(
    cm: CodeMode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "codemode"):
        failures = {
            body: fail(cm, body)
            for body in (
                "return pets.boom()",
                "return pets.broken()",
                "return pets.away()",
                "return pets.slow(seconds=5)",
                "return pets.huge()",
                "return pets.bomb()",
                'return pets.bomb(encoding="br")',
            )
        }
    assert [e.detail for e in failures.values()] == [
        "HTTP 500 Internal Server Error",
        "the API's response does not match its declared schema",
        "the API redirected to another origin",
        "the API did not answer within 2 s",
        "the API's response is too large",
        "the API's response is too large",
        "the API's response cannot be read",
    ]
    assert_no_canary(*failures.values())
    assert "answered 500" in caplog.text and "redirected" in caplog.text


def test_an_unreachable_api_is_a_connection_failure(store: PetStore) -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        spec = _document(store)
        cm.add_openapi("pets", spec=spec, base_url="http://127.0.0.1:9/v1", include=["readme"])
        assert str(fail(cm, "return pets.readme()")) == (
            "capability failed: the connection to the API failed"
        )


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


def test_gathered_calls_run_side_by_side(cm: CodeMode, store: PetStore) -> None:
    store.most_in_flight.clear()
    source = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(*[pets.slow(seconds=0.3) for _ in range(4)])\n"
    )
    assert cm.execute(source, subject="alice").value == [{"waited": 0.3}] * 4
    assert store.most_in_flight[0.3] == 4


def test_policies_see_the_methods_hints(store: PetStore) -> None:
    asked: list[AuthorizationRequest] = []

    def no_destruction(request: AuthorizationRequest) -> bool:
        asked.append(request)
        return not request.annotations["destructiveHint"]

    with CodeMode(authorizer=no_destruction) as cm:
        cm.add_openapi("pets", spec=store.spec_url, include=["pets"], auth={"bearer": TOKEN})
        assert run(cm, 'return pets.show_pet_by_id(petId="1")')["name"] == "Rex"
        assert fail(cm, 'return pets.create_pet(name="Z")').code == "permission_denied"
    assert [r.arguments for r in asked] == [{"petId": "1"}, {"name": "Z"}]


def test_include_and_exclude_take_ids_tags_and_routes(store: PetStore) -> None:
    def names(**options: Any) -> list[str]:
        with CodeMode(authorizer=AllowAll()) as cm:
            return sorted(cm.add_openapi("pets", spec=store.spec_url, **options))

    assert names(include=["pets"], exclude=["POST /pets"]) == [
        "pets.list_pets",
        "pets.show_pet_by_id",
    ]
    assert names(include=["GET /pets*"], exclude=["listPets"]) == ["pets.show_pet_by_id"]
    assert names(include=["admin", "read*"]) == ["pets.delete_pets_pet_id", "pets.readme"]
    with pytest.raises(RegistrationError) as info:
        names(include=["listPet"])
    assert str(info.value) == (
        'REST API "pets": no operation, tag or "METHOD /path" matches "listPet"'
    )


def test_registration_goes_through_the_catalog_and_its_policy(store: PetStore) -> None:
    class Refusing:
        def __call__(self, request: AuthorizationRequest) -> None:
            return None

        def prepare(self, capabilities: Any) -> Any:
            if any(c.name.startswith("pets.") for c in capabilities):
                raise ValueError("no pets")
            return self

    with CodeMode(authorizer=Refusing()) as cm:
        cm.prepare()
        with pytest.raises(RegistrationError, match="the policy refuses them"):
            cm.add_openapi("pets", spec=store.spec_url)
        assert not [n for n in cm.catalog.names() if n.startswith("pets.")]


def _document(store: PetStore) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(SPEC.replace("common.yaml#/Owner", "#/components/schemas/Pet")))


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            {"spec": {"openapi": "3.1.0", "paths": {}}},
            "the document names no server; give base_url",
        ),
        ({"spec": {"swagger": "2.0"}}, "Swagger 2.0 is not supported; convert it to OpenAPI 3"),
        (
            {"spec": {"openapi": "3.1.0", "paths": {}}, "base_url": "ftp://x"},
            "base_url must be an http(s) URL, not 'ftp://x'",
        ),
        (
            {"auth": {"bearr": "x"}},
            'auth names the security scheme "bearr", which is not declared; did you mean "bearer"?',
        ),
        (
            {"auth": {"basic": "x"}},
            'auth "basic" is HTTP basic: give a (user, password) pair (["user", "password"] in a config file)',
        ),
        (
            {
                "spec": {
                    "openapi": "3.1.0",
                    "servers": [{"url": "https://a"}, {"url": "https://b"}],
                    "paths": {},
                }
            },
            "the document names several servers; give base_url",
        ),
    ],
)
def test_registration_problems_are_one_clear_error(
    store: PetStore, options: dict[str, Any], problem: str
) -> None:
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_openapi("pets", **{"spec": store.spec_url, **options})
    assert str(info.value) == f'REST API "pets": {problem}'


def test_references_stay_with_the_document(tmp_path: Path, store: PetStore) -> None:
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "pets.yaml").write_text(SPEC)
    (tmp_path / "api" / "common.yaml").write_text(COMMON)
    with CodeMode(authorizer=AllowAll()) as cm:
        names = cm.add_openapi("pets", spec=tmp_path / "api" / "pets.yaml", base_url=store.url)
        assert "pets.show_pet_by_id" in names
    (tmp_path / "api" / "pets.yaml").write_text(SPEC.replace("common.yaml", "../secret.yaml"))
    (tmp_path / "secret.yaml").write_text(COMMON)
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("pets", spec=tmp_path / "api" / "pets.yaml", base_url=store.url)
        assert "pets.show_pet_by_id" not in cm.catalog.names()  # the operations that use it
        assert "pets.readme" in cm.catalog.names()
    remote = SPEC.replace("common.yaml#/Owner", "http://localhost:9/x.yaml#/Owner")
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("pets", spec=_parsed(remote), base_url=store.url)
        assert "pets.show_pet_by_id" not in cm.catalog.names()


def _parsed(text: str) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(text))


def test_a_config_file_puts_a_rest_api_behind_the_cli(
    tmp_path: Path, store: PetStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from codemode.cli import main

    (tmp_path / "pets.yaml").write_text(SPEC)
    (tmp_path / "common.yaml").write_text(COMMON)
    config = tmp_path / "servers.json"
    config.write_text(
        json.dumps(
            {
                "openApi": {
                    "pets": {
                        "spec": "pets.yaml",
                        "baseUrl": store.url + "/v1",
                        "auth": {"bearer": "${PETS_TOKEN}", "basic": ["ada", SECRET + "-b"]},
                        "include": ["pets"],
                        "timeout": 5,
                    }
                }
            }
        )
    )
    monkeypatch.setenv("PETS_TOKEN", SECRET)
    described = CliRunner().invoke(main, ["describe", str(config), "pets.show_pet_by_id"])
    assert described.exit_code == 0, described.output
    assert "pets.show_pet_by_id(*, petId: str) -> Pet" in described.output
    program = tmp_path / "p.py"
    program.write_text("def main():\n    return pets.show_pet_by_id(petId='1')['name']\n")
    store.seen.clear()
    ran = CliRunner().invoke(main, ["run", str(config), str(program)])
    assert ran.exit_code == 0, ran.output
    assert ran.output.strip() == '"Rex"'
    assert store.seen[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in described.output + ran.output


def test_a_compressed_body_is_bounded_as_it_inflates(cm: CodeMode) -> None:
    import tracemalloc

    fail(cm, "return pets.bomb()")  # warm: the pool's connection is made
    tracemalloc.start()
    try:
        error = fail(cm, "return pets.bomb()")  # ~100 KB of gzip, 100 MB inflated
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.detail == "the API's response is too large"
    assert peak < 32 * 2**20  # the 8 MiB bound and its copies, never the 100 MB


CEDAR = """
@id("everything")
permit (principal, action, resource);

@id("no-destructive-tools")
forbid (principal, action, resource)
when { resource has destructiveHint && resource.destructiveHint };
"""
REGO = """
package codemode.authz

import rego.v1

default allow := false

allow if not input.context.destructiveHint
"""


@pytest.mark.parametrize("kind", ["cedar", "rego"])
def test_the_gateway_guides_policies_cover_rest_operations_unchanged(
    store: PetStore, kind: str
) -> None:
    from codemode.authz.cedar import CedarAuthorizer
    from codemode.authz.rego import RegoAuthorizer

    authorizer: Any = (
        CedarAuthorizer(CEDAR) if kind == "cedar" else RegoAuthorizer(modules={"p.rego": REGO})
    )
    with CodeMode(authorizer=authorizer) as cm:
        cm.add_openapi("pets", spec=store.spec_url, include=["pets"], auth={"bearer": TOKEN})
        assert run(cm, 'return pets.show_pet_by_id(petId="1")')["name"] == "Rex"
        assert fail(cm, 'return pets.create_pet(name="Z")').code == "permission_denied"


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


def test_the_pool_keeps_no_cookie_from_one_caller_for_the_next(cm: CodeMode) -> None:
    run(cm, 'return pets.login(user="alice")')  # the API sets session=alice
    assert run(cm, "return pets.whoami()")["cookie"] is None


def test_a_credential_the_api_echoes_is_blanked_out(
    cm: CodeMode, events: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        error = fail(cm, 'return pets.create_pet(name="echo")')
    assert error.detail == (
        'HTTP 400 Bad Request: {"code":400,"message":"bad token Bearer [redacted]"}'
    )
    assert SECRET not in repr(events) + caplog.text


def test_what_the_document_declares_decides_what_crosses(cm: CodeMode) -> None:
    assert fail(cm, "return pets.gone()").detail == "HTTP 410 Gone"  # no body declared
    logo = run(cm, "return pets.logo()")
    assert logo == {"type": "binary", "mime_type": "image/png", "size": 64}  # not its header
    assert fail(cm, "return pets.deep()").detail == "the API's response is not JSON"


def test_the_timeout_bounds_the_whole_exchange(cm: CodeMode) -> None:
    assert fail(cm, "return pets.drip()").detail == "the API did not answer within 2 s"


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


def test_a_yaml_alias_bomb_is_refused_at_registration(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text(
        "openapi: 3.1.0\npaths: {}\nx-bomb:\n" + "".join(f"  {line}\n" for line in levels)
    )
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_openapi("bomb", spec=path, base_url="http://127.0.0.1:9")
    assert str(info.value) == (
        'REST API "bomb": the document repeats its parts (YAML aliases) too often'
    )


def test_a_document_too_deep_to_read_is_a_registration_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"openapi": "3.1.0", "paths": {}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_openapi("deep", spec=path, base_url="http://127.0.0.1:9")
    assert str(info.value).endswith("nests too deeply")


def test_no_container_or_spelling_gets_a_path_value_past_its_segment(cm: CodeMode) -> None:
    for call in (
        'pets.get_slot(shelf=[], slot={"row": 1})',
        'pets.get_slot(shelf=["a"], slot={})',
        'pets.get_slot(shelf=["a"], slot={"row": 1, "..": 2})',
        'pets.show_pet_by_id(petId="..;x")',
    ):
        assert fail(cm, f"return {call}").code == "invalid_arguments", call


def test_an_echo_in_any_json_spelling_is_blanked_out() -> None:
    from codemode.openapi.client import Api, Credential

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


def test_hints_are_trusted_from_the_hosts_own_document_only(
    store: PetStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # createPet claims `readOnlyHint: true, destructiveHint: false`: a POST that the
    # API's own document says is harmless.
    def annotations(spec: Any, **options: Any) -> dict[str, bool]:
        with CodeMode(authorizer=AllowAll()) as cm:
            cm.add_openapi("pets", spec=spec, base_url=store.url + "/v1", **options)
            return dict(cm.describe("pets.create_pet").annotations)

    post = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}
    claimed = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": False}
    with caplog.at_level(logging.WARNING, "codemode.openapi"):
        assert annotations(store.spec_url) == {**post, "openWorldHint": True}
    assert caplog.messages == [
        "REST API pets: x-codemode-hints not used (1 operation): the document was fetched "
        "from a URL (trust_hints=True trusts it); their methods' hints apply"
    ]
    assert annotations(store.spec_url, trust_hints=True) == {**claimed, "openWorldHint": True}
    (tmp_path / "pets.yaml").write_text(SPEC)
    (tmp_path / "common.yaml").write_text(COMMON)
    assert annotations(tmp_path / "pets.yaml") == {**claimed, "openWorldHint": True}
    caplog.clear()
    with caplog.at_level(logging.WARNING, "codemode.openapi"):
        assert annotations(tmp_path / "pets.yaml", trust_hints=False) == {
            **post,
            "openWorldHint": True,
        }
    assert caplog.messages == [
        "REST API pets: x-codemode-hints not used (1 operation): the host does not trust them "
        "(trust_hints=False); their methods' hints apply"
    ]
    config = tmp_path / "apis.json"
    config.write_text(json.dumps({"openApi": {"pets": {"spec": "x", "trustHints": True}}}))
    from codemode.gateway.config import load_config

    [entry] = load_config(config)
    assert entry.options["trust_hints"] is True
