"""What the program may ask of the host besides capabilities (`vars()`, sleeps, a name it
never defined): answered from the program's own values alone."""

from __future__ import annotations

import dataclasses

import pytest

from codemode.limits import Limits
from codemode.runtime.guest import sleep_problem, undefined, vars_of
from codemode.runtime.sandbox import Call, Injected, Returned
from codemode.values import RecordValue

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
