"""The documented language surface is the one the interpreter really has."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode import CodeMode, ErrorCode, language
from tests.conftest import run_error

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
}

UNSUPPORTED_PROBES = {
    "yield and generators": "def g():\n    yield 1\ndef main():\n    return 1",
    "class inheritance and custom exception classes": "class E(Exception):\n    pass\ndef main():\n    return 1",
    "del": "def main():\n    d = {'a': 1}\n    del d['a']\n    return d",
    "async with, async for, except*": "async def main():\n    async with x:\n        pass",
    "from module import *": "from json import *\ndef main():\n    return 1",
    "open(), os.environ, network, subprocesses": "def main():\n    return open('/etc/hostname').read()",
}


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
