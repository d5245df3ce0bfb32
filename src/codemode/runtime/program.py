"""A submitted program, checked before it runs and prepared as one feed.

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
import types
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from codemode import preflight, syntax
from codemode.capabilities import Capability, ShapeBook, Shown, outline, shown_to
from codemode.errors import (
    PROGRAM_FILE,
    UNCAUGHT_CHECK,
    CodeModeError,
    InvalidArgumentsError,
    InvalidProgramError,
    Where,
)
from codemode.runtime.appendix import Appendix, Entered, Located, Region, Rename, Site, fed, imports
from codemode.runtime.hints import Known, Vocabulary

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINE_END = re.compile(r"\r\n?")
"""The line ends an editor may write besides \n. Python's parser counts them, the
interpreter only \n, and neither counts \f, \x85 or \u2028 (which stay as written)."""
_ASYNC_MAIN = re.compile(r"^async\s+def\s+main\s*\(", re.MULTILINE)
NO_MAIN = "the program must define main(): add def main(): at top level"
RETURNED = "codemode_returned_"
"""The global the trailer keeps main()'s value in, for checks after the program ran."""


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
    names: frozenset[str] = frozenset()
    """Every name the program binds (for did-you-mean)."""
    keys: frozenset[str] = frozenset()
    """String keys the program writes in subscripts and dict displays."""
    returned: Where | None = None
    """The value of main()'s only `return`, when it has exactly one: where a value main()
    returned comes from."""
    tries: tuple[tuple[int, int, int, int], ...] = ()
    """(first, last line of a `try` body; first, last line of one of its `except` bodies):
    an exception that passes an `except` that does not match it is reported by the
    interpreter at a line of that `except`'s body, not where it was raised."""
    appendix: Appendix | None = None
    """Guest code fed after the program (`Appendix`), if any."""
    appended: int = 0
    """The fed line just before the appendix's first (its lines are numbered past it)."""
    imported: frozenset[str] = frozenset()
    """The namespaces the fed code imports: `roots`, and those its appendix mentions."""
    after: int = 0
    """The first fed line of the appendix's code after main() (`Appendix.after`)."""

    def hidden(self, name: str, offset: int) -> bool:
        """Whether a call of capability `name` made at UTF-8 byte offset `offset` of the fed
        code must be answered as a name that names nothing: one the appendix reserves for
        its code after main(), made anywhere else (`Appendix.reserved`)."""
        if self.appendix is None or name not in self.appendix.reserved:
            return False
        return self.line_at(offset) < self.after

    def tried(self, line: int) -> bool:
        """Whether `line` lies in a `try` body with an `except`: a program that fails there
        may believe it handles what only ends it."""
        return _in_try(line, self.tries)

    def function_at(self, line: int) -> str:
        """The innermost function of the program around `line` ("<module>" outside any)."""
        return _function_at(self.functions, line)

    def where(
        self, line: int, column: int, end_line: int, end_column: int, func: str | None
    ) -> Where | None:
        """A Where for a position reported by the interpreter, or None if it is not ours."""
        return _where(self.lines, line, column, end_line, end_column, func)

    def where_at(self, start: int, end: int) -> Where | None:
        """A Where for a span of UTF-8 byte offsets into the fed code (a call site); in
        appended code that runs for a site (`Appendix.entered`), that site's."""
        line, column = self._line_column(start)
        if line > len(self.lines):
            return self.entered_at(line)
        end_line, end_column = self._line_column(end)
        return self.where(line, column, end_line, end_column, self.function_at(line))

    def line_at(self, offset: int) -> int:
        """The fed line a UTF-8 byte offset into the fed code is on."""
        return self._line_column(offset)[0]

    def entered_at(self, line: int) -> Where | None:
        """The program's site a fed line past the program runs for, if any."""
        if self.appendix is None:
            return None
        at = line - self.appended
        for entered in self.appendix.entered:
            if entered.first <= at <= entered.last:
                return self.site(entered.site)
        return None

    def located(self, line: int) -> Located | None:
        """The text and its own line that a fed line past the program holds, if an
        appended region holds it (a line of the trailer or of glue code holds none)."""
        if self.appendix is None:
            return None
        at = line - self.appended
        for region in self.appendix.regions:
            if region.first <= at <= region.last:
                return Located(region.name, region.line + at - region.first)
        return None

    def site(self, number: int) -> Where | None:
        """Where in the program the appendix's site `number` is, or None if it names none."""
        if self.appendix is None:
            return None
        for site in self.appendix.sites:
            if site.number == number:
                return self.where(
                    site.line,
                    site.column,
                    site.end_line,
                    site.end_column,
                    self.function_at(site.line),
                )
        return None

    def _line_column(self, offset: int) -> tuple[int, int]:
        data = self.code.encode("utf-8", errors="surrogatepass")[:offset]
        line = data.count(b"\n") + 1
        last = data.rfind(b"\n") + 1
        return line, len(data[last:].decode("utf-8", errors="ignore")) + 1


