"""The three tools: their argument and reply types, the JSON Schemas a client lists for
them, their descriptions, the check of their arguments, and the replies built from CodeMode.

The input schema, the argument check and the output schema of each tool all derive from
one set of types, so they cannot drift apart; the payloads of `codemode.payloads` are
tested against the reply types. Each tool is a few lines over one CodeMode method; every
reply is built from a result or from `CodeModeError.to_payload()`, so the MCP answer says
exactly what the error says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, TypeAlias, TypeVar

from mcp.types import Tool, ToolAnnotations
from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    with_config,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, PydanticCustomError, core_schema
from typing_extensions import TypedDict  # pydantic needs its TypedDict before 3.12

from codemode.app import CodeMode
from codemode.binding import closest_name
from codemode.errors import CodeModeError, InvalidRequestError, NotFoundError
from codemode.language import surface
from codemode.limits import Limits, budget
from codemode.payloads import describe_payload, model_text, search_payload
from codemode.programs import MAX_NAME, SAVE_AS_FIELDS, SAVE_AS_NAME, SaveStatus
from codemode.types import JSONObject, JSONValue

# -- the types ------------------------------------------------------------------------------

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

SAVE_AS_DESCRIPTION = (
    "After the program succeeds, keep it as the capability programs.<name> for you to call "
    "later (keyword-only parameters of main are its parameters); saving is authorized and "
    "may ask a person; it counts as one call."
)


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
    schemas: Annotated[
        bool,
        Field(description="Add each capability's input and output JSON Schema (default false)"),
    ]


NAME_PATTERN = "^[a-z][a-z0-9_]*$"
"""What a saved program's name may be (`codemode.programs` checks it too)."""


@with_config(_CLOSED)
class SaveAsArgument(TypedDict):
    name: Annotated[
        Text,
        Field(
            max_length=MAX_NAME,
            description="Lowercase letters, digits and _: the program becomes programs.<name>",
            # listed for the client; the rule itself is CodeMode's, with its own text
            json_schema_extra={"pattern": NAME_PATTERN},
        ),
    ]
    summary: Annotated[Text, Field(description="What it does, as search_api will show it")]


SaveAsProperty: TypeAlias = Annotated[SaveAsArgument, Field(description=SAVE_AS_DESCRIPTION)]


@with_config(_CLOSED)
class ExecuteArguments(TypedDict):
    source: Annotated[Text, Field(description="The program: Python that defines def main():")]
    save_as: NotRequired[SaveAsProperty]


@with_config(_CLOSED)
class ExecuteSessionArguments(TypedDict):
    source: Annotated[Text, Field(description="The program: Python that defines def main():")]
    session: NotRequired[
        Annotated[
            Text,
            Field(
                max_length=64,
                description="new to start a session; a handle from a reply to continue one",
            ),
        ]
    ]
    save_as: NotRequired[SaveAsProperty]


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
    effects: str
    parameters: list[Object]
    result: Object
    shapes: list[str]
    example: str
    errors: list[str]
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
class SavedReply(TypedDict):
    """How a `save_as` ended: the capability name, and a status of a closed set."""

    name: str
    status: SaveStatus


@with_config(_CLOSED)
class ExecuteReply(TypedDict):
    """`execute_payload()`."""

    result: AnyJSON
    printed: NotRequired[str]
    usage: NotRequired[Object]
    session: NotRequired[str]
    saved: NotRequired[SavedReply]


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
    "execute": TypeAdapter(ExecuteSessionArguments),
}
"""Each tool's argument type: what check_arguments applies and what its input schema is
(`execute`'s as a host with sessions lists it; `WITHOUT_SESSIONS` for one without)."""
WITHOUT_SESSIONS = TypeAdapter(ExecuteArguments)
"""`execute`'s argument type when the host runs no sessions: a `session` is refused."""


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


# -- the tools ------------------------------------------------------------------------------

