"""The one builder of forwarded capabilities: calls sent elsewhere as one JSON document.

An upstream MCP tool and a REST operation are both a capability whose handler sends the
bound arguments somewhere else, as the document its input schema checks, and reads back
JSON. What makes such a capability is here, once: its name under the source's namespace,
the sixteen fields of `Capability` (`build`), the grace its runtime deadline gives the
source's own timeout, its annotations completed as MCP presumes them, the schema that
cannot be read leaving out one capability rather than its source (`readable`), and the
hop that sends a call's I/O to the loop its source lives on (`on_loop`). `forwarded` is
the same, public, for a source of a third kind: a capability from two JSON Schemas and an
async `send`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from codemode import capabilities as t
from codemode.capabilities import RESERVED_ROOTS, Capability, check_name, complete_hints
from codemode.errors import AgentError, RegistrationError
from codemode.sources.schema import (
    Hints,
    SchemaError,
    Signature,
    Uncheckable,
    camel,
    clean,
    identifier,
    object_schema,
    off_loop,
    signature,
    validator,
)
from codemode.types import JSONObject, JSONValue

T = TypeVar("T")

GRACE_SECONDS = 1.0
"""How much longer the runtime waits than a source's own timeout, so the source's timeout
(a `capability failed` the program can catch) is the one that ends a call."""

CLOSED = "its source is closed"
TIMED_OUT = "the source did not answer within {seconds:g} s"
UNDECLARED_RESULT = "the source's result does not match its output schema"
UNCHECKABLE_RESULT = "the source's result cannot be checked against its output schema"


class SourceClosed(Exception):
    """A call's I/O could not be handed to its source's loop: the source is closed."""


def namespace(name: object, kind: str) -> str:
    """A source's name as the namespace of its capabilities: an identifier (`my-fs` ->
    `my_fs`), or RegistrationError for one programs already use (a builtin or standard
    module). `kind` names it in the error ("MCP server", "REST API")."""
    if not isinstance(name, str) or not name.strip():
        raise RegistrationError(f"an {kind} name must be a non-empty string, not {name!r}")
    noun = "server" if kind == "MCP server" else "API"
    converted = identifier(name, lead=f"{noun.lower()}_")
    if converted in RESERVED_ROOTS:
        raise RegistrationError(
            f'{kind} "{name}": "{converted}" is a name programs use for a builtin or '
            f'module; name the {noun} otherwise, e.g. "{converted}_{noun.lower()}"'
        )
    return converted


def check_options(what: str, timeout: float | None, **lists: object) -> None:
    """RegistrationError, naming the source (`what`), for a `timeout` that is not a
    positive number or a list option given as one string."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise RegistrationError(f"{what}: timeout must be a positive number")
    for option, value in lists.items():
        if isinstance(value, str):
            raise RegistrationError(f"{what}: {option} must be a list of str")


def check_folder(what: str, folder: str | os.PathLike[str] | None) -> None:
    """RegistrationError for a working folder that is not one."""
    if folder is not None and not os.path.isdir(folder):
        raise RegistrationError(f"{what}: cwd {os.fspath(folder)!r} is not a folder")


def capability_name(namespace: str, leaf: str) -> str:
    """`namespace.leaf`, checked; SchemaError (the capability is skipped) when it cannot
    name a capability."""
    try:
        return check_name(f"{namespace}.{leaf}")
    except RegistrationError as exc:
        raise SchemaError(f"its name cannot name a capability ({exc})") from None


def hints_of(given: Mapping[str, object]) -> Mapping[str, bool]:
    """MCP's four hints, from those `given` as booleans, the rest as MCP presumes them."""
    return complete_hints({k: v for k, v in given.items() if isinstance(v, bool)})


def build(
    name: str,
    *,
    summary: str,
    description: str,
    search_terms: Iterable[str | None],
    call: Callable[..., Awaitable[Any]],
    arguments: Signature,
    result: Any,
    timeout: float | None,
    hints: Mapping[str, bool],
    result_doc: str | None = None,
    failing: Callable[[], tuple[str, ...]] | None = None,
) -> Capability:
    """The capability of a forwarded call: its handler `call` gets the document of
    `arguments` as its keyword arguments and returns JSON data, which crosses by being
    kept to `result`; its runtime deadline is `timeout` and the grace (None: the limits'
    default); `failing` builds what describe lists it can fail with."""
    return Capability(
        id=name,
        name=name,
        summary=summary,
        description=description,
        search_terms=tuple(w for w in search_terms if w),  # the ones it has
        handler=call,
        is_async=True,
        context_parameter=None,
        parameters=arguments.parameters,
        result_annotation=result,
        result_doc=result_doc,
        timeout=None if timeout is None else timeout + GRACE_SECONDS,
        flat=all(t.is_scalar(p.annotation) for p in arguments.parameters),
        annotations=hints,
        json_results=True,
        document=arguments.document,
        failing=failing,
    )


