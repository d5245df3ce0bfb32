"""The documented language surface is the one the interpreter really has."""

from __future__ import annotations

import importlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codemode import AgentError, CodeMode, ErrorCode, Limits, language
from codemode.authz import AllowAll, AuthorizationRequest, Denied
from codemode.testing import ManualClock
from tests.conftest import GUARD, eventually, run_error

DOCS = Path(__file__).parents[2] / "docs" / "reference"

SUPPORTED_PROBES = {
    "functions, lambdas, closures, decorators": (
        "def deco(f):\n    return lambda: f() + 1\n@deco\ndef one():\n    return 1\n"
        "def main():\n    k = 2\n    add = lambda x: x + k\n    return add(one())"
    ),
    "comprehensions, f-strings, str.format and % formatting": (
        "def main():\n    xs = [i * i for i in range(3)]\n"
        "    return f'{xs}' + '{}'.format(1) + '%d' % 2"
    ),
    "generator expressions, built at once as a list: sum(x for x in xs), any(...)": (
        "def main():\n    xs = [1, 2, 3]\n    assert sum(x for x in xs) == 6\n"
        "    assert list(x * 2 for x in xs) == [2, 4, 6]\n"
        "    assert any(x > 2 for x in xs) and all(x > 0 for x in xs)\n"
        "    assert ','.join(str(x) for x in xs) == '1,2,3'\n"
        "    assert isinstance((x for x in xs), list)\n"
        "    return max(x for x in xs)"
    ),
    "if/for/while, try/except/finally, raise, assert, with, match": (
        "def main():\n    n = 0\n    while n < 3:\n        n += 1\n"
        "    try:\n        raise ValueError('x')\n    except ValueError:\n        n += 1\n"
        "    finally:\n        n += 1\n    assert n == 5\n"
        "    match n:\n        case 5:\n            return 'five'\n    return 'other'"
    ),
    "classes without base classes, @dataclass": (
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n"
        "class Q:\n    def __init__(self):\n        self.y = 2\n"
        "def main():\n    return P(1).x + Q().y"
    ),
    "async def main() with await and asyncio.gather": (
        "import asyncio\nasync def two():\n    return 2\n"
        "async def main():\n    return sum(await asyncio.gather(two(), two()))"
    ),
    "vars(obj) turns a result object into a dict (nested objects too), ready for json.dumps": (
        "import json\nfrom dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n"
        "def main():\n    assert vars(P(1)) == {'x': 1}\n    return json.dumps(vars(P(2)))"
    ),
    "time.sleep and asyncio.sleep, within the execution time": (
        "import asyncio\nimport time\nasync def main():\n    time.sleep(0.01)\n"
        "    await asyncio.sleep(0.01)\n    return 1"
    ),
}

UNSUPPORTED_PROBES = {
    "yield and yield from (generator functions)": (
        "def g():\n    yield 1\ndef h():\n    yield from [1]\ndef main():\n    return 1"
    ),
    "class inheritance and custom exception classes": "class E(Exception):\n    pass\ndef main():\n    return 1",
    "del": "def main():\n    d = {'a': 1}\n    del d['a']\n    return d",
    "async with, async for, except*": "async def main():\n    async with x:\n        pass",
    "from module import *": "from json import *\ndef main():\n    return 1",
    "open(), os.environ, network, subprocesses": "def main():\n    return open('/etc/hostname').read()",
    "dataclasses.asdict and dataclasses.fields": (
        "import dataclasses\ndef main():\n    return dataclasses.asdict(1)"
    ),
}


LACK_PROBES = {
    "re.VERBOSE, re.X": (
        "import re\ndef main():\n    return re.findall('a # x', 'a', re.VERBOSE)",
        "re.VERBOSE is not supported in the sandbox: start the pattern with (?x)",
    ),
    "a function as re.sub's replacement": (
        "import re\ndef main():\n    return re.sub('a', lambda m: 'b', 'a')",
        "pass a string replacement (\\1 is a group), or join the pieces of re.finditer",
    ),
    "str.format_map": (
        "def main():\n    return '{a}'.format_map({'a': 1})",
        "str.format_map() is not supported in the sandbox: use str.format(**mapping)",
    ),
    "str.maketrans, str.translate": (
        "def main():\n    return 'ab'.translate(str.maketrans('a', 'b'))",
        "str.maketrans is not supported in the sandbox: use str.replace",
    ),
    "a method as a value, key=str.lower": (
        "def main():\n    return sorted(['b', 'A'], key=str.lower)",
        "str.lower cannot be taken as a value: use a lambda, e.g. lambda x: x.lower()",
    ),
    "json.dumps(default=...)": (
        "import json\ndef main():\n    return json.dumps({1}, default=list)",
        "json.dumps takes no default=: convert the value first, e.g. vars(obj) or list(s)",
    ),
    "encodings but utf-8 and ascii": (
        "def main():\n    return b'a'.decode('latin-1')",
        "the sandbox has utf-8 and ascii only: use .decode('utf-8')",
    ),
    "int.from_bytes": (
        "def main():\n    return int.from_bytes(b'a', 'big')",
        "int.from_bytes is not supported in the sandbox: use int(b.hex(), 16)",
    ),
    "@property, @staticmethod, @classmethod": (
        "class A:\n    @property\n    def x(self):\n        return 1\ndef main():\n    return A().x",
        "use a plain method and call it: obj.name()",
    ),
}


