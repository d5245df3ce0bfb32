"""The value main() returned, crossing out of the sandbox as JSON within its limits.

The interpreter hands over a fresh copy of the value, which no one else holds. When it is
plain JSON data (dicts with string keys, lists, and exact str, int, bool, None and finite
floats), it crosses as it is: `plain_size` checks and measures it a level at a time, each
level in a few passes of C (a type for every item, a join of the strings, the repr of
the numbers), and it is not copied. Anything it is not sure of (a tuple, an object, a wide
int, a suspect string, nesting as deep as the limit, a size near the bound) is left to
`to_json_sized`'s walk, which decides and words every refusal; the fast path answers
only where that walk would give the same value and size and raise nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Set
from itertools import chain, compress, repeat
from operator import is_, itemgetter, methodcaller
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
    digits_size,
    floats_size,
    json_size,
    texts_size,
    to_json_sized,
)


def returned(
    value: Any, program: Program, run: Run, capabilities: Mapping[str, object], limits: Limits
) -> tuple[JSONValue, int]:
    """The returned value as JSON and its size in bytes; a value that cannot cross, or is
    too big or too deep, stops the execution at the `return` (StopError)."""
    where = program.returned

    def suspect(text: str) -> bool:
        return text in capabilities or (text.startswith("<") and bool(VALUE_TEXT.fullmatch(text)))

    written = plain_size(value, limits, capabilities.keys(), suspect)
    if written is not None:
        result: JSONValue = value
    else:
        result, written = _walked(value, program, run, suspect, limits)
    if written is None:
        written = json_size(result)  # text UTF-8 cannot hold: refused as it always was
    if written > limits.max_return_bytes:
        raise StopError(
            exceeded(LimitKind.RETURN_VALUE_SIZE, limits, amount=size(written), where=where)
        )
    return result, written


def _walked(
    value: Any, program: Program, run: Run, suspect: Callable[[str], bool], limits: Limits
) -> tuple[JSONValue, int | None]:
    """`to_json_sized`'s walk of the value, its errors as the program is told them."""
    where = program.returned
    texts: list[tuple[str, str]] = []
    try:
        result, written = to_json_sized(
            value,
            max_depth=limits.max_value_depth,
            root="result",
            max_bytes=limits.max_return_bytes,
            suspect=suspect,
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
    return result, written


_NARROW = 1 << 59
"""As `values._NARROW`: ints within it spend their digits in `to_json_sized`'s bound."""
_STARTS_TAG = methodcaller("startswith", "<")


def plain_size(
    value: Any, limits: Limits, names: Set[str], suspect: Callable[[str], bool]
) -> int | None:
    """The JSON size of `value` when it is a dict or list of plain JSON data that
    `to_json_sized` would give back equal and measure alike, raising nothing: no string
    in it is suspect (a capability's name, a text the interpreter makes of a function or
    a call), no container is as deep as the limit, and the bytes its walk would spend
    stay within the bound. None otherwise (the walk decides).

    Each level's containers, then their items grouped by exact type, are checked and
    measured together: `spent` is the lower bound the walk spends on the way (so that no
    level is ever gathered past it), `written` the bytes of the JSON text, each value
    with a comma after it and each container less the comma after its last item.
    """
    kind = type(value)
    if kind is not dict and kind is not list:
        return None
    bound = limits.max_return_bytes
    spent = written = 0
    level: list[Any] = [value]
    depth = 0
    while level:
        if depth >= limits.max_value_depth:
            return None  # the walk says how deep (or that a container holds itself)
        count = len(level)
        lengths = list(map(len, level))
        spent += 2 * count
        written += 2 * count + lengths.count(0)
        if spent + sum(lengths) > bound:  # every item spends a byte at least
            return None
        kinds = list(map(type, level))
        if kinds.count(kinds[0]) == count:
            dicts, lists = (level, []) if kinds[0] is dict else ([], level)
        else:
            dicts, lists = _of(level, kinds, dict), _of(level, kinds, list)
        groups = [list(chain.from_iterable(lists))] if lists else []
        if dicts:
            entries = _entries(dicts, lengths if not lists else None)
            if entries is None:
                return None
            key_spent, key_written, values = entries
            spent += key_spent
            written += key_written
            groups.extend(values)
        level = []
        for group in groups:
            if not group:
                continue
            kinds = list(map(type, group))
            first = kinds[0]
            present = {first} if kinds.count(first) == len(group) else set(kinds)
            for kind in present:
                of_kind = group if len(present) == 1 else _of(group, kinds, kind)
                if kind is dict or kind is list:
                    level.extend(of_kind)
                    continue
                measured = _scalars(kind, of_kind, names, suspect)
                if measured is None:
                    return None
                spent += measured[0]
                written += measured[1]
        if spent > bound:
            return None
        depth += 1
    return written - 1


def _entries(
    dicts: list[dict[Any, Any]], lengths: list[int] | None
) -> tuple[int, int, list[list[Any]]] | None:
    """What the keys of `dicts` spend and write (each with its colon), and their values in
    groups: a column for each key when every dict has the same keys (rows, mostly: each
    column then holds one type), else all of them together. None for a key that is not
    an exact str, or one UTF-8 cannot write. `lengths` has each dict's, when known."""
    sizes = set(lengths if lengths is not None else map(len, dicts))
    if len(sizes) == 1:
        keys = list(dicts[0])
        if keys and all(type(key) is str for key in keys):
            try:  # as many keys as the first, and each of them: the same keys
                columns = [list(map(itemgetter(key), dicts)) for key in keys]
            except KeyError:
                pass
            else:
                measured = _keys(keys)
                if measured is None:
                    return None
                return measured[0] * len(dicts), measured[1] * len(dicts), columns
    keys = list(chain.from_iterable(dicts))
    if set(map(type, keys)) - {str}:
        return None
    measured = _keys(keys)
    if measured is None:
        return None
    return measured[0], measured[1], [list(chain.from_iterable(map(dict.values, dicts)))]


def _keys(keys: list[str]) -> tuple[int, int] | None:
    joined = "".join(keys)
    written = texts_size(joined, len(keys))
    if written is None:
        return None
    return len(joined) + 3 * len(keys), written + len(keys)


def _scalars(
    kind: type, items: list[Any], names: Set[str], suspect: Callable[[str], bool]
) -> tuple[int, int] | None:
    """What items of exactly `kind`, a JSON scalar, spend and write; None when the walk
    may say otherwise of one of them."""
    n = len(items)
    if kind is str:
        joined = "".join(items)
        written = texts_size(joined, n)
        if written is None or _suspected(items, joined, names, suspect):
            return None
        return len(joined) + 3 * n, written + n
    if kind is int:
        if min(items) <= -_NARROW or max(items) >= _NARROW:
            return None  # measured otherwise, or refused
        digits = digits_size(items)
        return digits, digits + n
    if kind is bool:
        return 2 * n, 6 * n - items.count(True)  # true and a comma, or false and one
    if kind is type(None):
        return 2 * n, 5 * n
    if kind is float and all(map(math.isfinite, items)):
        return 2 * n, floats_size(items) + n
    return None


def _of(items: list[Any], kinds: list[type], kind: type) -> list[Any]:
    """The items of exactly `kind` (`kinds` has each item's type), in one pass of C."""
    return list(compress(items, map(is_, kinds, repeat(kind))))


def _suspected(
    texts: list[str], joined: str, names: Set[str], suspect: Callable[[str], bool]
) -> bool:
    """Whether the walk would report any of `texts` (`joined` is their concatenation): a
    capability's name, or a text that opens as a tag does and that `suspect` picks."""
    if not names.isdisjoint(texts):
        return True
    if "<" not in joined:
        return False
    return any(map(suspect, filter(_STARTS_TAG, texts)))


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


__all__ = ["plain_size", "returned"]
