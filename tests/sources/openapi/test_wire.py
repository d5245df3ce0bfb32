"""What a policy decides on is what the API reads: against a real FastAPI app on loopback,
every value either reaches the server as the authorizer saw it, or is refused when the
call binds and nothing is sent; and serialization by style, as the tables of the OpenAPI
specification's own examples have it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.sources.openapi import wire
from codemode.sources.openapi.operations import Argument
from tests.conftest import run_error
from tests.sources.openapi.pets import served
from tests.sources.openapi.records import SPEC, create_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    with served(create_app, received) as url:
        yield url, received


@pytest.fixture
def received(server: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    server[1].clear()
    return server[1]


@pytest.fixture
def decided() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def cm(
    server: tuple[str, list[dict[str, Any]]], decided: list[dict[str, Any]]
) -> Iterator[CodeMode]:
    def policy(request: AuthorizationRequest) -> bool:
        decided.append(dict(request.arguments))
        return True

    with CodeMode(authorizer=policy) as host:
        host.add_openapi(
            "records",
            spec=SPEC,
            base_url=server[0],
            auth={"key": "host-key-secret"},
            headers={"Cookie": "session=host-session"},
        )
        yield host


def call(cm: CodeMode, expression: str) -> Any:
    return cm.execute(f"def main():\n    return {expression}\n", subject="alice").value


def refused(cm: CodeMode, expression: str) -> str:
    error = run_error(cm, f"def main():\n    return {expression}\n")
    assert error.code == "invalid_arguments"
    return str(error.detail).removeprefix("<codemode>:2:12: ")


def test_an_objects_keys_sent_as_parameters_cannot_be_another_parameters(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    """`filter` is sent as parameters of its own (form, exploded): a key that names
    another parameter, or the API key, would be read as that one."""
    for keys, key in (
        ('{"owner": "bob", "limit": 100000}', "owner"),
        ('{"LIMIT": 100000}', "LIMIT"),  # some servers read names without case
        ('{"key": "mine"}', "key"),  # the API key's
        ('{"page-size": 100}', "page-size"),  # PHP reads `-`, `.` and a space as `_`
        ('{"Page_Size": 100}', "Page_Size"),
        ('{"color": "red", "COLOR": "blue"}', "COLOR"),  # the object's own, alike
    ):
        detail = refused(cm, f'records.list_records(owner="alice", limit=5, filter={keys})')
        assert detail == (
            f"argument \"filter\" must not have the key '{key}': each key is sent as a query "
            "parameter of its own, and another has that name"
        )
    assert (received, decided) == ([], [])
    call(cm, 'records.list_records(owner="alice", limit=5, filter={"color": "red"})')
    [read] = received
    assert decided == [
        {"owner": "alice", "limit": 5, "filter": {"color": "red"}, "visibility": "private"}
    ]
    assert (read["owner"], read["limit"]) == ("alice", 5)
    assert read["query"] == [
        ("owner", "alice"),
        ("limit", "5"),
        ("color", "red"),
        ("visibility", "private"),  # the default, which the policy saw too
        ("key", "host-key-secret"),
    ]


def test_an_objects_keys_sent_as_parameters_are_plain_ascii_names(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    """A key another server would read as another name is refused: `l\u0131mit` (a dotless
    i) is `LIMIT` to Java's `equalsIgnoreCase` and .NET's `OrdinalIgnoreCase`, PHP drops
    a leading space and reads `.` as `_`, and many read `owner[0]` as owner's."""
    for key in ("l\u0131mit", "L\u0130MIT", "\u017fort", " limit", "li mit", "owner[0]", "tags.x"):
        detail = refused(cm, f"records.list_records(limit=5, filter={{{key!r}: 100000}})")
        assert detail == (
            f'argument "filter" must not have the key {key!r}: each key is sent as a query '
            'parameter of its own, named with ASCII letters, digits, "-" and "_" only'
        )
    assert (received, decided) == ([], [])
    call(cm, 'records.list_records(limit=5, filter={"color-x_1": "red"})')
    assert decided == [{"limit": 5, "filter": {"color-x_1": "red"}, "visibility": "private"}]
    [read] = received
    assert read["limit"] == 5
    assert read["query"] == [
        ("limit", "5"),
        ("color-x_1", "red"),
        ("visibility", "private"),
        ("key", "host-key-secret"),
    ]


