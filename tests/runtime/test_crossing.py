"""The value main() returned, crossing out of the sandbox: read back only through the
containers JSON has, never through a program's own objects."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode import CodeMode, Limits
from codemode.authz import AllowAll
from codemode.errors import ResourceLimitError
from codemode.runtime.crossing import plain_size
from codemode.values import (
    VALUE_TEXT,
    CrossingError,
    TooBigError,
    TooDeepError,
    json_size,
    to_json_sized,
)

P = "def main():\n"


def test_a_string_inside_an_object_is_never_read_back_through_the_object() -> None:
    """The check after main() reads suspect strings back only through lists and dicts: an
    object's own `__getitem__` (which loops here) never runs after the program."""
    source = (
        "from dataclasses import dataclass\n@dataclass\nclass D:\n    a: str\n"
        "    def __getitem__(self, key):\n        while True:\n            pass\n"
        + P
        + "    return [D('ns.one'), 'ns.one']\n"
    )
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("ns.one", summary="One.")
        def one() -> int:
            return 1

        assert cm.execute(source, subject="a").value == [{"a": "ns.one"}, "ns.one"]


# -- the plain fast path: exactly what the walk gives, or nothing ---------------------------

NAMES = {"ns.one": object()}


def suspect(text: str) -> bool:
    return text in NAMES or (text.startswith("<") and bool(VALUE_TEXT.fullmatch(text)))


class Text(str):
    pass


leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    st.sampled_from([2**59 - 1, -(2**59) + 1, 2**59, 2**200]),
    st.floats(),
    st.text(max_size=5),
    st.sampled_from(["é", "\ud800", '"\n\\', "<b>", "ns.one", "<function 'f' at 0x1f>", Text("t")]),
    st.sampled_from([{1}, b"x"]),
)
plain = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(
            st.one_of(st.sampled_from(["id", "name", "ok"]), st.sampled_from(["é", Text("k"), 1])),
            children,
            max_size=4,
        ),
        # rows: dicts of the same keys, each column now and then of one type
        st.lists(
            st.fixed_dictionaries({"id": children, "name": children, "ok": st.booleans()}),
            max_size=5,
        ),
    ),
    max_leaves=20,
)


def walked(value: Any, limits: Limits) -> tuple[Any, int | None] | Exception:
    texts: list[tuple[str, str]] = []
    try:
        result, size = to_json_sized(
            value,
            max_depth=limits.max_value_depth,
            root="result",
            max_bytes=limits.max_return_bytes,
            suspect=suspect,
            suspects=texts,
        )
    except (CrossingError, TooBigError, TooDeepError) as error:
        return error
    return (result, size) if not texts else ValueError(texts)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(
    value=plain,
    depth=st.sampled_from([1, 2, 3, 64]),
    bound=st.sampled_from([8, 40, 1 << 20]),
)
def test_the_plain_size_is_the_walks_when_it_answers(value: Any, depth: int, bound: int) -> None:
    limits = Limits(max_value_depth=depth, max_return_bytes=bound)
    size = plain_size(value, limits, NAMES.keys(), suspect)
    if size is None:
        return  # the walk decides
    expected = walked(value, limits)
    assert isinstance(expected, tuple), (value, expected)
    assert expected == (value, size)


ROWS = [
    {"id": i, "name": f"name {i}", "score": i * 0.5, "ok": i % 2 == 0, "x": None} for i in range(50)
]


def test_plain_rows_are_measured_without_the_walk_and_cross_as_they_are() -> None:
    size = plain_size(ROWS, Limits(), NAMES.keys(), suspect)
    assert size == json_size(ROWS)
    assert walked(ROWS, Limits()) == (ROWS, size)


@pytest.mark.parametrize(
    ("value", "limits"),
    [
        ([*ROWS, {"id": 1, "name": "ns.one", "score": 0.0, "ok": True, "x": None}], Limits()),
        (
            [*ROWS, {"id": 1, "name": "<coroutine main>", "score": 0.0, "ok": True, "x": None}],
            Limits(),
        ),
        ([*ROWS, (1, 2)], Limits()),
        ([*ROWS, {1: "a"}], Limits()),
        ([*ROWS, {"id": 2**59}], Limits()),
        ([*ROWS, {"id": math.nan}], Limits()),
        ([*ROWS, {"id": "\ud800"}], Limits()),
        ([*ROWS, [[[]]]], Limits(max_value_depth=3)),
        (ROWS, Limits(max_return_bytes=1000)),
        ("text", Limits()),
    ],
    ids=[
        "a name",
        "a value text",
        "a tuple",
        "an int key",
        "a wide int",
        "nan",
        "a surrogate",
        "too deep",
        "past the bound",
        "a scalar",
    ],
)
def test_what_the_walk_must_word_or_convert_is_left_to_it(value: Any, limits: Limits) -> None:
    assert plain_size(value, limits, NAMES.keys(), suspect) is None


def test_a_value_of_many_aliases_is_refused_before_its_levels_are_gathered() -> None:
    """A list of a million references to one list of a million strings would be 10^12
    items: the second level is never gathered, so nothing of that size is ever held."""
    inner = ["x"] * 1000
    value = [inner] * 1000
    tracemalloc.start()
    try:
        assert plain_size(value, Limits(max_return_bytes=100_000), NAMES.keys(), suspect) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


def test_a_value_that_holds_itself_is_left_to_the_walk() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert plain_size(cycle, Limits(), NAMES.keys(), suspect) is None
    assert isinstance(walked(cycle, Limits()), CrossingError)


def test_a_big_plain_result_crosses_whole() -> None:
    rows = [{"id": i, "name": f"row {i}", "ok": True} for i in range(5000)]
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("ns.rows", summary="Rows.")
        def rows_of() -> list[dict[str, Any]]:
            return rows

        result = cm.execute(P + "    return ns.rows()\n", subject="a")
    assert result.value == rows
    assert result.usage.return_bytes == json_size(rows)


@pytest.mark.parametrize(
    ("bound", "error"),
    [
        # the walk's lower bound (8 bytes a row) passes 500 in the middle: refused unmeasured
        (500, "return value size (limit 500 bytes) at <codemode>:2:12"),
        # it stays within 1000, the text (1,101 bytes) does not: refused, measured
        (1000, "return value size (limit 1000 bytes, reached 1.08 KiB) at <codemode>:2:12"),
    ],
)
def test_plain_rows_past_the_bound_are_refused_in_the_walks_words(bound: int, error: str) -> None:
    source = P + "    return [{'a': True} for _ in range(100)]\n"
    with (
        CodeMode(authorizer=AllowAll(), limits=Limits(max_return_bytes=bound)) as cm,
        pytest.raises(ResourceLimitError) as raised,
    ):
        cm.execute(source, subject="a")
    assert str(raised.value) == f"resource limit exceeded: {error}"
