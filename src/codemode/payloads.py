"""The wire shapes both adapters share: what search, describe and execute answer, the text
a model is shown, and an error as the page shows it, plus the one check of a text argument
they both apply."""

from __future__ import annotations

import json
from collections.abc import Mapping

from codemode.capabilities import CapabilityInfo, SearchResult
from codemode.errors import CodeModeError, InvalidRequestError
from codemode.programs import Saved
from codemode.runtime import ExecutionResult
from codemode.types import JSONObject, JSONValue


def search_payload(found: SearchResult) -> JSONObject:
    """What search_api answers: `next_offset` when another page follows, `hint` when
    nothing matched."""
    payload: JSONObject = {
        "results": [
            {"name": h.name, "signature": h.signature, "summary": h.summary} for h in found.results
        ],
        "truncated": found.truncated,
    }
    if found.next_offset is not None:
        payload["next_offset"] = found.next_offset
    if found.hint is not None:
        payload["hint"] = found.hint
    return payload


def offset_argument(value: JSONValue) -> int:
    """`offset` as a non-negative integer, or InvalidRequestError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidRequestError('property "offset" must be a non-negative integer')
    return value


def describe_payload(info: CapabilityInfo, *, schemas: bool = False) -> JSONObject:
    """What describe_api answers for one capability: its signature, parameters, result and
    shapes, what it says of its effects and what it declares it can fail with, and its JSON
    Schemas only when asked (they repeat what the rest says, at twice its size)."""
    payload: JSONObject = {
        "name": info.name,
        "signature": info.signature,
        "summary": info.summary,
    }
    if info.description != info.summary:
        payload["description"] = info.description
    if info.annotations:
        payload["effects"] = effects(info.annotations)
    payload["parameters"] = [
        {
            "name": p.name,
            "type": p.type,
            "required": p.required,
            **({} if p.default is None else {"default": p.default}),
            **({"doc": p.doc} if p.doc else {}),
            **({"constraints": p.constraints} if p.constraints else {}),
            **({"examples": list(p.examples)} if p.examples else {}),
            **({"format": p.format} if p.format else {}),
        }
        for p in info.parameters
    ]
    result: JSONObject = {
        "type": info.result.type,
        "read_as": info.result.read_as,
        **({"doc": info.result.doc} if info.result.doc else {}),
        **({"format": info.result.format} if info.result.format else {}),
    }
    observed = info.result.observed
    if observed is not None:  # learned from its results: marked as such, never a promise
        learned: JSONObject = {"shape": observed.shape, "results": observed.results}
        if schemas:
            learned["schema"] = observed.schema
        result["observed"] = learned
    payload["result"] = result
    payload["shapes"] = list(info.shapes)
    if info.example:
        payload["example"] = info.example
    if info.failures:
        payload["errors"] = list(info.failures)
    if schemas:
        payload["input_schema"] = info.input_schema
        payload["output_schema"] = info.output_schema
    return payload


def effects(annotations: Mapping[str, bool]) -> str:
    """MCP's hints in words: `read-only`, or `writes`, then `destructive` or `not
    destructive`, and `idempotent` when repeating a call changes nothing more."""
    if annotations.get("readOnlyHint"):
        return "read-only"
    words = ["writes", "destructive" if annotations.get("destructiveHint") else "not destructive"]
    if annotations.get("idempotentHint"):
        words.append("idempotent")
    return ", ".join(words)


def execute_payload(result: ExecutionResult, saved: Saved | None = None) -> JSONObject:
    """What execute answers: the value, what was printed (when anything was), usage, the
    session's handle when the program ran in one (the model sends it to continue), and
    how its `save_as` ended when it had one (`saved`: a name and a closed status)."""
    structured: JSONObject = {"result": result.value}
    if result.printed:
        structured["printed"] = result.printed
    structured["usage"] = result.usage.to_dict()
    if result.session is not None:
        structured["session"] = result.session
    if saved is not None:
        structured["saved"] = {"name": saved.name, "status": saved.status}
    return structured


_TEXT = json.JSONEncoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)`, without making an encoder for every reply."""


def model_text(structured: JSONObject) -> str:
    """The text item of a successful reply: the structured content as JSON."""
    return _TEXT.encode(structured)


def error_payload(error: CodeModeError) -> JSONObject:
    """The error payload plus the program's frames, for the page's traceback, and the text
    the model is shown, for its "what the model sees" view."""
    return {
        **error.to_payload(),
        "traceback": [w.to_dict() for w in error.traceback],
        "model_text": error.report(),
    }


def text_argument(name: str, value: JSONValue) -> str:
    """`value` as a text argument, or InvalidRequestError.

    JSON can spell a lone surrogate (`"\\ud800"`), which no UTF-8 text holds: it is the
    caller's malformed input, refused here before any CodeMode method sees it.
    """
    if not isinstance(value, str):
        raise InvalidRequestError(f'property "{name}" must be a string')
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(f'property "{name}" must be valid Unicode text') from None
    return value


__all__ = [
    "describe_payload",
    "effects",
    "error_payload",
    "execute_payload",
    "model_text",
    "offset_argument",
    "search_payload",
    "text_argument",
]
