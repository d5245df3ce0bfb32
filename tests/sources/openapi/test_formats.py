"""The formats a REST operation's arguments are checked by, before any request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AuthorizationRequest
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


def test_formats_are_checked_before_any_request(
    cm: CodeMode, received: list[dict[str, Any]], decided: list[dict[str, Any]]
) -> None:
    assert refused(cm, 'records.add_note(text="t", contact="x")') == (
        'argument "contact" must be an email address'
    )
    assert refused(cm, 'records.list_records(since="yesterday")') == (
        'argument "since" must be a date-time (RFC 3339, e.g. 2024-05-01T12:00:00Z)'
    )
    assert (received, decided) == ([], [])
    call(cm, 'records.add_note(text="t", contact="ada@example.org")')
    assert received[0]["contact"] == "ada@example.org"


def test_the_programs_own_datetime_is_sent_as_its_text(
    cm: CodeMode, decided: list[dict[str, Any]]
) -> None:
    source = (
        "import datetime\n"
        "def main():\n"
        "    zone = datetime.timezone.utc\n"
        "    return records.list_records(since=datetime.datetime(2026, 1, 31, 9, 30, tzinfo=zone))\n"
    )
    cm.execute(source, subject="alice")
    assert decided[0]["since"] == "2026-01-31T09:30:00+00:00"


@pytest.mark.parametrize(
    ("declared", "value", "words"),
    [
        ({"format": "email"}, "x", "an email address"),
        ({"format": "date-time"}, "2024-05-01T12:00:00", "a date-time (RFC 3339, e.g. "),
        ({"format": "date"}, "2024-02-30", "a date (RFC 3339, e.g. 2024-05-01)"),
        ({"format": "time"}, "x", "a time (RFC 3339, e.g. 12:00:00Z)"),
        ({"format": "uuid"}, "x", "a UUID"),
        ({"format": "ipv4"}, "1.2.3.4\n", "an IPv4 address"),
        ({"format": "ipv6"}, "x", "an IPv6 address"),
        ({"format": "uri"}, "x", "an absolute URI (RFC 3986)"),
        ({"format": "uri"}, "http://a/\n", "an absolute URI (RFC 3986)"),
        ({"format": "uri-reference"}, "a b", "a URI reference (RFC 3986)"),
        ({"format": "byte"}, "x", "base64 text (RFC 4648)"),
        ({"type": "integer", "format": "int32"}, 2**31, "an integer from -2147483648 to "),
        ({"type": "integer", "format": "int64"}, -(2**63) - 1, "an integer from "),
    ],
)
def test_each_checked_format_refuses_what_it_rules_out(
    declared: dict[str, Any], value: Any, words: str
) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", **declared}}}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "X", "version": "1"},
        "paths": {
            "/x": {
                "post": {
                    "operationId": "put",
                    "requestBody": {"content": {"application/json": {"schema": schema}}},
                    "responses": {"204": {"description": "Done."}},
                }
            }
        },
    }
    with CodeMode(authorizer=lambda request: True) as cm:  # refused before any request
        cm.add_openapi("x", spec=document, base_url="http://127.0.0.1:9")
        detail = refused(cm, f"x.put(v={value!r})")
    assert detail.startswith(f'argument "v" must be {words}'), detail
