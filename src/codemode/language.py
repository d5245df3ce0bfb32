"""The guest language surface, stated once: tool descriptions and docs quote it, and a
contract test checks it against the real interpreter and the documentation."""

from __future__ import annotations

MODULES: tuple[str, ...] = (
    "asyncio",
    "base64",
    "binascii",
    "bisect",
    "collections",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "functools",
    "hashlib",
    "itertools",
    "json",
    "math",
    "random",
    "re",
    "time",
    "tomllib",
    "typing",
    "unicodedata",
)
"""Standard library modules a program may import."""

MISSING_MODULES: tuple[str, ...] = (
    "abc",
    "enum",
    "fractions",
    "heapq",
    "inspect",
    "io",
    "operator",
    "pickle",
    "socket",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "textwrap",
    "threading",
    "urllib",
    "uuid",
)
"""Common modules that do not exist in the sandbox."""

SUPPORTED: tuple[str, ...] = (
    "functions, lambdas, closures, decorators",
    "comprehensions, f-strings, str.format and % formatting",
    "if/for/while, try/except/finally, raise, assert, with, match",
    "classes without base classes, @dataclass",
    "async def main() with await and asyncio.gather",
)
"""What works, in the words a model needs."""

UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("yield and generators", "build a list and return or loop over it"),
    (
        "class inheritance and custom exception classes",
        "use plain classes, dicts or raise built-in exceptions",
    ),
    ("del", "use dict.pop(key) or rebuild the list"),
    ("async with, async for, except*", "use await, for and except"),
    ("from module import *", "import the names you need"),
    ("open(), os.environ, network, subprocesses", "use the capabilities"),
)
"""What fails, each with the supported alternative."""


def surface() -> str:
    """The language surface as a few plain lines, for tool descriptions and docs."""
    lines = [
        "Language: a Python subset. Define def main(): (or async def main():) with no "
        "parameters; it returns one JSON-compatible value.",
        "Capabilities are ready-made namespaces: no import needed. Call them only inside "
        'main(), with keyword arguments: records.lookup(key="a"). In async def main(), '
        "await each call (or gather them).",
        "Works: " + "; ".join(SUPPORTED) + ".",
        "Not supported: " + "; ".join(f"{what} ({instead})" for what, instead in UNSUPPORTED) + ".",
        "Modules: " + ", ".join(MODULES) + ". Not available: " + ", ".join(MISSING_MODULES) + ".",
    ]
    return "\n".join(lines)


__all__ = ["MISSING_MODULES", "MODULES", "SUPPORTED", "UNSUPPORTED", "surface"]
