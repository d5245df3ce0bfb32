"""One operation -> one capability, built as an upstream MCP tool's is (`remote.build`):
its arguments from one object schema (`schema.signature`), its result hint from the
declared 2xx schemas (`schema.Hints`), so binding, describe, the declared-type projection
and every hint are the same code for a REST API as for any capability. Its request goes
out on the sources' loop (`remote.on_loop`), whatever loop the call comes from.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from codemode import capabilities as t
from codemode.capabilities import REQUIRED, Capability, Parameter, Projection
from codemode.errors import AgentError, printable
from codemode.sources import remote
from codemode.sources import schema as s
from codemode.sources.openapi import wire
from codemode.sources.openapi.client import (
    NO_CONTENT,
    NOT_JSON,
    UNDECLARED,
    UNREACHABLE,
    UNREADABLE_BODY,
    Api,
    declared,
    status_text,
)
from codemode.sources.openapi.formats import CHECKER
from codemode.sources.openapi.operations import Media, Operation
from codemode.types import JSONObject

log = logging.getLogger("codemode.openapi")


class BinaryBody(TypedDict):
    """A response body that is neither JSON nor text: what it is, not its bytes."""

    type: str
    mime_type: str
    size: int


_METHOD_HINTS: dict[str, dict[str, bool]] = {
    "get": {"readOnlyHint": True},
    "head": {"readOnlyHint": True},
    "options": {"readOnlyHint": True},
    "trace": {"readOnlyHint": True},
    "post": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
    "patch": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
    "put": {"readOnlyHint": False, "idempotentHint": True},
    "delete": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}


def annotations_of(operation: Operation) -> Mapping[str, bool]:
    """MCP's four hints, by the method and refined by `x-codemode-hints`."""
    given: dict[str, object] = dict(_METHOD_HINTS[operation.method])
    given.update({k: v for k, v in operation.hints.items() if isinstance(v, bool)})
    return remote.hints_of(given)


@dataclass(frozen=True)
class Shared:
    """What the operations of one API share: the readers of its schemas, one for each
    direction, and the loop its requests go out on (None: the caller's)."""

    requests: s.Hints
    responses: s.Hints
    loop: asyncio.AbstractEventLoop | None = None


def operation_capability(
    namespace: str, operation: Operation, api: Api, shared: Shared
) -> Capability:
    """The capability `namespace.<leaf>`; SchemaError when its schemas cannot be read."""
    name = remote.capability_name(namespace, operation.leaf)
    prefix = s.camel(operation.leaf)
    arguments = s.signature(
        operation.input_schema, prefix, hints=shared.requests, checked=True, formats=CHECKER
    )
    hints = shared.responses
    successes = {k: m for k, m in operation.responses.items() if k[0] == "2"} or {
        k: m for k, m in operation.responses.items() if k == "DEFAULT"
    }
    kinds = [_hint(hints, media, prefix + "Result") for media in successes.values()]
    result: Any = s.union(kinds) if kinds else type(None)
    t.check_supported(result)
    errors = {
        key: hints.of(media.schema, prefix + "Error")
        for key, media in operation.responses.items()
        if (key[0] == "4" or key == "DEFAULT") and media.kind == "json" and media.schema
    }
    projections: dict[str, Projection] = {}

    def error_detail(key: str, body: bytes) -> tuple[str, Any]:
        """The declared part of an error body (its projection made at the first one)."""
        if key not in projections:
            projections[key] = Projection(errors[key], serialize=False)
        return _error_detail(projections[key], body, api)

    checkers: dict[int, s.Checker] = {}

    def checker(media: Media) -> s.Checker:
        """The validator of one declared body (made at its first use)."""
        if id(media) not in checkers:
            checkers[id(media)] = s.validator({**media.schema, "$defs": operation.response_defs})
        return checkers[id(media)]

    async def call(**document: Any) -> Any:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            code, media_type, body = await _sent(api, operation, document, shared.loop)
        except remote.SourceClosed:
            log.warning("REST API %s: %s is not sent: it is closed", api.name, operation.route)
            raise AgentError(UNREACHABLE) from None
        key = declared(operation, code)
        if 200 <= code < 300:
            if key is None and code in _NO_CONTENT:  # a 204 where 200 is declared, say
                return _no_content(api, operation, code, successes)
            if key is None and len(successes) == 1:  # a 201 where 200 is declared, say
                key = next(iter(successes))
            media = operation.responses.get(key) if key is not None else None
            read = functools.partial(_value, api, operation, code, media, media_type, body, checker)
            left = None if api.timeout is None else api.timeout - (loop.time() - started)
            try:  # off the loop that serves every call, within the call's timeout
                return await s.off_loop(read, left)
            except s.Uncheckable:  # its time ran out
                log.warning(
                    "REST API %s: %s answered a body not checked within %g s",
                    api.name,
                    operation.route,
                    api.timeout,
                )
                raise AgentError(UNREADABLE_BODY) from None
        detail, kept = "", None
        if 400 <= code < 500 and key in errors:
            detail, kept = error_detail(key, body)
        log.warning(
            "REST API %s: %s answered %s: %s",
            api.name,
            operation.route,
            code,
            api.loggable(body),
        )
        raise AgentError(
            status_text(code) + (f": {detail}" if detail else ""),
            status=code,
            fields=kept if isinstance(kept, dict) else {},
        )

    # The route is the description's first line, where no text of the document can
    # come before it: a description may hold lines of its own, `GET /other` among them.
    route = printable(operation.route)
    summary = s.clean(operation.summary) or remote.first_sentence(s.clean(operation.description))
    body = s.clean(operation.description) or summary
    summary = summary or f"{route} of {namespace}."
    return remote.build(
        name,
        summary=summary,
        description=f"{route}\n\n{body}" if body else route,
        search_terms=(operation.operation_id, *operation.tags, operation.path, namespace),
        call=call,
        arguments=dataclasses.replace(
            arguments,
            document=_wire_checked(arguments.document, operation, arguments.parameters),
        ),
        result=result,
        timeout=api.timeout,
        hints=annotations_of(operation),
        failing=functools.partial(failures_of, operation, errors),
    )


