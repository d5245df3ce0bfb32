"""What a failed call says of itself as data: the facts `error_data` gives a program.

Kept apart from `errors` (every failure's text and code) because these are the facts a
program reads back, bounded and checked, not the failures themselves; `errors` re-exports
them under the same names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from codemode.types import JSONObject

MAX_FIELDS_BYTES = 4096
"""Largest `fields` a caught failure's `error_data` carries, as compact JSON in UTF-8
bytes: past it the fields are left out (`{}`), never cut part way."""

_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")


DENIALS = (
    "permission_denied",
    "policy_failure",
    "approval_declined",
    "approval_unavailable",
    "approval_timed_out",
)
"""The codes `error_data` gives a call codemode itself refused: no host's kind is one, so
a failure the host raised never reads as a denial."""


def is_kind(word: object) -> bool:
    """Whether `word` can be an `AgentError`'s kind: a snake_case word, none of `DENIALS`."""
    return isinstance(word, str) and _KIND.fullmatch(word) is not None and word not in DENIALS


@dataclass(frozen=True, slots=True)
class Facts:
    """What a failed call says of itself as data, for `error_data(e)` in the program: an
    `AgentError`'s declared kind, and for a REST call its HTTP status and the fields its
    error body declares. Never text the host did not give for the model."""

    kind: str | None = None
    status: int | None = None
    fields: JSONObject | None = None

    def to_dict(self) -> JSONObject:
        """The facts as JSON (a paused state keeps them)."""
        return {"kind": self.kind, "status": self.status, "fields": self.fields}


def bounded_fields(fields: object) -> JSONObject:
    """`fields` as a JSON object of at most `MAX_FIELDS_BYTES`, or `{}` when it is not
    one or is larger."""
    if not isinstance(fields, dict) or not all(isinstance(key, str) for key in fields):
        return {}
    try:
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return {}
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FIELDS_BYTES:
        return {}
    loaded: JSONObject = json.loads(text)
    return loaded
