"""The value main() returned, crossing out of the sandbox as JSON within its limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.errors import InvalidProgramError
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.runtime.classify import StopError
from codemode.runtime.program import RETURNED, Program
from codemode.runtime.sandbox import Run
from codemode.types import JSONValue
from codemode.values import (
    FUNCTION_TEXT,
    VALUE_TEXT,
    CrossingError,
    TooBigError,
    TooDeepError,
    json_size,
    to_json_sized,
)


def returned(
    value: Any, program: Program, run: Run, capabilities: Mapping[str, object], limits: Limits
) -> tuple[JSONValue, int]:
    """The returned value as JSON and its size in bytes; a value that cannot cross, or is
    too big or too deep, stops the execution at the `return` (StopError)."""
    where = program.returned
    texts: list[tuple[str, str]] = []
    try:
        result, written = to_json_sized(
            value,
            max_depth=limits.max_value_depth,
            root="result",
            max_bytes=limits.max_return_bytes,
            suspect=lambda text: (
                text in capabilities or (text.startswith("<") and bool(VALUE_TEXT.fullmatch(text)))
            ),
            suspects=texts,
        )
        if "type" not in program.names:  # the check asks the program's own `type`
            _check_texts(run, texts)
    except TooDeepError:
        raise StopError(exceeded(LimitKind.VALUE_DEPTH, limits, where=where)) from None
    except TooBigError:
        raise StopError(exceeded(LimitKind.RETURN_VALUE_SIZE, limits, where=where)) from None
    except CrossingError as problem:
        text = f"main() returned a value that is not JSON: {problem.path} {problem.reason}"
        if where is not None:
            text = f"{where.render()}: {text}"
        raise StopError(InvalidProgramError(text, where=where)) from None
    if written is None:
        written = json_size(result)  # text UTF-8 cannot hold: refused as it always was
    if written > limits.max_return_bytes:
        raise StopError(
            exceeded(LimitKind.RETURN_VALUE_SIZE, limits, amount=size(written), where=where)
        )
    return result, written


def _check_texts(run: Run, texts: list[tuple[str, str]]) -> None:
    """The interpreter hands some values main() returned over as text (a function, a call
    never awaited, a capability itself): of the strings at `texts` (path, text) that read
    so, those that were such values in the program are not JSON (CrossingError)."""
    if not texts:
        return
    names = run.type_names([RETURNED + path[len("result") :] for path, _ in texts])
    for (path, text), name in zip(texts, names or (), strict=False):
        if name == "str":
            continue
        if name == "coroutine":
            what = "a capability call that was never awaited (await it)"
        elif (found := FUNCTION_TEXT.fullmatch(text)) is not None:
            what = f"the {found[1]} function"
        else:
            what = f"the capability {text} itself, not called"
        raise CrossingError(path, f"is {what}, which JSON cannot hold")


__all__ = ["returned"]
