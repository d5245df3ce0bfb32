"""Rules for dotted capability names and ids."""

from __future__ import annotations

import builtins
import difflib
import keyword
import sys
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
    """For `namespace.leaf`, which names nothing: the close name in that namespace, else
    what the namespace holds (names the program may see anyway)."""
    inside = sorted(
        {
            name[len(namespace) + 1 :].split(".", 1)[0]
            for name in capabilities
            if name.startswith(namespace + ".")
        }
    )
    if not inside:
        return None
    close = difflib.get_close_matches(leaf, inside, n=1, cutoff=0.7)
    if close:
        return f'did you mean "{namespace}.{close[0]}"?'
    return f"{namespace} has: {', '.join(inside[:40])}"


__all__ = ["RESERVED_ROOTS", "check_id", "check_name", "namespace_hint"]
