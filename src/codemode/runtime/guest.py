"""What the program may ask of the host besides capabilities: `vars()`, `error_data()`,
`progress()`, sleeps, and the answer to a name it never defined. Pure functions of the program's own
values and of the failures its own calls raised."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from codemode.errors import CodeModeError, Where
from codemode.limits import Limits
from codemode.runtime.progress import Progress, bounded
from codemode.runtime.sandbox import Answer, Call, Injected, Returned
from codemode.values import (
    CrossingError,
    TooBigError,
    TooDeepError,
    kind_of,
    object_fields,
    to_json,
)


def vars_of(call: Call, limits: Limits) -> Answer:
    """`vars(obj)`: a result object (or a dataclass the program built) as the dict that
    returning it gives, nested objects included."""
    if len(call.args) != 1 or call.kwargs:
        return Injected("TypeError", "vars() takes one object: a result object or a dataclass")
    if object_fields(call.args[0]) is None:
        return Injected("TypeError", _not_an_object(call.args[0]))
    try:
        value = to_json(
            call.args[0],
            max_depth=limits.max_value_depth,
            root="vars()",
            max_bytes=limits.max_result_bytes,
        )
    except (TooDeepError, TooBigError):
        return Injected("ValueError", "vars() of an object this large is not supported")
    except CrossingError as problem:
        return Injected("TypeError", f"{problem.path} {problem.reason}")
    return Returned(value)


def error_data(call: Call, raised: Sequence[tuple[Where, str, str, CodeModeError]]) -> Answer:
    """`error_data(e)`: a caught call failure as data (`{"code", "status", "fields"}`), or
    None for any other exception or value.

    pydantic-monty gives the program's exception only its type and message, so the failure
    is known again by both, among those this execution's own calls raised (`raised`, the
    latest first): an exception the program builds with the same text gets the data of
    its own call that raised it, and never anything another execution or the host holds."""
    if len(call.args) != 1 or call.kwargs:
        return Injected("TypeError", "error_data() takes one exception: error_data(e)")
    exc = call.args[0]
    if not isinstance(exc, BaseException):
        return Returned(None)
    said = (type(exc).__name__, str(exc))
    for _, exc_type, message, error in reversed(raised):
        if (exc_type, message) == said:
            return Returned(error.data())
    return Returned(None)


PROGRESS_PARAMETERS = ("message", "done", "total")
"""`progress`'s parameters, in order: each may be given by position or by name, as the
signature the model reads suggests."""


def progress_call(call: Call, progress: Progress | None) -> Answer:
    """`progress(message, done=None, total=None)`: tell whoever watches the run how far it
    is. None, always; a no-op when no one watches, so a program runs the same on every
    client. It is not a capability call: nothing of the host answers it."""
    given = _progress_arguments(call.args, call.kwargs)
    message = None if given is None else given.get("message")
    if given is None or not isinstance(message, str):
        return Injected(
            "TypeError", "progress() takes a message string, and optional done and total numbers"
        )
    done, total = given.get("done"), given.get("total")
    if not (_amount(done) and _amount(total)):
        return Injected("ValueError", "progress() done and total must be numbers of 0 or more")
    if total is not None and done is None:
        return Injected("ValueError", "progress() takes total only with done")
    if progress is not None:
        progress.reported(
            bounded(message),
            None if done is None else float(done),
            None if total is None else float(total),
        )
    return Returned(None)


def _progress_arguments(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The arguments bound to `progress`'s parameters as Python binds them, or None when
    they do not bind (too many, an unknown name, one given twice)."""
    if len(args) > len(PROGRESS_PARAMETERS):
        return None
    given: dict[str, Any] = dict(zip(PROGRESS_PARAMETERS, args, strict=False))
    for name, value in kwargs.items():
        if name not in PROGRESS_PARAMETERS or name in given:
            return None
        given[name] = value
    return given


def _amount(value: object) -> bool:
    """Whether `done` or `total` is absent, or a finite number of 0 or more (an integer
    too large for a float, `10**400`, is not one: a note carries floats)."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        number = float(value)
    except OverflowError:
        return False
    return math.isfinite(number) and number >= 0


def sleep_problem(seconds: object) -> Injected | None:
    """What is wrong with a sleep's length, if anything."""
    if isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0:
        return None
    return Injected("ValueError", "sleep length must be a non-negative number")


def undefined(name: str) -> Injected:
    """The error for a call to a name the program never defined (the name is its own)."""
    module, _, attribute = name.rpartition(".")
    if module:
        return Injected("AttributeError", f"module '{module}' has no attribute '{attribute}'")
    return Injected("NameError", f"name '{name}' is not defined")


def _not_an_object(value: object) -> str:
    """What vars() says of a value it cannot turn into a dict (named by its kind only)."""
    if isinstance(value, dict):
        return "vars() got a dict, which is already one: use it as it is"
    if isinstance(value, list | tuple):
        return "vars() got a list: turn each item, [vars(x) for x in items]"
    return f"vars() takes a result object or a dataclass, not {kind_of(value)}"


__all__ = ["error_data", "sleep_problem", "undefined", "vars_of"]