SEARCH_DESCRIPTION = (
    "Search the host's capabilities by task, resource or exact name. Results are ranked; "
    "pass a returned name to describe_api, then call it from execute. An empty query lists "
    "every capability, a page at a time."
)
DESCRIBE_DESCRIPTION = (
    "Describe a capability by the exact name search_api returned (or up to "
    f"{MAX_DESCRIBE_NAMES} at once with names): its keyword-only signature, each "
    "parameter's meaning, what each field of its "
    'result is called and how to read it (r["key"] or r.key), whether it writes, and '
    "what it can fail with (the codes error_data(e) gives); JSON Schemas too with "
    "schemas: true. A result shape marked observed was learned from the capability's past "
    "results, not declared: key? was missing from some, ... stands for names not shown to you."
)
EXECUTE_DESCRIPTION = (
    "Run one program against the capabilities and return what main() returns, with anything "
    "it printed. Make several calls, filter and combine their results in one program.\n"
    + surface()
    + '\nCall progress("message", done=3, total=20) to tell the client how far the program '
    "is; done and total are optional numbers and it returns None."
    + "\nOn failure the reply is an error with a code and, for mistakes in the program, the "
    "line and column to fix.\nWith save_as, a program that succeeds is kept as "
    "programs.<name>, which your later programs call like any capability."
)
SESSIONS_DESCRIPTION = (
    'With session "new" (or a handle a reply gave), what the program leaves at top level '
    "— its assignments outside main(), names main() declares global, imports, "
    "functions and classes — is kept for the next program in that session. A program that fails "
    "leaves the session as it was."
)


def _tool(
    name: str, description: str, annotations: ToolAnnotations, arguments: TypeAdapter[Any]
) -> Tool:
    return Tool(
        name=name,
        description=description,
        input_schema=wire_schema(arguments),
        output_schema=wire_schema(REPLIES[name]),
        annotations=annotations,
    )


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
TOOLS = [
    _tool("search_api", SEARCH_DESCRIPTION, _READ_ONLY, ARGUMENTS["search_api"]),
    _tool("describe_api", DESCRIBE_DESCRIPTION, _READ_ONLY, ARGUMENTS["describe_api"]),
    _tool(
        "execute",
        f"{EXECUTE_DESCRIPTION}\n{SESSIONS_DESCRIPTION}",
        ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        ARGUMENTS["execute"],
    ),
]
"""The three tools as a host with sessions (the default) lists them."""


def tools(limits: Limits | None, *, sessions: bool = True, tasks: bool = False) -> list[Tool]:
    """The three tools; the execute description ends with the budget of `limits` (none
    for a host that keeps its bounds to itself; the task bound too when the server runs
    `tasks`). Without `sessions`, execute takes no `session` and says nothing of
    sessions."""
    execute = TOOLS[2]
    if not sessions:
        execute = execute.model_copy(
            update={
                "description": EXECUTE_DESCRIPTION,
                "input_schema": wire_schema(WITHOUT_SESSIONS),
            }
        )
    if limits is not None:
        line = budget(limits, sessions=sessions, tasks=tasks)
        execute = execute.model_copy(update={"description": f"{execute.description}\n{line}"})
    return [*TOOLS[:2], execute]


ToolResult = dict[str, Any]
"""A tool's answer as `CallToolResult` reads on the wire: `content`, `structuredContent`,
`isError` and `resultType`, exactly what the model would dump to. The SDK validates and
dumps every result against the protocol version's schema on its way out; a model built
here would be dumped once more before that."""


def ok(structured: JSONObject) -> ToolResult:
    """A success: the structured content, and the same JSON as the one text item."""
    return _reply(model_text(structured), structured, is_error=False)


def failed(error: CodeModeError) -> ToolResult:
    """An error: exactly one text item with the whole report (complete for a client that
    shows the model only text), and the payload."""
    structured: JSONObject = {"error": error.to_payload()}
    if error.printed:
        structured["printed"] = error.printed
    return _reply(error.report(), structured, is_error=True)


def _reply(text: str, structured: JSONObject, *, is_error: bool) -> ToolResult:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": is_error,
        "resultType": "complete",
    }


def check_arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    """The tool's arguments, checked against its argument type, or InvalidRequestError
    naming the first problem."""
    try:
        adapter = ARGUMENTS[tool.name]
        if tool.name == "execute" and "session" not in tool.input_schema["properties"]:
            adapter = WITHOUT_SESSIONS
        checked: dict[str, Any] = adapter.validate_python(arguments)
    except ValidationError as error:
        properties = tool.input_schema["properties"]
        details = error.errors(include_url=False, include_input=False)
        raise InvalidRequestError(_problem(details, properties, arguments)) from None
    return checked


