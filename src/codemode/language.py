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
    "zoneinfo",
)
"""Common modules that do not exist in the sandbox."""

SUPPORTED: tuple[str, ...] = (
    "functions, lambdas, closures, decorators",
    "comprehensions, f-strings, str.format and % formatting",
    "generator expressions, built at once as a list: sum(x for x in xs), any(...)",
    "if/for/while, try/except/finally, raise, assert, with, match",
    "classes without base classes, @dataclass",
    "async def main() with await and asyncio.gather",
    "vars(obj) turns a result object into a dict (nested objects too), ready for json.dumps",
    "time.sleep and asyncio.sleep, within the execution time",
)
"""What works, in the words a model needs."""

UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("yield and yield from (generator functions)", "build a list and return or loop over it"),
    (
        "class inheritance and custom exception classes",
        "use plain classes, dicts or raise built-in exceptions",
    ),
    ("del", "use dict.pop(key) or rebuild the list"),
    ("async with, async for, except*", "use await, for and except"),
    ("from module import *", "import the names you need"),
    ("dataclasses.asdict and dataclasses.fields", "use vars(obj)"),
    ("open(), os.environ, network, subprocesses", "use the capabilities"),
)
"""What fails, each with the supported alternative."""


INSTEAD: dict[str, str] = {
    "str.format_map": "use str.format(**mapping)",
    "str.translate": "use str.replace",
    "str.maketrans": "use str.replace",
    "int.from_bytes": "use int(b.hex(), 16)",
    "re.VERBOSE": "start the pattern with (?x)",
    "re.X": "start the pattern with (?x)",
    "int.bit_length": "use len(bin(abs(n))) - 2",
    "float.is_integer": "use x == int(x)",
    "dataclasses.asdict": "use vars(obj)",
    "dataclasses.astuple": "use tuple(vars(obj).values())",
    "dataclasses.fields": "use list(vars(obj))",
    "dataclasses.replace": "build a new object, or a dict: {**vars(obj), 'field': value}",
    "collections.OrderedDict": "use dict, which keeps insertion order",
    "collections.ChainMap": "merge dicts with {**a, **b}",
    "functools.cmp_to_key": "use sorted(items, key=...)",
    "functools.wraps": "leave it out",
    "functools.total_ordering": "sort with key=",
    "functools.cached_property": "use a plain method",
    "re.subn": "use re.sub, and len(re.findall(...)) to count",
    "json.JSONEncoder": "use json.dumps",
    "json.JSONDecoder": "use json.loads",
    "typing.NamedTuple": "use @dataclass or a dict",
    "datetime.UTC": "use datetime.timezone.utc",
    "asyncio.create_task": "use asyncio.gather",
    "asyncio.wait_for": "await the call; the execution time limit bounds it",
    "asyncio.as_completed": "use asyncio.gather",
    "dir": "describe_api lists a capability's fields; vars(obj) gives an object's",
    "vars": "call it on an object: vars(obj)",
    "callable": "check with isinstance",
    "issubclass": "use isinstance",
    "input": "a program has no input: pass values in its source",
    "exit": "return from main()",
    "globals": "use a dict of your own",
}
"""What to use instead of a function or method the sandbox lacks, where one exists."""

LACKS: tuple[tuple[str, str], ...] = (
    ("re.VERBOSE, re.X", INSTEAD["re.VERBOSE"]),
    ("a function as re.sub's replacement", r"use a string one, \1 for a group"),
    ("str.format_map", INSTEAD["str.format_map"]),
    ("str.maketrans, str.translate", INSTEAD["str.maketrans"]),
    ("a method as a value, key=str.lower", "use key=lambda s: s.lower()"),
    ("json.dumps(default=...)", "convert the value first: vars(obj), list(s)"),
    ("encodings but utf-8 and ascii", "decode as utf-8"),
    ("int.from_bytes", INSTEAD["int.from_bytes"]),
    ("@property, @staticmethod, @classmethod", "use plain methods"),
)
"""What the listed modules and built-in types lack, each with what to write instead (in
`INSTEAD`'s words where an error gives the same alternative)."""


CATCHING = (
    "Errors: a call that fails raises RuntimeError, one denied or not approved "
    "PermissionError; a program can catch them, and error_data(e) gives a caught one as "
    'data: {"code": ..., "status": ..., "fields": {...}} (for a REST call its HTTP status '
    "and the fields its error body declares; None for any other exception). Arguments "
    "that do not bind, and every limit, end the program: no except catches them (but "
    "recursion depth, a RecursionError, as in Python)."
)
"""Which errors a program can catch, and how it reads one as data."""


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
        "Missing from the modules and types: "
        + "; ".join(f"{what} ({instead})" for what, instead in LACKS)
        + ".",
        "Modules: " + ", ".join(MODULES) + ". Not available: " + ", ".join(MISSING_MODULES) + ".",
        CATCHING,
    ]
    return "\n".join(lines)


__all__ = [
    "CATCHING",
    "INSTEAD",
    "LACKS",
    "MISSING_MODULES",
    "MODULES",
    "SUPPORTED",
    "UNSUPPORTED",
    "surface",
]
