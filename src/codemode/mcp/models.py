"""The three tools' argument and reply types, and the JSON Schemas a client lists for them.

The input schema, the argument check and the output schema of each tool all derive from
these types, so they cannot drift apart; the payloads of `codemode.payloads` are tested
against the reply types.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    WithJsonSchema,
    with_config,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypedDict  # pydantic needs its TypedDict before 3.12

Schema = dict[str, Any]
MAX_DESCRIBE_NAMES = 20

# Closed shapes: a property the type does not name is refused, as `additionalProperties:
# false` tells the client; strict, so that "5" is no integer and 1.0 no offset.
_CLOSED = ConfigDict(extra="forbid", strict=True)


def _unicode(text: str) -> str:
    """JSON can spell a lone surrogate (`"\\ud800"`), which no UTF-8 text holds: it is the
    caller's malformed input, refused before any CodeMode method sees it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("string_unicode", "not Unicode text") from None
    return text


Text = Annotated[str, AfterValidator(_unicode)]


@with_config(_CLOSED)
class SearchArguments(TypedDict):
    query: Annotated[
        Text,
        Field(
            description=(
                "Words for the task or resource, or an exact capability name; empty lists all"
            )
        ),
    ]
    offset: NotRequired[
        Annotated[
            int,
            Field(
                ge=0, description="Where the page starts: the next_offset of the previous answer"
            ),
        ]
    ]


@with_config(_CLOSED)
class DescribeArguments(TypedDict, total=False):
    name: Annotated[Text, Field(description="The exact capability name, as search_api returned it")]
    names: Annotated[
        list[Text],
        Field(
            max_length=MAX_DESCRIBE_NAMES,
            description="Several exact names at once, instead of name",
        ),
    ]


@with_config(_CLOSED)
class ExecuteArguments(TypedDict):
    source: Annotated[Text, Field(description="The program: Python that defines def main():")]


@with_config(ConfigDict(extra="allow", strict=True))
class Where(TypedDict, total=False):
    """The place in the program an error names (`Where.to_dict()`), or null."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    func: str | None
    source: str


@with_config(_CLOSED)
class Call(TypedDict):
    """One capability call that ended before the failure, in the order they ended."""

    capability: str
    line: int | None
    outcome: str


@with_config(_CLOSED)
class Error(TypedDict):
    """`CodeModeError.to_payload()`."""

    code: str
    message: str
    where: Where | None
    calls: NotRequired[list[Call]]


@with_config(_CLOSED)
class ErrorReply(TypedDict):
    """What every tool answers on failure, with what the program printed before it."""

    error: Error
    printed: NotRequired[str]


@with_config(_CLOSED)
class Hit(TypedDict):
    """One search result."""

    name: str
    signature: str
    summary: str


@with_config(_CLOSED)
class SearchReply(TypedDict):
    """`search_payload()`."""

    results: list[Hit]
    truncated: bool
    next_offset: NotRequired[int]
    hint: NotRequired[str]


Object = dict[str, Any]


@with_config(_CLOSED)
class DescribeReply(TypedDict, total=False):
    """`describe_payload()` of one name, or of several: `capabilities` and `not_found`."""

    name: str
    signature: str
    summary: str
    description: str
    parameters: list[Object]
    result: Object
    shapes: list[str]
    example: str
    input_schema: Object
    output_schema: Object
    capabilities: list[Object]
    not_found: list[Object]


# Spelled out because pydantic's own schema for any value, `{}`, is one that clients (and
# the Inspector's --strict check) take for a schema that was forgotten.
AnyJSON = Annotated[
    Any,
    WithJsonSchema(
        {
            "description": "Any JSON value",
            "anyOf": [
                {"type": kind}
                for kind in ("object", "array", "string", "number", "boolean", "null")
            ],
        }
    ),
]


@with_config(_CLOSED)
class ExecuteReply(TypedDict):
    """`execute_payload()`."""

    result: AnyJSON
    printed: NotRequired[str]
    usage: NotRequired[Object]


def _outcome(reply: Any) -> str:
    return "error" if isinstance(reply, dict) and "error" in reply else "ok"


_Success = TypeVar("_Success")
Reply: TypeAlias = Annotated[
    Annotated[_Success, Tag("ok")] | Annotated[ErrorReply, Tag("error")],
    Discriminator(_outcome),
]
"""A tool's reply: its success, or the error reply, told apart by its `error` property."""
SearchOutput: TypeAlias = Reply[SearchReply]
DescribeOutput: TypeAlias = Reply[DescribeReply]
ExecuteOutput: TypeAlias = Reply[ExecuteReply]


class _Portable(GenerateJsonSchema):
    """Pydantic's JSON Schema in the tools' published spelling: keys in the order the types
    declare them (the order the reference shows), without the titles and docstrings that
    name Python classes, which are no contract of the tool."""

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def typed_dict_schema(self, schema: core_schema.TypedDictSchema) -> JsonSchemaValue:
        json_schema = super().typed_dict_schema(schema)
        json_schema.pop("title", None)
        json_schema.pop("description", None)
        return json_schema


def wire_schema(adapter: TypeAdapter[Any]) -> Schema:
    """`adapter`'s JSON Schema as a tool lists it: every `$ref` inlined (a client that maps
    tool schemas onto its own dialect may not follow one), and `"type": "object"` at the
    root, without which a 2025-era client refuses the whole tools/list."""
    schema = adapter.json_schema(schema_generator=_Portable)
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            *_, name = node["$ref"].split("/")
            node = {**definitions[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return {key: inline(value) for key, value in node.items()}

    return {"type": "object", **inline(schema)}


ARGUMENTS: dict[str, TypeAdapter[Any]] = {
    "search_api": TypeAdapter(SearchArguments),
    "describe_api": TypeAdapter(DescribeArguments),
    "execute": TypeAdapter(ExecuteArguments),
}
"""Each tool's argument type: what check_arguments applies and what its input schema is."""


def _adapter(form: Any) -> TypeAdapter[Any]:
    """`TypeAdapter(form)` for an annotated union, a type form mypy does not take for a
    `type` (PEP 747 would)."""
    return TypeAdapter(form)


REPLIES: dict[str, TypeAdapter[Any]] = {
    "search_api": _adapter(SearchOutput),
    "describe_api": _adapter(DescribeOutput),
    "execute": _adapter(ExecuteOutput),
}
"""Each tool's reply type: its output schema, and what its payloads are tested against."""


__all__ = [
    "ARGUMENTS",
    "MAX_DESCRIBE_NAMES",
    "REPLIES",
    "DescribeArguments",
    "DescribeReply",
    "ErrorReply",
    "ExecuteArguments",
    "ExecuteReply",
    "Schema",
    "SearchArguments",
    "SearchReply",
    "wire_schema",
]
