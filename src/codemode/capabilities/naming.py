"""Rules for dotted capability names and ids."""

from __future__ import annotations

import builtins
import keyword
import sys
from collections import Counter
from collections.abc import Iterable

from codemode.errors import RegistrationError

RESERVED_ROOTS: frozenset[str] = frozenset(
    {name for name in dir(builtins) if not name.startswith("_")}
    | set(sys.stdlib_module_names)
    | {"main"}
)
"""Names a capability namespace may not take: the guest's builtins, its standard library
modules and the entry point, so that a program's `json.loads` or `len` keeps its meaning."""


def check_name(name: object) -> str:
    """Return `name` if it is a valid dotted capability name, else raise RegistrationError."""
    if not isinstance(name, str):
        raise RegistrationError(f"capability name must be a string, not {name!r}")
    segments = name.split(".")
    if len(segments) < 2:
        raise RegistrationError(
            f'capability "{name}": name needs a namespace and a name, e.g. "records.lookup"'
        )
    for segment in segments:
        if not segment.isidentifier() or not segment.isascii():
            raise RegistrationError(
                f'capability "{name}": segment "{segment}" is not a Python identifier'
            )
        if keyword.iskeyword(segment) or keyword.issoftkeyword(segment):
            raise RegistrationError(f'capability "{name}": segment "{segment}" is a keyword')
        if segment.startswith("_"):
            raise RegistrationError(
                f'capability "{name}": segment "{segment}" must not start with "_"'
            )
    if segments[0] in RESERVED_ROOTS:
        raise RegistrationError(
            f'capability "{name}": namespace "{segments[0]}" is a builtin or standard '
            "library name of the guest language"
        )
    return name


def check_id(capability_id: object, name: str) -> str:
    """Return a valid capability id (non-empty, no surrounding whitespace)."""
    if (
        not isinstance(capability_id, str)
        or not capability_id
        or capability_id != capability_id.strip()
    ):
        raise RegistrationError(
            f'capability "{name}": id must be a non-empty string without surrounding whitespace'
        )
    return capability_id


def namespace_hint(namespace: str, leaf: str, capabilities: Iterable[str]) -> str | None:
    """For `namespace.leaf`, which names nothing: the likely spelling of it in that
    namespace, else what the namespace holds (names the program may see anyway)."""
    inside = sorted(
        {
            name[len(namespace) + 1 :].split(".", 1)[0]
            for name in capabilities
            if name.startswith(namespace + ".")
        }
    )
    if not inside:
        return None
    close = likely_spelling(leaf, inside)
    if close:
        return f'did you mean "{namespace}.{close}"?'
    return f"{namespace} has: {', '.join(inside[:40])}"


def capability_hint(name: str, capabilities: Iterable[str]) -> str | None:
    """For a capability name that names none of `capabilities` (those the caller sees):
    the likely spelling of it, else what its namespace holds, else nothing."""
    names = sorted(set(capabilities))
    namespace, _, leaf = name.rpartition(".")
    hint = namespace_hint(namespace, leaf, names) if namespace else None
    if hint is None:
        close = likely_spelling(name, names)
        hint = f'did you mean "{close}"?' if close else None
    return hint


def likely_spelling(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate `word` most likely misspells, or None.

    A misspelling is a few edits away for its length (a quarter of its letters, at least
    one; a swap of two letters is one edit), and keeps its verb: the first word of its
    last segment (`delete` in `fs.delete_file`) is the candidate's, or a misspelling of
    it (`wirte`, `gt`), so `delete_file` never suggests `edit_file`, nor `set_user`
    `get_user`."""
    if len(word) > 200:
        return None
    verb = _verb(word)
    letters = Counter(word)
    best: tuple[int, str] | None = None
    for candidate in sorted(set(candidates) - {word}):
        # Cheapest first: the length alone rules most out, then the short verbs, then the
        # letters they do not share (each edit mends at most one).
        allowed = _allowed(word, candidate)
        if best is not None:
            allowed = min(allowed, best[0] - 1)
        if abs(len(word) - len(candidate)) > allowed or not _same_verb(verb, _verb(candidate)):
            continue
        shared = (letters & Counter(candidate)).total()
        if max(len(word), len(candidate)) - shared > allowed:
            continue
        distance = edit_distance(word, candidate, allowed)
        if distance <= allowed:
            best = (distance, candidate)
    return best[1] if best else None


def _verb(name: str) -> str:
    return name.rsplit(".", 1)[-1].split("_", 1)[0]


def _allowed(a: str, b: str) -> int:
    return max(1, max(len(a), len(b)) // 4)


def _same_verb(a: str, b: str) -> bool:
    """A verb and a misspelling of it: a quarter of its letters changed, or one letter
    dropped, doubled or swapped with its neighbour (`gt`, `gett`, `gte` are `get`; `set`
    is another verb)."""
    if abs(len(a) - len(b)) > _allowed(a, b):
        return False
    distance = edit_distance(a, b)
    if distance <= max(len(a), len(b)) // 4:
        return True
    return distance == 1 and (len(a) != len(b) or sorted(a) == sorted(b))


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """The edits that make `a` into `b`: insertions, deletions, substitutions and swaps of
    two neighbouring letters (optimal string alignment). With `limit`, counting stops
    once every alignment needs more (the answer is then some number above it)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        if limit is not None and min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]


__all__ = [
    "RESERVED_ROOTS",
    "capability_hint",
    "check_id",
    "check_name",
    "edit_distance",
    "likely_spelling",
    "namespace_hint",
]
