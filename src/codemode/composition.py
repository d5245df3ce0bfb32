"""What a program that calls saved programs is fed with: its sites, their closure, the appendix.

Each place the caller's text names `programs.<name>` (a site) is fed as `_p000017`, a
name as long as `programs`, so every position the interpreter reports holds for the text
as written. It names an instance of a guest class with two methods per saved program the
site reaches: the first calls the capability `programs.<name>` (bound, authorized as the
caller's subject, counted and audited as any call is: its handler hands the bound
arguments back), then has the second run the saved text, indented into it, and calls the
main it returns with them. A site's appended lines are that site's (`Entered`), so
whatever fails there is placed at the caller's line, and the saved text's own lines are
named (`Region`), never shown. The closure is walked before anything runs (each program
once): a cycle, a chain too deep or too many programs is refused there.

Model text is fed beside this code, so none of it may move or rebind it: a saved text
with a form feed or vertical tab outside a string, or any text naming what the code
binds (`_cm_...`, `_p000017`), is refused, and the code is parsed again once composed and
must have exactly the shape it was built with.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codemode import syntax
from codemode.capabilities import (
    RESERVED,
    RESPELLED,
    SAVE,
    SavedCapability,
    View,
    reserved_name,
    respelled,
)
from codemode.errors import PROGRAM_FILE, InvalidProgramError, Where
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
    """A closure that cannot run (the text says why), at the site it was walked from
    (None: the program as a whole)."""

    def __init__(self, text: str, site: Reach | None = None) -> None:
        super().__init__(text)
        self.site = site


class TooMany(Refused):
    """More programs than an execution may feed (said of the program as a whole)."""


TOO_MANY = (
    "the program calls saved programs in more than {limit} places (each program reached counts)"
)


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


def closures(
    sites: list[Reach], lines: list[str], view: View, saving: str | None, depth: int, most: int
) -> None:
    """Set each site's closure; `InvalidProgramError` at the site for a cycle or a chain
    deeper than `depth`, and of the program as a whole once more than `most` programs
    would be fed.

    Each program's closure is walked once (shared callees are read from what was walked),
    and the walk stops as soon as a bound is passed: its cost is the programs there are,
    not the paths through them nor the number of sites."""
    walked: dict[str, tuple[list[str], int]] = {}
    fed = 0
    try:
        if len(sites) > most:  # each site feeds one program at least
            raise TooMany(TOO_MANY.format(limit=most))
        for site in sites:
            try:
                site.closure = _closure(site.name, view, saving, depth, most, walked)
            except TooMany:
                raise
            except Refused as refused:
                refused.site = site
                raise
            fed += len(site.closure)
            if fed > most:
                raise TooMany(TOO_MANY.format(limit=most))
    except Refused as refused:
        raise refusal(str(refused), refused.site, lines) from None


def refusal(text: str, site: Reach | None, lines: list[str]) -> InvalidProgramError:
    """A closure that cannot run, at the caller's site it was reached from (if one)."""
    if site is None:
        return InvalidProgramError(text)
    where = where_of(site.span, lines)
    return InvalidProgramError(f"{where.render()}: {text}", where=where)


def unreserved(tree: ast.Module, lines: list[str]) -> None:
    """Refuse a caller's text that writes a name the code calling saved programs binds
    (`InvalidProgramError` where it is written): it could rebind what that code holds; or
    that spells `programs` in letters Python folds into it, which that code cannot find."""
    found = reserved_name(tree)
    respelt = respelled(tree, "\n".join(lines))
    if found is None and respelt is None:
        return
    if found is not None:
        node, text = found[1], RESERVED.format(name=found[0])
    else:
        assert respelt is not None
        node, text = respelt, RESPELLED.format(line=respelt.lineno)
    line = getattr(node, "lineno", 1)
    column = _characters(lines, line, getattr(node, "col_offset", 0))
    where = Where(PROGRAM_FILE, line, column, line, column, None, lines[line - 1])
    raise InvalidProgramError(f"{where.render()}: {text}", where=where)


