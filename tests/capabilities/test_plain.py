"""The one-walk projection of plain results gives exactly what the full projection gives."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import typing
from typing import Annotated, Any, Literal, NotRequired, get_args, get_origin

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict, is_typeddict

from codemode.capabilities.plain import MAX_DEPTH, NotPlain
from codemode.capabilities.results import Projected, Projection
from codemode.capabilities.typehints import is_union
from codemode.values import RecordValue, record_fields


class Row(TypedDict):
    id: int
    name: str
    score: float | None
    ok: bool


class Partial(TypedDict, total=False):
    id: int
    tags: list[str]


class Described(TypedDict):
    id: Annotated[int, pydantic.Field(description="The id.", ge=0)]
    kind: Literal["a", "b", 1, True]
    hidden: NotRequired[Annotated[str, pydantic.Field(exclude=True)]]


class Tree(TypedDict):
    name: str
    children: list[Tree]


@dataclasses.dataclass
class Record:
    id: int


@dataclasses.dataclass
class Point:
    x: int
    label: str | None
    tags: list[str]


@dataclasses.dataclass
class Marked(Point):
    mark: str = "m"


@dataclasses.dataclass
class Hidden:
    id: int
    note: Annotated[str, pydantic.Field(exclude=True)] = ""
    later: int = dataclasses.field(init=False, default=0)


class User(pydantic.BaseModel):
    id: int
    name: str
    point: Point | None = None
    secret: Annotated[str, pydantic.Field(exclude=True)] = "s"


class Text(str):
    pass


DECLARED: list[Any] = [
    list[Row],
    list[Row | None],
    Row | None,
    list[Partial],
    list[Described],
    Tree,
    dict[str, Any],
    list[Any],
    Any,
    dict[str, list[int | str]],
    list[int | float],
    list[float | int],
    list[Literal["a", 0, False] | None],
    list[Point],
    list[User],
    User | None,
    list[Point | User | None],
    list[Hidden],
    dict[str, Point],
]

KEYS = ["id", "name", "score", "ok", "tags", "kind", "hidden", "children", "x", "label"]
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2**14_001]),
    st.floats(),
    st.text(max_size=4),
    st.sampled_from(["a", "b", "\ud800", "é", '"\n', Text("a")]),
)
value = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5),
        st.dictionaries(st.sampled_from([1, Text("id")]), children, max_size=2),
        st.builds(Record, st.integers()),
    ),
    max_leaves=12,
)


NESTING = 4
"""How many typed dicts deep `shaped` nests: a `Tree` four levels deep, the levels
below it empty lists."""


def shaped(tp: Any, depth: int = NESTING) -> st.SearchStrategy[Any]:
    """Data mostly of type `tp`, with undeclared keys, and now and then a wrong leaf;
    `depth` typed dicts deep at most (a recursive one would otherwise grow until
    Hypothesis gives the example up)."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        return shaped(get_args(tp)[0], depth)
    if origin is Literal:
        return st.one_of(st.sampled_from(get_args(tp)), leaf)
    if is_union(tp):
        return st.one_of([shaped(member, depth) for member in get_args(tp)])
    if origin is list:
        return st.lists(shaped(get_args(tp)[0], depth), max_size=4 if depth else 0)
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), shaped(get_args(tp)[1], depth), max_size=4)
    if is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        declared = {name: later(hint, depth - 1) for name, hint in hints.items()}
        required = {k: declared[k] for k in tp.__required_keys__}
        optional = {k: v for k, v in declared.items() if k not in required}
        rows = st.fixed_dictionaries(required, optional=optional)
        extras = st.dictionaries(st.sampled_from(KEYS), value, max_size=2)
        return st.one_of(rows, st.tuples(rows, extras).map(lambda p: {**p[1], **p[0]}))
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        init = {f.name: shaped(hints[f.name]) for f in dataclasses.fields(tp) if f.init}
        kinds = [tp, Marked] if tp is Point else [tp]
        return st.one_of([st.builds(kind, **init) for kind in kinds])  # type: ignore[arg-type]
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        hints = typing.get_type_hints(tp)
        fields = {name: shaped(hints[name]) for name in tp.model_fields}
        return st.fixed_dictionaries(fields).map(lambda kw: tp.model_construct(**kw))
    scalars: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(st.characters(codec="utf-8"), max_size=4),
        int: st.integers(-(2**70), 2**70),
        float: st.floats(allow_nan=False, allow_infinity=False),
        bool: st.booleans(),
        type(None): st.none(),
    }
    return st.integers(0, 12).flatmap(lambda n: scalars[tp] if n else leaf)


