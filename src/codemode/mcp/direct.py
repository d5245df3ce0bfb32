"""Direct tools: capabilities the host lists as plain MCP tools beside the three, for clients
and models that do not write programs.

A call of a direct tool is a program the host writes (`def main(): return name(**ARGS)`)
and runs through the very path `execute` takes, as the caller's subject: binding,
authorization (a person asked, when the policy says so), limits and audit are exactly a
program's, and so is every error, with no position, since the model wrote no program.
The list is fixed when the server is built and every caller is listed the same tools, so
only a capability every subject sees can be one: a pattern that matches nothing, or a
capability a policy could hide from someone, refuses the start.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from typing import Any

from mcp.server import ServerRequestContext
from mcp.types import CallToolRequestParams, InputRequiredResult, Tool, ToolAnnotations

from codemode.app import CodeMode
from codemode.errors import (
    CodeModeError,
    InvalidProgramError,
    InvalidRequestError,
    RegistrationError,
    UnauthenticatedError,
)
from codemode.mcp import approvals
from codemode.mcp.tools import Schema, ToolResult, failed, ok
from codemode.runtime import ExecutionResult

MATCHES_NOTHING = "--tools {pattern}: matches no capability"
"""Why a server does not start: a direct-tool pattern that names no capability."""

HIDDEN = (
    "--tools {pattern}: {name} may be hidden from some subjects (hide_forbidden), and a "
    "direct tool is listed to every caller"
)
"""Why a server does not start: a direct tool whose policy may hide it from someone."""

ANY_JSON: Schema = {
    "description": "Any JSON value",
    "anyOf": [
        {"type": kind} for kind in ("object", "array", "string", "number", "boolean", "null")
    ],
}
"""What a schema that constrains nothing becomes: clients (and the Inspector's --strict
check) take `{}` or `true` for a schema that was forgotten."""

_POSITION = re.compile(r"^<codemode>:\d+:\d+: ")
"""A position in the program, as a detail begins with one."""

_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")

_CONSTRAINING = frozenset(
    {
        "type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "items",
        "prefixItems", "properties", "additionalProperties", "patternProperties", "required",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems",
        "minProperties", "maxProperties", "contains", "propertyNames",
    }
)  # fmt: skip
"""Keywords that make a schema constrain its value (the Inspector's own list, in short)."""

_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_BY_NAME = ("properties", "patternProperties")


def matched(cm: CodeMode) -> tuple[str, ...]:
    """The capability names `cm.direct_tools` names, in pattern order then name order;
    RegistrationError for a pattern that matches nothing, or a capability a policy may
    hide (with `hide_forbidden` no list fixed for every caller can be right for each)."""
    names = sorted(cm.visible())
    found: dict[str, None] = {}
    for pattern in cm.direct_tools:
        hits = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        if not hits:
            raise RegistrationError(MATCHES_NOTHING.format(pattern=pattern))
        if cm.hide_forbidden:
            raise RegistrationError(HIDDEN.format(pattern=pattern, name=hits[0]))
        found.update(dict.fromkeys(hits))
    return tuple(found)


def direct_tools(cm: CodeMode) -> list[Tool]:
    """One MCP tool per matched capability: its description, its effects as MCP's hints,
    its input schema as describe_api shows it, and `{"result": ...}` with its result
    schema as the output, each made portable (`portable`)."""
    listed = []
    for name in matched(cm):
        info = cm.describe(name)
        hints = {key: info.annotations[key] for key in _HINTS if key in info.annotations}
        listed.append(
            Tool(
                name=name,
                description=info.description,
                input_schema=portable(info.input_schema),
                output_schema={
                    "type": "object",
                    "properties": {"result": portable(info.output_schema)},
                    "required": ["result"],
                },
                annotations=ToolAnnotations.model_validate(hints) if hints else None,
            )
        )
    return listed


def portable(schema: Schema) -> Schema:
    """`schema` in the spelling every client reads: each `$ref` inlined (a recursive one
    kept, with its definition), `type` arrays as `anyOf` branches, and a schema that
    constrains nothing spelled out as any JSON value."""
    definitions: dict[str, Any] = schema.get("$defs", {})
    kept: dict[str, Any] = {}

    def inline(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, bool):
            return dict(ANY_JSON) if node else {"not": {}}
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
            name = node["$ref"].removeprefix("#/$defs/")
            if name in seen:  # recursive: the reference stays, with what it names
                if name not in kept:
                    kept[name] = None
                    kept[name] = inline(definitions[name], (name,))
                return dict(node)
            rest = {key: value for key, value in node.items() if key != "$ref"}
            node, seen = {**definitions[name], **rest}, (*seen, name)
        out = {key: value for key, value in node.items() if key != "$defs"}
        kinds = out.get("type")
        if isinstance(kinds, list):
            del out["type"]
            out["anyOf"] = [{"type": kind} for kind in kinds]
        for key in _ONE:
            value = out.get(key)
            if key == "additionalProperties" and isinstance(value, bool):
                continue  # `false` closes the object, `true` opens it: both as meant
            if key in out and not (key == "not" and value == {}):
                out[key] = inline(value, seen)
        for key in _MANY:
            if isinstance(out.get(key), list):
                out[key] = [inline(item, seen) for item in out[key]]
        for key in _BY_NAME:
            if isinstance(out.get(key), dict):
                out[key] = {name: inline(value, seen) for name, value in out[key].items()}
        if not _CONSTRAINING & out.keys():
            out = {**out, **ANY_JSON}
        return out

    result: Schema = inline(schema, ())
    if kept:
        result["$defs"] = kept
    return result


def program(name: str, arguments: dict[str, Any]) -> str:
    """The program a call of the direct tool `name` runs: one call with these arguments,
    written as a Python literal; InvalidRequestError for a value no program could hold."""
    return f"def main():\n    return {name}(**{_literal(arguments, None)})\n"


def _literal(value: Any, key: str | None) -> str:
    """A JSON value as Python source; `key` is the argument it is part of, for the error."""
    if isinstance(value, dict):
        items = [(k, v, key if key is not None else k) for k, v in value.items()]
        return "{" + ", ".join(f"{_literal(k, at)}: {_literal(v, at)}" for k, v, at in items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item, key) for item in value) + "]"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequestError(f'property "{key}" must be valid Unicode text') from None
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequestError(f'property "{key}" must be a finite number')
    return repr(value)