def _problem(details: list[ErrorDetails], properties: Schema, arguments: Any) -> str:
    """The first of pydantic's findings, in the words the references pin.

    Arguments that are not an object come first, then the first unknown property by name
    (with the fix when it is known), then a missing one, then the first property of the
    call whose value is wrong, as its schema says it must be.
    """
    order = list(arguments) if isinstance(arguments, dict) else []

    def rank(detail: ErrorDetails) -> tuple[int, int, str, bool]:
        if not detail["loc"]:
            return (0, 0, "", False)
        key = str(detail["loc"][0])
        if detail["type"] == "extra_forbidden":
            return (1, 0, key, False)
        if detail["type"] == "missing":
            return (2, list(properties).index(key), "", False)
        return (3, order.index(key), "", detail["type"] == "string_unicode")

    first = min(details, key=rank)
    if not first["loc"]:
        return "arguments must be an object"
    key = str(first["loc"][0])
    if key == "save_as" and key in properties:  # its own texts, as CodeMode gives them
        too_long = first["type"] in ("too_long", "string_too_long")
        return SAVE_AS_NAME if too_long and first["loc"][1:] == ("name",) else SAVE_AS_FIELDS
    if first["type"] == "extra_forbidden":
        return _unknown(key, properties)
    if first["type"] == "missing":
        return f'missing required property "{key}"'
    if first["type"] == "string_unicode":
        return f'property "{key}" must be valid Unicode text'
    expected = properties[key]
    if expected["type"] == "array":
        return f'property "{key}" must be a list of at most {expected["maxItems"]} strings'
    if expected["type"] == "integer":
        return f'property "{key}" must be a non-negative integer'
    if expected["type"] == "boolean":
        return f'property "{key}" must be true or false'
    if "maxLength" in expected:
        return f'property "{key}" must be a string of at most {expected["maxLength"]} characters'
    return f'property "{key}" must be a string'


PROGRAM_PROPERTIES = frozenset({"code", "program", "script", "python", "src", "main"})
"""Names a model gives the program that `execute` takes as `source`."""


def _unknown(key: str, properties: Schema) -> str:
    """`unknown property "code"; the program goes in "source"` (the fix, when known)."""
    text = f'unknown property "{key[:64]}"'
    if "source" in properties and key.lower() in PROGRAM_PROPERTIES:
        return f'{text}; the program goes in "source"'
    hint = closest_name(key, properties)
    if hint is not None:
        return f'{text}; did you mean "{hint}"?'
    return f"{text}; this tool takes " + ", ".join(f'"{p}"' for p in properties)


@dataclass(frozen=True, slots=True)
class Handlers:
    """The discovery tools' handlers over one CodeMode (`execute`'s, which may ask a
    person, is `codemode.mcp.approvals.execute`)."""

    cm: CodeMode

    async def search_api(self, arguments: dict[str, Any], subject: str) -> ToolResult:
        found = await self.cm.search_async(
            arguments["query"], offset=arguments.get("offset", 0), subject=subject
        )
        return ok(search_payload(found))

    async def describe_api(self, arguments: dict[str, Any], subject: str) -> ToolResult:
        if ("name" in arguments) == ("names" in arguments):
            raise InvalidRequestError('pass exactly one of "name" and "names"')
        schemas = arguments.get("schemas", False)
        if "name" in arguments:
            capability = await self.cm.describe_async(arguments["name"], subject=subject)
            return ok(describe_payload(capability, schemas=schemas))
        found: list[JSONValue] = []
        missing: list[JSONValue] = []
        for name in dict.fromkeys(arguments["names"]):
            try:
                info = await self.cm.describe_async(name, subject=subject)
                found.append(describe_payload(info, schemas=schemas))
            except NotFoundError as error:
                missing.append({"name": name[:200], "message": str(error)})
        return ok({"capabilities": found, "not_found": missing})

    def lookup(self, name: str) -> Callable[[dict[str, str], str], Awaitable[ToolResult]] | None:
        if name == "search_api":
            return self.search_api
        if name == "describe_api":
            return self.describe_api
        return None


__all__ = [
    "ARGUMENTS",
    "MAX_DESCRIBE_NAMES",
    "REPLIES",
    "SAVE_AS_DESCRIPTION",
    "SESSIONS_DESCRIPTION",
    "TOOLS",
    "WITHOUT_SESSIONS",
    "DescribeArguments",
    "DescribeReply",
    "ErrorReply",
    "ExecuteArguments",
    "ExecuteReply",
    "ExecuteSessionArguments",
    "Handlers",
    "SaveAsArgument",
    "SavedReply",
    "Schema",
    "SearchArguments",
    "SearchReply",
    "ToolResult",
    "budget",
    "check_arguments",
    "failed",
    "ok",
    "tools",
    "wire_schema",
]