@pytest.mark.parametrize("name", [what for what, _ in language.LACKS])
def test_each_listed_gap_fails_with_what_to_write_instead(cm: CodeMode, name: str) -> None:
    """What the description says the modules and types lack fails at its line, and the
    error says what to use, as the description does."""
    source, instead = LACK_PROBES[name]
    error = run_error(cm, source)
    assert error.code is ErrorCode.INVALID_PROGRAM and error.where is not None
    assert str(error).endswith(instead), str(error)


def test_every_listed_gap_has_a_probe() -> None:
    assert set(LACK_PROBES) == {what for what, _ in language.LACKS}


def test_surface_block_is_quoted_verbatim_in_the_docs() -> None:
    for page in ("errors.md", "mcp-tools.md"):
        assert f"```text\n{language.surface()}\n```" in (DOCS / page).read_text(), page


def test_every_statement_of_the_surface_has_a_probe() -> None:
    assert set(SUPPORTED_PROBES) == set(language.SUPPORTED)
    assert set(UNSUPPORTED_PROBES) == {what for what, _ in language.UNSUPPORTED}


@pytest.mark.parametrize("name", language.SUPPORTED)
def test_supported_constructs_run(cm: CodeMode, name: str) -> None:
    cm.execute(SUPPORTED_PROBES[name], subject="a")


@pytest.mark.parametrize("name", [what for what, _ in language.UNSUPPORTED])
def test_unsupported_constructs_are_invalid_programs(cm: CodeMode, name: str) -> None:
    assert run_error(cm, UNSUPPORTED_PROBES[name]).code is ErrorCode.INVALID_PROGRAM


@pytest.mark.parametrize(
    "source",
    [
        "def main():\n    def g():\n        yield 1\n    return list(g())",
        "def main():\n    def g():\n        yield from [1]\n    return list(g())",
    ],
)
def test_generator_functions_say_what_to_write_instead(cm: CodeMode, source: str) -> None:
    """Generator expressions run (built as a list); a generator function fails at its
    yield, in the description's words."""
    assert str(run_error(cm, source)) == (
        "invalid program: <codemode>:3:9: yield is not supported: build a list and return "
        "or loop over it"
    )


@pytest.mark.parametrize("module", language.MODULES)
def test_listed_modules_import(cm: CodeMode, module: str) -> None:
    cm.execute(f"import {module}\ndef main():\n    return 1", subject="a")


@pytest.mark.parametrize("module", language.MISSING_MODULES)
def test_missing_modules_do_not_import(cm: CodeMode, module: str) -> None:
    error = run_error(cm, f"def main():\n    import {module}\n    return 1")
    assert (
        str(error)
        == f"invalid program: <codemode>:2:5: ModuleNotFoundError: No module named '{module}'"
    )


def _missing(cm: CodeMode, setup: str, expressions: list[str]) -> list[str]:
    """Those of `expressions` the sandbox cannot evaluate (AttributeError or NameError)."""
    probes = "".join(
        f"    try:\n        {e}\n    except (AttributeError, NameError):\n"
        f"        out.append({e!r})\n    except Exception:\n        pass\n"
        for e in expressions
    )
    source = f"{setup}\ndef main():\n    out = []\n{probes}    return out"
    value = cm.execute(source, subject="a").value
    assert isinstance(value, list)
    return [str(e) for e in value]


def _gaps(cm: CodeMode) -> list[tuple[str, str]]:
    """(setup, expression) of every function and method of the listed surface that the
    real standard library has and the sandbox lacks."""
    gaps = []
    for module in language.MODULES:
        real = importlib.import_module(module)
        names = [f"{module}.{n}" for n in dir(real) if not n.startswith("_")]
        gaps += [(f"import {module}", e) for e in _missing(cm, f"import {module}", names)]
    for kind, literal in TYPES.items():
        names = [f"({literal}).{m}()" for m in dir(kind) if not m.startswith("_")]
        gaps += [("", e) for e in _missing(cm, "", names)]
    return gaps


TYPES: dict[type, str] = {
    str: "''",
    list: "[]",
    dict: "{}",
    int: "0",
    float: "0.0",
    tuple: "()",
    set: "set()",
    bytes: "b''",
}


