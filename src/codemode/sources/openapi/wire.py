"""Arguments -> an HTTP request's path, query, headers and cookies, by OpenAPI's
serialization rules (`style`, `explode`), with nothing an argument holds able to change
the request's scheme, host or path.

Every value in a path is percent-encoded (`/`, `?` and `#` included), so it stays within
its segment; binding has refused a value that is empty, `.`, `..` or holds `/` or a
backslash (servers and proxies decode `%2F` and resolve `%2E%2E`), and a request whose
values next to each other would still make a `.` or `..` segment is not sent.

A value goes out only in a form the API reads back as that same value (`check`, run when
the call binds, so what the authorizer decides on is what the server reads): no item or
key holding the delimiter its style joins them by, no empty list or object (sent as
nothing, or as one empty value), no list or object inside another, no None outside JSON,
and no key of an object sent as query parameters of its own but one spelled with ASCII
letters, digits, `-` and `_` that no other parameter, form or JSON field, API key or
key has, compared as loosely as servers compare them (the server could not tell whose
value it reads).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from codemode.sources.openapi.operations import Argument, Operation, folded

_TEMPLATE = re.compile(r"\{([^{}]+)\}")


def scalar(value: Any) -> str:
    """A primitive as text: JSON's words for booleans and null, numbers as written."""
    if value is True or value is False or value is None:
        return json.dumps(value)
    return value if isinstance(value, str) else json.dumps(value)


def _pairs(value: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), scalar(v)) for k, v in value.items() if v is not None]


def path(template: str, values: Mapping[str, tuple[Argument, Any]]) -> str:
    """The path with each `{name}` filled in (encoded); the template's own text stays."""

    def fill(match: re.Match[str]) -> str:
        found = values.get(match.group(1))
        if found is None:  # binding requires every path parameter; this is a safe stop
            raise ValueError(f"no value for the path parameter {match.group(1)!r}")
        argument, value = found
        return _path_value(argument, value)

    filled = _TEMPLATE.sub(fill, template)
    segments = filled.split("/")
    if any(segment.split(";")[0] in (".", "..") for segment in segments):
        raise ValueError("a path value would make a . or .. segment")  # binding refuses it
    return "/".join(segments)


def _path_value(argument: Argument, value: Any) -> str:
    def enc(text: str) -> str:
        return quote(text, safe="")

    name, style, explode = enc(argument.wire), argument.style, argument.explode
    if argument.json:
        value = json.dumps(value, separators=(",", ":"))
    if argument.segments and isinstance(value, str):  # `docs/README.md`: its `/` stay
        return "/".join(enc(segment) for segment in value.split("/"))
    if isinstance(value, list):
        items = [enc(scalar(v)) for v in value]
        if style == "label":
            return "." + ("." if explode else ",").join(items)
        if style == "matrix":
            if explode:
                return "".join(f";{name}={item}" for item in items)
            return f";{name}=" + ",".join(items)
        return ",".join(items)
    if isinstance(value, dict):
        pairs = [(enc(k), enc(v)) for k, v in _pairs(value)]
        if explode:
            joined = [f"{k}={v}" for k, v in pairs]
            if style == "label":
                return "." + ".".join(joined)
            if style == "matrix":
                return "".join(";" + item for item in joined)
            return ",".join(joined)
        flat = ",".join(f"{k},{v}" for k, v in pairs)
        return {"label": "." + flat, "matrix": f";{name}={flat}"}.get(style, flat)
    text = enc(scalar(value))
    return {"label": "." + text, "matrix": f";{name}={text}"}.get(style, text)


