"""The three tools: their schemas, descriptions, and the replies built from CodeMode.

Each tool is a few lines over one CodeMode method; every reply is built from a result or
from `CodeModeError.to_payload()`, so the MCP answer says exactly what the error says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from codemode.app import CodeMode
from codemode.binding import closest_name
from codemode.errors import CodeModeError, InvalidRequestError, NotFoundError
from codemode.language import surface
from codemode.limits import Limits, seconds, size
from codemode.payloads import (
    describe_payload,
    execute_payload,
    model_text,
    offset_argument,
    search_payload,
    text_argument,
)
from codemode.types import JSONObject, JSONValue

Schema = dict[str, Any]

SEARCH_DESCRIPTION = (
    "Search the host's capabilities by task, resource or exact name. Results are ranked; "
    "pass a returned name to describe_api, then call it from execute. An empty query lists "
    "every capability, a page at a time."
)
DESCRIBE_DESCRIPTION = (
    "Describe a capability by the exact name search_api returned (or up to 20 at once with "
    "names): its keyword-only signature, each parameter's meaning, what each field of its "
    'result is called and how to read it (r["key"] or r.key), and JSON Schemas.'
)
MAX_DESCRIBE_NAMES = 20
EXECUTE_DESCRIPTION = (
    "Run one program against the capabilities and return what main() returns, with anything "
    "it printed. Make several calls, filter and combine their results in one program.\n"
    + surface()
    + "\nOn failure the reply is an error with a code and, for mistakes in the program, the "
    "line and column to fix."
)


def _nullable(schema: Schema) -> Schema:
    """`schema` or null, one type per branch (the portable spelling)."""
    return {"anyOf": [schema, {"type": "null"}]}


_WHERE_SCHEMA: Schema = _nullable(
    {
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "line": {"type": "integer"},
            "column": {"type": "integer"},
            "end_line": {"type": "integer"},
            "end_column": {"type": "integer"},
            "func": _nullable({"type": "string"}),
            "source": {"type": "string"},
        },
    }
)
_CALLS_SCHEMA: Schema = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["capability", "line", "outcome"],
        "additionalProperties": False,
        "properties": {
            "capability": {"type": "string"},
            "line": _nullable({"type": "integer"}),
            "outcome": {"type": "string"},
        },
    },
}
ERROR_SCHEMA: Schema = {
    "type": "object",
    "required": ["code", "message", "where"],
    "additionalProperties": False,
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "where": _WHERE_SCHEMA,
        "calls": _CALLS_SCHEMA,
    },
}
_ANY_JSON: Schema = {
    "description": "Any JSON value",
    "anyOf": [
        {"type": kind} for kind in ("object", "array", "string", "number", "boolean", "null")
    ],
}


def _input(prop: str, description: str) -> Schema:
    return {
        "type": "object",
        "properties": {prop: {"type": "string", "description": description}},
        "required": [prop],
        "additionalProperties": False,
    }


DESCRIBE_INPUT: Schema = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": "The exact capability name, as search_api returned it",
        },
        "names": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": MAX_DESCRIBE_NAMES,
            "description": "Several exact names at once, instead of name",
        },
    },
    "additionalProperties": False,
}


def _output(properties: Schema, required: list[str]) -> Schema:
    """An output schema that also admits the error reply (`{"error": ...}`)."""
    return {
        "type": "object",
        "oneOf": [
            {"properties": properties, "required": required, "additionalProperties": False},
            {
                "properties": {"error": ERROR_SCHEMA, "printed": {"type": "string"}},
                "required": ["error"],
                "additionalProperties": False,
            },
        ],
    }


_STRING: Schema = {"type": "string"}
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

SEARCH_INPUT: Schema = _input(
    "query", "Words for the task or resource, or an exact capability name; empty lists all"
)
SEARCH_INPUT["properties"]["offset"] = {
    "type": "integer",
    "minimum": 0,
    "description": "Where the page starts: the next_offset of the previous answer",
}


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


TOOLS = [
    Tool(
        name="search_api",
        description=SEARCH_DESCRIPTION,
        input_schema=SEARCH_INPUT,
        output_schema=_output(
            {
                "results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "signature", "summary"],
                        "additionalProperties": False,
                        "properties": {"name": _STRING, "signature": _STRING, "summary": _STRING},
                    },
                },
                "truncated": {"type": "boolean"},
                "next_offset": {"type": "integer"},
                "hint": _STRING,
            },
            ["results", "truncated"],
        ),
        annotations=_READ_ONLY,
    ),
    Tool(
        name="describe_api",
        description=DESCRIBE_DESCRIPTION,
        input_schema=DESCRIBE_INPUT,
        output_schema=_output(
            {
                "name": _STRING,
                "signature": _STRING,
                "summary": _STRING,
                "description": _STRING,
                "parameters": {"type": "array", "items": {"type": "object"}},
                "result": {"type": "object"},
                "shapes": {"type": "array", "items": _STRING},
                "example": _STRING,
                "input_schema": {"type": "object"},
                "output_schema": {"type": "object"},
                "capabilities": {"type": "array", "items": {"type": "object"}},
                "not_found": {"type": "array", "items": {"type": "object"}},
            },
            [],
        ),
        annotations=_READ_ONLY,
    ),
    Tool(
        name="execute",
        description=EXECUTE_DESCRIPTION,
        input_schema=_input("source", "The program: Python that defines def main():"),
        output_schema=_output(
            {"result": _ANY_JSON, "printed": _STRING, "usage": {"type": "object"}}, ["result"]
        ),
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    ),
]


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
    """The tool's arguments, or InvalidRequestError naming the first problem."""
    if not isinstance(arguments, dict):
        raise InvalidRequestError("arguments must be an object")
    properties = tool.input_schema["properties"]
    for key in sorted(arguments):
        if key not in properties:
            raise InvalidRequestError(_unknown(key, properties))
    for key in tool.input_schema.get("required", []):
        if key not in arguments:
            raise InvalidRequestError(f'missing required property "{key}"')
    for key, value in arguments.items():
        schema = properties[key]
        if schema["type"] == "string":
            text_argument(key, value)
        if schema["type"] == "integer":
            offset_argument(value)
        if schema["type"] == "array":
            if not (
                isinstance(value, list)
                and all(isinstance(item, str) for item in value)
                and len(value) <= schema["maxItems"]
            ):
                raise InvalidRequestError(
                    f'property "{key}" must be a list of at most {schema["maxItems"]} strings'
                )
            for item in value:
                text_argument(key, item)
    return arguments


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