def later(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    """`shaped(hint, depth)`, built when first drawn (a recursive type refers to itself)."""
    return st.deferred(lambda: shaped(hint, depth))


@functools.cache
def projection_of(declared: Any) -> Projection:
    return Projection(declared)


def full(projection: Projection, data: Any, max_items: int) -> Projected | Exception:
    """What the full projection makes of `data` (the plain walk turned off)."""
    plain, projection.plain = projection.plain, None
    try:
        return projection.project(data, max_items)
    except Exception as error:
        return error
    finally:
        projection.plain = plain


def same(a: Any, b: Any) -> bool:
    """Equal, of the same exact types, in the same key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, RecordValue):
        return same(record_fields(a), record_fields(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


@pytest.mark.parametrize("declared", DECLARED, ids=repr)
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), max_items=st.sampled_from([3, 1000]))
def test_a_plain_walk_gives_what_the_full_projection_gives(
    declared: Any, data: st.DataObject, max_items: int
) -> None:
    projection = projection_of(declared)
    assert projection.plain is not None
    result = data.draw(st.one_of(shaped(declared), shaped(declared), value))
    try:
        kept, size = projection.plain(result, max_items)
    except NotPlain:
        return  # the full projection decides
    expected = full(projection, result, max_items)
    assert isinstance(expected, Projected), (result, expected)
    assert same(kept, expected.value), (kept, expected.value)
    assert size == expected.size


def test_a_plain_walk_copies_every_container() -> None:
    rows = [{"id": 1, "name": "a", "score": None, "ok": True, "x": [1]}]
    projected = Projection(list[Row]).project(rows, 100)
    assert projected.value == [{"id": 1, "name": "a", "score": None, "ok": True}]
    assert projected.value is not rows and projected.value[0] is not rows[0]


def test_undeclared_keys_are_counted_against_the_bound() -> None:
    """The bound counts what serialization would read, undeclared keys included."""
    rows = [{"id": 1, "name": "a", "score": None, "ok": True, "x": list(range(50))}]
    assert Projection(list[Row]).plain is not None
    with pytest.raises(ValueError, match="more items than the result size allows"):
        Projection(list[Row]).project(rows, 20)


def test_a_cycle_is_left_to_the_full_projection() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    walk = Projection(list[Any]).plain
    assert walk is not None
    with pytest.raises(NotPlain):
        walk(cycle, 10**6)
    with pytest.raises(ValueError, match="more items than the result size allows"):
        Projection(list[Any]).project(cycle, 10**6)


def test_deep_data_is_left_to_the_full_projection() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    walk = Projection(Any).plain
    assert walk is not None
    with pytest.raises(NotPlain):
        walk(deep, 10**6)


def test_types_that_may_serialize_their_own_way_take_the_full_projection() -> None:
    class Configured(TypedDict):
        id: int

    class Serialized(pydantic.BaseModel):
        id: int

        @pydantic.field_serializer("id")
        def more(self, id: int) -> int:
            return id + 1

    class Computed(pydantic.BaseModel):
        id: int

        @pydantic.computed_field  # type: ignore[prop-decorator]
        @property
        def twice(self) -> int:
            return 2 * self.id

    class Extra(pydantic.BaseModel, extra="allow"):
        id: int

    Configured.__pydantic_config__ = pydantic.ConfigDict()  # type: ignore[attr-defined]
    serialized = Annotated[int, pydantic.PlainSerializer(lambda v: v + 1)]
    declared = [
        list[Configured],
        list[Serialized],
        list[Computed],
        list[Extra],
        list[serialized],
        list[tuple[int, ...]],
        list[Point | Marked],
        pydantic.RootModel[int],
        str,
        int,
    ]
    for tp in declared:
        assert Projection(tp).plain is None, tp


def test_floats_that_json_cannot_hold_take_the_full_projection() -> None:
    walk = Projection(list[float]).plain
    assert walk is not None
    for bad in (math.inf, math.nan):
        with pytest.raises(NotPlain):
            walk([bad], 10)
    assert walk([0.1, -0.0], 10) == ([0.1, -0.0], len("[0.1,-0.0]"))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="one Python is enough")
def test_the_size_is_that_of_the_compact_utf8_text() -> None:
    walk = Projection(dict[str, Any]).plain
    assert walk is not None
    data = {"é": ["ü", 1, None, True, False, 1.5, {"\n": '"'}]}
    kept, size = walk(data, 100)
    assert kept == data
    assert size == len('{"é":["ü",1,null,true,false,1.5,{"\\n":"\\""}]}'.encode())
