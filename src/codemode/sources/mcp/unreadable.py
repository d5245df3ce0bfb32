"""Answers a stdio upstream sent that the MCP SDK cannot parse, made ones it can.

The SDK's stdio transport parses each line with pydantic, whose JSON parser stops at 200
levels of nesting; a line it cannot parse is logged and dropped, and the request that
waits for it waits until its timeout, or forever. Here such an answer is read without
recursion instead: a tools list keeps the tools that can be read (each one skipped with a
warning), and any other answer becomes an error answer for its request. (The SDK's HTTP
transport already answers such a request with a parse error.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as mt
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from pydantic_core import from_json

log = logging.getLogger("codemode.upstream")


class Mended:
    """The stdio transport's read stream, where each answer the SDK could not parse
    becomes one it can (see `mend`): else the transport drops it, and its request
    waits forever. It only wraps `receive`, so it costs a message one call."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
        if isinstance(item, ValidationError):
            return mend(item, self._name) or item
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


MAX_CHARS = 16 * 1024 * 1024
"""The longest line that is mended (reading it takes a few passes over it)."""


def mend(error: ValidationError, name: str) -> SessionMessage | None:
    """The answer in a line the SDK could not parse for its depth, as one it can: a tools
    list without the tools that cannot be read, or an error answer for the request. None
    when the line is no answer, or not even JSON enough to find its request's id."""
    details = error.errors(include_url=False)
    if not details or details[0]["type"] != "json_invalid":
        return None
    line, message = details[0]["input"], str(details[0]["msg"])
    if "recursion limit" not in message or not isinstance(line, str) or len(line) > MAX_CHARS:
        return None  # broken JSON is the upstream's to fix; only depth is the SDK's limit
    reason = _unreadable(message)
    try:
        members = {key: (start, end) for key, start, end in _entries(line, _space(line, 0))}
        if "method" in members or "id" not in members:
            return None  # a request or a notification: the SDK's dropping it waits on nothing
        request_id = from_json(line[slice(*members["id"])])
    except ValueError:
        return None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if "result" in members:
        with contextlib.suppress(ValueError):
            result = _readable_result(line, members["result"][0], name)
            return SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))
    failure = mt.ErrorData(code=mt.PARSE_ERROR, message=f"the answer is {reason}")
    return SessionMessage(mt.JSONRPCError(jsonrpc="2.0", id=request_id, error=failure))


def _readable_result(line: str, start: int, name: str) -> dict[str, Any]:
    """A result's members, where a `tools` list keeps the tools that can be read (the
    others are skipped with a warning); ValueError when any other member cannot be."""
    result: dict[str, Any] = {}
    for key, begin, end in _entries(line, start):
        if key == "tools" and line[begin] == "[":
            result[key] = []
            for _, tool_start, tool_end in _entries(line, begin):
                try:
                    result[key].append(from_json(line[tool_start:tool_end]))
                except ValueError as exc:
                    log.warning(
                        "MCP server %s: tool %r skipped: its listing is %s",
                        name,
                        _tool_name(line, tool_start),
                        _unreadable(str(exc)),
                    )
        else:
            result[str(key)] = from_json(line[begin:end])
    return result


def _tool_name(line: str, start: int) -> str | None:
    """The name of the tool whose listing is at `start`, if it can be read."""
    with contextlib.suppress(ValueError):
        for key, begin, end in _entries(line, start):
            if key == "name":
                found = from_json(line[begin:end])
                return found if isinstance(found, str) else None
    return None


def _unreadable(reason: str) -> str:
    """Why a message cannot be read, without the parser's position (in what it parsed,
    which for a tool is not the line the upstream sent)."""
    reason = _POSITION.sub("", reason.removeprefix("Invalid JSON: "))
    if "recursion limit" in reason:
        return f"nested deeper than the MCP SDK reads ({reason})"
    return f"not JSON the MCP SDK reads ({reason})"


_POSITION = re.compile(r" at line \d+ column \d+$")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"')
"""A string after its opening quote: tried once per string, so a scan stays linear."""
_STRUCTURE = re.compile(r'[\[\]{}"]')
_SCALAR = re.compile(r"[^\s,:\[\]{}]+")
_SPACE = re.compile(r"[ \t\n\r]*")


def _space(text: str, at: int) -> int:
    """Where the whitespace at `at` ends."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


def value_end(text: str, start: int) -> int:
    """Where the JSON value at `start` ends, found without parsing or recursion, at any
    depth (it only has to be good JSON where the value is parsed after)."""
    opening = text[start : start + 1]
    if opening in ("[", "{"):
        depth, at = 0, start
        while (found := _STRUCTURE.search(text, at)) is not None:
            if found.group() == '"':  # skip the whole string, or fail: never rescan it
                rest = _STRING_REST.match(text, found.end())
                if rest is None:
                    raise ValueError("a string that does not end")
                at = rest.end()
                continue
            depth += 1 if found.group() in "[{" else -1
            at = found.end()
            if depth == 0:
                return at
        raise ValueError("an array or object that does not end")
    match = (_STRING if opening == '"' else _SCALAR).match(text, start)
    if match is None:
        raise ValueError(f"no JSON value at {start}")
    return match.end()


def _entries(text: str, start: int) -> Iterator[tuple[str | None, int, int]]:
    """The members (key, start, end) of the JSON object at `start`, or the elements
    (None, start, end) of the array there, each value left unparsed."""
    opening = text[start : start + 1]
    if opening not in ("[", "{"):
        raise ValueError(f"no array or object at {start}")
    closing = "]" if opening == "[" else "}"
    at = _space(text, start + 1)
    if text[at : at + 1] == closing:
        return
    while True:
        key: str | None = None
        if opening == "{":
            if text[at : at + 1] != '"':
                raise ValueError(f"no key at {at}")
            end = value_end(text, at)
            key = json.loads(text[at:end])
            at = _space(text, end)
            if text[at : at + 1] != ":":
                raise ValueError(f"no colon at {at}")
            at = _space(text, at + 1)
        end = value_end(text, at)
        yield key, at, end
        at = _space(text, end)
        if text[at : at + 1] == closing:
            return
        if text[at : at + 1] != ",":
            raise ValueError(f"no comma at {at}")
        at = _space(text, at + 1)


__all__ = ["Mended"]
