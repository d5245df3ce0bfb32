"""A declared result type is outlined as the shape the projection keeps: every name known,
a record read by attribute, a map's keys never checked, anything uncertain unchecked."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import pydantic
from typing_extensions import TypedDict

from codemode.capabilities import Node, outline
from codemode.sources.schema import Hints


class Named(TypedDict):
    name: str
    entityType: str


class Entity(Named, total=False):
    note: str


class Page(TypedDict):
    items: list[Entity]
    total: int
    next_offset: int | None
    owners: dict[str, Entity]


@dataclasses.dataclass
class Instance:
    sandbox: str
    memory_mb: int


class Machine(pydantic.BaseModel):
    name: str
    secret: str = pydantic.Field(exclude=True)

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return self.name.upper()


class Tree(TypedDict):
    name: str
    children: list[Tree]


def only(node: Node | None) -> Node:
    assert node is not None
    return node


def below(node: Node, name: str) -> Node:
    field = node.field(name)
    assert field is not None
    return field.node


def test_a_typeddict_knows_every_name_and_which_are_required() -> None:
    node = only(outline(Entity))
    assert node.declared and node.checkable() and node.record is None
    assert node.fields is not None
    assert [(name, node.required(f)) for name, f in node.fields] == [
        ("name", True),
        ("entityType", True),
        ("note", False),
    ]


def test_lists_maps_and_optionals_are_followed() -> None:
    page = only(outline(Page))
    assert page.key_names() == ("items", "total", "next_offset", "owners")
    items = below(page, "items")
    assert items.kinds == {"array"} and items.items == outline(Entity)
    owners = below(page, "owners")
    assert owners.is_map() and owners.values == outline(Entity) and not owners.checkable()
    assert below(page, "next_offset") == Node()  # a scalar is never checked


def test_an_optional_typeddict_may_also_be_none() -> None:
    node = only(outline(Entity | None))
    assert node.kinds == {"object", "null"} and node.checkable()
    assert node.key_names() == ("name", "entityType", "note")


def test_a_record_is_read_by_attribute_with_the_fields_that_cross() -> None:
    instance = only(outline(Instance))
    assert instance.record == "Instance" and instance.key_names() == ("sandbox", "memory_mb")
    machine = only(outline(Annotated[Machine, "meta"]))
    assert machine.record == "Machine" and machine.key_names() == ("name", "label")


def test_a_list_or_a_map_of_records() -> None:
    assert only(outline(list[Instance])).items == outline(Instance)
    assert only(outline(dict[str, Instance])).values == outline(Instance)


def test_what_cannot_be_checked_has_no_outline() -> None:
    for tp in (
        Any,
        int,
        str | None,
        list[str],
        dict[str, Any],
        Entity | Instance,
        tuple[Entity, int],
    ):
        assert outline(tp) is None, tp


def test_a_type_that_refers_to_itself_is_outlined_to_a_bounded_depth() -> None:
    node = only(outline(Tree))
    depth = 0
    while (children := below(node, "children")) != Node():
        assert children.items is not None
        node, depth = children.items, depth + 1
    assert node.checkable() and depth == 3  # levels 0, 2, 4, 6: a tree and its children


def test_the_outline_of_a_type_is_made_once() -> None:
    assert outline(Page) is outline(Page)


def test_an_mcp_output_schema_is_outlined_as_its_hints_declare() -> None:
    """The memory server's read_graph `outputSchema`, read by the same Hints as upstream tools."""
    item = {"type": "object", "additionalProperties": False}
    schema = {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    **item,
                    "properties": {
                        "name": {"type": "string", "description": "The name of the entity"},
                        "entityType": {"type": "string"},
                        "observations": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["name", "entityType", "observations"],
                },
            },
            "relations": {
                "type": "array",
                "items": {
                    **item,
                    "properties": {
                        "from": {"type": "string"},
                        "to": {"type": "string"},
                        "relationType": {"type": "string"},
                    },
                    "required": ["from", "to", "relationType"],
                },
            },
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["entities", "relations"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }
    graph = only(outline(Hints(schema, "ReadGraph").of(schema, "ReadGraphResult")))
    assert graph.checkable() and graph.key_names() == ("entities", "relations", "meta")
    assert [graph.required(f) for _, f in graph.fields or ()] == [True, True, False]
    entities = below(graph, "entities").items
    assert entities is not None and entities.key_names() == ("name", "entityType", "observations")
    relations = below(graph, "relations").items
    assert relations is not None and relations.key_names() == ("from", "to", "relationType")
    meta = below(graph, "meta")
    assert meta.kinds == {"object", "null"} or meta.kinds == {"object"}
    assert meta.is_map() and not meta.checkable()
