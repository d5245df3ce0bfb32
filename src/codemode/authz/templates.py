"""Approval messages that name the call's arguments: `{name}` templates, checked and filled.

A person asked to approve a payout should read ``Pay `34500` cents to `"ACME"` ``, not the
arguments' JSON, so a policy's approval message (Cedar's `@approval("...")`, Rego's
`{"approval": "..."}`) may name arguments: `"Pay {amount_cents} cents to {payee}"`.

What a template can reach is only the call's own arguments, by their top-level names:
a field is a bare name (no `.attr`, `[index]`, `!conversion` or `:format`, which
`str.format` would follow into the value's type); `{{` and `}}` are literal braces. Each
value is written as JSON (a string in quotes, so an argument cannot pose as the
message's own words), cut to `VALUE_CHARS` characters, with every character that could
break, reorder or hide a line escaped (`inert`), and set in a Markdown code span, where a
client that renders the question shows no link, image, emphasis or HTML it holds. A
name the call does not have (another capability's argument, an optional one left out)
stays as it is written, `{name}`; Cedar refuses at start-up a name that no capability
has.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping

from codemode.inert import inert
from codemode.types import JSONValue

VALUE_CHARS = 80
"""The most characters of one argument a message shows (a longer one ends with `…`)."""

_FORMATTER = string.Formatter()


def template_problem(message: str) -> str | None:
    """Why the message is not a template codemode fills, or None (so also for plain text)."""
    try:
        fields = list(_FORMATTER.parse(message))
    except ValueError as exc:
        return f"{exc} (write a literal brace as {{{{ or }}}})"
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            return f"{{{shown}}} is not an argument's name (a field is a bare name, as {{payee}})"
    return None


def template_names(message: str) -> list[str]:
    """The argument names a valid template's fields name, in order, each once."""
    names = [name for _, name, _, _ in _FORMATTER.parse(message) if name]
    return list(dict.fromkeys(names))


def fill(message: str, arguments: Mapping[str, JSONValue]) -> str:
    """The message with each field naming an argument of the call replaced by its value
    (see the module docstring); a message that is not a valid template is shown as it is."""
    if template_problem(message) is not None:
        return message
    parts: list[str] = []
    spans = False  # whether the last part is a value's code span
    for literal, name, _, _ in _FORMATTER.parse(message):
        parts.append(" " if spans and not literal else literal)  # two spans never touch
        if name is not None:
            value = arguments.get(name)
            spans = value is not None
            parts.append(f"{{{name}}}" if value is None else _shown(value))
    return "".join(parts)


def _shown(value: JSONValue) -> str:
    """One argument as the person reads it: JSON, bounded, inert (see `inert`; `<` and
    `>` escaped too), in a Markdown code span, where a client that renders the question
    shows it as written: no link, image, emphasis or HTML comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if len(text) > VALUE_CHARS:
        text = text[: VALUE_CHARS - 1] + "…"
    text = inert(text).replace("<", "\\u003c").replace(">", "\\u003e")
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    return f"{fence}{text}{fence}"  # JSON starts and ends with no backtick: no padding
