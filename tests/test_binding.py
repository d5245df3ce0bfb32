"""Keyword binding: exactly the messages the model sees, with the call site."""

from __future__ import annotations

import pytest

from codemode import CodeMode, ErrorCode
from tests.conftest import run_error

P = "def main():\n    return "


@pytest.mark.parametrize(
    ("call", "detail"),
    [
        ('records.lookup(keu="a")', 'unknown argument "keu"; did you mean "key"?'),
        ("records.lookup()", 'missing required argument "key"'),
        ('records.lookup(key="a", limit="x")', 'argument "limit" must be an integer or None'),
        ('records.lookup(key="a", limit=True)', 'argument "limit" must be an integer or None'),
        ('records.lookup(key="a", limit=1.5)', 'argument "limit" must be an integer or None'),
        ("records.lookup(key=1)", 'argument "key" must be a string'),
        ('records.lookup("a")', "positional arguments are not accepted"),
        (
            'records.search(filter={"owner": 1, "tags": []})',
            'argument "filter.owner" must be a string',
        ),
        (
            'records.search(filter={"owner": "o", "tags": ["a", 2]})',
            'argument "filter.tags[1]" must be a string',
        ),
        (
            'records.search(filter={"owner": "o", "tags": [], "ownr": 1})',
            'unknown argument "filter.ownr"; did you mean "owner"?',
        ),
        ('records.search(filter={"owner": "o"})', 'missing required argument "filter.tags"'),
        ('records.search(filter="x")', 'argument "filter" must be a dict'),
        (
            'records.search(filter={"owner": "o", "tags": []}, order="up")',
            "argument \"order\" must be one of 'asc', 'desc'",
        ),
        (
            'records.search(filter={"owner": "o", "tags": []}, labels={"env": 1})',
            "argument \"labels['env']\" must be a string",
        ),
        ("records.lookup(key={1, 2})", 'argument "key" is a set, which JSON cannot hold'),
    ],
)
def test_binding_errors_name_the_argument_path(cm: CodeMode, call: str, detail: str) -> None:
    error = run_error(cm, P + call)
    assert error.code is ErrorCode.INVALID_ARGUMENTS
    assert str(error) == f"invalid capability arguments: {detail}"
    assert error.where is not None
    assert (error.where.line, error.where.column, error.where.func) == (2, 12, "main")


def test_binding_errors_stop_the_program_even_inside_try(cm: CodeMode) -> None:
    source = "def main():\n    try:\n        records.lookup(keu=1)\n    except Exception:\n        return 'swallowed'"
    assert run_error(cm, source).code is ErrorCode.INVALID_ARGUMENTS


def test_valid_calls_bind_defaults_ints_as_floats_and_tuples_as_lists(cm: CodeMode) -> None:
    source = (
        "def main():\n"
        '    a = records.lookup(key="a")\n'
        '    b = records.search(filter={"owner": "o", "tags": ("x", "y")}, order="desc")\n'
        "    return [a, b]"
    )
    assert cm.execute(source, subject="alice").value == [
        {"key": "a", "count": 0},
        [{"key": "o-x", "count": 0}, {"key": "o-y", "count": 1}],
    ]


def test_authorizer_sees_canonical_arguments_with_defaults() -> None:
    from codemode.authz import AuthorizationRequest

    seen: list[AuthorizationRequest] = []
    cm = CodeMode(authorizer=seen.append)

    @cm.capability("records.lookup", id="rec.lookup", summary="Look up.")
    def lookup(*, key: str, limit: int | None = None, scale: float = 1.0) -> int:
        return 1

    with cm:
        cm.execute('def main():\n    return records.lookup(key="a", scale=2)', subject="bob")
    assert len(seen) == 1
    request = seen[0]
    assert (request.subject, request.capability_id, request.capability_name) == (
        "bob",
        "rec.lookup",
        "records.lookup",
    )
    assert request.arguments == {"key": "a", "limit": None, "scale": 2.0}


def test_call_context_is_injected_and_invisible(cm: CodeMode) -> None:
    result = cm.execute(P + "records.whoami()", subject="carol")
    assert result.value == ["carol", "records.whoami", "records.whoami"]
    assert str(run_error(cm, P + "records.whoami(ctx=1)")) == (
        'invalid capability arguments: unknown argument "ctx"'
    )