def query(argument: Argument, value: Any) -> list[tuple[str, str]]:
    """The query pairs one argument becomes (the client percent-encodes them)."""
    name, style, explode = argument.wire, argument.style, argument.explode
    if argument.json:
        return [(name, json.dumps(value, separators=(",", ":")))]
    if isinstance(value, list):
        items = [scalar(v) for v in value]
        if explode:  # one pair per item, in every style that has a list form
            return [(name, item) for item in items]
        return [(name, _JOINED[style].join(items))]
    if isinstance(value, dict):
        pairs = _pairs(value)
        if style == "deepObject":
            return [(f"{name}[{k}]", v) for k, v in pairs]
        if explode:
            return pairs
        return [(name, _JOINED[style].join(f"{k}{_JOINED[style]}{v}" for k, v in pairs))]
    return [(name, scalar(value))]


_JOINED = {"form": ",", "spaceDelimited": " ", "pipeDelimited": "|"}
"""What a query style joins a list's items (an object's keys and values) by."""


def header(argument: Argument, value: Any) -> str:
    """A header's value (`simple` style); a line break cannot be sent in a header."""
    if argument.json:
        text = json.dumps(value, separators=(",", ":"))
    elif isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif isinstance(value, dict):
        pairs = _pairs(value)
        sep = "=" if argument.explode else ","
        text = ",".join(f"{k}{sep}{v}" for k, v in pairs)
    else:
        text = scalar(value)
    if not text.isascii() or any(ch in text for ch in "\r\n\0") or text != text.strip(" "):
        raise ValueError("a header value holds a line break, an edge space or a non-ASCII one")
    return text


def cookie(argument: Argument, value: Any) -> str:
    """`name=value` for the Cookie header (`form` style), the value percent-encoded."""
    if argument.json:
        text = json.dumps(value, separators=(",", ":"))
    elif isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif isinstance(value, dict):
        text = ",".join(f"{k},{v}" for k, v in _pairs(value))
    else:
        text = scalar(value)
    return f"{argument.wire}={quote(text, safe='')}"


_PLACES = {
    "path": "a path parameter",
    "query": "a query parameter",
    "header": "a header",
    "cookie": "a cookie",
    "body": "a form field",
}