def _closure(
    start: str,
    view: View,
    saving: str | None,
    depth: int,
    most: int,
    walked: dict[str, tuple[list[str], int]],
) -> list[str]:
    """The saved programs a call of `start` reaches, `start` first (in the order a walk
    meets them first); `walked` holds each program walked before: its closure and the
    length of its longest chain."""

    def visit(name: str, path: list[str]) -> tuple[list[str], int]:
        if name == saving:
            raise Refused(_cycle([saving, *path, saving]))
        if name in path:
            raise Refused(_cycle([*path[path.index(name) :], name]))
        found = walked.get(name)
        if len(path) >= depth or (found is not None and len(path) + found[1] > depth):
            raise Refused(f"{NAMESPACE}.{start} calls saved programs more than {depth} deep")
        if found is not None:
            return found
        capability = view[f"{NAMESPACE}.{name}"]
        assert isinstance(capability, SavedCapability)
        order, height = [name], 1
        for callee in sorted(capability.calls):
            if _saved(view, callee) or callee == saving:
                below, reach = visit(callee, [*path, name])
                order.extend(n for n in below if n not in order)
                height = max(height, reach + 1)
                if len(order) > most:
                    raise TooMany(TOO_MANY.format(limit=most))
        walked[name] = (order, height)
        return order, height

    return visit(start, [])[0]


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
    """The appendix: a guest class per site, its methods the programs it reaches.

    Each program `X` is two methods: `X(**arguments)` makes the entry call (its holder
    comes in with any positional argument, so every name a caller passes is an argument
    the entry binds) and hands the bound arguments to `_cm_X()`'s main, and `_cm_X()`
    runs the saved text and returns its main. The bound arguments live in the first,
    where the saved text cannot name or rebind them. The code is parsed again once built
    and must have exactly this shape, each saved text exactly its own statements (else
    `InvalidProgramError` at the site, naming the program that does not keep it).
    """
    code: list[str] = []
    renames, numbered, regions, entered = [], [], [], []
    for site in sites:
        node = site.node.value
        renames.append(
            Rename(
                node.lineno, _characters(lines, node.lineno, node.col_offset), _token(site.number)
            )
        )
        where = where_of(site.span, lines)
        numbered.append(
            Site(site.number, where.line, where.column, where.end_line, where.end_column)
        )
        first = len(code) + 1
        code.append(f"class _cm_c{site.number}:")
        for name in site.closure:
            code.extend(_entry(name))
            body = _body(_source(view, name))
            regions.append(Region(f"{NAMESPACE}.{name}", len(code) + 1, len(code) + len(body)))
            code.extend(body)
            code.append(_RETURN)
        code.append(f"{_token(site.number)} = _cm_c{site.number}()")
        entered.append(Entered(site.number, first, len(code)))
    after = ""
    if document is not None:  # host-written literals: the exact document authorized
        arguments = ", ".join(f"{key}={value!r}" for key, value in document.items())
        after = f"try:\n    {SAVE}({arguments})\nexcept Exception:\n    pass"
    text = "\n".join(code)
    if sites:
        try:
            _check(text, tuple((site.number, tuple(site.closure)) for site in sites), view)
        except Broken as broken:
            at = next(site for site in sites if broken.name in site.closure)
            raise refusal(str(broken), at, lines) from None
    return Appendix(
        text,
        after,
        tuple(renames),
        tuple(numbered),
        tuple(regions),
        tuple(entered),
        reserved=frozenset() if document is None else frozenset({SAVE}),
    )


def is_async(tree: ast.Module) -> bool:
    """Whether the program's main is `async def` (its calls are then awaited apart)."""
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return any(isinstance(n, ast.AsyncFunctionDef) for n in mains if n.name == "main")


class Broken(Exception):
    """Composed code that does not have the shape it was built with (a saved text that
    leaves the place it was put in): the program named does not run inside a caller."""

    def __init__(self, name: str) -> None:
        super().__init__(BROKEN.format(name=f"{NAMESPACE}.{name}"))
        self.name = name


BROKEN = "{name} does not keep its shape inside the program that calls it: save it again"
_RETURN = "        return main"


def _entry(name: str) -> tuple[str, ...]:
    """A program's entry method and the head of the method that runs its text."""
    return (
        f"    def {name}(*_cm_at, **_cm_kw):",
        f"        _cm_kw = {NAMESPACE}.{name}(*_cm_at[1:], **_cm_kw)",
        f"        return _cm_at[0]._cm_{name}()(**_cm_kw)",
        f"    def _cm_{name}(_cm_self):",
    )


def _source(view: View, name: str) -> str:
    capability = view[f"{NAMESPACE}.{name}"]
    assert isinstance(capability, SavedCapability)
    return capability.source


