"""What the program may ask of the host besides capabilities: `vars()`, sleeps, and the
answer to a name it never defined. Pure functions of the program's own values."""

from __future__ import annotations

import math

from codemode.limits import Limits
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


__all__ = ["sleep_problem", "undefined", "vars_of"]