def unplaced(error: CodeModeError) -> CodeModeError:
    """`error` as a direct tool reports it: the same code and message, and no position
    (`where` null, the calls with no line, no `<codemode>:L:C: ` before the detail),
    since the model wrote no program: a position would be one in the host's wrapper."""
    calls = tuple(dataclasses.replace(call, line=None) for call in error.calls)
    detail = error.detail
    if detail is not None:
        detail = _POSITION.sub("", detail, count=1)
    return error.replace(where=None, traceback=(), calls=calls, detail=detail)


class DirectTools:
    """The direct tools of one server: listed once, when it is built, and each call run
    as its program."""

    def __init__(self, cm: CodeMode) -> None:
        self.cm = cm
        self.listed = direct_tools(cm) if cm.direct_tools else []
        self._names = frozenset(tool.name for tool in self.listed)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    async def call(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams, subject: str | None
    ) -> ToolResult | InputRequiredResult:
        """Run a call of a direct tool as its program, as `execute` runs one (a person
        asked however this request's channel can), answering `{"result": value}`, or
        the error the program's call failed with, unplaced."""
        try:
            if subject is None:
                raise UnauthenticatedError()
            source = program(params.name, params.arguments or {})
            return await approvals.run(self.cm, ctx, params, subject, source, None, _answer)
        except CodeModeError as error:
            if subject is not None and isinstance(error, InvalidProgramError):
                error = await self._gone(params.name, subject) or error
            return failed(unplaced(error))

    async def _gone(self, name: str, subject: str) -> CodeModeError | None:
        """The error describe_api answers for `name` when the subject no longer has it (a
        program deleted, its file removed since the list was made), else None: a call
        of a tool that is gone fails as a name that does not exist, not in the wrapper."""
        try:
            await self.cm.describe_async(name, subject=subject)
        except CodeModeError as error:
            return error
        return None


def _answer(result: ExecutionResult) -> ToolResult:
    return ok({"result": result.value})


__all__ = [
    "ANY_JSON",
    "HIDDEN",
    "MATCHES_NOTHING",
    "DirectTools",
    "direct_tools",
    "matched",
    "portable",
    "program",
    "unplaced",
]
