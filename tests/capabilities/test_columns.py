"""Many rows walked a column at a time give exactly what the full projection gives, and
never carry out what the declared type does not declare."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from codemode.capabilities.columns import BATCH_ROWS
from codemode.capabilities.plain import NotPlain
from codemode.capabilities.results import Projected, Projection
from codemode.values import RecordValue, json_size, record_fields
from tests.capabilities.test_plain import (
    Described,
    Hidden,
    Partial,
    Point,
    Row,
    Tree,
    User,
    full,
    projection_of,
    same,
    shaped,
)

CANARY = "canary-7f3e-undeclared"
"""Text only undeclared fields hold: it must never be in what crosses."""


class Fixed(TypedDict):
    id: int
    name: str
    ok: bool


class Small(Fixed, total=False):
    note: str | None


@dataclasses.dataclass
class Secretive:
    id: int
    name: str
    secret: pydantic.SkipValidation[str] = dataclasses.field(default=CANARY)


class Account(pydantic.BaseModel):
    id: int
    name: str
    password: str = pydantic.Field(default=CANARY, exclude=True)


ROWS: list[Any] = [
    list[Row],
    list[Partial],
    list[Described],
    list[Small],
    list[Point],
    list[User],
    list[Hidden],
    list[Tree],
    list[int],
    list[str | None],
    list[float | int],
    list[bool],
]


@pytest.mark.parametrize("declared", ROWS, ids=repr)
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(data=st.data(), max_items=st.sampled_from([40, 10_000]))
def test_rows_walked_by_columns_give_what_the_full_projection_gives(
    declared: Any, data: st.DataObject, max_items: int
) -> None:
    """Lists long enough to be walked by columns: mostly rows of the declared type, some
    with undeclared keys or a wrong leaf somewhere, of the same order or not."""
    projection = projection_of(declared)
    assert projection.plain is not None
    item = shaped(declared.__args__[0], depth=2)
    rows = data.draw(
        st.one_of(
            st.lists(item, min_size=BATCH_ROWS, max_size=BATCH_ROWS + 8),
            st.lists(item, min_size=1, max_size=3).map(lambda few: few * BATCH_ROWS),
        )
    )
    try:
        kept, size = projection.plain(rows, max_items)
    except NotPlain:
        return  # the full projection decides
    expected = full(projection, rows, max_items)
    assert isinstance(expected, Projected), (rows, expected)
    assert same(kept, expected.value), (kept, expected.value)
    assert size == expected.size


def test_rows_of_exactly_the_declared_keys_are_kept_as_copies_and_measured() -> None:
    rows = [{"id": i, "name": f"n{i}", "ok": i % 2 == 0} for i in range(40)]
    rows[3]["note"] = "é\n"
    rows[5]["note"] = None
    projected = Projection(list[Small]).project(rows, 10_000)
    assert projected.value == rows
    assert all(a is not b for a, b in zip(projected.value, rows, strict=True))
    assert projected.size == json_size(rows)


def test_undeclared_keys_never_cross_whatever_their_order() -> None:
    """Rows with a key the type does not declare are kept row by row: the canary is gone,
    and the keys are in the declared order."""
    rows = [{"secret": CANARY, "ok": True, "name": "n", "id": i} for i in range(40)]
    projected = Projection(list[Small]).project(rows, 10_000)
    assert CANARY not in json.dumps(projected.value)
    assert all(list(row) == ["id", "name", "ok"] for row in projected.value)
    assert projected.size == len(json.dumps(projected.value, separators=(",", ":")))


def test_fields_a_record_does_not_declare_as_crossing_never_cross() -> None:
    """A dataclass's undeclared attribute, a model's excluded field, and a subclass's
    extra field: none of them reach what crosses, walked by columns or not."""

    @dataclasses.dataclass
    class Loud(Point):
        shout: str = CANARY

    points: list[Point] = [Point(i, "p", ["t"]) for i in range(40)]
    cases: list[tuple[Any, list[Any]]] = [
        (list[Account], [Account(id=i, name="a") for i in range(40)]),
        (list[Point], [*points, Loud(1, "l", [])]),
        (list[Point], [Loud(i, "l", []) for i in range(40)]),
        (list[Hidden], [Hidden(i, note=CANARY) for i in range(40)]),
    ]
    for declared, rows in cases:
        projected = Projection(declared).project(rows, 10_000)
        out = [record_fields(r) if isinstance(r, RecordValue) else r for r in projected.value]
        assert CANARY not in json.dumps(out), declared
        assert len(out) == len(rows)


def test_a_wrong_leaf_in_a_column_refuses_the_rows_as_the_full_projection_does() -> None:
    rows: list[Any] = [{"id": i, "name": "n", "ok": True} for i in range(40)]
    rows[30]["ok"] = 1
    projection = Projection(list[Small])
    assert projection.plain is not None
    with pytest.raises(NotPlain):
        projection.plain(rows, 10_000)
    with pytest.raises(ValueError):
        projection.project(rows, 10_000)


def test_rows_past_the_item_bound_are_refused() -> None:
    rows = [{"id": i, "name": "n", "ok": True} for i in range(40)]
    with pytest.raises(ValueError, match="more items than the result size allows"):
        Projection(list[Small]).project(rows, 100)
