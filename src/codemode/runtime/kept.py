"""A session in the worker: its state loaded, kept, and told by name without a value leaving it.

A person trying sessions (the playground's "Keep variables") and a host showing one want
to see what the next program will find: `rows: list of 1000`, `double: function`. After a
program in a session succeeds, the worker evaluates `LISTING` over its globals (`locals()`
at top level: pydantic-monty 1.4.0 has no `globals()` or `dir()`), which yields for each
name only its type's name and, for a string, bytes or a built-in container, its length; so
the listing is as small as the names and never carries the values a program keeps. It runs
after the state is kept and calls built-ins by name, which a program may have rebound at top
level: then it tells the names alone (`NAMES`), and what a function of the program returns
in a built-in's place is the program's own word on its own values.

What codemode itself leaves there is not the program's state and is left out: main()'s
value and the loop markers (let go before the state is kept, but their names stay, as
there is no `del`), the capability namespaces (each program's trailer imports those it
uses) and `main`, which every program must define again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import pydantic_monty as pm

from codemode.runtime.appendix import GUEST_NAMES
from codemode.runtime.loops import LOOPS, MARKERS
from codemode.runtime.program import RETURNED

LISTING = (
    "[(k, type(v).__name__, len(v) if isinstance(v, (str, bytes, list, tuple, dict, set,"
    " frozenset)) else None) for k, v in locals().items()]"
)
"""Fed to a worker whose program succeeded: (name, type name, length or None) per global."""
NAMES = "[(k, '?', None) for k in locals()]"
"""The listing when `LISTING` fails, the names alone: it calls built-ins a program may
rebind at top level (`type = "user"`, `list = [...]`, `len = 3`), and such a program's
state is kept all the same."""
UNREAD = "?"
"""What a name is, as `NAMES` tells it: the listing could not read its type."""


@dataclass(frozen=True, slots=True)
class Kept:
    """What a run in a session leaves: its globals as the next run loads them, and what
    they hold by name (see `held`)."""

    state: bytes
    names: dict[str, str] = field(default_factory=dict)
    """Each name the program's state holds -> what it is (`described`)."""


def described(type_name: str, length: int | None) -> str:
    """A value as a person reads it from the listing: `list of 1000`, `int`, `module`."""
    return type_name if length is None else f"{type_name} of {length}"


def held(listing: object, namespaces: Iterable[str]) -> dict[str, str]:
    """The program's own names in what `LISTING` gave, each described; `namespaces` are the
    view's capability roots, left out while they are still modules (or of a type unread: the
    preflight lets no program keep a global by such a name). A row that is not
    the listing's shape is skipped (it can only come from this module's expression)."""
    roots = frozenset(namespaces)
    names: dict[str, str] = {}
    for row in listing if isinstance(listing, list) else ():
        if not (isinstance(row, tuple) and len(row) == 3):
            continue
        name, type_name, length = row
        if not (isinstance(name, str) and isinstance(type_name, str)):
            continue
        if not (length is None or type(length) is int):
            continue
        if name in (RETURNED, "main") or MARKERS.fullmatch(name) or GUEST_NAMES.fullmatch(name):
            continue
        if name in roots and type_name in ("module", UNREAD):
            continue
        names[name] = described(type_name, length)
    return names


LET_GO = f"{RETURNED} = None; {LOOPS} = []"
"""Fed before a session's globals are kept: main()'s value and the loop markers' entries are
the run's, not the session's (there is no `del`: the names stay). The list stays a list: a
function an earlier program defined with a loop in it pushes onto it when a later program
calls it, and a later program without a loop of its own makes no new one."""

_FEED = re.compile(r"<python-input-(\d+)>")


def load_session(session: pm.MontySession, state: bytes) -> str:
    """Load a session's globals into `session`; the name the interpreter will give the
    program fed next ("" when it cannot tell), learned by a probe: it names each feed of a
    session in turn, and a call whose position is in another feed was made in a function
    an earlier program defined. The worker's own errors pass."""
    session.load_session(state)
    try:
        session.feed_run("raise ValueError", print_callback=silent)
    except pm.MontyRuntimeError as probe:
        frames = probe.traceback()
        found = _FEED.fullmatch(frames[0].filename) if frames else None
        if found is not None:
            return f"<python-input-{int(found[1]) + 1}>"
    return ""


def keep_session(session: pm.MontySession, namespaces: Iterable[str]) -> Kept:
    """After the program succeeded: the globals the next run loads, and what they hold
    (`namespaces`: the view's capability roots). The worker's own errors pass."""
    session.feed_run(LET_GO, print_callback=silent)
    state = session.dump()
    # listed after the dump: the session keeps every text it is fed, and not this one, nor
    # anything a program's own function does when the listing calls it by a built-in's name
    listing: object = []
    for feed in (LISTING, NAMES):
        try:
            listing = session.feed_run(feed, print_callback=silent)
            break
        except pm.MontyRuntimeError as error:  # a name it calls is the program's
            if isinstance(error.exception(), TimeoutError | MemoryError):
                break  # and spent the run's time or memory: the names go untold
    return Kept(state, held(listing, namespaces))


def silent(stream: str, text: str) -> None:
    """Output of the feeds codemode makes (none is expected; none is kept)."""


__all__ = [
    "LET_GO",
    "LISTING",
    "NAMES",
    "UNREAD",
    "Kept",
    "described",
    "held",
    "keep_session",
    "load_session",
    "silent",
]