def readable(
    build: Callable[[], Capability], skipped: Callable[[str], None], *, projection: bool = True
) -> Capability | None:
    """The capability `build` makes, with what describe (and, with `projection`, the
    result's crossing) needs made now; None, after `skipped(why)`, when its schema cannot
    be read, so one tool or operation is left out rather than its whole source."""
    try:
        capability = build()
        capability.info  # noqa: B018 - built now: a schema that breaks it is skipped
        if projection:
            capability.projection.adapter  # noqa: B018 - describe's output schema too
    except (SchemaError, t.UnsupportedTypeError) as exc:
        skipped(str(exc))
        return None
    except Exception as exc:  # a schema too intricate to read (a RecursionError)
        skipped(f"its schema cannot be read ({type(exc).__name__})")
        return None
    return capability


async def on_loop(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, T]) -> T:
    """`work` run on its source's loop, awaited from whichever loop the call runs on:
    there at once, else handed over (cancelling the wait cancels it there).
    SourceClosed when that loop is closed."""
    if asyncio.get_running_loop() is loop:
        return await work
    # Not an anyio portal's `start_task_soon`, which blocks this loop's thread until the
    # source's loop has started the task: gathered calls would start one by one.
    try:
        future = asyncio.run_coroutine_threadsafe(work, loop)
    except RuntimeError:  # the loop is closed
        work.close()
        raise SourceClosed() from None
    return await asyncio.wrap_future(future)


def first_sentence(text: str) -> str:
    """The first sentence of a description's first line (a summary)."""
    line = text.strip().split("\n", 1)[0].strip()
    end = line.find(". ")
    return line if end < 0 else line[: end + 1]


def strict_json(text: str | bytes) -> Any:
    """JSON as JSON defines it; ValueError for anything else, NaN and Infinity included
    (Python's extensions, which no other reader takes)."""
    return json.loads(text, parse_constant=_not_json)


def _not_json(constant: str) -> None:
    raise ValueError(constant)


def forwarded(
    name: str,
    send: Callable[[JSONObject], Coroutine[Any, Any, JSONValue]],
    *,
    summary: str,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None = None,
    description: str | None = None,
    search_terms: Iterable[str] = (),
    annotations: Mapping[str, bool] | None = None,
    timeout: float | None = None,
) -> Capability:
    """A capability whose calls are sent elsewhere, described by JSON Schemas.

    The program calls `name(...)` with a keyword argument per property of `input_schema`;
    the bound arguments become one JSON document, checked against the schema (the
    document the authorizer decides on and the audit records), and `send(document)`
    answers with JSON data. With `output_schema` the answer is checked against it
    (bounded, off the loop) and crosses as the type it declares; else it crosses whole.
    `send` runs on the loop the capability is made on, whatever loop a call comes from:
    a source makes its capabilities in `open` or `changes`, on the sources' loop. A
    failure of `send` that is not an `AgentError` is `capability failed`; `timeout`
    bounds one call in seconds. Raises RegistrationError for a name or a schema that
    cannot be used.
    """
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    try:
        namespace_, _, leaf = name.rpartition(".")
        name = capability_name(namespace_, leaf) if namespace_ else check_name(name)
        prefix = camel(leaf)
        arguments = signature(object_schema(dict(input_schema)), prefix)
        result: Any = Any
        output = None
        if output_schema is not None:
            output = validator(output_schema)
            result = Hints(output_schema, prefix).of(output_schema, prefix + "Result")
            t.check_supported(result)
    except (SchemaError, t.UnsupportedTypeError) as exc:
        raise RegistrationError(f'capability "{name}": {exc}') from None

    async def call(**document: Any) -> Any:
        started = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(timeout):
                answer = await (send(document) if loop is None else on_loop(loop, send(document)))
        except SourceClosed:
            raise AgentError(CLOSED) from None
        except TimeoutError:
            raise AgentError(TIMED_OUT.format(seconds=timeout or 0)) from None
        if output is not None:
            spent = asyncio.get_running_loop().time() - started
            left = None if timeout is None else timeout - spent
            try:
                error = await off_loop(functools.partial(output.first, answer), left)
            except Uncheckable:
                raise AgentError(UNCHECKABLE_RESULT) from None
            if error is not None:
                raise AgentError(UNDECLARED_RESULT)
        return answer

    text = clean(description or summary)
    return build(
        name,
        summary=clean(summary),
        description=text,
        search_terms=tuple(search_terms),
        call=call,
        arguments=arguments,
        result=result,
        timeout=timeout,
        hints=hints_of(annotations or {}),
    )


__all__ = [
    "CLOSED",
    "GRACE_SECONDS",
    "TIMED_OUT",
    "UNCHECKABLE_RESULT",
    "UNDECLARED_RESULT",
    "SourceClosed",
    "build",
    "capability_name",
    "check_folder",
    "check_options",
    "first_sentence",
    "forwarded",
    "hints_of",
    "namespace",
    "on_loop",
    "readable",
    "strict_json",
]
