"""The size `to_json_sized` measures as it converts is the size `json_size` gives."""

from __future__ import annotations

import dataclasses
import enum
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.values import (
    MAX_SUSPECTS,
    CrossingError,
    RecordValue,
    TooBigError,
    TooDeepError,
    json_size,
    to_json,
    to_json_sized,
)


class Color(enum.Enum):
    RED = "red"
    ONE = 1


class Level(enum.IntEnum):
    HIGH = 7


class Text(str):
    pass


@dataclasses.dataclass
class Point:
    x: object
    y: object = None


Carrier = dataclasses.make_dataclass(
    "Carrier", [("a", Any), ("b", Any)], bases=(RecordValue,), slots=True
)

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([59, 60, 14_500]).map(lambda bits: 2**bits),
    st.floats(),
    st.text(max_size=5),
    st.sampled_from(["é", "\ud800", '"\n\\', Text("t"), Color.RED, Color.ONE, Level.HIGH, {1}]),
)
value = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.sampled_from(["é", Text("k"), 1])),
            children,
            max_size=4,
        ),
        st.builds(Point, children, children),
        st.builds(Carrier, children, children),
    ),
    max_leaves=16,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=value, max_depth=st.sampled_from([2, 64]), max_bytes=st.sampled_from([None, 30]))
def test_the_size_measured_in_the_walk_is_json_size(
    data: Any, max_depth: int, max_bytes: int | None
) -> None:
    options: dict[str, Any] = {"max_depth": max_depth, "root": "result", "max_bytes": max_bytes}
    try:
        result, size = to_json_sized(data, **options)
    except (CrossingError, TooBigError, TooDeepError) as error:
        with pytest.raises(type(error)):
            to_json(data, **options)
        return
    assert to_json(data, **options) == result
    if size is None:
        with pytest.raises(UnicodeEncodeError):
            json_size(result)
    else:
        assert size == json_size(result)


def test_a_lone_surrogate_in_a_container_is_left_to_json_size() -> None:
    assert to_json_sized(["\ud800"], max_depth=4, root="result") == (["\ud800"], None)
    assert to_json_sized("\ud800", max_depth=4, root="result") == ("\ud800", json_size("\ud800"))


def test_a_record_is_measured_as_the_dict_of_its_fields() -> None:
    result, size = to_json_sized([Carrier(1, "é")], max_depth=4, root="result")
    assert result == [{"a": 1, "b": "é"}]
    assert size == len('[{"a":1,"b":"é"}]'.encode())


def test_walking_a_value_costs_its_size_whatever_its_keys() -> None:
    """Paths are rendered only when shown, and suspects stop at a bound: a value with a
    100 kB key over 2,000 suspect strings would need 200 MB of eager paths."""
    value = {"A" * 100_000: ["ns.one"] * 2_000}
    found: list[tuple[str, str]] = []
    tracemalloc.start()
    try:
        to_json(value, max_depth=10, root="result", suspect=lambda s: True, suspects=found)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found) == MAX_SUSPECTS
    assert peak < 30 * 1024 * 1024
