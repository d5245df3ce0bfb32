"""Guest code fed with a program, and how positions in it read: data a feature hands in.

A program is fed as written, then a trailer (`program`). A feature that must run guest
code of its own beside the program (a kept program called from it) hands `Programs.prepare`
an `Appendix`: code for the trailer, names in the program fed as others of the same
length (so every position the interpreter reports stays one in the text as written),
numbered sites in the program, and regions of the appended code that hold another text,
so a failure there is told by that text's name and line while `where` stays in the
program. It is a value, not behaviour on the execution: the runtime reads it, the
feature that built it keeps what it means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GUEST_NAMES = re.compile(r"_cm_c[0-9]+|_p[0-9]{6}")
"""The globals appended code may bind (a site's class and its instance): the feature's,
never a session's state."""


@dataclass(frozen=True, slots=True)
class Site:
    """A place in the program that appended code stands in for (numbered by whoever
    builds the appendix): a span of the program's own text, 1-based, end exclusive."""

    number: int
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True, slots=True)
class Region:
    """Lines of appended code that hold another text (a kept program's): appended lines
    `first` to `last` (1 = the appendix's first line) are that text's lines from `line`."""

    name: str
    first: int
    last: int
    line: int = 1


@dataclass(frozen=True, slots=True)
class Entered:
    """Appended lines `first` to `last` (1 = the appendix's first line) that run only for
    the program's site `site`: whatever happens there is placed at that site, as the
    program wrote it (the appended text is never shown)."""

    site: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Rename:
    """A name in the program fed as another of the same length, so every offset, line and
    column the interpreter reports holds for the text as written."""

    line: int
    column: int
    name: str


@dataclass(frozen=True, slots=True)
class Appendix:
    """Guest code fed with a program, and how to read positions in it: data only.

    `code` goes after the trailer's import line and before main() is called, `after`
    after main() returned (its value is still the program's); neither is shown. The
    program's own text is fed as written but for `renames`; `sites` name places in it and
    `regions` the appended lines that are another text's, so a failure there can be told
    by that text's own name and line while `where` stays in the program; `entered`
    says which appended lines run for which site, so a call made there is placed at it.
    `carried` is what the feature needs again where the program goes on after a pause
    (another replica, perhaps): it is sealed with the paused state, never fed or shown.
    `reserved` names capabilities only `after` calls: a call of one from anywhere else
    (the program's text, however it reached it, or appended code) is answered as a name
    that names nothing, before it is bound or authorized.
    """

    code: str
    after: str = ""
    renames: tuple[Rename, ...] = ()
    sites: tuple[Site, ...] = ()
    regions: tuple[Region, ...] = ()
    entered: tuple[Entered, ...] = ()
    carried: str = ""
    reserved: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Located:
    """A line of appended code as the text it holds numbers it (`Region.name`)."""

    name: str
    line: int


def fed(
    source: str,
    lines: tuple[str, ...],
    is_async: bool,
    used: frozenset[str],
    returned: str,
    roots: frozenset[str],
    appendix: Appendix | None,
) -> tuple[str, int, int]:
    """What is fed (the program, then the trailer with any appendix in it), the fed line
    just before the appendix's first, and the first fed line of its `after` code."""
    text = source if appendix is None else _renamed(source, lines, appendix.renames)
    code = text + ("\n" if text and not text.endswith("\n") else "")
    imported = imports(used, roots, appendix)
    trailer = ["import " + ", ".join(sorted(imported))] if imported else []
    appended = len(lines) + len(trailer)
    if appendix is not None and appendix.code:
        trailer.append(appendix.code.rstrip("\n"))
    trailer.append(f"{returned} = {'await main()' if is_async else 'main()'}")
    after = len(lines) + sum(part.count("\n") + 1 for part in trailer) + 1
    if appendix is not None and appendix.after:
        trailer.append(appendix.after.rstrip("\n"))
    trailer.append(returned)
    return code + "\n".join(trailer), appended, after


def imports(
    used: frozenset[str], roots: frozenset[str], appendix: Appendix | None
) -> frozenset[str]:
    """The namespaces the trailer imports: those the program mentions, and those its
    appended code does (before and after main())."""
    if appendix is None:
        return used
    return used | roots.intersection(IDENTIFIER.findall(appendix.code + "\n" + appendix.after))


def _renamed(source: str, lines: tuple[str, ...], renames: tuple[Rename, ...]) -> str:
    """The program with each renamed name replaced by one of the same length, so every
    position in it holds (ValueError for a rename that does not replace a name so)."""
    edited = list(lines)
    for rename in renames:
        if not 1 <= rename.line <= len(edited):
            raise ValueError(f"no line {rename.line} to rename at")
        text, start = edited[rename.line - 1], rename.column - 1
        found = IDENTIFIER.match(text, start)
        if (
            found is None
            or found.end() - start != len(rename.name)
            or not rename.name.isidentifier()
        ):
            raise ValueError(
                f"a rename at {rename.line}:{rename.column} must replace a name of its length"
            )
        edited[rename.line - 1] = text[:start] + rename.name + text[found.end() :]
    return "\n".join(edited) + ("\n" if source.endswith("\n") else "")


__all__ = [
    "GUEST_NAMES",
    "IDENTIFIER",
    "Appendix",
    "Entered",
    "Located",
    "Region",
    "Rename",
    "Site",
    "fed",
    "imports",
]
