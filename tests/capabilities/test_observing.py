"""One result is observed within a fixed budget: long lists are sampled and their key sets
scanned, deep values are cut, and what was not read never closes a level."""

from __future__ import annotations

from typing import Any

from codemode.capabilities import (
    MAX_DEPTH,
    OBSERVE_NODES,
    SAMPLE_ITEMS,
    SCAN_ITEMS,
    Node,
    observe,
    observed_notation,
    subject_digest,
)

A = subject_digest("alice")
CANARY = "canary-5e1d-observed"


def rows(count: int, fields: int = 10) -> list[dict[str, Any]]:
    return [{f"col{j}": (i * j if j % 2 else f"v{i}") for j in range(fields)} for i in range(count)]


def field_node(node: Node, name: str) -> Node:
    field = node.field(name)
    assert field is not None
    return field.node


def test_one_result_is_seen_once_and_its_names_carry_the_subject() -> None:
    node = observe({"id": 1, "name": "a"}, A)
    assert (node.seen, node.objects) == (1, 1) and node.kinds == {"object"}
    assert node.closed() and node.key_names() == ("id", "name")
    field = node.field("id")
    assert field is not None and field.subjects == {A}


def test_kinds_are_json_kinds_and_a_tuple_is_an_array() -> None:
    node = observe({"b": True, "i": 1, "f": 1.5, "s": "x", "n": None, "t": (1, 2), "l": []}, A)
    assert observed_notation(node) == (
        "dict {b: bool, i: int, f: float, s: str, n: None, t: list[int], l: list[Any]}"
    )


def test_only_the_shape_is_kept_never_a_value_or_a_map_key() -> None:
    value = {
        "note": CANARY,
        "count": 7,
        "owners": {f"{CANARY}-{i}": {"role": CANARY} for i in range(3)},
        "list": [CANARY, {"text": CANARY}],
    }
    assert CANARY not in repr(observe(value, A))


class TestLongLists:
    def test_a_thousand_rows_are_sampled_and_their_key_sets_scanned(self) -> None:
        node = observe({"rows": rows(1_000)}, A)
        items = field_node(node, "rows").items
        assert items is not None and items.seen == SAMPLE_ITEMS
        assert items.closed() and items.key_names() == tuple(f"col{j}" for j in range(10))
        assert items.fields is not None
        assert all(not field.node.complete for _, field in items.fields)  # values unread

    def test_a_row_past_the_sample_with_another_key_set_opens_the_item_level(self) -> None:
        many = rows(1_000)
        many[700] = {**many[700], "extra": 1}
        items = field_node(observe({"rows": many}, A), "rows").items
        assert items is not None and not items.closed()
        assert items.key_names() == tuple(f"col{j}" for j in range(10))  # never read

    def test_a_row_past_the_sample_that_is_no_object_opens_the_item_level(self) -> None:
        many: list[Any] = rows(100)
        many[-1] = None
        items = observe(many, A).items
        assert items is not None and not items.closed()

    def test_rows_past_the_scan_open_the_item_level(self) -> None:
        items = observe(rows(SAMPLE_ITEMS + SCAN_ITEMS + 1, 1), A).items
        assert items is not None and not items.closed()
        assert observe(rows(SAMPLE_ITEMS + SCAN_ITEMS, 1), A).items == Node(
            kinds=frozenset({"object"}),
            seen=SAMPLE_ITEMS,
            objects=SAMPLE_ITEMS,
            keyed=SAMPLE_ITEMS,
            fields=items.fields,
        )

    def test_a_short_list_is_read_whole(self) -> None:
        items = observe(rows(SAMPLE_ITEMS), A).items
        assert items is not None and items.closed()
        assert items.fields is not None and all(field.node.complete for _, field in items.fields)

    def test_a_long_list_of_scalars_is_not_complete(self) -> None:
        items = observe(list(range(100)), A).items
        assert items is not None and items.kinds == {"integer"} and not items.complete


class TestBudget:
    def test_a_wide_map_has_its_first_values_read_as_a_long_list_has(self) -> None:
        """Each value of a map with 100k keys was put on the walk's stack: the walk cost
        as much as parsing the result, on the call's path; now a sample is read."""
        node = observe({f"{CANARY}{i}": {"share": i} for i in range(100_000)}, A)
        values = node.values
        assert values is not None and values.seen == SAMPLE_ITEMS and not values.closed()
        assert observed_notation(node) == "dict[str, dict {share: int}]"

    def test_past_the_budget_nothing_more_is_read_and_what_was_not_read_is_open(self) -> None:
        value = [{f"f{j}": [j, j] for j in range(20)} for _ in range(SAMPLE_ITEMS)]
        assert SAMPLE_ITEMS * 61 > OBSERVE_NODES  # each item is 61 values
        node = observe(value, A)
        items = node.items
        assert items is not None and items.seen < SAMPLE_ITEMS and not items.closed()
        total_seen = 1 + items.seen
        for _, field in items.fields or ():
            total_seen += field.node.seen + (field.node.items.seen if field.node.items else 0)
        assert total_seen == OBSERVE_NODES

    def test_a_deep_value_is_cut_below_max_depth(self) -> None:
        value: dict[str, Any] = {"leaf": 1}
        for depth in range(10):
            value = {f"level{9 - depth}": value}
        node = observe(value, A)
        for depth in range(MAX_DEPTH):
            assert node.closed(), depth
            node = field_node(node, f"level{depth}")
        assert node.kinds == {"object"} and node.fields is None and not node.complete
        assert observed_notation(observe(value, A)) == (
            "dict {level0: dict {level1: dict {level2: dict {level3: dict {level4: "
            "dict {level5: dict}}}}}}"
        )

    def test_a_very_deep_value_is_walked_without_recursion(self) -> None:
        value: list[Any] = []
        for _ in range(100_000):
            value = [value]
        node = observe(value, A)
        assert node.kinds == {"array"}
