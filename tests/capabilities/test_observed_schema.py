"""A learned shape is written as a valid JSON Schema that reads back as itself, and as the
notation describe shows; neither ever holds a value, a map's key, or a name another
subject's results alone had."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from codemode.capabilities import (
    MAX_FIELDS,
    NOTATION_CHARS,
    Node,
    from_schema,
    merge,
    observe,
    observed_notation,
    shown_to,
    subject_digest,
    to_schema,
)

A = subject_digest("alice")
B = subject_digest("bob")
C = subject_digest("carol")
CANARY = "canary-9b2f-shapes"

GRAPH = {
    "entities": [
        {"name": "Ada", "entityType": "person", "observations": ["likes tea"]},
        {"name": "Bob", "entityType": "person", "observations": []},
    ],
    "relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}],
}

VALUES: list[tuple[Any, str]] = [
    (GRAPH, A),
    ({"entities": [], "relations": [], "total": 2}, B),
    ({"id": 1, "size": 2.5, "kind": None}, A),
    ({"owners": {"k-1": {"size": 1}, "k-2": {"size": 2}}}, A),
    ([1, "a", None, True, [], {}], C),
    ({"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}, A),
    ({"rows": [{"id": i} for i in range(100)]}, B),
    ("text", A),
    ({f"k{i}": i for i in range(MAX_FIELDS + 3)}, A),
]


def shapes() -> list[Node]:
    """Every value's shape alone, and all of them merged one by one."""
    found = [observe(value, subject) for value, subject in VALUES]
    total = found[0]
    for node in found[1:]:
        total = merge(total, node)
        found.append(total)
    found.append(merge(observe({"b": 1, "a": 2}, A), observe({"a": 1, "x": 2, "b": 3}, B)))
    return found


def test_an_object_is_written_with_its_properties_and_required_keys() -> None:
    node = merge(observe({"id": 1, "note": "x"}, A), observe({"id": 2.5}, A))
    assert to_schema(node, stats=False) == {
        "type": "object",
        "properties": {"id": {"type": "number"}, "note": {"type": "string"}},
        "required": ["id"],
    }


def test_a_map_an_array_and_several_kinds_are_written_as_json_schema_says() -> None:
    node = observe({"owners": {"k-1": 1}, "list": [1, None], "any": []}, A)
    assert to_schema(node, stats=False)["properties"] == {
        "owners": {"type": "object", "additionalProperties": {"type": "integer"}},
        "list": {"type": "array", "items": {"type": ["integer", "null"]}},
        "any": {"type": "array"},
    }
    assert to_schema(Node(), stats=False) == {}


def test_every_schema_is_a_valid_draft_2020_12_schema() -> None:
    for node in shapes():
        for stats in (False, True):
            for shown in (None, shown_to(A), shown_to(B)):
                Draft202012Validator.check_schema(to_schema(node, stats=stats, shown=shown))


def test_every_value_conforms_to_the_schema_learned_from_it() -> None:
    for value, subject in VALUES:
        Draft202012Validator(to_schema(observe(value, subject), stats=False)).validate(value)


def test_a_shape_written_with_its_counts_reads_back_as_itself() -> None:
    for node in shapes():
        written = json.loads(json.dumps(to_schema(node, stats=True)))
        assert from_schema(written) == node


def test_counts_are_written_as_keywords_json_schema_ignores() -> None:
    node = merge(observe({"id": 1}, A), observe({"id": 2}, B))
    assert to_schema(node, stats=True) == {
        "type": "object",
        "properties": {
            "id": {
                "type": "integer",
                "x-codemode-seen": 2,
                "x-codemode-present": 2,
                "x-codemode-subjects": sorted([A, B]),
            }
        },
        "required": ["id"],
        "x-codemode-seen": 2,
        "x-codemode-objects": 2,
        "x-codemode-keyed": 2,
    }


