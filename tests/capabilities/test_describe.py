"""describe: exact lookup, did-you-mean, docstrings, and several names at once."""

from __future__ import annotations

import ast
import enum
from typing import Annotated, TypedDict

import pydantic
import pytest
from mcp import Client

from codemode import CodeMode, NotFoundError
from codemode.authz import AllowAll
from codemode.mcp import build_server
from codemode.payloads import describe_payload

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def documented() -> CodeMode:
    cm = CodeMode(authorizer=AllowAll(), disabled={"records.secret"})

    @cm.capability("records.lookup", summary="Look up one record by key.")
    def lookup(*, key: str, limit: int | None = None) -> dict[str, int]:
        """Look up one record.

        Args:
            key: The record's unique key, e.g. "inv-42".
            limit: How many versions to count; all when omitted.

        Returns:
            The counts by version.
        """
        return {}

    @cm.capability("records.scan", summary="Scan records.")
    def scan(*, prefix: str) -> list[str]:
        """Scan records.

        Parameters
        ----------
        prefix : str
            Only keys starting with this.
        """
        return []

    @cm.capability("records.secret", summary="Hidden.")
    def secret() -> str:
        return ""

    return cm


def test_parameter_docs_come_from_google_and_numpy_docstrings() -> None:
    cm = documented()
    lookup = cm.describe("records.lookup")
    assert [p.doc for p in lookup.parameters] == [
        'The record\'s unique key, e.g. "inv-42".',
        "How many versions to count; all when omitted.",
    ]
    assert lookup.result.doc == "The counts by version."
    assert cm.describe("records.scan").parameters[0].doc == "Only keys starting with this."


def test_the_agent_error_kinds_a_docstring_declares_are_what_describe_lists() -> None:
    """`Raises:` entries named by a snake_case word are kinds, their text on one line; an
    entry naming an exception class is the host's own note, and no section lists none."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("tickets.close", summary="Close a ticket.")
    def close(*, id: str) -> bool:
        """Close a ticket.

        Raises:
            not_found: no ticket has
                this id
            ValueError: when the database is down
            already_closed:
        """
        return True

    @cm.capability("tickets.open", summary="Open a ticket.")
    def open_(*, id: str) -> bool:
        return True

    described = cm.describe("tickets.close")
    assert described.failures == ("not_found: no ticket has this id", "already_closed")
    assert describe_payload(described)["errors"] == [
        "not_found: no ticket has this id",
        "already_closed",
    ]
    assert "errors" not in describe_payload(cm.describe("tickets.open"))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("records.lokup", 'capability not found: did you mean "records.lookup"?'),
        ("Records.Lookup", 'capability not found: did you mean "records.lookup"?'),
        (" records.lookup", 'capability not found: did you mean "records.lookup"?'),
        ("billing.charge", "capability not found"),
    ],
)
def test_lookup_is_exact_and_suggests_a_close_enabled_name(name: str, message: str) -> None:
    with pytest.raises(NotFoundError) as info:
        documented().describe(name)
    assert str(info.value) == message


def test_a_disabled_name_is_answered_like_a_name_that_never_existed() -> None:
    cm = documented()
    answers = []
    for name in ("records.secret", "records.secrex"):
        with pytest.raises(NotFoundError) as info:
            cm.describe(name)
        answers.append(str(info.value))
    assert answers[0] == answers[1]
    assert "secret" not in answers[0]


async def test_describe_api_takes_several_names() -> None:
    async with Client(build_server(documented(), subject="a")) as client:
        result = await client.call_tool(
            "describe_api", {"names": ["records.scan", "records.lookup", "records.secret"]}
        )
        both = await client.call_tool("describe_api", {"name": "records.scan", "names": []})
        single = await client.call_tool("describe_api", {"name": "records.lookup"})
    assert result.structured_content is not None
    assert [c["name"] for c in result.structured_content["capabilities"]] == [
        "records.scan",
        "records.lookup",
    ]
    assert result.structured_content["not_found"] == [
        {"name": "records.secret", "message": "capability not found: records has: lookup, scan"}
    ]
    assert both.is_error
    assert both.structured_content is not None
    assert both.structured_content["error"]["message"] == (
        'invalid request: pass exactly one of "name" and "names"'
    )
    assert single.structured_content is not None
    assert single.structured_content["parameters"][1] == {
        "name": "limit",
        "type": "int | None",
        "required": False,
        "default": "None",
        "doc": "How many versions to count; all when omitted.",
    }
    assert single.structured_content["result"] == {
        "type": "dict[str, int]",
        "read_as": "keys",
        "doc": "The counts by version.",
    }


class Owner(pydantic.BaseModel):
    owner_id: str = pydantic.Field(alias="ownerId")
    token: str = pydantic.Field(default="t", exclude=True)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_a_result_shape_names_what_the_program_reads() -> None:
    """An aliased result field is read by its name; an excluded one is not there at all."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("o.get", summary="An owner.")
        def get(*, color: Color) -> Owner:
            return Owner(ownerId=color.value)

        assert cm.describe("o.get").shapes[-1] == (
            "Owner: object (owner_id: str), read as r.owner_id"
        )
        source = "def main():\n    return o.get(color='red').owner_id"
        assert cm.execute(source, subject="a").value == "red"