def failures_of(operation: Operation, errors: Mapping[str, Any]) -> tuple[str, ...]:
    """What describe lists a call can fail with: each error status the operation declares
    (4xx and 5xx, ranges such as `4XX`, and `default` as any other status), with, for a
    4xx, the fields of the body it declares, which `error_data` gives (`errors`: each
    status's body type, for those that declare a JSON object)."""
    found = []
    for key in operation.responses:
        if key[0] not in "45" and key != "DEFAULT":
            continue
        line = "capability_failed, " + ("any other status" if key == "DEFAULT" else f"status {key}")
        fields = _fields(errors.get(key))
        if fields and key[0] == "4":
            line += f", fields {fields}"
        elif fields and key == "DEFAULT":
            line += f", fields {fields} for a 4xx"
        found.append(line)
    return tuple(found)


def _fields(hint: Any) -> str | None:
    """An error body's declared fields as describe shows a dict's (`{detail?: str}`), or
    None for a body that is not an object with fields."""
    declared = getattr(hint, "__annotations__", None)
    if not isinstance(declared, dict) or not declared:
        return None
    required: frozenset[str] = getattr(hint, "__required_keys__", frozenset())
    return (
        "{"
        + ", ".join(
            f"{printable(key)}{'' if key in required else '?'}: {t.notation(value)}"
            for key, value in declared.items()
        )
        + "}"
    )


async def _sent(
    api: Api, operation: Operation, document: JSONObject, loop: asyncio.AbstractEventLoop | None
) -> tuple[int, str, bytes]:
    """The API's answer to one call, its request sent on the sources' loop."""
    if loop is None:
        return await api.call(operation, document)
    return await remote.on_loop(loop, api.call(operation, document))


def _wire_checked(
    document: Callable[[JSONObject, Callable[[], bool]], JSONObject | str],
    operation: Operation,
    parameters: tuple[Parameter, ...],
) -> Callable[[JSONObject, Callable[[], bool]], JSONObject | str]:
    """`document`, refusing what HTTP cannot carry where the argument goes, so the
    document the authorizer decides on is what the server reads: a path parameter that
    could change the path (empty, `.`, `..`, or holding `/` or `\\`: percent-encoding
    them is not enough, as servers and proxies decode `%2F` and resolve `%2E%2E` before
    they route), a header value that is not one line of printable ASCII or that begins or
    ends with a space (which HTTP strips: it could not be sent as it was given), and a
    value its style has no faithful form for (`wire.check`). A None where no null can be
    sent is left out, as the program could have left it (so the document holds no null
    the server never reads), unless that would change it: a required argument, or one
    whose default is not None."""
    where = {a.key: a.location for a in operation.arguments if a.location in ("path", "header")}
    names = {p.key: p.name for p in parameters}  # as the program wrote it
    defaults = {p.key: p.default for p in parameters}
    by_key = {a.key: a for a in operation.arguments}

    segments = {a.key for a in operation.arguments if a.segments}

    def checked(arguments: JSONObject, ended: Callable[[], bool]) -> JSONObject | str:
        made = document(arguments, ended)
        if isinstance(made, str):
            return made
        for key in [k for k, v in made.items() if v is None and k in by_key]:
            if wire.carries_null(operation, by_key[key]):
                continue
            default = defaults.get(key, REQUIRED)
            if default is not None:
                said = f'argument "{names.get(key, key)}" must not be None: '
                said += f"{wire.place(operation, by_key[key])} has no form for None"
                return said if default is REQUIRED else f"{said}; leave it out for its default"
            made = {k: v for k, v in made.items() if k != key}
        for key, location in where.items():
            if key not in made:
                continue
            name = names.get(key, key)
            parts = _parts(made[key])
            if location == "path" and not all(_segment(p, key in segments) for p in parts):
                return (
                    f'argument "{name}" must not be empty, "." or ".." or hold "/" or "\\": '
                    "it is one segment of the path"
                    if key not in segments
                    else f'argument "{name}" must not hold an empty, "." or ".." segment or "\\"'
                )
            if location == "header" and not all(p.isascii() and p.isprintable() for p in parts):
                return f'argument "{name}" must be printable ASCII: it is sent as a header'
            if location == "header" and any(p != p.strip(" ") for p in parts):
                return (
                    f'argument "{name}" must not begin or end with a space: it is sent as a header'
                )
        try:
            wire.check(operation, made)
        except wire.Unsendable as problem:
            return (
                f'argument "{names.get(problem.key, problem.key)}{problem.where}" {problem.reason}'
            )
        return made

    return checked