def normalized(source: str) -> str:
    """The program as an editor shows it, done once at intake so the parser, the
    interpreter and an editor number lines alike: every line end as \n (\r\n and a lone
    \r too), and no byte-order mark before its first line (as Python reads a file)."""
    return _LINE_END.sub("\n", source.removeprefix("\ufeff"))


def split_lines(source: str) -> tuple[str, ...]:
    """The lines of a `normalized` program, as every position numbers them."""
    lines = source.split("\n")
    if lines[-1] == "":
        lines.pop()
    return tuple(lines)


def _where(
    lines: tuple[str, ...], line: int, column: int, end_line: int, end_column: int, func: str | None
) -> Where | None:
    if not 1 <= line <= len(lines):
        return None
    if end_line > len(lines) or end_line < line:
        end_line, end_column = line, len(lines[line - 1]) + 1
    return Where(PROGRAM_FILE, line, column, end_line, end_column, func, lines[line - 1])


def _function_at(functions: tuple[tuple[int, int, str], ...], line: int) -> str:
    inside = [(first, name) for first, last, name in functions if first <= line <= last]
    return max(inside)[1] if inside else "<module>"


@dataclass(frozen=True, slots=True)
class Refused:
    """A program the preflight refuses: the one error `execute` raises, and each mistake
    as an error of its own (what `check` lists)."""

    error: CodeModeError
    each: tuple[CodeModeError, ...]


Learned = Callable[[], tuple[int, Mapping[str, preflight.Outline]]]
"""The learned shapes worth checking, by capability name, and their version: a program
checked under one version is checked again once the version changes."""


def learned_outlines(book: ShapeBook, capabilities: Mapping[str, Capability]) -> Learned:
    """The shapes `book` learned of these capabilities that the preflight may check
    (`ShapeBook.reader`), each with the results it was learned from, which a message
    names (as of the version: counts alone never change it)."""
    read = book.reader(capabilities)
    kept: list[tuple[int, Mapping[str, preflight.Outline]]] = []

    def outlines() -> tuple[int, Mapping[str, preflight.Outline]]:
        version, nodes = read()
        if kept and kept[0][0] == version:
            return kept[0]
        found = {}
        for name, node in nodes.items():
            learned = book.learned(capabilities[name])
            results = book.checked_after if learned is None else learned.results
            found[name] = preflight.Outline(node, results)
        kept[:] = [(version, types.MappingProxyType(found))]
        return kept[0]

    return outlines


