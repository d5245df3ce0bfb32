"""One upstream MCP tool -> one capability, and its results -> values a program reads.

The capability is built by the one builder of forwarded capabilities (`remote.build`),
with its hints read from the tool's schemas (`codemode.sources.schema`). Its handler
forwards the call to the upstream; the upstream's answer becomes a value here, and its
failures become `AgentError`s with fixed texts that say which kind of failure it was,
and, as `expose_errors` chooses, the upstream's own words: by default the text of an
`isError` result, which MCP defines as the report meant for the model. The full detail
of every failure goes to the host log.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import mcp_types as mt

from codemode import capabilities as t
from codemode.capabilities import Capability
from codemode.errors import AgentError, ExpectedError
from codemode.sources import remote
from codemode.sources import schema as s
from codemode.sources.mcp.upstream import UpstreamError, UpstreamRefused, UpstreamTimeout
from codemode.sources.remote import first_sentence, strict_json
from codemode.types import JSONObject, JSONValue

TEXT_RESULT = (
    "The tool's text: parsed as JSON when it is JSON, else a str; several content items "
    "come as a list, and an image, audio or resource as a dict "
    '{"type", "mime_type", "size"} (with "text" or "uri" where it has them).'
)

Send = Callable[[mt.Tool, JSONObject], Awaitable[mt.CallToolResult]]
"""Sends one `tools/call` of this tool definition (the arguments as the upstream names
them); `ToolChanged` when the upstream no longer serves that definition."""


class ToolChanged(UpstreamError):
    """The tool a call was bound to is no longer the one the upstream serves under its
    name: it changed or went away while the program ran, or its change was refused."""


class UpstreamToolError(ExpectedError):
    """The upstream answered a call with `isError: true`; the message is its own text,
    for the host log (the model gets it as `expose_errors` chooses)."""


ExposeErrors = Literal["tool", "none", "all"]
"""Which of an upstream's own words reach the model, as `capability failed: ...`:
`tool` the text of an `isError` result (MCP's error report for the model), `all` also
the message of a JSON-RPC error it answers with, `none` neither. Transport failures,
its stderr and exceptions never do."""

SAYS = "the upstream says: "
"""What an upstream's own words follow, so the model can tell them from codemode's."""
TOOL_ERROR = "the upstream reported an error"
WITHHELD = "; its text is withheld"
REFUSED = "the upstream refused the call"
UNREACHABLE = "the connection to the upstream failed"
UNDECLARED_RESULT = "the upstream's result does not match its output schema"
UNCHECKABLE_RESULT = "the upstream's result cannot be checked against its output schema"


def expose_mode(value: object) -> ExposeErrors:
    """`expose_errors` as one of its three modes (True is "all", False "none"), or
    ValueError."""
    if value is True or value is False:
        return "all" if value else "none"
    if value in ("tool", "none", "all"):
        return value
    raise ValueError(f'expose_errors must be "tool", "none" or "all", not {value!r}')


def annotations_of(tool: mt.Tool) -> Mapping[str, bool]:
    """The tool's four hints, as it gives them or as MCP presumes (`remote.hints_of`)."""
    return remote.hints_of(tool.annotations.model_dump(by_alias=True) if tool.annotations else {})


def tool_capability(
    namespace: str,
    tool: mt.Tool,
    send: Send,
    *,
    expose_errors: ExposeErrors,
    timeout: float | None,
) -> Capability:
    """The capability `namespace.<tool name as an identifier>`; SchemaError when its
    schemas cannot be read (the caller skips the tool)."""
    name = remote.capability_name(namespace, s.identifier(tool.name))
    arguments = s.signature(s.object_schema(tool.input_schema), s.camel(tool.name))
    output = None if tool.output_schema is None else s.validator(tool.output_schema)
    result: Any = Any
    if tool.output_schema is not None:
        result = s.Hints(tool.output_schema, s.camel(tool.name)).of(
            tool.output_schema, s.camel(tool.name) + "Result"
        )
        t.check_supported(result)

    async def call(**document: Any) -> Any:
        started = asyncio.get_running_loop().time()
        try:
            answer = await send(tool, document)
        except UpstreamTimeout as late:  # codemode's own budget: the program may know it
            raise AgentError(str(late)) from late
        except ToolChanged:  # the program's own name, and a fact of the catalog it reads
            raise AgentError(
                f"{name} changed on its server while the program ran; {_AGAIN}"
            ) from None
        except UpstreamRefused as refused:
            said = refused.said.strip() if expose_errors == "all" else ""
            raise AgentError(f"{REFUSED}: {said}" if said else REFUSED + WITHHELD) from refused
        except UpstreamError as failed:
            raise AgentError(UNREACHABLE) from failed
        if output is not None and not answer.is_error:
            spent = asyncio.get_running_loop().time() - started
            left = None if timeout is None else timeout - spent
            await _checked(output, answer.structured_content, left)
        return tool_value(answer, structured=output is not None, expose=expose_errors)

    description = s.clean(tool.description or "")
    title = s.clean(tool.title or (tool.annotations.title if tool.annotations else None) or "")
    summary = first_sentence(description) or title or f"The {tool.name} tool of {namespace}."
    return remote.build(
        name,
        summary=summary,
        description=description or summary,
        search_terms=(tool.name, title, namespace),
        call=call,
        arguments=arguments,
        result=result,
        result_doc=None if tool.output_schema is not None else TEXT_RESULT,
        timeout=timeout,
        hints=annotations_of(tool),
    )


_AGAIN = "describe it again, then run the program again"


async def _checked(output: s.Checker, structured: Any, seconds: float | None) -> None:
    """Check structured content against the tool's output schema, bounded, on a worker
    thread and within what is left of the call's timeout. Content that breaks the schema,
    or that cannot be checked, fails the call with a text of its own (the upstream
    answered: no connection failed), its details for the host log only."""
    try:
        error = await s.off_loop(functools.partial(output.first, structured), seconds)
    except s.Uncheckable as exc:
        failed = UpstreamError(f"its structured content cannot be checked: {exc}")
        raise AgentError(UNCHECKABLE_RESULT) from failed
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the root"
        failed = UpstreamError(
            f"its structured content does not meet its output schema at {where}: "
            f"{error.message[:500]}"
        )
        raise AgentError(UNDECLARED_RESULT) from failed


def tool_value(answer: mt.CallToolResult, *, structured: bool, expose: ExposeErrors) -> Any:
    """What a program gets from an upstream's answer, or the failure it raises: for an
    `isError` result, an AgentError with its text items (unless `expose` is "none"),
    raised from an UpstreamToolError that carries them all for the host log."""
    if answer.is_error:
        text = " ".join(item.text for item in answer.content if isinstance(item, mt.TextContent))
        cause = UpstreamToolError(text or "the tool reported an error without a text")
        if not text.strip():
            raise AgentError(TOOL_ERROR) from cause
        if expose == "none":
            raise AgentError(TOOL_ERROR + WITHHELD) from cause
        raise AgentError(SAYS + text) from cause
    if structured:
        return answer.structured_content
    values = [_content_value(item) for item in answer.content]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _content_value(item: Any) -> JSONValue:
    if isinstance(item, mt.TextContent):
        try:
            parsed: JSONValue = strict_json(item.text)
        except ValueError:
            return item.text
        return parsed
    if isinstance(item, mt.ImageContent | mt.AudioContent):
        return {"type": item.type, "mime_type": item.mime_type, "size": _decoded_size(item.data)}
    if isinstance(item, mt.ResourceLink):
        return {"type": "resource", "mime_type": item.mime_type, "size": item.size, "uri": item.uri}
    if isinstance(item, mt.EmbeddedResource):
        inner = item.resource
        value: JSONObject = {
            "type": "resource",
            "mime_type": inner.mime_type,
            "uri": str(inner.uri),
        }
        if isinstance(inner, mt.TextResourceContents):
            value["size"] = len(inner.text.encode("utf-8"))
            value["text"] = inner.text
        else:
            value["size"] = _decoded_size(inner.blob)
        return value
    return {"type": str(getattr(item, "type", "unknown")), "mime_type": None, "size": None}


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


__all__ = [
    "REFUSED",
    "SAYS",
    "TEXT_RESULT",
    "TOOL_ERROR",
    "UNCHECKABLE_RESULT",
    "UNDECLARED_RESULT",
    "UNREACHABLE",
    "WITHHELD",
    "ExposeErrors",
    "Send",
    "ToolChanged",
    "UpstreamToolError",
    "annotations_of",
    "expose_mode",
    "tool_capability",
    "tool_value",
]
