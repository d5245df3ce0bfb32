"""Arguments -> an HTTP request's path, query, headers and cookies, by OpenAPI's
serialization rules (`style`, `explode`), with nothing an argument holds able to change
the request's scheme, host or path.

Every value in a path is percent-encoded (`/`, `?` and `#` included), so it stays within
its segment; binding has refused a value that is empty, `.`, `..` or holds `/` or a
backslash (servers and proxies decode `%2F` and resolve `%2E%2E`), and a request whose
values next to each other would still make a `.` or `..` segment is not sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from codemode.openapi.operations import Argument

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
        if style == "spaceDelimited":
            return [(name, " ".join(items))]
        if style == "pipeDelimited":
            return [(name, "|".join(items))]
        return [(name, item) for item in items] if explode else [(name, ",".join(items))]
    if isinstance(value, dict):
        pairs = _pairs(value)
        if style == "deepObject":
            return [(f"{name}[{k}]", v) for k, v in pairs]
        if explode:
            return pairs
        return [(name, ",".join(f"{k},{v}" for k, v in pairs))]
    return [(name, scalar(value))]


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
    if isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif isinstance(value, dict):
        text = ",".join(f"{k},{v}" for k, v in _pairs(value))
    else:
        text = scalar(value)
    return f"{argument.wire}={quote(text, safe='')}"


__all__ = ["cookie", "header", "path", "query", "scalar"]