def test_an_objects_keys_sent_as_parameters_cannot_be_a_path_or_body_name(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    """Spring's `@RequestParam`, Flask's `request.values`, Laravel and Rails read the
    query, the path's names and the form's fields as one set of parameters: a query key
    `amount` would be read in place of the body's amount the policy saw."""
    for key in ("amount", "AMOUNT", "account"):
        detail = refused(
            cm, f'records.transfer(account="acme", amount=1, opts={{{key!r}: "1000000"}})'
        )
        assert detail == (
            f'argument "opts" must not have the key {key!r}: each key is sent as a query '
            "parameter of its own, and another has that name"
        )
    assert (received, decided) == ([], [])
    call(cm, 'records.transfer(account="acme", amount=1, opts={"memo": "rent"})')
    assert decided == [{"account": "acme", "opts": {"memo": "rent"}, "amount": 1}]
    assert received == [
        {
            "account": "acme",
            "query": [("memo", "rent"), ("key", "host-key-secret")],
            "form": [("amount", "1")],
        }
    ]


def test_an_item_holding_its_styles_delimiter_is_refused(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    assert refused(cm, 'records.list_records(ids=["2,1"])') == (
        'argument "ids[0]" must not hold ",": a query parameter joins its items by it'
    )
    assert refused(cm, 'records.list_records(sort={"a]b": "asc"})') == (
        "argument \"sort\" must not have the key 'a]b': a query parameter has no form for "
        '"]" in one'
    )
    assert refused(cm, 'records.list_records(X_Tags=["a", "b,c"])') == (
        'argument "X_Tags[1]" must not hold ",": a header joins its items by it'
    )
    assert refused(cm, "records.list_records(ids=[])") == (
        'argument "ids" must not be empty: a query parameter has no form for an empty list'
    )
    assert refused(cm, 'records.list_records(tags=[["a"]])') == (
        'argument "tags[0]" must be a string'  # the schema's own word, before the wire's
    )
    assert (received, decided) == ([], [])
    # Repeated parameters carry any item as it is, in every style that repeats them.
    call(cm, 'records.list_records(tags=["a,b", "c d"], words=["x y", "z"], ids=["7"])')
    [read] = received
    assert read["tags"] == ["a,b", "c d"]
    assert [pair for pair in read["query"] if pair[0] in ("words", "ids")] == [
        ("ids", "7"),
        ("words", "x y"),
        ("words", "z"),
    ]


def test_none_is_sent_as_null_or_left_out_as_the_policy_sees_it(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    """No query parameter has a form for None: the API would use its default."""
    assert refused(cm, "records.list_records(visibility=None)") == (
        'argument "visibility" must not be None: a query parameter has no form for None; '
        "leave it out for its default"
    )
    assert (received, decided) == ([], [])
    call(cm, "records.list_records(owner=None)")  # no default: None is leaving it out
    assert decided == [{"visibility": "private"}]
    assert (received[0]["owner"], received[0]["visibility"]) == (None, "private")
    call(cm, "records.list_records(where=None)")  # JSON text has a null
    assert decided[1] == {"where": None, "visibility": "private"}
    assert ("where", "null") in received[1]["query"]
    call(cm, 'records.add_note(text="t", note=None)')  # and so has a JSON body
    assert decided[2] == {"text": "t", "note": None}
    assert received[2] == {"text": "t", "note": None, "contact": None}


def test_a_cookie_the_host_sends_is_no_argument(
    cm: CodeMode, received: list[dict[str, Any]]
) -> None:
    assert "session" not in cm.describe("records.list_records").signature
    call(cm, 'records.list_records(theme="dark")')
    assert (received[0]["theme"], received[0]["session"]) == ("dark", "host-session")


def test_an_object_whose_declared_key_is_another_parameter_is_skipped(
    server: tuple[str, list[dict[str, Any]]], caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, "codemode.openapi"),
        CodeMode(authorizer=lambda request: True) as cm,
    ):
        names = cm.add_openapi(
            "records", spec=SPEC, base_url=server[0], include=["GET /ambiguous*"]
        )
    assert list(names) == []
    assert (
        'operation GET /ambiguous skipped: parameter "page" sends its key "limit" as a query '
        "parameter, and another parameter has that name"
    ) in caplog.text


def test_an_object_whose_declared_key_a_server_reads_as_another_name_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def operation(parameters: list[Any], **more: Any) -> dict[str, Any]:
        return {"parameters": parameters, "responses": {"204": {"description": "done"}}, **more}

    opts = {"type": "object", "properties": {"Page-Size": {}, "amount": {}}}
    spec: dict[str, Any] = {
        "openapi": "3.1.0",
        "paths": {
            "/folded": {
                "get": operation(
                    [
                        {"name": "page_size", "in": "query"},
                        {"name": "opts", "in": "query", "schema": opts},
                    ]
                )
            },
            "/shadowed": {
                "post": operation(
                    [{"name": "o", "in": "query", "schema": opts}],
                    requestBody={
                        "content": {
                            "application/x-www-form-urlencoded": {
                                "schema": {"properties": {"amount": {"type": "integer"}}}
                            }
                        }
                    },
                )
            },
        },
    }
    with (
        caplog.at_level(logging.WARNING, "codemode.openapi"),
        CodeMode(authorizer=lambda request: True) as cm,
    ):
        assert list(cm.add_openapi("api", spec=spec, base_url="http://127.0.0.1:9")) == []
    assert caplog.messages == [
        'REST API api: operation GET /folded skipped: parameter "opts" sends its key '
        '"Page-Size" as a query parameter, and another parameter has that name',
        'REST API api: operation POST /shadowed skipped: parameter "o" sends its key '
        '"amount" as a query parameter, and another parameter has that name',
    ]


@pytest.mark.parametrize(
    ("parameter", "value", "detail"),
    [
        (
            {"in": "query", "explode": False},
            {"a": "1,2"},
            'argument "p[\'a\']" must not hold ",": a query parameter joins its keys and '
            "values by it",
        ),
        (
            {"in": "query", "style": "pipeDelimited"},
            ["a|b"],
            'argument "p[0]" must not hold "|": a query parameter joins its items by it',
        ),
        (
            {"in": "query", "style": "spaceDelimited"},
            {"a b": "c"},
            "argument \"p\" must not have the key 'a b': a query parameter has no form for a "
            "space in one",
        ),
        (
            {"in": "query", "style": "spaceDelimited", "explode": True},
            {"a": "b"},
            'argument "p" must not be a dict: spaceDelimited has no form for one',
        ),
        (
            {"in": "query", "style": "deepObject"},
            ["a"],
            'argument "p" must not be a list: a deepObject is a dict',
        ),
        (
            {"in": "path", "required": True, "style": "label", "explode": True},
            ["a.b"],
            'argument "p[0]" must not hold ".": a path parameter joins its items by it',
        ),
        (
            {"in": "path", "required": True, "style": "matrix", "explode": True},
            {"a=b": "c"},
            'argument "p" must not have the key \'a=b\': a path parameter has no form for "=" '
            "in one",
        ),
        (
            {"in": "path", "required": True},
            {"a": None},
            "argument \"p['a']\" must not be None: a path parameter has no form for None",
        ),
        (
            {"in": "header", "explode": True},
            {"a": "b,c"},
            'argument "p[\'a\']" must not hold ",": a header joins its keys and values by it',
        ),
        (
            {"in": "cookie"},
            {},
            'argument "p" must not be empty: a cookie has no form for an empty dict',
        ),
        (
            {"in": "query"},
            {"": "x"},
            'argument "p" must not have an empty key: a query parameter has no form for one',
        ),
    ],
)
def test_every_style_refuses_what_it_has_no_faithful_form_for(
    parameter: dict[str, Any], value: Any, detail: str
) -> None:
    path = "/x/{p}" if parameter["in"] == "path" else "/x"
    document = {
        "openapi": "3.1.0",
        "info": {"title": "X", "version": "1"},
        "paths": {
            path: {
                "get": {
                    "operationId": "get",
                    "parameters": [{"name": "p", **parameter}],
                    "responses": {"204": {"description": "Done."}},
                }
            }
        },
    }
    with CodeMode(authorizer=lambda request: True) as cm:  # refused before any request
        cm.add_openapi("x", spec=document, base_url="http://127.0.0.1:9")
        assert refused(cm, f"x.get(p={value!r})") == detail


def test_a_form_field_and_a_text_body_are_sent_as_they_are_or_refused() -> None:
    def body(media: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"required": True, "content": {media: {"schema": schema}}}

    document = {
        "openapi": "3.1.0",
        "info": {"title": "X", "version": "1"},
        "paths": {
            "/form": {
                "post": {
                    "operationId": "form",
                    "requestBody": body(
                        "application/x-www-form-urlencoded",
                        {"type": "object", "properties": {"meta": {}, "tags": {}}},
                    ),
                    "responses": {"204": {"description": "Done."}},
                }
            },
            "/text": {
                "post": {
                    "operationId": "text",
                    "requestBody": body("text/plain", {}),
                    "responses": {"204": {"description": "Done."}},
                }
            },
        },
    }
    with CodeMode(authorizer=lambda request: True) as cm:
        cm.add_openapi("x", spec=document, base_url="http://127.0.0.1:9")
        assert refused(cm, 'x.form(meta={"a": 1})') == (
            'argument "meta" must not be a dict: a form field has no form for one'
        )
        assert refused(cm, "x.form(tags=[])") == (
            'argument "tags" must not be empty: a form field has no form for an empty list'
        )
        assert refused(cm, "x.text(body=[1])") == (
            'argument "body" must be a string: the body is sent as text'
        )


def doc(paths: dict[str, Any], version: str = "3.1.0", **extra: Any) -> dict[str, Any]:
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


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
