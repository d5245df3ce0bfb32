"""The three tools: their descriptions, the check of their arguments, and the replies
built from CodeMode.

Their schemas and the argument check come from the types in `codemode.mcp.models`. Each
tool is a few lines over one CodeMode method; every reply is built from a result or from
`CodeModeError.to_payload()`, so the MCP answer says exactly what the error says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from codemode.app import CodeMode
from codemode.binding import closest_name
from codemode.errors import CodeModeError, InvalidRequestError, NotFoundError
from codemode.language import surface
from codemode.limits import Limits, seconds, size
from codemode.mcp.models import ARGUMENTS, MAX_DESCRIBE_NAMES, REPLIES, Schema, wire_schema
from codemode.payloads import describe_payload, execute_payload, model_text, search_payload
from codemode.types import JSONObject, JSONValue

SEARCH_DESCRIPTION = (
    "Search the host's capabilities by task, resource or exact name. Results are ranked; "
    "pass a returned name to describe_api, then call it from execute. An empty query lists "
    "every capability, a page at a time."
)
DESCRIBE_DESCRIPTION = (
    "Describe a capability by the exact name search_api returned (or up to "
    f"{MAX_DESCRIBE_NAMES} at once with names): its keyword-only signature, each "
    "parameter's meaning, what each field of its "
    'result is called and how to read it (r["key"] or r.key), and JSON Schemas.'
)
EXECUTE_DESCRIPTION = (
    "Run one program against the capabilities and return what main() returns, with anything "
    "it printed. Make several calls, filter and combine their results in one program.\n"
    + surface()
    + "\nOn failure the reply is an error with a code and, for mistakes in the program, the "
    "line and column to fix."
)


def _tool(name: str, description: str, annotations: ToolAnnotations) -> Tool:
    return Tool(
        name=name,
        description=description,
        input_schema=wire_schema(ARGUMENTS[name]),
        output_schema=wire_schema(REPLIES[name]),
        annotations=annotations,
    )


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
TOOLS = [
    _tool("search_api", SEARCH_DESCRIPTION, _READ_ONLY),
    _tool("describe_api", DESCRIBE_DESCRIPTION, _READ_ONLY),
    _tool(
        "execute",
        EXECUTE_DESCRIPTION,
        ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    ),
]


def budget(limits: Limits) -> str:
    """The limits a program runs under, as one line of the execute description: the
    program's own budget, given up front so it need not find it by failing."""
    return (
        f"Budget per program: {limits.max_capability_calls} capability calls, "
        f"{seconds(limits.max_execution_seconds)} in all "
        f"({seconds(limits.max_interpreter_seconds)} running code), "
        f"{size(limits.max_return_bytes)} returned, {size(limits.max_printed_bytes)} printed, "
        f"{size(limits.max_memory_bytes)} of memory."
    )


def tools(limits: Limits | None) -> list[Tool]:
    """The three tools; the execute description ends with the budget of `limits` (none
    for a host that keeps its bounds to itself)."""
    execute = TOOLS[2]
    if limits is None:
        return TOOLS
    described = execute.model_copy(
        update={"description": f"{execute.description}\n{budget(limits)}"}
    )
    return [*TOOLS[:2], described]


def ok(structured: JSONObject) -> CallToolResult:
    """A success: the structured content, and the same JSON as the one text item."""
    return CallToolResult(
        content=[TextContent(type="text", text=model_text(structured))],
        structured_content=structured,
    )


def failed(error: CodeModeError) -> CallToolResult:
    """An error: exactly one text item with the whole report (complete for a client that
    shows the model only text), and the payload."""
    structured: JSONObject = {"error": error.to_payload()}
    if error.printed:
        structured["printed"] = error.printed
    return CallToolResult(
        content=[TextContent(type="text", text=error.report())],
        structured_content=structured,
        is_error=True,
    )


def check_arguments(tool: Tool, arguments: Any) -> dict[str, Any]:
    """The tool's arguments, checked against its argument type, or InvalidRequestError
    naming the first problem."""
    try:
        checked: dict[str, Any] = ARGUMENTS[tool.name].validate_python(arguments)
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
    """The three tool handlers over one CodeMode, for one resolved subject."""

    cm: CodeMode

    async def search_api(self, arguments: dict[str, Any], subject: str) -> CallToolResult:
        found = await self.cm.search_async(
            arguments["query"], offset=arguments.get("offset", 0), subject=subject
        )
        return ok(search_payload(found))

    async def describe_api(self, arguments: dict[str, Any], subject: str) -> CallToolResult:
        if ("name" in arguments) == ("names" in arguments):
            raise InvalidRequestError('pass exactly one of "name" and "names"')
        if "name" in arguments:
            capability = await self.cm.describe_async(arguments["name"], subject=subject)
            return ok(describe_payload(capability))
        found: list[JSONValue] = []
        missing: list[JSONValue] = []
        for name in dict.fromkeys(arguments["names"]):
            try:
                found.append(describe_payload(await self.cm.describe_async(name, subject=subject)))
            except NotFoundError as error:
                missing.append({"name": name[:200], "message": str(error)})
        return ok({"capabilities": found, "not_found": missing})

    async def execute(self, arguments: dict[str, Any], subject: str) -> CallToolResult:
        result = await self.cm.execute_async(arguments["source"], subject=subject)
        return ok(execute_payload(result))

    def lookup(
        self, name: str
    ) -> Callable[[dict[str, str], str], Awaitable[CallToolResult]] | None:
        return {
            "search_api": self.search_api,
            "describe_api": self.describe_api,
            "execute": self.execute,
        }.get(name)


__all__ = ["TOOLS", "Handlers", "budget", "check_arguments", "failed", "ok", "tools"]
