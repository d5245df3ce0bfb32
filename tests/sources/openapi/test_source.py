"""A REST API as a source, against the tests' own pet store on loopback: what it registers
(operations, policies, include and exclude, references, a config file) and what it refuses."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.errors import RegistrationError
from tests.sources.openapi.conftest import SECRET, TOKEN, fail, run
from tests.sources.openapi.pets import COMMON, SPEC, PetStore

pytestmark = pytest.mark.slow


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


KEY = "SECRET q/+=&é-key"
"""A query API key whose every character a URL encodes, as an API may echo it."""


PASSWORD = "SECRET/pw+x"


COOKIE = "SECRET-cookie-v4lue"


HEADER_KEY = "SECRET-hdr/key+1"


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
    from codemode.sources.config import load_config

    [entry] = load_config(config)
    assert entry.options["trust_hints"] is True