def _parts(value: Any) -> list[str]:
    """The texts one argument is sent as: a scalar's, or a list's or an object's items
    and keys (one level, as OpenAPI serializes them; deeper, or empty, is `""`)."""
    if isinstance(value, list | dict):
        items = [*value, *value.values()] if isinstance(value, dict) else value
        if not items or any(isinstance(item, list | dict) for item in items):
            return [""]  # an empty segment, or one OpenAPI gives no form to
        return [item if isinstance(item, str) else json.dumps(item) for item in items]
    return [value if isinstance(value, str) else json.dumps(value)]


def _segment(text: str, spans: bool) -> bool:
    """Whether `text` stays one segment of a path (or, `spans`, whole segments) however
    servers and proxies decode and resolve it (`%2F`, `%2E%2E`, `..;`)."""
    if "\\" in text or (not spans and "/" in text):
        return False
    return all(part.split(";")[0] not in ("", ".", "..") for part in text.split("/"))


def _hint(hints: s.Hints, media: Media, name: str) -> Any:
    if media.kind == "json":
        return Any if media.schema is None else hints.of(media.schema, name)
    if media.kind == "text":
        return str
    if media.kind == "binary":
        return BinaryBody
    return type(None)


def _error_detail(projection: Projection, body: bytes, api: Api) -> tuple[str, Any]:
    """The declared part of an error body, credentials blanked out: as compact JSON (cut
    short in the message, as every `AgentError` message is) and as the data it spells
    (whose fields `error_data` gives); `("", None)` for a body not what it declares."""
    try:
        value = remote.strict_json(body)
        kept = api.scrub(projection.project(value, 10_000).value)
    except Exception:  # a body that is not what it declares: its status says enough
        return "", None
    detail = json.dumps(kept, separators=(",", ":"), ensure_ascii=False, default=str)
    return detail, json.loads(detail)


_NO_CONTENT = (204, 205)
"""The successes that carry no body, whatever the operation declares."""


def _no_content(api: Api, operation: Operation, code: int, successes: Mapping[str, Media]) -> None:
    """A 204 (or 205) the operation does not declare: its result is None when it declares
    no body for a success either (`-> None`); else it failed to give the declared result,
    which says so (not that a body it never had is not JSON)."""
    if all(media.kind == "none" for media in successes.values()):
        return None
    log.warning("REST API %s: %s answered %s, undeclared", api.name, operation.route, code)
    raise AgentError(NO_CONTENT.format(status=status_text(code)))


def _value(
    api: Api,
    operation: Operation,
    code: int,
    media: Media | None,
    media_type: str,
    body: bytes,
    checker: Callable[[Media], s.Checker],
    budget: s.Budget,
) -> Any:
    """A 2xx response as the program gets it, or AgentError for one that breaks what the
    operation declares (on a worker thread: reading and checking a large body, or one
    its schema makes costly, holds no loop, and `budget` bounds the check)."""
    if media is None:  # a status it declares no response for
        log.warning("REST API %s: %s answered %s, undeclared", api.name, operation.route, code)
        raise AgentError(UNDECLARED)
    if media.kind == "none":
        return None
    if media.kind == "text":
        return api.redact(body.decode("utf-8", "replace"))
    if media.kind == "binary":  # the declared media type: the server's header is its own
        given = media_type if media_type in media.types else None
        kind = given or (media.types[0] if media.types else "application/octet-stream")
        return {"type": "binary", "mime_type": kind, "size": len(body)}
    try:
        value = remote.strict_json(body)
        if _SURROGATE.search(body):  # `"\ud800"` parses to text no UTF-8 can hold
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        log.warning("REST API %s: %s answered %s with no JSON", api.name, operation.route, code)
        raise AgentError(NOT_JSON) from None
    if media.schema is not None:
        try:
            error = checker(media).first(value, budget)
        except (s.Uncheckable, s.SchemaError) as exc:  # too deep, or costlier than one may spend
            log.warning(
                "REST API %s: %s answered a body its schema cannot check: %s",
                api.name,
                operation.route,
                exc,
            )
            raise AgentError(UNREADABLE_BODY) from None
        if error is not None:
            log.warning(
                "REST API %s: %s answered %s with a body its schema refuses: %s at %s",
                api.name,
                operation.route,
                code,
                api.redact(error.message)[:500],
                "/".join(str(p) for p in error.absolute_path) or "the root",
            )
            raise AgentError(UNDECLARED)
    return api.scrub(value)


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


__all__ = ["BinaryBody", "Shared", "annotations_of", "operation_capability"]