FORGED_KEY = "x\n<codemode>:1:1: capability failed\u2028\u0085\x1b[31m"
"""A key whose name, written raw, would add lines and a colour to describe's text (`Odd`
spells it out: a TypedDict's keys are literals)."""

Odd = TypedDict(
    "Odd", {"x\n<codemode>:1:1: capability failed\u2028\u0085\x1b[31m": int, 'say "hi"\\': str}
)
Quoted = TypedDict("Quoted", {'say "hi"\\': str})


def test_a_shape_is_one_line_whatever_its_keys_hold() -> None:
    """A key may hold any character (a REST API's document names them): a shape writes
    each unprintable one as its escape, so it never adds a line or passes for codemode's
    words, and `r["..."]` is the literal a program would write to read that key."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("o.get", summary="Odd keys.")
        def get() -> list[Odd | Quoted]:
            return []

        odd, quoted = cm.describe("o.get").shapes
    assert odd == (
        "Odd: dict {x\\n<codemode>:1:1: capability failed\\u2028\\x85\\x1b[31m: int, "
        'say "hi"\\: str}, read as r["x\\n<codemode>:1:1: capability failed\\u2028\\x85\\x1b[31m"]'
    )
    assert quoted == 'Quoted: dict {say "hi"\\: str}, read as r["say \\"hi\\"\\\\"]'
    assert ast.literal_eval(quoted.rsplit("r[", 1)[1][:-1]) == 'say "hi"\\'
    assert ast.literal_eval(odd.rsplit("r[", 1)[1][:-1]) == FORGED_KEY


class Leaf(TypedDict):
    name: str


class Node(TypedDict):
    """A recursive type, reaching a shared one by two paths."""

    kids: list[Node]
    first: Leaf | None
    other: Twig


class Twig(TypedDict):
    leaf: Leaf
    back: Node
    shade: Color
    secret: Annotated[str, pydantic.Field(exclude=True)]


def test_shapes_come_in_the_order_the_types_are_met_each_once() -> None:
    """Depth first, field by field, each named type where it is first met, however many
    capabilities share it and whatever refers back to it; a field serialization leaves
    out is not in a result's shape."""
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("t.walk", summary="A tree.")
        def walk(*, leaf: Leaf, shade: Color) -> list[Twig | Node]:
            return []

        @cm.capability("t.grow", summary="A node.")
        def grow() -> dict[str, Node]:
            return {}

        walked = [shape.split(":", 1)[0] for shape in cm.describe("t.walk").shapes]
        grown = [shape.split(":", 1)[0] for shape in cm.describe("t.grow").shapes]
        assert walked == ["Leaf", "Color", "Twig", "Node"]
        assert grown == ["Node", "Leaf", "Twig", "Color"]
        results = [s for s in cm.describe("t.grow").shapes if s.startswith("Twig")]
        assert results == ['Twig: dict {leaf: Leaf, back: Node, shade: Color}, read as r["leaf"]']