class Unsendable(ValueError):
    """An argument value its parameter has no faithful form for."""

    def __init__(self, key: str, where: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        """The argument's key in the document."""
        self.where = where
        """Where in its value (`[0]`, `['color']`), or "" for the whole of it."""
        self.reason = reason
        """The rest of the binding message: `must not hold ","`."""


def carries_null(operation: Operation, argument: Argument) -> bool:
    """Whether None can be sent for this argument as it is: as JSON (a JSON body's, or a
    parameter sent as JSON text); no other form has a null."""
    return argument.json or (argument.location == "body" and operation.body == "json")


def place(operation: Operation, argument: Argument) -> str:
    """Where an argument goes, in the words of a binding message (`a query parameter`)."""
    if argument.location == "body":
        return "the body" if operation.body == "text" else _PLACES["body"]
    return _PLACES[argument.location]


def check(operation: Operation, document: Mapping[str, Any]) -> None:
    """Raise Unsendable for the first argument the API would not read back as the
    document holds it (None is left to the caller, which knows the defaults)."""
    by_key = {a.key: a for a in operation.arguments}
    sent: set[str] = set()
    """The `folded` query names the objects spread so far have sent."""
    for key, value in document.items():
        argument = by_key.get(key)
        if argument is None or value is None or carries_null(operation, argument):
            continue
        if argument.location == "body" and operation.body == "text":
            if not isinstance(value, str):
                raise Unsendable(key, "", "must be a string: the body is sent as text")
            continue
        here = place(operation, argument)
        if isinstance(value, list):
            _items(key, value, here, _list_joint(argument))
        elif isinstance(value, dict):
            _object(key, value, here, _object_joints(argument))
            if argument.spread:
                _spread(argument, value, sent)


def _list_joint(argument: Argument) -> str:
    """What a list's items are joined by ("" when each is a value of its own); Unsendable
    for a style that has no list form."""
    style, explode = argument.style, argument.explode
    if argument.location == "body":
        return ""  # a form field's items are repeated fields
    if argument.location == "query":
        if style == "deepObject":
            raise Unsendable(argument.key, "", "must not be a list: a deepObject is a dict")
        return "" if explode else _JOINED[style]
    if argument.location == "path" and explode and style in ("label", "matrix"):
        return "." if style == "label" else ";"
    return ","


def _object_joints(argument: Argument) -> tuple[str, str]:
    """The characters an object's keys and its values must not hold, as its style joins
    them; Unsendable for a style that has no object form."""
    style, explode = argument.style, argument.explode
    if argument.location == "body":
        raise Unsendable(argument.key, "", "must not be a dict: a form field has no form for one")
    if argument.location == "query":
        if style == "deepObject":
            return "[]", ""
        if style == "form":
            return ("", "") if explode else (",", ",")
        if explode:
            raise Unsendable(argument.key, "", f"must not be a dict: {style} has no form for one")
        return _JOINED[style], _JOINED[style]
    if argument.location == "cookie" or not explode:
        return ",", ","
    joint = {"label": ".", "matrix": ";"}.get(style, ",")
    return joint + "=", joint


def _items(key: str, value: list[Any], here: str, joint: str) -> None:
    if not value:
        raise Unsendable(key, "", f"must not be empty: {here} has no form for an empty list")
    for index, item in enumerate(value):
        _scalar(key, f"[{index}]", item, here, joint, "a list", "items")


def _object(key: str, value: dict[str, Any], here: str, joints: tuple[str, str]) -> None:
    if not value:
        raise Unsendable(key, "", f"must not be empty: {here} has no form for an empty dict")
    for name, item in value.items():
        if not name:
            raise Unsendable(key, "", f"must not have an empty key: {here} has no form for one")
        held = next((c for c in joints[0] if c in name), None)
        if held is not None:
            raise Unsendable(
                key,
                "",
                f"must not have the key {name!r}: {here} has no form for {_shown(held)} in one",
            )
        _scalar(key, f"[{name!r}]", item, here, joints[1], "a dict", "keys and values")


def _scalar(key: str, where: str, item: Any, here: str, joint: str, inside: str, what: str) -> None:
    """An item of a list or a value of an object: one string, number or bool."""
    if item is None:
        raise Unsendable(key, where, f"must not be None: {here} has no form for None")
    if isinstance(item, list | dict):
        kind = "a list" if isinstance(item, list) else "a dict"
        raise Unsendable(key, where, f"must not be {kind}: {here} has no form for one in {inside}")
    held = next((c for c in joint if isinstance(item, str) and c in item), None)
    if held is not None:
        raise Unsendable(key, where, f"must not hold {_shown(held)}: {here} joins its {what} by it")


def _shown(character: str) -> str:
    return "a space" if character == " " else f'"{character}"'


_KEY = re.compile(r"[A-Za-z0-9_-]+")
"""What a key sent as a query parameter of its own may be spelled with: a name no server
reads as another (a non-ASCII letter is one under another's case rules, `l\u0131mit` is
`LIMIT` to Java; PHP drops a leading space and reads `.` and a space as `_`; `a[b]`
and `a.b` are part of `a` to many)."""


def _spread(argument: Argument, value: dict[str, Any], sent: set[str]) -> None:
    """An object whose keys are query parameters of their own: each key is spelled with
    ASCII letters, digits, `-` and `_` only, and none is, once `folded`, a name another
    parameter, field or API key has (`Argument.taken`) or one sent already."""
    for name in value:
        if not _KEY.fullmatch(name):
            raise Unsendable(
                argument.key,
                "",
                f"must not have the key {name!r}: each key is sent as a query parameter of "
                'its own, named with ASCII letters, digits, "-" and "_" only',
            )
        key = folded(name)
        if key in argument.taken or key in sent:
            raise Unsendable(
                argument.key,
                "",
                f"must not have the key {name!r}: each key is sent as a query parameter of "
                "its own, and another has that name",
            )
        sent.add(key)


__all__ = [
    "Unsendable",
    "carries_null",
    "check",
    "cookie",
    "header",
    "path",
    "place",
    "query",
    "scalar",
]
