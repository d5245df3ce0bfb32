"""Reading a document: names, schemas as 2020-12, references, and serialization by style
(the tables of the OpenAPI specification's own examples)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.errors import RegistrationError
from codemode.gateway.schema import SchemaError
from codemode.openapi import client, wire
from codemode.openapi.document import Schemas, SpecError, load
from codemode.openapi.operations import Argument, default_name, operations, snake


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("listPets", "list_pets"),
        ("getHTTPStatus", "get_http_status"),
        ("pets/list", "pets_list"),
        ("read_item_items__item_id__get", "read_item_items_item_id_get"),
        ("Delete-Pet", "delete_pet"),
        ("import", "import_"),
        ("2fa", "op_2fa"),
    ],
)
def test_operation_ids_become_snake_case(given: str, name: str) -> None:
    assert snake(given) == name


def test_an_operation_without_an_id_is_named_by_method_and_path() -> None:
    assert default_name("get", "/pets/{petId}/photos") == "get_pets_pet_id_photos"
    assert default_name("delete", "/") == "delete"


def doc(paths: dict[str, Any], version: str = "3.1.0", **extra: Any) -> dict[str, Any]:
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def test_openapi_3_0_schemas_become_2020_12() -> None:
    document = load(
        doc(
            {},
            "3.0.3",
            components={
                "schemas": {
                    "Age": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                    "Name": {"type": "string", "nullable": True, "example": "Rex"},
                    "Kind": {"type": "string", "enum": ["a"], "nullable": True},
                    "Maybe": {"allOf": [{"$ref": "#/components/schemas/Name"}], "nullable": True},
                }
            },
        )
    )
    schemas = Schemas(document, "request")
    for name in ("Age", "Name", "Kind", "Maybe"):
        schemas.convert({"$ref": f"#/components/schemas/{name}"}, document.uri)
    assert schemas.defs == {
        "Age": {"type": "integer", "exclusiveMinimum": 0},
        "Name": {"type": ["string", "null"], "examples": ["Rex"]},
        "Kind": {"type": ["string", "null"], "enum": ["a", None]},
        "Maybe": {"anyOf": [{"allOf": [{"$ref": "#/$defs/Name"}]}, {"type": "null"}]},
    }


def test_read_only_and_write_only_properties_keep_to_their_direction() -> None:
    document = load(doc({}))
    schema = {
        "type": "object",
        "required": ["id", "password"],
        "properties": {
            "id": {"type": "integer", "readOnly": True},
            "password": {"type": "string", "writeOnly": True},
        },
    }
    sent = Schemas(document, "request").convert(schema, document.uri)
    returned = Schemas(document, "response").convert(schema, document.uri)
    assert (sent["properties"].keys(), sent["required"]) == ({"password"}, ["password"])
    assert (returned["properties"].keys(), returned["required"]) == ({"id"}, ["id"])


def test_a_recursive_schema_is_one_recursive_shape() -> None:
    tree = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}},
        },
    }
    spec = doc(
        {
            "/tree": {
                "get": {
                    "operationId": "getTree",
                    "responses": {
                        "200": {
                            "description": "t",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Tree"}
                                }
                            },
                        }
                    },
                }
            }
        },
        components={"schemas": {"Tree": tree}},
    )
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("trees", spec=spec, base_url="http://127.0.0.1:9")
        info = cm.describe("trees.get_tree")
    assert info.signature == "trees.get_tree() -> Tree"
    assert info.shapes == ('Tree: dict {label?: str, children?: list[Tree]}, read as r["label"]',)


def test_a_yaml_file_with_integer_statuses_and_dates(tmp_path: Any) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(
        "openapi: 3.0.0\ninfo: {title: t, version: 1}\nx-released: 2024-01-02\npaths:\n"
        "  /a:\n    get:\n      operationId: a\n      responses:\n"
        "        200: {description: ok, content: {text/plain: {}}}\n"
    )
    document = load(path)
    assert document.root["x-released"] == "2024-01-02"
    [operation] = operations(document, set()).operations
    assert list(operation.responses) == ["200"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"swagger": "2.0"}', "Swagger 2.0 is not supported; convert it to OpenAPI 3"),
        ('{"openapi": "4.0.0"}', "\"openapi\" must be a 3.0 or 3.1 version, not '4.0.0'"),
        ("openapi: [", "is neither JSON nor YAML at line 2, column 1"),
        ("[1, 2]", "the document is not an object"),
    ],
)
def test_a_document_that_cannot_be_read_says_why(tmp_path: Any, text: str, problem: str) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load(path)
    assert str(info.value).endswith(problem)


def test_a_broken_schema_skips_only_the_operations_that_use_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def get(ref: str) -> dict[str, Any]:
        media = {"application/json": {"schema": {"$ref": ref}}}
        return {"get": {"responses": {"200": {"description": "d", "content": media}}}}

    spec = doc(
        {
            "/a": get("#/components/schemas/Bad"),
            "/b": get("#/components/schemas/Bad"),
            "/c": get("#/components/schemas/Good"),
            "/d": get("#/components/schemas/Missing"),
        },
        components={"schemas": {"Bad": {"type": "strnig"}, "Good": {"type": "string"}}},
    )
    with caplog.at_level(logging.WARNING, "codemode.openapi"):
        found = operations(load(spec), set(), "api").operations
    assert [o.path for o in found] == ["/c"]
    assert (
        "api: operation GET /a skipped: #/components/schemas/Bad: type 'strnig' is not"
        in caplog.text
    )
    assert (
        "api: operation GET /d skipped: reference '#/components/schemas/Missing' points at nothing"
        in (caplog.text)
    )


def test_clashing_names_get_their_location_and_credentials_are_no_arguments() -> None:
    spec = doc(
        {
            "/items/{id}": {
                "put": {
                    "operationId": "put",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {"name": "id", "in": "query", "schema": {"type": "string"}},
                        {"name": "X-Key", "in": "header", "schema": {"type": "string"}},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "id": {"type": "string"},
                                        "n": {"type": "integer"},
                                    },
                                }
                            }
                        }
                    },
                    "responses": {"204": {"description": "done"}},
                }
            }
        }
    )
    [operation] = operations(load(spec), {("header", "x-key")}).operations
    assert [(a.key, a.location) for a in operation.arguments] == [
        ("id", "path"),
        ("id_query", "query"),
        ("id_body", "body"),
        ("n", "body"),
    ]


def test_a_request_body_codemode_cannot_send_skips_the_operation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = doc(
        {
            "/upload": {
                "post": {
                    "requestBody": {"content": {"multipart/form-data": {}}},
                    "responses": {"204": {"description": "done"}},
                }
            }
        }
    )
    with caplog.at_level(logging.WARNING, "codemode.openapi"):
        assert operations(load(spec), set()).operations == []
    assert "POST /upload skipped: its request body is multipart/form-data" in caplog.text


def test_two_operations_of_one_name_are_a_registration_error() -> None:
    get = {"operationId": "same", "responses": {"204": {"description": "d"}}}
    spec = doc({"/a": {"get": get}, "/b": {"get": get}})
    with CodeMode(authorizer=AllowAll()) as cm, pytest.raises(RegistrationError) as info:
        cm.add_openapi("api", spec=spec, base_url="http://127.0.0.1:9")
    assert str(info.value) == (
        'REST API "api": operations GET /a and GET /b both become "api.same"; exclude one of them'
    )


def arg(style: str, explode: bool, location: str = "path") -> Argument:
    return Argument("id", "id", location, style=style, explode=explode)  # type: ignore[arg-type]


OBJECT = {"role": "admin", "firstName": "Alex"}


@pytest.mark.parametrize(
    ("style", "explode", "value", "sent"),
    [
        ("simple", False, 5, "5"),
        ("simple", False, [3, 4, 5], "3,4,5"),
        ("simple", False, OBJECT, "role,admin,firstName,Alex"),
        ("simple", True, OBJECT, "role=admin,firstName=Alex"),
        ("label", False, 5, ".5"),
        ("label", False, [3, 4, 5], ".3,4,5"),
        ("label", True, [3, 4, 5], ".3.4.5"),
        ("label", True, OBJECT, ".role=admin.firstName=Alex"),
        ("matrix", False, 5, ";id=5"),
        ("matrix", False, [3, 4, 5], ";id=3,4,5"),
        ("matrix", True, [3, 4, 5], ";id=3;id=4;id=5"),
        ("matrix", False, OBJECT, ";id=role,admin,firstName,Alex"),
        ("matrix", True, OBJECT, ";role=admin;firstName=Alex"),
        ("simple", False, True, "true"),
        ("simple", False, "a/b?c#d e", "a%2Fb%3Fc%23d%20e"),
    ],
)
def test_path_values_by_style(style: str, explode: bool, value: Any, sent: str) -> None:
    assert wire.path("/{id}", {"id": (arg(style, explode), value)}) == "/" + sent


@pytest.mark.parametrize("value", ["..", "."])
def test_a_path_value_never_steps_up(value: str) -> None:
    with pytest.raises(ValueError, match="segment"):  # binding refused it already
        wire.path("/a/{id}/b", {"id": (arg("simple", False), value)})
    assert wire.path("/a/{id}", {"id": (arg("simple", False), "%2E%2E")}) == "/a/%252E%252E"


def test_a_multi_segment_value_keeps_its_slashes() -> None:
    spanning = Argument("path", "path", "path", segments=True)
    assert wire.path("/c/{path}", {"path": (spanning, "docs/a b.md")}) == "/c/docs/a%20b.md"


@pytest.mark.parametrize(
    ("style", "explode", "value", "pairs"),
    [
        ("form", True, 5, [("id", "5")]),
        ("form", True, [3, 4], [("id", "3"), ("id", "4")]),
        ("form", False, [3, 4], [("id", "3,4")]),
        ("form", True, OBJECT, [("role", "admin"), ("firstName", "Alex")]),
        ("form", False, OBJECT, [("id", "role,admin,firstName,Alex")]),
        ("spaceDelimited", False, [3, 4], [("id", "3 4")]),
        ("pipeDelimited", False, [3, 4], [("id", "3|4")]),
        ("deepObject", True, OBJECT, [("id[role]", "admin"), ("id[firstName]", "Alex")]),
    ],
)
def test_query_values_by_style(
    style: str, explode: bool, value: Any, pairs: list[tuple[str, str]]
) -> None:
    assert wire.query(arg(style, explode, "query"), value) == pairs


def test_a_header_value_cannot_break_its_line() -> None:
    with pytest.raises(ValueError, match="line break"):
        wire.header(arg("simple", False, "header"), "a\r\nX-Evil: 1")


def test_a_bad_keyword_is_a_schema_error() -> None:
    document = load(doc({}))
    with pytest.raises(SchemaError, match="minLength must be a number"):
        Schemas(document, "request").convert({"minLength": "3"}, document.uri)


FAILURE_TEXTS = (
    client.UNREACHABLE,
    client.TOO_LARGE,
    client.UNREADABLE_BODY,
    client.NOT_JSON,
    client.UNDECLARED,
    client.REDIRECTED,
    client.TIMED_OUT.format(seconds=10),
    client.status_text(500),
)
"""Every failure of an operation that is not its 4xx answer, as the model reads it."""


def test_the_failure_texts_are_the_documented_ones() -> None:
    documented = (Path(__file__).parents[2] / "docs" / "reference" / "errors.md").read_text()
    for text in FAILURE_TEXTS:
        assert f"`{text}`" in documented, text
    assert f"`{client.status_text(404)}: " in documented
    assert client.status_text(422) == "HTTP 422 Unprocessable Content"
    assert client.status_text(499) == "HTTP 499"


def test_a_multi_segment_path_parameter_takes_whole_segments_only() -> None:
    parameter = {"name": "path", "in": "path", "required": True, "x-multi-segment": True}
    spec = doc(
        {
            "/contents/{path}": {
                "get": {
                    "operationId": "get",
                    "parameters": [{**parameter, "schema": {"type": "string"}}],
                    "responses": {"204": {"description": "d"}},
                }
            }
        }
    )
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("repo", spec=spec, base_url="http://127.0.0.1:9")

        def error(path: str) -> str:
            try:
                cm.execute(f"def main():\n    return repo.get(path={path!r})\n", subject="a")
            except Exception as failed:
                return str(failed)
            raise AssertionError("it ran")

        assert error("docs/README.md") == "capability failed: the connection to the API failed"
        assert error("docs/../secret") == (
            'invalid capability arguments: argument "path" must not hold an '
            'empty, "." or ".." segment or "\\"'
        )


def test_yaml_that_costs_out_of_proportion_to_its_size_is_refused_or_kept_as_text(
    tmp_path: Path,
) -> None:
    merges = ["x-m0: &m0 {k0: 0}"] + [
        f"x-m{n}: &m{n} {{<<: *m{n - 1}, k{n}: 0}}" for n in range(1, 400)
    ]
    path = tmp_path / "merge.yaml"
    path.write_text("openapi: 3.1.0\npaths: {}\n" + "\n".join(merges) + "\n")
    with pytest.raises(SpecError, match="merge keys"):
        load(path)
    path.write_text("openapi: 3.1.0\npaths: {}\nx-time: 1:59:59\nx-big: 0x" + "f" * 5000 + "\n")
    document = load(path)
    assert (document.root["x-time"], len(document.root["x-big"])) == ("1:59:59", 5002)


def test_an_operation_of_the_wrong_shape_is_skipped_alone(caplog: pytest.LogCaptureFixture) -> None:
    ok = {"operationId": "ok", "responses": {"204": {"description": "d"}}}
    spec = doc(
        {
            "/a": {"get": {"operationId": "a", "responses": 5}},
            "/b/{id}": {"get": {"operationId": "b", "responses": {"204": {"description": "d"}}}},
            "/c": {"get": ok},
        }
    )
    with caplog.at_level(logging.WARNING, "codemode.openapi"):
        found = operations(load(spec), set(), "api").operations
    assert [o.leaf for o in found] == ["ok"]
    assert "operation GET /a skipped: it cannot be read (AttributeError)" in caplog.text
    assert "operation GET /b/{id} skipped: its path and its path parameters differ (id)" in (
        caplog.text
    )