def _token(number: int) -> str:
    """The name site `number`'s `programs` is fed as: as long as `programs`."""
    return f"_p{number:06d}"


def _check(code: str, sites: tuple[tuple[int, tuple[str, ...]], ...], view: View) -> None:
    """Refuse composed code whose statements are not exactly those it was built from: per
    site a class holding two methods per program, the entry as written and a method that
    runs the saved text's own statements, then returns its main; then the site's
    instance. Each is a whole statement at module level, so the caller's statements
    before them stay as the caller wrote them. (Checked once per code: the last are kept.)"""
    sources = tuple((name, _source(view, name)) for _, closure in sites for name in closure)
    digest = hashlib.sha256(repr((code, sites, sources)).encode("utf-8", "surrogatepass"))
    key = digest.hexdigest()
    if key in _CHECKED:
        return
    _checked(code, sites, dict(sources))
    _CHECKED[key] = None
    while len(_CHECKED) > _CHECKED_KEPT:
        with contextlib.suppress(KeyError, StopIteration, RuntimeError):  # raced: fine
            del _CHECKED[next(iter(_CHECKED))]


_CHECKED: dict[str, None] = {}
_CHECKED_KEPT = 256


def _checked(
    code: str, sites: tuple[tuple[int, tuple[str, ...]], ...], source_of: dict[str, str]
) -> None:
    try:
        tree = syntax.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise Broken(sites[0][1][0]) from None
    body = iter(tree.body)
    for number, closure in sites:
        holder, instance = next(body, None), next(body, None)
        methods = holder.body if isinstance(holder, ast.ClassDef) else []
        shaped = (
            isinstance(holder, ast.ClassDef)
            and holder.name == f"_cm_c{number}"
            and not (holder.bases or holder.keywords or holder.decorator_list)
            and len(methods) == 2 * len(closure)
            and _dump(instance) == _dump(_statement(f"{_token(number)} = _cm_c{number}()"))
        )
        for index, name in enumerate(closure):
            enter, run = (methods[2 * index], methods[2 * index + 1]) if shaped else (None, None)
            if (
                _dump(enter) != _entry_dump(name)
                or not isinstance(run, ast.FunctionDef)
                or run.name != f"_cm_{name}"
                or run.decorator_list
                or run.returns is not None
                or _dump(run.args) != _RUN_ARGUMENTS
                or tuple(_dump(s) for s in run.body[:-1]) != _statements(source_of[name])
                or _dump(run.body[-1]) != _RETURN_MAIN
            ):
                raise Broken(name)
    if next(body, None) is not None:
        raise Broken(sites[-1][1][0])


def _dump(node: ast.AST | None) -> str:
    return "" if node is None else ast.dump(node)


def _statement(text: str) -> ast.stmt:
    statement: ast.stmt = syntax.parse(text).body[0]
    return statement


_RETURN_MAIN = ast.dump(ast.Return(ast.Name("main", ast.Load())))
_RUN_ARGUMENTS = ast.dump(ast.parse("def f(_cm_self): pass").body[0].args)  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=256)
def _entry_dump(name: str) -> str:
    return ast.dump(_statement("\n".join(line[4:] for line in _entry(name)[:3])))


@functools.lru_cache(maxsize=32)
def _statements(source: str) -> tuple[str, ...]:
    """A saved text's own statements as its method must hold them (its `programs` read as
    the method's holder)."""
    lines = _renamed_lines(source)
    return tuple(ast.dump(s) for s in syntax.parse("\n".join(lines)).body)


def _renamed_lines(source: str) -> list[str]:
    """A saved text's lines, its `programs.<name>` made calls of its holder's own methods
    (`_cm_self`, as long as `programs`: every column holds)."""
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
        lines[line - 1] = (data[:offset] + b"_cm_self" + data[offset + len(NAMESPACE) :]).decode()
    return lines


def _body(source: str) -> list[str]:
    """A saved program's lines indented into its method (line for line: its lines are
    named by their number)."""
    inside = _string_lines(source)
    return [
        text if number in inside or not text else "        " + text
        for number, text in enumerate(_renamed_lines(source), 1)
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
    "BROKEN",
    "NAMESPACE",
    "TOO_MANY",
    "Broken",
    "Reach",
    "Refused",
    "TooMany",
    "closures",
    "composed",
    "is_async",
    "reaches",
    "refusal",
    "unreserved",
    "where_of",
]
