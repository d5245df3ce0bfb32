"""A tool's or an operation's input schema -> a capability's keyword parameters, and the
document its bound arguments are sent as, checked by the schema in binding words.

Each property is one parameter, its hint read by `Hints`; the schema stays the authority
over the arguments, checked once, bounded, as the document is made (`Signature.document`).
"""

from __future__ import annotations

import copy
import keyword
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from codemode import capabilities as t
from codemode.capabilities import REQUIRED, Parameter
from codemode.errors import printable
from codemode.sources.schema.checking import Budget, SchemaError, Uncheckable, measured, validator
from codemode.sources.schema.hints import DEPTH, Hints, camel, clean
from codemode.types import JSONObject


def identifier(name: str, lead: str = "tool_") -> str:
    """A name as a Python identifier that may name a capability or an argument:
    `list-files` -> `list_files`, `from` -> `from_`, `ümlaut` -> `umlaut`, and `lead` in
    front of one that would start with a digit or be empty (`2fa` -> `tool_2fa`)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    text = re.sub(r"\W", "_", ascii_name.strip(), flags=re.ASCII).lstrip("_")
    if not text or text[0].isdigit():
        text = lead + text
    if keyword.iskeyword(text) or keyword.issoftkeyword(text):
        text += "_"
    return text


def nullable(schema: object) -> bool:
    """Whether a schema admits null (so an explicit None is sent, not left out)."""
    if not isinstance(schema, Mapping):
        return schema is True
    kinds = schema.get("type")
    if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
        return True
    if None in (schema.get("enum") or ()):
        return True
    return any(nullable(member) for key in ("anyOf", "oneOf") for member in schema.get(key) or ())


def problem(error: jsonschema.ValidationError, names: Mapping[str, str]) -> str:
    """A schema violation in binding words: the argument's path as the program wrote it,
    then what the schema asks (from the schema, which `describe` shows in full)."""
    path = list(error.absolute_path)
    where = names.get(str(path[0]), str(path[0])) if path else ""
    where = printable(where + "".join(f"[{p!r}]" for p in path[1:]))
    asked = error.schema if isinstance(error.schema, Mapping) else {}
    kind = str(error.validator)
    words = {  # what the schema declares, as literals: it never adds a line to the report
        "pattern": f"must match the pattern {t.shown(asked.get('pattern'), pattern=True)}",
        "enum": "must be one of " + ", ".join(t.shown(v) for v in asked.get("enum") or ()),
        "const": f"must be {t.shown(asked.get('const'))}",
        "format": f"must be {FORMATS.get(str(asked.get('format')), 'of its format')}",
        "minProperties": f"must have at least {asked.get('minProperties')} keys",
        "maxProperties": f"must have at most {asked.get('maxProperties')} keys",
        "uniqueItems": "must not repeat an item",
        "required": "is missing a required key",
        "additionalProperties": "has a key the schema does not declare",
    }.get(kind, f'does not meet its schema ("{kind}")')
    return f'argument "{where}" {words}' if where else f"the arguments do not meet {kind!r}"


FORMATS = {
    "date": "a date (RFC 3339, e.g. 2024-05-01)",
    "date-time": "a date-time (RFC 3339, e.g. 2024-05-01T12:00:00Z)",
    "time": "a time (RFC 3339, e.g. 12:00:00Z)",
    "email": "an email address",
    "idn-email": "an email address",
    "ipv4": "an IPv4 address",
    "ipv6": "an IPv6 address",
    "uri": "an absolute URI (RFC 3986)",
    "uri-reference": "a URI reference (RFC 3986)",
    "uuid": "a UUID",
    "byte": "base64 text (RFC 4648)",
    "int32": "an integer from -2147483648 to 2147483647",
    "int64": "an integer from -9223372036854775808 to 9223372036854775807",
}
"""What a value of each format a schema may check must be, in binding words."""


def with_defaults(schema: Any, value: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    """`value` with the `default` of each property it leaves out filled in, at every level
    of objects the schema declares (through local `$ref`s and `allOf` members, and in
    array items), as an upstream that validates its arguments applies them: a policy
    decides on what the upstream will do. The value itself is never changed."""
    schema = resolved(schema, root)
    if depth > DEPTH or not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        filled = dict(value)
        for key, sub in _properties(schema, root).items():
            if key in filled:
                filled[key] = with_defaults(sub, filled[key], root, depth + 1)
            elif isinstance(target := resolved(sub, root), Mapping) and "default" in target:
                filled[key] = copy.deepcopy(target["default"])
        return filled
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return [with_defaults(items, item, root, depth + 1) for item in value]
    return value


def resolved(schema: Any, root: Mapping[str, Any]) -> Any:
    """A local `#/...` reference followed (a few levels), else the schema; None for one
    that resolves to nothing."""
    for _ in range(DEPTH):
        ref = schema.get("$ref") if isinstance(schema, Mapping) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return None


def _properties(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """The properties an object schema declares, its `allOf` members' too."""
    found: dict[str, Any] = {}
    for member in [schema, *(schema.get("allOf") or ())]:
        member = resolved(member, root)
        given = member.get("properties") if isinstance(member, Mapping) else None
        if isinstance(given, Mapping):
            found.update({str(k): v for k, v in given.items() if str(k) not in found})
    return found


