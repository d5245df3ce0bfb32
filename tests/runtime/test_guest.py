"""What the program may ask of the host besides capabilities (`vars()`, `error_data()`,
sleeps, a name it never defined): answered from the program's own values and the failures
of its own calls alone."""

from __future__ import annotations

import dataclasses

import pytest

from codemode import AgentError, CodeMode
from codemode.authz import AuthorizationRequest, Denied
from codemode.errors import CapabilityFailedError, Facts, PermissionDeniedError, Where
from codemode.limits import Limits
from codemode.runtime.guest import error_data, sleep_problem, undefined, vars_of
from codemode.runtime.sandbox import Call, Injected, Returned
from codemode.testing import run
from codemode.values import RecordValue
from tests.conftest import CANARY, assert_no_canary

LIMITS = Limits()


@dataclasses.dataclass
class Server(RecordValue):
    name: str
    tags: list[str]


@dataclasses.dataclass
class Box(RecordValue):
    inner: object


def vars_call(*args: object, **kwargs: object) -> Call:
    return Call("vars", args, kwargs, call_id=1, span=(0, 0))


def test_vars_of_a_result_object_is_the_dict_returning_it_gives() -> None:
    answer = vars_of(vars_call(Server("api", ["x"])), LIMITS)
    assert answer == Returned({"name": "api", "tags": ["x"]})
    nested = vars_of(vars_call(Box(Server("db", []))), LIMITS)
    assert nested == Returned({"inner": {"name": "db", "tags": []}})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, "vars() got a dict, which is already one: use it as it is"),
        ([1], "vars() got a list: turn each item, [vars(x) for x in items]"),
        (1, "vars() takes a result object or a dataclass, not an int"),
        ("s", "vars() takes a result object or a dataclass, not a str"),
        (None, "vars() takes a result object or a dataclass, not None"),
    ],
    ids=["dict", "list", "int", "str", "none"],
)
def test_vars_of_what_is_no_object_says_what_to_do(value: object, message: str) -> None:
    assert vars_of(vars_call(value), LIMITS) == Injected("TypeError", message)


def test_vars_takes_one_object_and_nothing_else() -> None:
    expected = Injected("TypeError", "vars() takes one object: a result object or a dataclass")
    assert vars_of(vars_call(Server("api", []), 2), LIMITS) == expected
    assert vars_of(vars_call(Server("api", []), depth=1), LIMITS) == expected


def test_vars_of_an_object_past_the_value_limits_is_refused() -> None:
    too_large = Injected("ValueError", "vars() of an object this large is not supported")
    deep = Box(Box(Box(Box(1))))
    assert vars_of(vars_call(deep), Limits(max_value_depth=3)) == too_large
    assert vars_of(vars_call(Box("x" * 5000)), Limits(max_result_bytes=1000)) == too_large


def test_vars_of_an_object_holding_what_json_cannot_says_where() -> None:
    answer = vars_of(vars_call(Box({1, 2})), LIMITS)
    assert answer == Injected("TypeError", "vars()['inner'] is a set, which JSON cannot hold")


@pytest.mark.parametrize("seconds", [0, 1.5, 10**6])
def test_a_sleep_of_a_finite_non_negative_number_is_fine(seconds: object) -> None:
    assert sleep_problem(seconds) is None


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "1", None])
def test_any_other_sleep_is_a_value_error(seconds: object) -> None:
    problem = Injected("ValueError", "sleep length must be a non-negative number")
    assert sleep_problem(seconds) == problem


def test_a_name_never_defined_is_the_error_python_would_raise() -> None:
    assert undefined("records") == Injected("NameError", "name 'records' is not defined")
    assert undefined("records.get") == Injected(
        "AttributeError", "module 'records' has no attribute 'get'"
    )
    assert undefined("a.b.c") == Injected("AttributeError", "module 'a.b' has no attribute 'c'")


def data_call(*args: object, **kwargs: object) -> Call:
    return Call("error_data", args, kwargs, call_id=1, span=(0, 0))


