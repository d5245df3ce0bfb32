"""A document's operations: their names, where each argument goes, what is no argument,
and what is skipped alone."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.errors import RegistrationError
from codemode.sources.openapi.document import load
from codemode.sources.openapi.operations import default_name, operations, snake


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