UNCHECKABLE = "the arguments cannot be checked against their schema"
"""What a call says whose arguments no bounded check can judge (see `checking`)."""


@dataclass(frozen=True)
class Signature:
    """An object schema as a capability's keyword parameters, one per property."""

    parameters: tuple[Parameter, ...]
    document: Callable[[JSONObject, Callable[[], bool]], JSONObject | str]
    """The bound arguments as the document that goes on the wire, which the authorizer
    and audit see too: the schema's names, a None it does not accept left out, then its
    defaults of what is omitted, at every level (`with_defaults`); or the problem the
    schema finds, in binding words. The check stops (UNCHECKABLE) once its second
    argument says the call's execution was answered."""


def signature(
    input_schema: JSONObject,
    prefix: str,
    *,
    hints: Hints | None = None,
    checked: bool = False,
    formats: jsonschema.FormatChecker | None = None,
) -> Signature:
    """The parameters of `input_schema`'s properties, their shapes named after `prefix`
    (by `hints`, which several schemas may share, so a shape each refers to is made
    once); SchemaError when the schema is not valid (unless `checked`) or two properties
    read as one name. The document is checked against the schema, and its `format`s by
    `formats` when given."""
    # Checked now when it must be; else made at the first call (a REST API's ten thousand
    # operations would each hold one from registration on), its patterns measured now all
    # the same, so a schema too costly to check leaves its operation out at registration.
    checker = None if checked else validator(input_schema, formats=formats)
    if checked:
        measured(input_schema)
    hints = hints or Hints(input_schema, prefix)
    properties: dict[str, Any] = dict(input_schema.get("properties") or {})  # type: ignore[arg-type]
    required = set(input_schema.get("required") or ())  # type: ignore[arg-type]
    parameters: list[Parameter] = []
    wire: dict[str, str] = {}
    """Each parameter's name as the schema spells it."""
    defaults: JSONObject = {}
    """The schema's default of each optional property that has one, by the schema's name."""
    for key, sub in properties.items():
        param = identifier(key, lead="arg_")
        if param in wire:
            raise SchemaError(f'properties "{wire[param]}" and "{key}" both read as "{param}"')
        wire[param] = key
        hint = hints.of(sub, prefix + camel(key))
        if key in required:
            default: Any = REQUIRED
        elif isinstance(sub, Mapping) and "default" in sub:
            default = defaults[key] = sub["default"]
        else:  # left out when the program leaves it out (or passes None)
            default, hint = None, hint if hint is Any else hints.optional(hint)
        doc = sub.get("description") if isinstance(sub, Mapping) else None
        parameters.append(
            Parameter(
                param,
                hints.described(hint, sub),
                default,
                clean(doc) if isinstance(doc, str) else None,
                wire=key if key != param else None,
                filled=defaults.get(key) is not None,
            )
        )
    for parameter in parameters:
        t.check_supported(parameter.annotation)
    keep_null = {param for param, key in wire.items() if nullable(properties[key])}
    names = {key: param for param, key in wire.items()}

    def document(arguments: JSONObject, ended: Callable[[], bool]) -> JSONObject | str:
        nonlocal checker
        if checker is None:
            checker = validator(input_schema, checked=True, formats=formats)
        sent = {wire.get(k, k): v for k, v in arguments.items() if v is not None or k in keep_null}
        try:
            errors = checker.errors(sent, Budget(ended=ended))
        except Uncheckable:  # costlier than any check may spend, or its caller was answered
            return UNCHECKABLE
        error = next(iter(sorted(errors, key=lambda e: e.path)), None)
        if error is not None:
            return problem(error, names)
        filled: JSONObject = with_defaults(input_schema, sent, input_schema)
        return filled

    return Signature(tuple(parameters), document)


def object_schema(schema: object) -> JSONObject:
    """An input schema as an object schema, or SchemaError when no call could meet it."""
    if not isinstance(schema, dict):
        raise SchemaError("the input schema is not an object")
    if schema.get("type", "object") != "object":
        raise SchemaError(f'the input schema is of type "{schema.get("type")}", not "object"')
    return schema


__all__ = [
    "FORMATS",
    "UNCHECKABLE",
    "Signature",
    "identifier",
    "nullable",
    "object_schema",
    "problem",
    "resolved",
    "signature",
    "with_defaults",
]
