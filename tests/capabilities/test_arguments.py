"""Binding plain arguments in one check gives exactly what strict validation gives."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode import Limits
from codemode.binding import bind, validate
from codemode.capabilities import Capability, build_capability, is_union
from codemode.errors import CodeModeError


class Text(str):
    pass


DECLARED: list[Any] = [
    int,
    str,
    float,
    bool,
    None,
    Literal["a", "b"],
    Literal[1, 2],
    Literal[1, True],
    Literal[None, "x"],
    int | None,
    int | str,
    bool | int,
    int | float,
    float | int,
    float | None,
    Literal["a"] | bool,
    Annotated[int, pydantic.Field(ge=0, le=10, description="A count.")],
    Annotated[int, annotated_types.Gt(-3), annotated_types.Lt(3)],
    Annotated[float, pydantic.Field(gt=0.5, lt=100)],
    Annotated[float, pydantic.Field(ge=-1, le=1)],
    Annotated[str, pydantic.Field(min_length=1, max_length=3)],
    Annotated[str, pydantic.Field(pattern="^a")],
    Annotated[int, pydantic.Field(multiple_of=2)],
    Annotated[float, pydantic.Field(allow_inf_nan=True)],
    Annotated[int, pydantic.Field(strict=False)],
    Annotated[int, pydantic.Field(ge=0)] | None,
    list[int],
    list[str] | None,
    list[float],
    list[Literal["a", "b"]],
    Annotated[list[int], pydantic.Field(min_length=1, max_length=3)],
    list[list[int | None]],
    dict[str, int],
    dict[str, list[float | None]],
    dict[str, Annotated[int, pydantic.Field(ge=0)]],
    Annotated[dict[str, str], pydantic.Field(max_length=2)],
    list[int] | dict[str, int] | str | None,
    list[int] | list[str],
    Any,
    list[Any],
    tuple[int, int],
]

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.sampled_from([0, 1, -1, 2, 3, 10, 11, 2**53 - 1, 2**53, -(2**53), 2**64, 2**1100]),
    st.floats(),
    st.sampled_from([0.5, 1.0, -0.0, 100.0, 1e308, math.nan, math.inf, -math.inf]),
    st.text(max_size=4),
    st.sampled_from(["", "a", "b", "x", "abcd", "é", "\ud800", '"\n', Text("a")]),
)
value = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=2), children, max_size=3),
        st.dictionaries(st.sampled_from([1, Text("k")]), children, max_size=2),
    ),
    max_leaves=10,
)
LIMITS = [Limits(), Limits(max_value_depth=2), Limits(max_argument_bytes=64)]
NEAR = [-(2**53), -11, -3, -1, -1.0, -0.0, 0, 0.5, 0.75, 1, 1.0, 2, 3, 10, 11, 99.5, 100, 100.0]
NEAR += [2**53 - 1, 2**53]
"""Numbers at and around the bounds declared above, and the edges of a narrow int."""


def shaped(tp: Any) -> st.SearchStrategy[Any]:
    """Data mostly of type `tp` (values at its bounds among them), now and then a wrong
    leaf, so that both answers of the plain check are drawn often."""
    origin = get_origin(tp)
    if tp is Any or origin is tuple:
        return value
    if origin is Annotated:
        inner = get_args(tp)[0]
        if inner in (int, float):
            numbers = [n for n in NEAR if type(n) is inner or inner is float]
            return st.one_of(st.sampled_from(numbers), shaped(inner))
        if inner is str:
            return st.one_of(st.text(max_size=5), shaped(inner))
        return shaped(inner)
    if origin is Literal:
        return st.one_of(st.sampled_from(get_args(tp)), leaf)
    if is_union(tp):
        return st.one_of([shaped(member) for member in get_args(tp)])
    if origin is list:
        return st.lists(shaped(get_args(tp)[0]), max_size=4)
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), shaped(get_args(tp)[1]), max_size=4)
    scalars: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(st.characters(codec="utf-8"), max_size=4),
        int: st.integers(-(2**54), 2**54),
        float: st.floats(allow_nan=False, allow_infinity=False),
        bool: st.booleans(),
        None: st.none(),
        type(None): st.none(),
    }
    return st.integers(0, 12).flatmap(lambda n: scalars[tp] if n else leaf)


def handler_of(declared: Any) -> Any:
    def handler(*, first: int = 0, x: Any, last: str = "z") -> None:
        return None

    handler.__annotations__ = {"first": int, "x": declared, "last": str, "return": None}
    return handler


CAPABILITIES: dict[str, Capability] = {}


def capability_of(declared: Any) -> Capability:
    """One capability per declared type, built once (its plain check compiled once)."""
    key = repr(declared)
    if key not in CAPABILITIES:
        CAPABILITIES[key] = build_capability(
            handler_of(declared),
            f"checks.t{len(CAPABILITIES)}",
            id=None,
            summary="Checks an argument.",
            description=None,
            search_terms=(),
        )
    return CAPABILITIES[key]


def strictly(
    capability: Capability, kwargs: dict[str, Any], limits: Limits
) -> tuple[Any, Any] | Exception:
    try:
        return validate(capability, kwargs, limits)
    except Exception as error:
        return error


def same(a: Any, b: Any) -> bool:
    """Equal, of the same exact types, in the same key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def containers(value: Any) -> list[int]:
    """The ids of every list and dict in `value`."""
    if isinstance(value, list):
        return [id(value), *(i for item in value for i in containers(item))]
    if isinstance(value, dict):
        return [id(value), *(i for item in value.values() for i in containers(item))]
    return []


