"""Reading a document: schemas as 2020-12 in each direction, references and recursion,
YAML, what cannot be read and why, and the failure texts the reference documents."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.sources.openapi import client
from codemode.sources.openapi.document import Schemas, SpecError, load
from codemode.sources.openapi.operations import Argument, operations
from codemode.sources.schema import SchemaError


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


def arg(style: str, explode: bool, location: str = "path") -> Argument:
    return Argument("id", "id", location, style=style, explode=explode)  # type: ignore[arg-type]


OBJECT = {"role": "admin", "firstName": "Alex"}


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
    documented = (Path(__file__).parents[3] / "docs" / "reference" / "errors.md").read_text()
    for text in FAILURE_TEXTS:
        assert f"`{text}`" in documented, text
    assert f"`{client.status_text(404)}: " in documented
    assert client.status_text(422) == "HTTP 422 Unprocessable Content"
    assert client.status_text(499) == "HTTP 499"


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
