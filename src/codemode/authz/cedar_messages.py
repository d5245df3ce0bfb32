"""Cedar's parse and validation errors as a person fixes them: each mistake once (Cedar
repeats one per action it checks), at its own line and column, with the name it may have
meant.

cedarpy gives each error as a policy id and a text, with no position: the policy is
found by splitting the text into policies as Cedar numbers them (policy0, policy1, ...),
and the mistake by searching that policy for what the error names. A parse error is
found by parsing ever longer beginnings of the text: the first that fails otherwise
than by ending early ends at the token Cedar refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import cedarpy

from codemode.authz.cedar_schema import attribute_paths, cedar_string
from codemode.binding import closest_name

_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|;|\S', re.DOTALL)


def _policy_spans(text: str) -> dict[str, tuple[int, int]]:
    """Where each policy is in the text, by Cedar's generated id (policy0, policy1, ...):
    the offset of its first character (its annotations') and the offset past its `;`."""
    spans: dict[str, tuple[int, int]] = {}
    start = None
    for match in _TOKEN.finditer(text):
        if match.group().startswith("//"):
            continue
        if start is None:
            start = match.start()
        if match.group() == ";":
            spans[f"policy{len(spans)}"] = (start, match.end())
            start = None
    if start is not None:
        spans[f"policy{len(spans)}"] = (start, len(text))
    return spans


_WORD = re.compile(
    r'"(?:\\.|[^"\\])*"|//[^\n]*|[A-Za-z_][A-Za-z0-9_]*|[0-9]+|==|!=|<=|>=|&&|\|\||::|\S',
    re.DOTALL,
)
"""Cedar's tokens, as far as a beginning of the text must not split one (a keyword, a
two-character operator, a string)."""
_EARLY_END = "unexpected end of input"


def unparsed(text: str, error: str) -> str:
    """A parse error with its position: `the policies do not parse at line 3, column 26:
    unexpected token `resource``. The shortest beginning of `text` that fails otherwise
    than by ending early ends at the token Cedar refused (found by bisection: a
    beginning fails so once it holds that token); when none does, the text ends early,
    and the position is its end."""
    tokens = [m.span() for m in _WORD.finditer(text) if not m.group().startswith("//")]
    low, high = 0, len(tokens)  # the first token whose beginning fails, if any, is here
    while low < high:
        middle = (low + high) // 2
        if _fails_there(text[: tokens[middle][1]]):
            high = middle
        else:
            low = middle + 1
    offset = tokens[low][0] if low < len(tokens) else len(text.rstrip())
    if text.startswith(";", offset):  # refused whole (`when` misspelt, an unknown function)
        offset = _named(text, text.rfind(";", 0, offset) + 1, offset, error) or offset
    return f"the policies do not parse at {_position(text, offset)}: {error}"


def _named(text: str, start: int, end: int, error: str) -> int | None:
    """Where, between `start` and `end`, the policy holds the word Cedar's error names
    (`` `foo` is not a valid function``, `invalid policy condition: wh`), if it does."""
    quoted = re.search(r"`([^`]+)`", error)
    name = quoted[1] if quoted else error.rpartition(": ")[2]
    for match in _WORD.finditer(text, start, end):
        if match.group() == name:
            return match.start()
    return None


def _fails_there(beginning: str) -> bool:
    """Whether Cedar refuses `beginning` for a token in it, not for ending early."""
    try:
        cedarpy.PolicySet.from_str(beginning)
    except ValueError as exc:
        return _EARLY_END not in str(exc)
    return False


def policy_lines(text: str) -> dict[str, int]:
    """The line each policy starts on, by Cedar's generated id (policy0, policy1, ...)."""
    return {policy: _line(text, start) for policy, (start, _) in _policy_spans(text).items()}


def approval_lines(text: str) -> dict[str, int]:
    """The line each policy's `@approval(...)` annotation is on, by Cedar's generated id
    (the policy's first line for one without it)."""
    lines = {}
    for policy, (start, end) in _policy_spans(text).items():
        found = _APPROVAL.search(text, start, end)
        lines[policy] = _line(text, found.start() if found else start)
    return lines


_APPROVAL = re.compile(r"@approval\s*\(")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _position(text: str, offset: int) -> str:
    """`line 2, column 29` of an offset into the text (columns count characters from 1)."""
    column = offset - text.rfind("\n", 0, offset)
    return f"line {_line(text, offset)}, column {column}"


_OWN_ID = re.compile(r"^for policy `[^`]*`, ")
_ACTION = r'(?:[^`"]*::)?Action::"(?P<action>(?:\\.|[^"\\])*)"'
_FOR_ACTION = re.compile(f" for {_ACTION}")
_UNKNOWN_ACTION = re.compile(f"^unrecognized action `{_ACTION}`$")
_UNKNOWN_TYPE = re.compile(r"^unrecognized entity type `(?P<name>[^`]+)`$")
_ATTRIBUTE = re.compile(
    rf"attribute `(?P<path>[^`]+)` (?:in context(?: for {_ACTION})?|on entity type "
    r"`(?P<type>[^`]+)`)(?P<missing> not found$)?"
)
_NO_ACTION = "unable to find an applicable action given the policy scope constraints"
"""What Cedar adds to a policy whose scope names an unknown action or entity type."""


def mistakes(
    text: str,
    result: cedarpy.ValidationResult,
    schema: Mapping[str, Any],
    contexts: Mapping[str, Mapping[str, Any]],
) -> str:
    """Each mistake once (Cedar repeats one per action it checks), one per line in the
    order of the text: `policy "typo" at line 2, column 29: unknown action ...`."""
    by_policy: dict[str, list[str]] = {}
    for found in result.errors:
        by_policy.setdefault(found.policy_id, []).append(_OWN_ID.sub("", found.error))
    spans = _policy_spans(text)
    names = result.id_annotations_by_policy_id
    context_paths = {
        path
        for context in contexts.values()
        for path, _ in attribute_paths({"type": "Record", "attributes": context})
    }
    mistakes: dict[tuple[int, str], None] = {}
    for policy, errors in by_policy.items():
        if policy not in spans:  # the schema's own errors, and any Cedar gives no policy
            mistakes.update(((-1, error), None) for error in errors)
            continue
        label = f"policy {cedar_string(names[policy])}" if policy in names else "policy"
        scope_unknown = any(_UNKNOWN_ACTION.match(e) or _UNKNOWN_TYPE.match(e) for e in errors)
        lacking: dict[str, list[str]] = {}
        """Context attributes some actions have, by the policy's actions without them."""
        said = []
        for error in errors:
            match = _ATTRIBUTE.search(error)
            if match and match["missing"] and match["action"] and match["path"] in context_paths:
                lacking.setdefault(match["path"], []).append(match["action"])
            elif error != _NO_ACTION or not scope_unknown:
                said.append(_mistake(error, text, spans[policy], schema, context_paths))
        said.extend(
            _lacking(path, actions, text, spans[policy]) for path, actions in lacking.items()
        )
        for offset, words in said:
            mistakes[(offset, f"{label} at {_position(text, offset)}: {words}")] = None
    return "\n".join(said for _, said in sorted(mistakes))


def _mistake(
    error: str,
    text: str,
    span: tuple[int, int],
    schema: Mapping[str, Any],
    context_paths: Iterable[str],
) -> tuple[int, str]:
    """Where a validation error is and what to say of it: an unknown action, entity type
    or attribute with the name it may have meant; else Cedar's words (once for all the
    actions it checked), at the attribute they name or at the policy."""
    if match := _UNKNOWN_ACTION.match(error):
        where = _find(text, span, r'Action\s*::\s*"' + re.escape(match["action"]) + '"')
        actions = [a for part in schema.values() for a in part.get("actions", {})]
        return where, _unknown("action", match["action"], actions)
    if match := _UNKNOWN_TYPE.match(error):
        where = _find(text, span, rf'(?<![\w:"]){re.escape(match["name"])}\b')
        return where, _unknown("entity type", match["name"], _type_names(schema))
    match = _ATTRIBUTE.search(error)
    if match is None:
        return span[0], _FOR_ACTION.sub("", error)
    where = _attribute_at(text, span, match["path"])
    if not match["missing"]:
        return where, _FOR_ACTION.sub("", error)
    if match["type"] is None:
        return where, _unknown("context attribute", match["path"], context_paths)
    namespace, _, base = match["type"].rpartition("::")
    shape = schema.get(namespace, {}).get("entityTypes", {}).get(base, {}).get("shape", {})
    known = [path for path, _ in attribute_paths(shape)]
    return where, _unknown(f"{match['type']} attribute", match["path"], known)


def _lacking(path: str, actions: list[str], text: str, span: tuple[int, int]) -> tuple[int, str]:
    """A context attribute some of the policy's actions lack: where it is read, and the fix."""
    some = ", ".join(actions[:3]) + (f" and {len(actions) - 3} more" if actions[3:] else "")
    return (
        _attribute_at(text, span, path),
        f'context attribute "{path}" is missing for {some}; test `context has {path}` first',
    )


def _attribute_at(text: str, span: tuple[int, int], path: str) -> int:
    """Where the policy reads the attribute (`.name` or `["name"]`, its last step)."""
    leaf = re.escape(path.rpartition(".")[2])
    return _find(text, span, rf'\.\s*(?P<dot>{leaf})\b|\[\s*(?P<key>"{leaf}")')


def _find(text: str, span: tuple[int, int], pattern: str) -> int:
    """The offset of the pattern's first match in the span (of its named group, if one
    matched), else of the span: where a message points."""
    match = re.compile(pattern).search(text, *span)
    return match.start(match.lastgroup or 0) if match else span[0]


def _unknown(what: str, name: str, known: Iterable[str]) -> str:
    """`unknown action "a.serch"; did you mean "a.search"?` (no hint when none is close)."""
    close = closest_name(name, set(known))
    return f'unknown {what} "{name}"' + (f'; did you mean "{close}"?' if close else "")


def _type_names(schema: Mapping[str, Any]) -> list[str]:
    """The entity types a schema declares, by the names policies give them."""
    return [
        f"{namespace}::{base}" if namespace else base
        for namespace, part in schema.items()
        for base in part.get("entityTypes", {})
    ]


__all__ = ["approval_lines", "mistakes", "policy_lines", "unparsed"]
