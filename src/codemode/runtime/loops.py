"""The code the interpreter is fed: each loop between markers, so a time-limit trip can be placed.

pydantic-monty 1.4.0 ends a program whose interpreter time runs out with a `TimeoutError`
that carries no frames, and leaves the program's globals as they were. So a line before
each loop pushes the loop's first line onto a list in the globals (keeping the list's
length in a variable of its own), and lines after the loop and before each `return` inside
it cut the list back to that length: after a time-limit trip the list holds every loop the
program was inside, innermost last, and the host reads it with one more feed of the same
session. Entering a loop costs a push; going round it costs nothing.

An `except` inside a loop cuts the list back too, since an exception may have left loops
below it. No marker holds an exception handler: a `with` or `try` around a loop would move
the line the interpreter reports an exception at (it reports where its handler left off).
A marker sits on a line of its own, or, before a `return` that shares its line (`if x:
return y`), inside that line; `Marked` maps every position back. An exception caught
outside every loop of its function leaves the entries of the loops it left until the
caller's loop around it ends.
"""

from __future__ import annotations

import ast
import bisect
import functools
import io
import re
import tokenize
from dataclasses import dataclass

from codemode import syntax

LOOPS = "codemode_loops_"
"""The global holding the first lines of the loops the program is inside, innermost last."""

_LENGTH = "codemode_len_"
"""The global the markers measure the list with: the program may name its own `len`."""
_PRELUDE = f"{LOOPS} = []; {_LENGTH} = len"
BIND_LENGTH = f"{_LENGTH} = len"
"""Fed before a new session's first program, while `len` is still the built-in: a later
program of the session may find `len` rebound by an earlier one, so its markers measure
with this one (`going_on`)."""
MARKERS = re.compile(rf"{LOOPS}|{_LENGTH}|codemode_[0-9]+_")
"""Every global the markers may leave: their list, their `len`, the length a loop outside
any function measured the list at. None of it is the program's state."""
_LOOP_NODES = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


Row = tuple[int, int, int, int]
"""A fed line: its line in the code (0 for the prelude), and where a marker was put inside
it: at which character, at which UTF-8 byte, how many characters (0, 0, 0 for none)."""


@dataclass(frozen=True, slots=True)
class Marked:
    """Code ready to feed, and the way back from its positions to the code's own."""

    code: str
    """What the interpreter is fed."""
    loops: frozenset[int] = frozenset()
    """The first line of every marked loop, in the code's own lines."""
    rows: tuple[Row, ...] = ()
    """One per fed line; a marker's own line has the line of the statement it stands
    before (or, after a loop, the loop's last line). Empty when nothing was marked."""
    fed_starts: tuple[int, ...] = ()
    """UTF-8 offset of each fed line."""
    starts: tuple[int, ...] = ()
    """UTF-8 offset of each line of the code."""

    def position(self, line: int, column: int) -> tuple[int, int] | None:
        """The code's own (line, column) of a fed one; None inside the prelude."""
        if not self.rows or not 1 <= line <= len(self.rows):
            return line, column
        own, at, _, added = self.rows[line - 1]
        return None if own == 0 else (own, _back(column - 1, at, added) + 1)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The code's own UTF-8 offsets of a fed span (a call expression)."""
        return self._offset(start), self._offset(end)

    def _offset(self, offset: int) -> int:
        if not self.rows:
            return offset
        row = bisect.bisect_right(self.fed_starts, offset) - 1
        own, _, at, added = self.rows[row]
        if own == 0:
            return 0
        return self.starts[own - 1] + _back(offset - self.fed_starts[row], at, added)


def _back(index: int, at: int, added: int) -> int:
    """A 0-based index into a fed line, in the line as written (inserted text -> `at`)."""
    return index - added if index >= at + added else min(index, at)


@functools.lru_cache(maxsize=256)
def mark(code: str) -> Marked:
    """`code` with each of its loops marked, or as it is when it has none (or cannot be
    parsed here, or starts with a `from __future__` import, which must stay first)."""
    tree = _tree(code)
    if tree is None:
        return Marked(code)
    starts = _logical_starts(code)
    if starts is None:
        return Marked(code)
    marks = _Marks(code.split("\n"), starts)
    marks.walk(tree.body, ())
    if not marks.loops:
        return Marked(code)
    return marks.marked()


