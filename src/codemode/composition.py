"""What a program that calls saved programs is fed with: its sites, their closure, the appendix.

Each place the caller's text names `programs.<name>` (a site) is fed as `_p000017`, a
name as long as `programs`, so every position the interpreter reports holds for the text
as written. It names an instance of a guest class with one method per saved program the
site reaches: the method first calls the capability `programs.<name>` (bound, authorized
as the caller's subject, counted and audited as any call is: its handler hands the bound
arguments back), then runs the saved text, indented into it, and returns its
`main(**arguments)`. A site's appended lines are that site's (`Entered`), so whatever
fails there is placed at the caller's line, and the saved text's own lines are named
(`Region`), never shown. The closure is walked before anything runs: a cycle or a chain
too deep is refused there.
"""

from __future__ import annotations

import ast
import contextlib
import io
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codemode import syntax
from codemode.capabilities import SAVE, SavedCapability, View
from codemode.errors import PROGRAM_FILE, Where
from codemode.runtime import Appendix, Entered, Region, Rename, Site

NAMESPACE = "programs"
"""The capability namespace of saved programs (reserved while saved programs are on)."""


@dataclass(slots=True)
class Reach:
    """One place in the caller's text that names a saved program."""

    number: int
    name: str
    node: ast.Attribute
    span: ast.expr
    closure: list[str] = field(default_factory=list)


class Refused(Exception):
    """A closure that cannot run (the text says why)."""


def reaches(tree: ast.Module, view: View) -> list[Reach]:
    """Each `programs.<name>` in the caller's text that names a saved program (or the
    save), in source order, numbered from 1."""
    found = []
    calls = {
        id(node.func): node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == NAMESPACE
            and (node.attr == "save" or _saved(view, node.attr))
        ):
            found.append((node, calls.get(id(node), node)))
    found.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    return [Reach(n, node.attr, node, span) for n, (node, span) in enumerate(found, 1)]


def _saved(view: View, name: str) -> bool:
    """Whether `programs.<name>` is a saved program of this view."""
    return isinstance(view.get(f"{NAMESPACE}.{name}"), SavedCapability)


def closure(start: str, view: View, saving: str | None, depth: int) -> list[str]:
    """The saved programs a call of `start` reaches, `start` first; `Refused` for a
    cycle (through the program being saved too) or a chain deeper than `depth`."""
    order: list[str] = []

    def visit(name: str, path: list[str]) -> None:
        if name == saving:
            raise Refused(_cycle([saving, *path, saving]))
        if name in path:
            raise Refused(_cycle([*path[path.index(name) :], name]))
        if len(path) >= depth:
            raise Refused(f"{NAMESPACE}.{start} calls saved programs more than {depth} deep")
        if name not in order:
            order.append(name)
        capability = view[f"{NAMESPACE}.{name}"]
        assert isinstance(capability, SavedCapability)
        for callee in sorted(capability.calls):
            if _saved(view, callee) or callee == saving:
                visit(callee, [*path, name])

    visit(start, [])
    return order


def _cycle(names: list[str]) -> str:
    through = ", ".join(f"{NAMESPACE}.{n}" for n in names[1:-1])
    text = f"{NAMESPACE}.{names[0]} calls itself"
    return f"{text} through {through}" if through else text


def where_of(node: ast.expr, lines: list[str]) -> Where:
    """Where a node of the caller's text is, as the runtime places one."""
    line, end_line = node.lineno, node.end_lineno or node.lineno
    column = _characters(lines, line, node.col_offset)
    end_column = _characters(lines, end_line, node.end_col_offset or 0)
    return Where(PROGRAM_FILE, line, column, end_line, end_column, None, lines[line - 1])


def _characters(lines: list[str], line: int, byte_offset: int) -> int:
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1


def composed(
    sites: list[Reach], lines: list[str], view: View, document: Mapping[str, Any] | None
) -> Appendix:
    """The appendix: a guest class per site, its methods the programs it reaches."""
    code: list[str] = []
    renames, numbered, regions, entered = [], [], [], []
    for site in sites:
        node = site.node.value
        renames.append(
            Rename(node.lineno, _characters(lines, node.lineno, node.col_offset), _token(site))
        )
        where = where_of(site.span, lines)
        numbered.append(
            Site(site.number, where.line, where.column, where.end_line, where.end_column)
        )
        first = len(code) + 1
        code.append(f"class _cm_c{site.number}:")
        for name in site.closure:
            capability = view[f"{NAMESPACE}.{name}"]
            assert isinstance(capability, SavedCapability)
            code.append(f"    def {name}(_cm, **_cm_kw):")
            code.append(f"        _cm_kw = {NAMESPACE}.{name}(**_cm_kw)")
            body = _body(capability.source)
            regions.append(Region(f"{NAMESPACE}.{name}", len(code) + 1, len(code) + len(body)))
            code.extend(body)
            code.append("        return main(**_cm_kw)")
        code.append(f"{_token(site)} = _cm_c{site.number}()")
        entered.append(Entered(site.number, first, len(code)))
    after = ""
    if document is not None:  # host-written literals: the exact document authorized
        arguments = ", ".join(f"{key}={value!r}" for key, value in document.items())
        after = f"try:\n    {SAVE}({arguments})\nexcept Exception:\n    pass"
    return Appendix(
        "\n".join(code),
        after,
        tuple(renames),
        tuple(numbered),
        tuple(regions),
        tuple(entered),
    )


def is_async(tree: ast.Module) -> bool:
    """Whether the program's main is `async def` (its calls are then awaited apart)."""
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return any(isinstance(n, ast.AsyncFunctionDef) for n in mains if n.name == "main")


def _token(site: Reach) -> str:
    """The name a site's `programs` is fed as: as long as `programs`."""
    return f"_p{site.number:06d}"


def _body(source: str) -> list[str]:
    """A saved program's lines indented into its method, its `programs.<name>` calls made
    calls of the method's own (line for line: its lines are named by their number)."""
    lines = source.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tree = syntax.parse(source)
    spots = sorted(
        (
            (node.value.lineno, node.value.col_offset)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == NAMESPACE
        ),
        reverse=True,
    )
    for line, offset in spots:
        data = lines[line - 1].encode("utf-8")
        lines[line - 1] = (data[:offset] + b"_cm" + data[offset + len(NAMESPACE) :]).decode()
    inside = _string_lines(source)
    return [
        text if number in inside or not text else "        " + text
        for number, text in enumerate(lines, 1)
    ]


def _string_lines(source: str) -> set[int]:
    """The lines that continue a string begun on an earlier line (left as written)."""
    inside: set[int] = set()
    with contextlib.suppress(tokenize.TokenError, SyntaxError):
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
    return inside


__all__ = [
    "NAMESPACE",
    "Reach",
    "Refused",
    "closure",
    "composed",
    "is_async",
    "reaches",
    "where_of",
]
