"""What counts as one JSON-RPC message from a client, and the fixed errors for what does not.

Both transports read every incoming message through `decode` and `check` before the SDK
sees it, so a malformed one gets a JSON-RPC error with our own words (never a parser's or a
validator's text), and one the SDK would silently take for a notification (`"id": null`,
an id that is an object) gets an answer.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import pydantic_core
from mcp.types import INVALID_REQUEST, PARSE_ERROR

PARSE_ERROR_MESSAGE = "Parse error: the message is not valid JSON"
NOT_A_MESSAGE = (
    "Invalid Request: send one JSON-RPC 2.0 object with jsonrpc, method, and an id for a request"
)
BAD_ID = "Invalid Request: id must be a string or an integer"
EMPTY_BATCH = "Invalid Request: a batch must hold at least one message"
MAX_BATCH = 20
"""The most messages one batch may hold: each is a request of its own, answered at once."""
LONG_BATCH = f"Invalid Request: a batch may hold at most {MAX_BATCH} messages"
BATCH_VERSIONS = ("2025-03-26",)
"""Protocol versions whose clients may send a batch."""
NO_BATCHES = "Invalid Request: batches belong to protocol 2025-03-26; send one message at a time"

JSON = Any
"""A decoded JSON value."""


class Rejected(Exception):
    """A message that gets a JSON-RPC error instead of reaching the server."""

    def __init__(
        self,
        code: int,
        message: str,
        request_id: str | int | None = None,
        data: dict[str, JSON] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id
        self.data = data

    def reply(self) -> dict[str, JSON]:
        """The JSON-RPC error response."""
        error: dict[str, JSON] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.request_id, "error": error}


def decode(raw: bytes | str) -> JSON:
    """The decoded body or line, or Rejected with -32700. The SDK's own parser decides,
    so that what passes here (no BOM, no lone surrogate, nesting within its limit) is
    what the SDK reads after."""
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        raise Rejected(PARSE_ERROR, PARSE_ERROR_MESSAGE) from None


def check(message: JSON) -> dict[str, JSON]:
    """`message` when it is one well-formed request, notification or response, else
    Rejected with -32600 (echoing its id when that id is a valid one)."""
    if not isinstance(message, dict):
        raise Rejected(INVALID_REQUEST, NOT_A_MESSAGE)
    has_id = "id" in message
    request_id = message.get("id")
    if has_id and not is_request_id(request_id):
        raise Rejected(INVALID_REQUEST, BAD_ID)
    params = message.get("params")
    is_call = isinstance(message.get("method"), str) and (
        params is None or isinstance(params, dict)
    )
    is_reply = has_id and (_is_result(message) or _is_error(message))
    if message.get("jsonrpc") != "2.0" or not (is_call or is_reply):
        raise Rejected(INVALID_REQUEST, NOT_A_MESSAGE, request_id)
    return message


def check_batch(batch: list[JSON], version: str | None) -> list[JSON]:
    """`batch` when `version` has batches and it holds 1 to MAX_BATCH messages, else
    Rejected with -32600 (its messages are checked one by one after)."""
    if version not in BATCH_VERSIONS:
        raise Rejected(INVALID_REQUEST, NO_BATCHES)
    if not batch:
        raise Rejected(INVALID_REQUEST, EMPTY_BATCH)
    if len(batch) > MAX_BATCH:
        raise Rejected(INVALID_REQUEST, LONG_BATCH)
    return batch


def _is_result(message: dict[str, JSON]) -> bool:
    return isinstance(message.get("result"), dict) and "error" not in message


def _is_error(message: dict[str, JSON]) -> bool:
    error = message.get("error")
    return (
        "result" not in message
        and isinstance(error, dict)
        and _is_int(error.get("code"))
        and isinstance(error.get("message"), str)
    )


def is_request_id(value: JSON) -> TypeGuard[str | int]:
    """A JSON-RPC id MCP accepts: a string or an integer (never null, a bool or a float)."""
    return isinstance(value, str) or _is_int(value)


def _is_int(value: JSON) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = [
    "BAD_ID",
    "BATCH_VERSIONS",
    "EMPTY_BATCH",
    "LONG_BATCH",
    "MAX_BATCH",
    "NOT_A_MESSAGE",
    "NO_BATCHES",
    "PARSE_ERROR_MESSAGE",
    "Rejected",
    "check",
    "check_batch",
    "decode",
    "is_request_id",
]