class _Marks:
    """The markers of one piece of code, gathered by walking its statements."""

    def __init__(self, lines: list[str], starts: frozenset[int]) -> None:
        self.lines = lines
        self.starts = starts
        """The lines a logical line starts on, at their first character."""
        self.ordered = sorted(starts)
        self.loops: set[int] = set()
        self.before: dict[int, list[str]] = {}
        self.after: dict[int, list[str]] = {}
        self.inline: dict[int, tuple[int, str]] = {}
        """Line -> (UTF-8 column, text): a marker inside a line (`if x: return y`)."""

    def walk(self, body: list[ast.stmt], enclosing: tuple[int, ...]) -> None:
        """Mark the loops of `body`, inside `enclosing` loops of the same function."""
        for node in body:
            if isinstance(node, _LOOP_NODES):
                line, indent = node.lineno, _indent(self.lines[node.lineno - 1])
                length = f"codemode_{line}_"
                self.loops.add(line)
                self.before.setdefault(line, []).append(
                    f"{indent}{length} = {_LENGTH}({LOOPS}); {LOOPS}.append({line})"
                )
                end = self._logical_end(node.end_lineno or line)
                self.after.setdefault(end, []).insert(0, f"{indent}{LOOPS}[{length}:] = []")
                self.walk(node.body, (*enclosing, line))
                self.walk(node.orelse, (*enclosing, line))  # its entry stays until the end
            elif isinstance(node, ast.Return):
                if enclosing:  # leaving every loop of the function at once
                    self._cut(node, f"codemode_{enclosing[0]}_")
            elif isinstance(node, _SCOPES):
                self.walk(getattr(node, "body", []), ())
            else:
                for field in ("body", "orelse", "finalbody"):
                    self.walk(getattr(node, field, []), enclosing)
                for handler in getattr(node, "handlers", []):
                    if enclosing and handler.body:  # an exception may have left inner loops
                        self._cut(handler.body[0], f"codemode_{enclosing[-1]}_ + 1")
                    self.walk(handler.body, enclosing)
                for case in getattr(node, "cases", []):
                    self.walk(case.body, enclosing)

    def _logical_end(self, line: int) -> int:
        """The last line of the logical line that ends a statement on `line`: a backslash
        may carry it onto a blank or comment line, which the marker after it must follow."""
        after = bisect.bisect_right(self.ordered, line)
        return self.ordered[after] - 1 if after < len(self.ordered) else len(self.lines)

    def _cut(self, node: ast.stmt, length: str) -> None:
        """Cut the list back to `length` just before `node` runs."""
        text = self.lines[node.lineno - 1]
        cut = f"{LOOPS}[{length}:] = []"
        indent = _indent(text)
        if len(indent) == node.col_offset and node.lineno in self.starts:  # a line of its own
            self.before.setdefault(node.lineno, []).append(indent + cut)
        else:  # one cut per line: a later one is a `return`'s (deeper), at the first place
            at = min(self.inline.get(node.lineno, (node.col_offset,))[0], node.col_offset)
            self.inline[node.lineno] = (at, cut + "; ")

    def marked(self) -> Marked:
        fed, rows = [_PRELUDE], [(0, 0, 0, 0)]
        for number, text in enumerate(self.lines, start=1):
            for extra in self.before.get(number, ()):
                fed.append(extra)
                rows.append((number, 0, 0, 0))
            row: Row = (number, 0, 0, 0)
            if number in self.inline:
                at, extra = self.inline[number]
                data = text.encode("utf-8", errors="surrogatepass")
                head = data[:at].decode("utf-8", errors="surrogatepass")
                row = (number, len(head), at, len(extra))
                text = head + extra + text[len(head) :]
            fed.append(text)
            rows.append(row)
            for extra in self.after.get(number, ()):
                fed.append(extra)
                rows.append((number, 0, 0, 0))
        return Marked(
            "\n".join(fed), frozenset(self.loops), tuple(rows), _starts(fed), _starts(self.lines)
        )


def _tree(code: str) -> ast.Module | None:
    try:
        with syntax.LOCK:
            tree = compile(
                code,
                "<codemode>",
                "exec",
                flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                dont_inherit=True,
            )
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body)
    return None if future else tree


def _logical_starts(code: str) -> frozenset[int] | None:
    """The lines whose first character starts a logical line (not one a backslash or a
    bracket carries on), or None for code that does not tokenize."""
    starts: set[int] = set()
    fresh = True
    skipped = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.NEWLINE:
                fresh = True
            elif token.type not in skipped:
                if fresh:  # after a NEWLINE, a token starts its physical line too
                    starts.add(token.start[0])
                fresh = False
    except (tokenize.TokenError, SyntaxError):
        return None
    return frozenset(starts)


def _indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


def _starts(lines: list[str]) -> tuple[int, ...]:
    offsets, at = [], 0
    for text in lines:
        offsets.append(at)
        at += len(text.encode("utf-8", errors="surrogatepass")) + 1
    return tuple(offsets)


def going_on(code: str) -> str:
    """Marked `code` as a program that goes on from a session's state is fed: its prelude
    keeps the `len` the session bound first (`BIND_LENGTH`), and the line keeps its
    length, so every position after it stays where it was."""
    if not code.startswith(_PRELUDE + "\n"):
        return code
    return f"{LOOPS} = []".ljust(len(_PRELUDE)) + code[len(_PRELUDE) :]


__all__ = ["BIND_LENGTH", "LOOPS", "MARKERS", "Marked", "going_on", "mark"]