def test_every_gap_of_the_listed_surface_says_it_is_not_supported(cm: CodeMode) -> None:
    """Walks every public function of every listed module and every method of the
    built-in types against the interpreter: what it lacks fails with a message that says
    so (and what to use instead, where the surface has an alternative)."""
    gaps = _gaps(cm)
    assert ("", "('').format_map()") in gaps
    for setup, expression in gaps:
        error = run_error(cm, f"{setup}\ndef main():\n    return {expression}")
        assert "is not supported in the sandbox" in str(error), (expression, str(error))


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            "def main():\n    return '{a}'.format_map({'a': 1})",
            "invalid program: <codemode>:2:12: AttributeError: 'str' object has no attribute "
            "'format_map'; str.format_map() is not supported in the sandbox: use "
            "str.format(**mapping)",
        ),
        (
            "import dataclasses\ndef main():\n    return dataclasses.asdict(1)",
            "invalid program: <codemode>:3:12: AttributeError: module 'dataclasses' has no "
            "attribute 'asdict'; dataclasses.asdict is not supported in the sandbox: use vars(obj)",
        ),
        (
            "def main():\n    return dir()",
            "invalid program: <codemode>:2:12: NameError: name 'dir' is not defined; dir() is "
            "not supported in the sandbox: describe_api lists a capability's fields; vars(obj) "
            "gives an object's",
        ),
        (
            "import os\ndef main():\n    return os.getenv('HOME')",
            "invalid program: <codemode>:3:12: RuntimeError: 'os.getenv' is not supported in "
            "this environment; the environment is not available in the sandbox: use the "
            "capabilities",
        ),
    ],
)
def test_unsupported_features_say_so_and_what_to_use(cm: CodeMode, source: str, text: str) -> None:
    assert str(run_error(cm, source)) == text


def test_sleep_waits_within_the_deadline_and_never_past_it(cm: CodeMode) -> None:
    """A sleep ends when the clock reaches its moment, not before; one past the deadline
    fails at once."""
    clock = ManualClock()
    with ThreadPoolExecutor(1) as callers, CodeMode(authorizer=AllowAll(), clock=clock) as timed:
        source = "import time\ndef main():\n    time.sleep(0.25)\n    return 1"
        answer = callers.submit(timed.execute, source, subject="a")
        assert eventually(lambda: clock.pending == 2)  # the execution's deadline and the sleep
        clock.advance(0.25 - 2**-10)  # binary fractions: the clock lands on the moment exactly
        assert clock.pending == 2
        clock.advance(2**-10)
        assert answer.result(GUARD).value == 1
    error = run_error(cm, "import time\ndef main():\n    time.sleep(60)\n    return 1")
    assert str(error) == "resource limit exceeded: execution time (limit 10 s) at <codemode>:3:5"
    error = run_error(cm, "import time\ndef main():\n    time.sleep(-1)\n    return 1")
    assert str(error) == (
        "invalid program: <codemode>:3:5: ValueError: sleep length must be non-negative"
    )


def test_the_statement_on_errors_is_true() -> None:
    """`language.CATCHING`, each claim run: a failed call is a RuntimeError and a denied one
    a PermissionError, both caught and read with error_data (None for the program's own);
    arguments that do not bind and a limit end the program inside `try` all the same."""

    def deny(request: AuthorizationRequest) -> None:
        if request.capability_name == "t.denied":
            raise Denied("no")

    with CodeMode(authorizer=deny, limits=Limits(max_calls_per_capability=3)) as cm:

        @cm.capability("t.get", summary="Get one.")
        def get(*, id: int) -> int:
            raise AgentError("no such one", kind="not_found")

        @cm.capability("t.denied", summary="Denied.")
        def denied() -> int:
            return 1

        caught = (
            "def main():\n    out = []\n"
            "    try:\n        t.get(id=1)\n    except RuntimeError as e:\n"
            "        out.append(error_data(e))\n"
            "    try:\n        t.denied()\n    except PermissionError as e:\n"
            "        out.append(error_data(e)['code'])\n"
            "    try:\n        [][0]\n    except IndexError as e:\n"
            "        out.append(error_data(e))\n"
            "    return out\n"
        )
        assert cm.execute(caught, subject="a").value == [
            {"code": "not_found", "status": None, "fields": {}},
            "permission_denied",
            None,
        ]
        unbound = "def main():\n    try:\n        t.get(id=str(1))\n    except Exception:\n        return 0\n"
        assert run_error(cm, unbound).code is ErrorCode.INVALID_ARGUMENTS
        limit = (
            "def main():\n    try:\n        for i in range(5):\n            try:\n"
            "                t.get(id=i)\n            except RuntimeError:\n                pass\n"
            "    except Exception:\n        return 0\n"
        )
        assert run_error(cm, limit).code is ErrorCode.RESOURCE_LIMIT
        deep = (
            "def f(n):\n    return f(n + 1)\n"
            "def main():\n    try:\n        f(0)\n    except RecursionError:\n"
            "        return 'caught'\n"
        )
        assert cm.execute(deep, subject="a").value == "caught"