@pytest.mark.parametrize("declared", DECLARED, ids=repr)
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    data=st.data(),
    limits=st.sampled_from(LIMITS),
    first=st.sampled_from([None, 1, True, "1"]),
    last=st.sampled_from([None, "y", 2, "é" * 20]),
    extra=st.sampled_from([None, None, None, 1]),
)
def test_a_plain_check_accepts_only_what_validation_gives_alike(
    declared: Any,
    data: st.DataObject,
    limits: Limits,
    first: Any,
    last: Any,
    extra: Any,
) -> None:
    """Whatever it accepts, strict validation accepts too, with equal values of the same
    types in the same order; everything else it leaves to validation."""
    capability = capability_of(declared)
    kwargs: dict[str, Any] = {}  # in another order than declared: the output is declared's
    if last is not None:
        kwargs["last"] = last
    kwargs["x"] = data.draw(st.one_of(shaped(declared), shaped(declared), value))
    if first is not None:
        kwargs["first"] = first
    if extra is not None:
        kwargs["extra"] = extra
    expected = strictly(capability, kwargs, limits)
    plain = capability.plain_arguments
    if plain is None:
        return
    accepted = plain(kwargs, limits.max_value_depth, limits.max_argument_bytes // 4)
    if accepted is None:
        return  # validation decides
    assert not isinstance(expected, Exception), (kwargs, expected)
    arguments, handler_kwargs = accepted
    assert same(arguments, expected[0]), (arguments, expected[0])
    assert same(handler_kwargs, expected[1]), (handler_kwargs, expected[1])
    shared = set(containers(arguments)) & set(containers(handler_kwargs))
    assert not shared and not set(containers(kwargs)) & set(containers(handler_kwargs))
    assert not set(containers(kwargs)) & set(containers(arguments))


@pytest.mark.parametrize(
    ("declared", "given"),
    [
        (int, 3),
        (str, "é"),
        (float, 1.5),
        (bool, False),
        (None, None),
        (Literal["a", "b"], "b"),
        (int | None, None),
        (Annotated[int, pydantic.Field(ge=0, le=10)], 10),
        (Annotated[str, pydantic.Field(max_length=3)], "abc"),
        (list[str] | None, ["a", "b"]),
        (dict[str, list[float | None]], {"k": [1.5, None]}),
        (list[list[int | None]], [[1, None], []]),
    ],
)
def test_plain_data_of_the_declared_type_skips_validation(declared: Any, given: Any) -> None:
    capability = capability_of(declared)
    plain = capability.plain_arguments
    assert plain is not None
    limits = Limits()
    kwargs = {"x": given, "first": 2}
    accepted = plain(kwargs, limits.max_value_depth, limits.max_argument_bytes // 4)
    assert accepted is not None
    assert list(accepted[0]) == ["first", "x"]
    assert accepted == validate(capability, kwargs, limits)
    assert bind(capability, (), kwargs, limits) == accepted


@pytest.mark.parametrize(
    "declared",
    [
        Annotated[str, pydantic.Field(pattern="^a")],
        Annotated[int, pydantic.Field(multiple_of=2)],
        Annotated[int, pydantic.Field(strict=False)],
        Literal[1, True],
        list[int] | list[str],
        Any,
        tuple[int, int],
    ],
    ids=repr,
)
def test_a_type_it_cannot_judge_alike_is_always_validated(declared: Any) -> None:
    assert capability_of(declared).plain_arguments is None


@pytest.mark.parametrize(
    ("declared", "given"),
    [
        (int, True),
        (float, 1),
        (float, math.nan),
        (int, 2**60),
        (str, Text("a")),
        (str, "\ud800"),
        (Annotated[int, pydantic.Field(ge=0, le=10)], 11),
        (list[int], (1, 2)),
        (list[int], [1, False]),
        (dict[str, int], {1: 1}),
    ],
)
def test_a_value_it_is_not_sure_of_goes_to_validation(declared: Any, given: Any) -> None:
    plain = capability_of(declared).plain_arguments
    assert plain is not None
    assert plain({"x": given}, 64, 1 << 18) is None


def test_nesting_and_size_near_their_limits_go_to_validation() -> None:
    """The limits' own errors come from validation, as they always did."""
    plain = capability_of(list[list[int | None]]).plain_arguments
    assert plain is not None
    assert plain({"x": [[1]]}, 2, 1000) is not None
    assert plain({"x": [[1]]}, 1, 1000) is None
    assert plain({"x": [[1] * 10]}, 2, 40) is None
    limits = Limits(max_value_depth=1)
    with pytest.raises(CodeModeError, match="value depth"):
        bind(capability_of(list[list[int | None]]), (), {"x": [[1]]}, limits)


def test_unknown_and_missing_arguments_go_to_validation() -> None:
    plain = capability_of(int).plain_arguments
    assert plain is not None
    assert plain({"x": 1, "y": 2}, 64, 1000) is None
    assert plain({"first": 1}, 64, 1000) is None
    with pytest.raises(CodeModeError, match='unknown argument "y"'):
        bind(capability_of(int), (), {"x": 1, "y": 2}, Limits())