WHERE = Where("<codemode>", 3, 9, 3, 20, "main", "        t.get()")
NOT_FOUND = CapabilityFailedError("no such ticket")
NOT_FOUND.facts = Facts("not_found")
RAISED = [
    (WHERE, "RuntimeError", "capability failed: no such ticket", NOT_FOUND),
    (WHERE, "PermissionError", "permission denied", PermissionDeniedError()),
]


def test_error_data_knows_a_caught_failure_again_by_its_type_and_text() -> None:
    assert error_data(data_call(RuntimeError("capability failed: no such ticket")), RAISED) == (
        Returned({"code": "not_found", "status": None, "fields": {}})
    )
    assert error_data(data_call(PermissionError("permission denied")), RAISED) == Returned(
        {"code": "permission_denied", "status": None, "fields": {}}
    )


@pytest.mark.parametrize(
    "value",
    [
        RuntimeError("capability failed: no such invoice"),  # no call raised this text
        ValueError("capability failed: no such ticket"),  # nor this type
        RuntimeError("permission denied"),
        "capability failed: no such ticket",  # not an exception at all
        None,
    ],
)
def test_error_data_of_anything_no_call_raised_is_none(value: object) -> None:
    assert error_data(data_call(value), RAISED) == Returned(None)
    assert error_data(data_call(value), []) == Returned(None)


def test_error_data_takes_one_exception() -> None:
    for call in (data_call(), data_call(1, 2), data_call(e=1)):
        assert error_data(call, RAISED) == Injected(
            "TypeError", "error_data() takes one exception: error_data(e)"
        )


def a_failing_host() -> CodeMode:
    def deny_payouts(request: AuthorizationRequest) -> None:
        if request.capability_name == "t.pay":
            raise Denied(CANARY)

    cm = CodeMode(authorizer=deny_payouts)

    @cm.capability("t.get", summary="Get a ticket.")
    def get(id: int) -> int:
        raise AgentError("no such ticket", kind="not_found")

    @cm.capability("t.crash", summary="Crash.")
    def crash() -> int:
        raise ValueError(CANARY)

    @cm.capability("t.pay", summary="Pay.")
    def pay() -> int:
        return 1

    return cm


CATCHING = (
    "def main():\n"
    "    out = []\n"
    "    for call in [lambda: t.get(id=1), t.crash, t.pay]:\n"
    "        try:\n"
    "            call()\n"
    "        except Exception as e:\n"
    "            out.append(error_data(e))\n"
    "    try:\n"
    "        1 / 0\n"
    "    except ZeroDivisionError as e:\n"
    "        out.append(error_data(e))\n"
    "    return out\n"
)


def test_a_program_reads_each_caught_failure_as_data_and_no_host_text() -> None:
    with a_failing_host() as cm:
        result = run(cm, CATCHING)
    assert result.value == [
        {"code": "not_found", "status": None, "fields": {}},
        {"code": "capability_failed", "status": None, "fields": {}},
        {"code": "permission_denied", "status": None, "fields": {}},
        None,
    ]
    assert_no_canary(result)


def test_an_exception_the_program_builds_gets_only_its_own_calls_data() -> None:
    """Known again by type and text among this execution's own failures: a forged one with
    a real failure's text gets that call's data, one with any other text gets None, and
    another execution's failures are never among them."""
    forged = (
        "def main():\n"
        "    return [error_data(RuntimeError('capability failed: no such ticket')),\n"
        "            error_data(RuntimeError('capability failed: other'))]\n"
    )
    caught = (
        "def main():\n"
        "    try:\n"
        "        t.get(id=1)\n"
        "    except RuntimeError:\n"
        "        pass\n" + forged.split("\n", 1)[1].replace("return [", "return [1, ", 1)
    )
    with a_failing_host() as cm:
        assert run(cm, caught).value == [
            1,
            {"code": "not_found", "status": None, "fields": {}},
            None,
        ]
        assert run(cm, forged).value == [None, None]