class TestReading:
    """`from_schema` reads only what `to_schema(stats=True)` writes."""

    def written(self, properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "x-codemode-seen": 1}

    def one(self, name: str) -> dict[str, Any]:
        field = {"type": "integer", "x-codemode-seen": 1, "x-codemode-present": 1}
        return self.written({name: field})

    @pytest.mark.parametrize("name", ["content-type", "x" * 33, "ä", "", "1st", "a b"])
    def test_a_name_that_is_not_a_short_identifier_is_refused(self, name: str) -> None:
        with pytest.raises(ValueError, match="identifiers"):
            from_schema(self.one(name))

    def test_an_identifier_is_read(self) -> None:
        assert from_schema(self.one("size")).key_names() == ("size",)

    @pytest.mark.parametrize(
        "schema",
        [
            [],
            {"type": "object"},  # no counts
            {"type": "thing", "x-codemode-seen": 1},
            {"type": "object", "x-codemode-seen": -1},
            {"type": "object", "x-codemode-seen": True},
            {"type": "object", "x-codemode-seen": 1, "enum": [1]},
            {"type": "string", "x-codemode-seen": 1, "properties": {}},
            {"type": "object", "x-codemode-seen": 1, "properties": {}, "additionalProperties": {}},
            {"type": "string", "x-codemode-seen": 1, "items": {"x-codemode-seen": 1}},
            {"type": "object", "x-codemode-seen": 1, "x-codemode-complete": "no"},
            {"type": "object", "x-codemode-seen": 1, "x-codemode-present": 1},
        ],
    )
    def test_anything_else_is_refused(self, schema: Any) -> None:
        with pytest.raises(ValueError):
            from_schema(schema)

    @pytest.mark.parametrize("subjects", [["abc"], [A, B, C], [A.upper()], "x"])
    def test_subjects_are_at_most_two_digests(self, subjects: Any) -> None:
        schema = self.one("size")
        schema["properties"]["size"]["x-codemode-subjects"] = subjects
        with pytest.raises(ValueError):
            from_schema(schema)

    def test_a_shape_deeper_than_it_is_learned_is_refused(self) -> None:
        schema: dict[str, Any] = {"type": "object", "x-codemode-seen": 1}
        for _ in range(8):
            schema = {"type": "array", "items": schema, "x-codemode-seen": 1}
        with pytest.raises(ValueError, match="deep"):
            from_schema(schema)

    def test_too_many_names_are_read_as_a_map(self) -> None:
        field = {"type": "integer", "x-codemode-seen": 1, "x-codemode-present": 1}
        names = {f"k{i}": dict(field) for i in range(MAX_FIELDS + 1)}
        node = from_schema({**self.written(names), "x-codemode-objects": 1})
        assert node.is_map() and node.key_names() == ()


class TestNotation:
    def test_a_graph_is_written_as_a_python_programmer_reads_it(self) -> None:
        node = merge(observe(GRAPH, A), observe({**GRAPH, "total": 2}, A))
        assert observed_notation(node) == (
            "dict {entities: list[dict {name: str, entityType: str, observations: list[str]}], "
            "relations: list[dict {from: str, to: str, relationType: str}], total?: int}"
        )

    def test_a_map_kinds_and_nothing_known(self) -> None:
        node = observe({"owners": {"k-1": {"size": 1}}, "note": None, "raw": "x"}, A)
        node = merge(node, observe({"owners": {}, "note": "n", "raw": "y"}, A))
        assert observed_notation(node) == (
            "dict {owners: dict[str, dict {size: int}], note: str | None, raw: str}"
        )
        assert observed_notation(Node()) == "Any"

    def test_a_long_shape_is_cut(self) -> None:
        wide = {f"field_number_{i}": [{f"inner_name_{j}": 1 for j in range(10)}] for i in range(10)}
        text = observed_notation(observe(wide, A))
        assert len(text) == NOTATION_CHARS and text.endswith("...")


class TestSubjects:
    """A name seen in one subject's results only is shown to that subject alone."""

    def test_a_name_from_one_subject_is_not_shown_to_another(self) -> None:
        node = merge(observe({"id": 1, "alice_only": 2}, A), observe({"id": 3}, B))
        assert observed_notation(node, shown_to(A)) == "dict {id: int, alice_only?: int}"
        assert observed_notation(node, shown_to(B)) == "dict {id: int, ...}"
        schema = to_schema(node, stats=False, shown=shown_to(B))
        assert schema == {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
        }
        assert "alice_only" in observed_notation(node)  # the operator sees every name

    def test_a_name_two_subjects_had_is_shown_to_all(self) -> None:
        node = merge(observe({"id": 1}, A), observe({"id": 2}, B))
        assert observed_notation(node, shown_to(C)) == "dict {id: int}"

    def test_a_hidden_name_still_counts_for_the_closed_flag(self) -> None:
        node = merge(observe({"id": 1, "secret": 1}, A), observe({"id": 2, "secret": 2}, A))
        assert node.closed() and node.key_names(shown_to(B)) == ()
        assert node.field("secret") is not None


def test_no_value_or_map_key_is_ever_written() -> None:
    """Canaries in every value and in a map's keys appear in no rendering."""
    value = {
        "title": CANARY,
        "count": 12345,
        "owners": {f"{CANARY}-{i}": {"role": CANARY, "since": 1999} for i in range(4)},
        "byname": {f"user_{i}": {"note": CANARY} for i in range(30)},
        "tags": [CANARY, CANARY + "2"],
        "rows": [{"text": CANARY, "n": i} for i in range(50)],
    }
    node = merge(observe(value, A), observe({**value, "count": 99999}, B))
    forbidden = [CANARY, "12345", "1999", "user_1"]
    for shown in (None, shown_to(A), shown_to(C)):
        rendered = [
            json.dumps(to_schema(node, stats=True, shown=shown)),
            json.dumps(to_schema(node, stats=False, shown=shown)),
            observed_notation(node, shown),
        ]
        for text in rendered:
            for word in forbidden:
                assert word not in text
