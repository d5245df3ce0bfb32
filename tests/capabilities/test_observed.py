"""Learned shapes merge by laws (any order, any grouping, counts add), close only when every
result had the same key set, turn into maps when their keys look like data, and stay
within their bounds."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.capabilities import (
    MAX_FIELDS,
    MAX_NODES,
    MAX_SCHEMA_BYTES,
    Field,
    Node,
    bounded,
    is_field_name,
    merge,
    observe,
    same_form,
    shown_to,
    subject_digest,
    to_schema,
)

A = subject_digest("alice")
B = subject_digest("bob")
C = subject_digest("carol")


def shape(value: Any, subject: str = A) -> Node:
    return observe(value, subject)


def fold(nodes: list[Node]) -> Node:
    total = nodes[0]
    for node in nodes[1:]:
        total = merge(total, node)
    return total


def levels(node: Node) -> int:
    """How many levels deep a shape goes."""
    below = [field.node for _, field in node.fields or ()]
    below += [n for n in (node.values, node.items) if n is not None]
    return 1 + max((levels(n) for n in below), default=0)


def count(node: Node) -> int:
    below = [field.node for _, field in node.fields or ()]
    below += [n for n in (node.values, node.items) if n is not None]
    return 1 + sum(count(n) for n in below)


TABLE = [
    shape({"id": 1, "name": "a"}),
    shape({"id": 2.5, "name": None, "tags": ["x"]}, B),
    shape({"name": "b", "id": 3}, C),
    shape({"owner": {"k-1": 1, "k-2": 2}}),  # a map below a named level
    shape({"owner": {"alice": 1}}, B),
    shape([{"id": 1}, {"id": 2, "extra": True}]),
    shape([1, "two", None]),
    shape({}),
    shape({"x": {"y": {"z": {"w": {"v": {"u": {"t": 1}}}}}}}),  # cut by depth
    shape("text"),
    shape(True),
    shape({"a": 1, "b": 2, "c": 3, "d": 4}),
    shape({"e": 1, "f": 2, "g": 3, "h": 4}, B),
]


def test_merge_is_commutative() -> None:
    for a, b in itertools.product(TABLE, repeat=2):
        assert merge(a, b) == merge(b, a)


def test_merge_is_associative() -> None:
    for a, b, c in itertools.product(TABLE, repeat=3):
        assert merge(merge(a, b), c) == merge(a, merge(b, c))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "d", "id", "k-1"]), inner, max_size=5)
    ),
    max_leaves=20,
)
SHAPES = st.builds(observe, JSON, st.sampled_from([A, B, C]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPES, SHAPES, SHAPES)
def test_the_laws_hold_for_any_results(a: Node, b: Node, c: Node) -> None:
    assert merge(a, b) == merge(b, a)
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


def test_counts_add() -> None:
    for a, b in itertools.product(TABLE, repeat=2):
        merged = merge(a, b)
        assert merged.seen == a.seen + b.seen
        assert merged.objects == a.objects + b.objects


def test_any_order_of_results_gives_one_shape() -> None:
    results = [shape({"id": i, "name": "n", **({"note": "x"} if i % 2 else {})}) for i in range(5)]
    shapes = {
        json.dumps(to_schema(fold(list(o)), stats=True)) for o in itertools.permutations(results)
    }
    assert len(shapes) == 1


def test_a_field_missing_from_some_objects_is_optional() -> None:
    merged = merge(shape({"id": 1, "note": "x"}), shape({"id": 2}))
    assert merged.fields is not None
    assert [(name, merged.required(field)) for name, field in merged.fields] == [
        ("id", True),
        ("note", False),
    ]


def test_an_integer_and_a_number_make_a_number_and_a_bool_is_no_integer() -> None:
    assert merge(shape(1), shape(1.5)).kinds == {"number"}
    assert merge(shape(1), shape(True)).kinds == {"integer", "boolean"}


def test_fields_are_listed_by_their_place_in_the_object() -> None:
    merged = merge(shape({"a": 1, "b": 2, "c": 3}), shape({"a": 1, "x": 2, "c": 3}))
    assert merged.key_names() == ("a", "b", "x", "c")


SAME = [{"id": 1, "name": "a"}, {"name": "b", "id": 2}, {"id": 3, "name": None}]
"""Three results with one key set."""


class TestClosed:
    """The closed flag: the same key set in every object, every object read."""

    def test_the_same_key_set_in_every_result_closes_in_every_order(self) -> None:
        for order in itertools.permutations([shape(v) for v in SAME]):
            assert fold(list(order)).closed()

    @pytest.mark.parametrize(
        "other", [{"id": 4, "name": "d", "extra": 1}, {"id": 4}], ids=["extra", "missing"]
    )
    def test_one_result_with_another_key_set_opens_it_in_every_order(
        self, other: dict[str, Any]
    ) -> None:
        for order in itertools.permutations([shape(v) for v in [*SAME, other]]):
            merged = fold(list(order))
            assert not merged.closed() and not merged.checkable()
            assert not merge(merged, fold([shape(v) for v in SAME])).closed()

    def test_a_level_not_read_whole_is_never_closed(self) -> None:
        cut = shape({"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}})
        deepest = cut
        while deepest.fields:
            deepest = deepest.fields[0][1].node
        assert deepest.kinds == {"object"} and not deepest.complete and not deepest.closed()
        assert not merge(deepest, shape({"g": 1})).closed()

    def test_a_scalar_or_a_map_is_never_closed(self) -> None:
        assert not shape(1).closed()
        assert not shape({"not a name": 1}).closed()


class TestMaps:
    """Keys that look like data make a map: its values kept, its keys never."""

    def test_more_than_max_fields_keys_is_a_map(self) -> None:
        node = shape({f"k{i}": i for i in range(MAX_FIELDS + 1)})
        assert node.is_map() and node.key_names() == ()
        assert node.values is not None and node.values.seen == MAX_FIELDS + 1

    def test_names_of_several_results_past_max_fields_make_a_map(self) -> None:
        half = MAX_FIELDS // 2 + 1
        first = shape({f"a{i}": i for i in range(half)} | {"id": 1})
        second = shape({f"b{i}": i for i in range(half)} | {"id": 2})
        assert not first.is_map() and not second.is_map()
        assert merge(first, second).is_map()

    @pytest.mark.parametrize("key", ["not-a-name", "2024", "ä", "x" * 33, ""])
    def test_a_key_that_is_not_a_short_identifier_makes_a_map(self, key: str) -> None:
        assert shape({"id": 1, key: 2}).is_map()
        assert not is_field_name(key)

    def test_a_name_of_32_characters_is_kept(self) -> None:
        assert shape({"x" * 32: 1}).key_names() == ("x" * 32,)

    def test_two_objects_that_share_no_key_are_a_map(self) -> None:
        merged = merge(shape({"alice": {"n": 1}}), shape({"bob": {"n": 2}}))
        assert merged.is_map() and merged.values is not None
        assert merged.values.key_names() == ("n",)

    def test_three_objects_sharing_under_a_quarter_of_their_names_are_a_map(self) -> None:
        results = [{"id": 1, "a": 1, "b": 1}, {"id": 1, "c": 1, "d": 1}, {"id": 1, "e": 1}]
        assert fold([shape(r) for r in results]).is_map()  # 1 of 6 in common

    def test_three_objects_sharing_a_quarter_stay_named(self) -> None:
        results = [{"id": 1, "n": 1, "a": 1}, {"id": 1, "n": 1, "b": 1}, {"id": 1, "n": 1}]
        merged = fold([shape(r) for r in results])
        assert not merged.is_map() and merged.key_names() == ("id", "n", "a", "b")

    def test_an_empty_object_does_not_make_a_map(self) -> None:
        merged = fold([shape({}), shape({"id": 1}), shape({"id": 2})])
        assert not merged.is_map() and not merged.closed()

    def test_a_map_never_turns_back(self) -> None:
        merged = merge(shape({"alice": 1}), shape({"bob": 2}))
        for _ in range(5):
            merged = merge(merged, shape({"id": 1, "name": "x"}))
        assert merged.is_map() and not merged.closed() and not merged.checkable()

    def test_a_list_of_objects_each_with_its_own_key_is_a_map(self) -> None:
        node = shape([{f"user{i}": {"role": "r"}} for i in range(10)])
        assert node.items is not None and node.items.is_map()


class TestSubjects:
    """Each name remembers up to two subjects it was seen from."""

    def test_a_name_keeps_the_subjects_it_was_seen_from_two_at_most(self) -> None:
        merged = fold([shape({"id": 1}, s) for s in (C, A, B, A)])
        field = merged.field("id")
        assert field is not None and field.subjects == frozenset(sorted([A, B, C])[:2])

    def test_a_name_is_shown_to_its_subject_or_once_two_had_it(self) -> None:
        alone = shape({"id": 1}, A)
        assert alone.key_names(shown_to(A)) == ("id",)
        assert alone.key_names(shown_to(B)) == ()
        assert merge(alone, shape({"id": 2}, C)).key_names(shown_to(B)) == ("id",)

    def test_a_subject_digest_is_twelve_hex_characters_keyed_when_a_key_is_given(self) -> None:
        plain, keyed = subject_digest("alice"), subject_digest("alice", b"k" * 32)
        assert len(plain) == len(keyed) == 12 and plain != keyed
        assert int(plain, 16) >= 0 and keyed == subject_digest("alice", b"k" * 32)

    def test_a_field_keeps_at_most_two_subjects(self) -> None:
        with pytest.raises(ValueError):
            Field(1, Node(), frozenset({A, B, C}))


class TestBounds:
    def test_a_small_shape_is_kept_as_it_is(self) -> None:
        node = shape({"id": 1, "tags": ["a"], "owner": {"name": "x"}})
        assert bounded(node) is node

    def test_too_many_nodes_are_cut_from_the_deepest_level(self) -> None:
        wide = shape({f"f{i}": {f"g{j}": {"h": j} for j in range(20)} for i in range(20)})
        assert count(wide) > MAX_NODES
        cut = bounded(wide)
        assert count(cut) <= MAX_NODES and levels(cut) < levels(wide)
        assert cut.key_names() == wide.key_names() and cut.closed()
        assert cut.fields is not None
        assert all(not f.node.complete and not f.node.closed() for _, f in cut.fields)

    def test_a_schema_over_max_bytes_is_cut(self) -> None:
        long = "n" * 32
        big = shape(
            {f"{long[:30]}{i:02}": {f"{long[:30]}{j:02}": 1 for j in range(9)} for i in range(20)}
        )
        assert count(big) <= MAX_NODES
        assert len(json.dumps(to_schema(big, stats=True))) > MAX_SCHEMA_BYTES
        cut = bounded(big)
        assert len(json.dumps(to_schema(cut, stats=True))) <= MAX_SCHEMA_BYTES
        assert cut.key_names() == big.key_names()

    def test_every_bounded_shape_fits_its_schema_bound(self) -> None:
        for width in (5, 10, 15, 20, 24):
            value = {
                f"field_{i}": [{f"inner_{j}": {"deep": [i, j]} for j in range(width)}]
                for i in range(width)
            }
            node = bounded(shape(value))
            assert count(node) <= MAX_NODES
            assert len(json.dumps(to_schema(node, stats=True))) <= MAX_SCHEMA_BYTES


def test_same_form_ignores_counts_only() -> None:
    one = shape({"id": 1, "name": "a"})
    assert same_form(one, merge(one, shape({"id": 2, "name": "b"})))
    assert not same_form(one, merge(one, shape({"id": 2})))  # name became optional
    assert not same_form(one, merge(one, shape({"id": "2", "name": "b"})))  # a kind added
    assert not same_form(one, shape({"id": 1, "nme": "a"}))


def test_a_level_is_either_named_or_a_map() -> None:
    with pytest.raises(ValueError):
        Node(fields=(), values=Node())