class Programs:
    """Prepared programs by source, for one set of capabilities (small LRU cache).

    The preflight checks a result's reads by its capability's declared type (outlined
    once per set of capabilities) and by the shapes `outlines` answers, if given; a
    declared shape is the one checked where both exist. `shown` says which learned
    names the reader may see in a message; with `subjects` (a book's `digest`), a
    program prepared for a subject names only what that subject may see (a name seen
    in one other subject's results never reaches it), each subject's verdict kept apart.
    """

    def __init__(
        self,
        capabilities: Mapping[str, Capability],
        size: int = 256,
        outlines: Learned | None = None,
        shown: Shown | None = None,
        subjects: Callable[[str], str] | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.roots = frozenset(name.split(".", 1)[0] for name in capabilities)
        self.size = size
        self.outlines = outlines
        self.shown = shown
        self.subjects = subjects
        self._cache: OrderedDict[tuple[str, int, str, Appendix | None], Program | Refused] = (
            OrderedDict()
        )

    @classmethod
    def learning(
        cls, capabilities: Mapping[str, Capability], book: ShapeBook, subject: str | None = None
    ) -> Programs:
        """Programs that check the shapes `book` learned of these capabilities too: for
        `subject` alone when given (what `check` runs), else for whichever subject each
        `prepare` names (the engine's, one per view)."""
        if subject is not None:
            shown = shown_to(book.digest(subject))
            return cls(capabilities, outlines=learned_outlines(book, capabilities), shown=shown)
        return cls(
            capabilities, outlines=learned_outlines(book, capabilities), subjects=book.digest
        )

    @functools.cached_property
    def declared(self) -> Mapping[str, preflight.Outline]:
        """The outline of every declared result type that has a level to check."""
        found = {}
        for name, capability in self.capabilities.items():
            node = outline(capability.result_annotation)
            if node is not None:
                found[name] = preflight.Outline(node)
        return types.MappingProxyType(found)

    def _shapes(self) -> tuple[int, Mapping[str, preflight.Outline], bool]:
        """The version of the learned shapes, every outline to check, and whether any
        of them is learned (so its names depend on who reads them)."""
        if self.outlines is None:
            return 0, self.declared, False
        version, learned = self.outlines()
        if not learned:
            return version, self.declared, False
        return version, {**learned, **self.declared}, True

    @functools.cached_property
    def vocabulary(self) -> Vocabulary:
        """What these capabilities name, for hints (built on the first failure that needs it)."""
        return Vocabulary.of(self.capabilities.values())

    def known(self, program: Program, results: Mapping[str, Any] | None = None) -> Known:
        """What `program` may be naming, for did-you-mean, and what its calls gave it (not
        what its appendix alone calls: to the program, that names nothing)."""
        vocabulary, capabilities = self.vocabulary, self.capabilities
        hidden = frozenset() if program.appendix is None else program.appendix.reserved
        if hidden.intersection(capabilities):
            capabilities = {n: c for n, c in capabilities.items() if n not in hidden}
            vocabulary = Vocabulary.of(capabilities.values())
        return Known(
            vocabulary,
            program.names,
            program.keys,
            self.roots,
            capabilities,
            program.source,
            types.MappingProxyType(dict(results or {})),
        )

    def prepare(
        self,
        source: str,
        subject: str | None = None,
        *,
        learned: bool = True,
        appendix: Appendix | None = None,
    ) -> Program:
        """The program ready to feed, or the InvalidProgram/InvalidArguments error;
        `subject`: who runs it (the learned names it may read in a message). `learned`
        false checks against declared shapes alone: a program resumed after a pause was
        checked when it started, and a shape learned meanwhile must not refuse it halfway.
        `appendix`: guest code fed with it (the checks read the program alone)."""
        found = self._prepared(normalized(source), subject, learned, appendix)
        if isinstance(found, Refused):
            raise found.error.replace()
        return found

    def check(self, source: str) -> list[CodeModeError]:
        """Each mistake the preflight is sure of, as an error of its own with its `where`,
        in source order; a syntax error as Python's parser words it (the interpreter
        refuses the program too). Empty when there is nothing to report."""
        source = normalized(source)
        found = self._prepared(source)
        if isinstance(found, Refused):
            return [error.replace() for error in found.each]
        problem = _syntax_error(source)
        return [] if problem is None else [problem]

    def _prepared(
        self,
        source: str,
        subject: str | None = None,
        learning: bool = True,
        appendix: Appendix | None = None,
    ) -> Program | Refused:
        version, shapes, learned = self._shapes() if learning else (0, self.declared, False)
        shown, digest = self.shown, ""
        if learned and subject is not None and self.subjects is not None:
            digest = self.subjects(subject)
            shown = shown_to(digest)
        key = (source, version, digest, appendix)
        found = self._cache.get(key)
        if found is None:
            found = self._prepare(source, shapes, shown, appendix)
            self._cache[key] = found
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return found

    def _prepare(
        self,
        source: str,
        shapes: Mapping[str, preflight.Outline],
        shown: Shown | None,
        appendix: Appendix | None = None,
    ) -> Program | Refused:
        lines = split_lines(source)
        if "\x00" in source:
            error = InvalidProgramError("the program contains a NUL character")
            return Refused(error, (error,))
        try:
            tree: ast.Module | None = syntax.parse(source, filename=PROGRAM_FILE)
        except SyntaxError as error:
            if error.msg in preflight.PARSER_NESTING:  # the interpreter's bound is lower
                return _error([_nesting(error, lines)], lines, (), no_main=False)
            tree = None  # newer syntax or a syntax error: the interpreter decides
        except (RecursionError, MemoryError):  # deeper than Python's own parser goes
            deep = InvalidProgramError(preflight.NESTED_TOO_DEEPLY)
            return Refused(deep, (deep,))
        except ValueError:
            tree = None
        functions: tuple[tuple[int, int, str], ...] = ()
        names: frozenset[str] = frozenset()
        keys: frozenset[str] = frozenset()
        returned: Where | None = None
        tries: tuple[tuple[int, int, int, int], ...] = ()
        if tree is None:
            is_async = bool(_ASYNC_MAIN.search(source))
        else:
            nested = preflight.too_deep(tree, lines)
            if nested is not None:  # refused first: the other checks would recurse as deep
                return _error([nested], lines, (), no_main=False)
            found = preflight.scan(tree)
            main, problems = preflight.entry_point(tree, lines)
            problems += preflight.check(
                tree, lines, self.capabilities, found, outlines=shapes, shown=shown
            )
            functions = tuple(found.functions)
            if problems or main is None:
                ordered = sorted(dict.fromkeys(problems), key=lambda p: (p.line, p.column))
                refused = _error(ordered, lines, functions, no_main=main is None)
                return _uncaught(refused, _tries(tree))
            is_async = isinstance(main, ast.AsyncFunctionDef)
            names, keys = frozenset(found.bound), frozenset(found.keys)
            returned = _returned(main, lines)
            tries = _tries(tree)
        used = self.roots.intersection(_IDENTIFIER.findall(source))
        code, appended, after = fed(source, lines, is_async, used, RETURNED, self.roots, appendix)
        return Program(
            source,
            lines,
            is_async,
            frozenset(used),
            code,
            functions,
            names,
            keys,
            returned,
            tries,
            appendix,
            appended,
            imports(frozenset(used), self.roots, appendix),
            after,
        )


def _uncaught(refused: Refused, tries: tuple[tuple[int, int, int, int], ...]) -> Refused:
    """A refusal of calls only, the first in a `try` body, says that no `except` would
    have caught it: the program never ran."""
    error, where = refused.error, refused.error.where
    if not isinstance(error, InvalidArgumentsError) or where is None:
        return refused
    if not _in_try(where.line, tries):
        return refused
    return Refused(error.replace(note=UNCAUGHT_CHECK), refused.each)


def _in_try(line: int, tries: tuple[tuple[int, int, int, int], ...]) -> bool:
    return any(first <= line <= last for first, last, _, _ in tries)


def _tries(tree: ast.Module) -> tuple[tuple[int, int, int, int], ...]:
    """Where each `try` statement's body and its handlers are (see `Program.tries`)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try | ast.TryStar):
            continue
        for handler in node.handlers:
            found.append(
                (
                    node.body[0].lineno,
                    node.body[-1].end_lineno or node.body[-1].lineno,
                    handler.body[0].lineno,
                    handler.body[-1].end_lineno or handler.body[-1].lineno,
                )
            )
    return tuple(found)


def _returned(main: ast.FunctionDef | ast.AsyncFunctionDef, lines: tuple[str, ...]) -> Where | None:
    """The value of main()'s only `return <value>` (not counting nested functions)."""
    found: list[ast.expr] = []
    stack: list[ast.AST] = list(main.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    if len(found) != 1:
        return None
    value = found[0]
    line, end_line = value.lineno, value.end_lineno or value.lineno
    column = _characters(lines, line, value.col_offset)
    end_column = _characters(lines, end_line, value.end_col_offset or 0)
    return _where(lines, line, column, end_line, end_column, main.name)


def _characters(lines: tuple[str, ...], line: int, byte_offset: int) -> int:
    """The 1-based character column of an ast byte offset."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1


def _error(
    problems: list[preflight.Problem],
    lines: tuple[str, ...],
    functions: tuple[tuple[int, int, str], ...],
    *,
    no_main: bool,
) -> Refused:
    """One error listing every problem, one per line, `where` on the first; and each
    problem alone."""
    rendered = [f"{PROGRAM_FILE}:{p.line}:{p.column}: {p.message}" for p in problems]
    wheres = [
        _where(lines, p.line, p.column, p.end_line, p.end_column, _function_at(functions, p.line))
        for p in problems
    ]
    each: list[CodeModeError] = [
        (InvalidArgumentsError if p.kind == "arguments" else InvalidProgramError)(text, where=where)
        for p, text, where in zip(problems, rendered, wheres, strict=True)
    ]
    if no_main:
        rendered.append(NO_MAIN)
        each.append(InvalidProgramError(NO_MAIN))
    kind = (
        InvalidArgumentsError
        if problems and not no_main and all(p.kind == "arguments" for p in problems)
        else InvalidProgramError
    )
    return Refused(kind("\n".join(rendered), where=wheres[0] if wheres else None), tuple(each))


def _nesting(error: SyntaxError, lines: tuple[str, ...]) -> preflight.Problem:
    """One of Python's parser's nesting bounds, where it tripped, in the preflight's words."""
    line = min(max(error.lineno or 1, 1), max(len(lines), 1))
    text = lines[line - 1] if lines else ""
    column = min(max(error.offset or 1, 1), len(text) + 1)
    return preflight.Problem(line, column, line, column + 1, preflight.NESTED_TOO_DEEPLY)


def _syntax_error(source: str) -> CodeModeError | None:
    """The syntax error Python's parser finds in the program, at its position, or None."""
    try:
        syntax.parse(source, filename=PROGRAM_FILE)
    except SyntaxError as error:
        lines = split_lines(source)
        line = min(max(error.lineno or 1, 1), max(len(lines), 1))
        text = lines[line - 1] if lines else ""
        column = min(max(error.offset or 1, 1), len(text) + 1)
        where = Where(PROGRAM_FILE, line, column, line, column + 1, None, text)
        return InvalidProgramError(f"{where.render()}: SyntaxError: {error.msg}", where=where)
    except (ValueError, RecursionError, MemoryError):
        pass  # the interpreter decides
    return None


__all__ = [
    "NO_MAIN",
    "Appendix",
    "Entered",
    "Learned",
    "Located",
    "Program",
    "Programs",
    "Refused",
    "Region",
    "Rename",
    "Site",
    "learned_outlines",
    "normalized",
    "split_lines",
]
