"""A submitted program, checked for its entry point and prepared as one feed.

The program is fed once, with a trailer after its last line that imports the capability
namespaces it mentions and calls `main()`. Nothing is prepended, so every line and column
the interpreter reports is a position in the program itself; frames past its last line
belong to the trailer and are never shown. Because the namespaces are imported only after
the module body ran, a capability reached while the module loads fails by construction.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from codemode.errors import PROGRAM_FILE, InvalidProgramError, Where

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASYNC_MAIN = re.compile(r"^async\s+def\s+main\s*\(", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Program:
    """A program ready to feed."""

    source: str
    lines: tuple[str, ...]
    is_async: bool
    roots: frozenset[str]
    """Capability namespaces the program mentions."""
    code: str
    """What is fed: the program, then the trailer."""
    functions: tuple[tuple[int, int, str], ...] = ()
    """(first line, last line, name) of every function the program defines."""

    def function_at(self, line: int) -> str:
        """The innermost function of the program around `line` ("<module>" outside any)."""
        inside = [(first, name) for first, last, name in self.functions if first <= line <= last]
        return max(inside)[1] if inside else "<module>"

    def where(
        self, line: int, column: int, end_line: int, end_column: int, func: str | None
    ) -> Where | None:
        """A Where for a position reported by the interpreter, or None if it is not ours."""
        if not 1 <= line <= len(self.lines):
            return None
        if end_line > len(self.lines) or end_line < line:
            end_line, end_column = line, len(self.lines[line - 1]) + 1
        return Where(PROGRAM_FILE, line, column, end_line, end_column, func, self.lines[line - 1])

    def where_at(self, start: int, end: int) -> Where | None:
        """A Where for a span of UTF-8 byte offsets into the fed code (a call site)."""
        line, column = self._line_column(start)
        end_line, end_column = self._line_column(end)
        return self.where(line, column, end_line, end_column, self.function_at(line))

    def _line_column(self, offset: int) -> tuple[int, int]:
        data = self.code.encode("utf-8")[:offset]
        line = data.count(b"\n") + 1
        last = data.rfind(b"\n") + 1
        return line, len(data[last:].decode("utf-8", errors="ignore")) + 1


def prepare(source: str, roots: frozenset[str]) -> Program:
    """Check the entry point and build the feed. Raises InvalidProgramError."""
    return _prepare(source, roots)


@functools.lru_cache(maxsize=256)
def _prepare(source: str, roots: frozenset[str]) -> Program:
    lines = tuple(source.splitlines())
    is_async, functions = _check_entry_point(source, lines)
    used = roots.intersection(_IDENTIFIER.findall(source))
    trailer = []
    if used:
        trailer.append("import " + ", ".join(sorted(used)))
    trailer.append("await main()" if is_async else "main()")
    code = source + ("\n" if source and not source.endswith("\n") else "") + "\n".join(trailer)
    return Program(source, lines, is_async, frozenset(used), code, functions)


def _check_entry_point(
    source: str, lines: tuple[str, ...]
) -> tuple[bool, tuple[tuple[int, int, str], ...]]:
    """Whether `main` is async, and the program's functions; raises when `main` is unusable.

    Python's own parser reads the program; where it cannot (syntax newer than the host's
    Python, or a syntax error), the interpreter decides and reports instead.
    """
    if "\x00" in source:
        raise InvalidProgramError("the program contains a NUL character")
    try:
        tree = ast.parse(source, filename=PROGRAM_FILE)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return bool(_ASYNC_MAIN.search(source)), ()
    main: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main":
            main = node
        elif _binds_main(node):
            main = None
    if main is None:
        raise InvalidProgramError("the program must define main(): add def main(): at top level")
    a = main.args
    if a.posonlyargs or a.args or a.vararg or a.kwonlyargs or a.kwarg:
        line = main.lineno
        where = Where(
            PROGRAM_FILE,
            line,
            main.col_offset + 1,
            line,
            len(lines[line - 1]) + 1,
            "<module>",
            lines[line - 1],
        )
        raise InvalidProgramError(f"{where.render()}: main() must take no parameters", where=where)
    functions = tuple(
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )
    return isinstance(main, ast.AsyncFunctionDef), functions


def _binds_main(node: ast.stmt) -> bool:
    """A top-level statement that rebinds `main` to something other than a function."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    elif isinstance(node, ast.ClassDef):
        return node.name == "main"
    return any(isinstance(target, ast.Name) and target.id == "main" for target in targets)


__all__ = ["Program", "prepare"]
