"""The one shape of every source of capabilities: a name, open, what it offers, its
changes, close."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from codemode.capabilities import Capability


@runtime_checkable
class Source(Protocol):
    """Where capabilities come from: the host's own functions, an upstream MCP server, a
    REST API's operations, or a kind of your own.

    `CodeMode.add_source(source)` opens it, puts what it offers in the catalog (all of it
    or none: a policy checks it first), follows its changes and closes it with the
    CodeMode, so its capabilities are searched, described, bound, authorized and audited
    as every other is. Each is named under the source's `name` (`name.<leaf>`), a
    namespace the source owns: no capability of another may be there when it is added.

    **Which loop.** Every source's `open`, `changes` and `close` run on one event loop,
    the sources' own (on a thread the CodeMode starts with the first source it adds),
    and so does every request its capabilities send: a session, a connection pool or a
    subscription a source opens lives there, whatever loop or thread a program's call
    comes from. A `capability()` handler runs where every host function does (a sync one
    on a worker thread of the engine's pool, an async one on the engine's loop or the
    host's `host_loop`); one that needs the source's loop hands its work there
    (`codemode.sources.forwarded` does so itself). Nothing a source does holds its loop:
    reading a large document or building thousands of capabilities runs on a worker
    thread.

    A source may also have a `kind` (a str attribute, `"REST API"`): the words its
    errors are named by; without one they say `source "<name>"`.
    """

    @property
    def name(self) -> str:
        """The namespace of its capabilities, an identifier (`"fs"` for `fs.read_file`)."""
        ...

    async def open(self) -> None:
        """Connect, read or list what it offers. A `RegistrationError` says why it cannot
        be used (anything else it raises is reported as one); it is closed after."""
        ...

    def capabilities(self) -> Sequence[Capability]:
        """What it offers now, once open: a snapshot, read when it is added."""
        ...

    def changes(self) -> AsyncIterator[Sequence[Capability] | None] | None:
        """None when what it offers never changes. Else an async generator that yields
        what it offers now each time that changes, the whole set (a capability left out
        is removed; one yielded again, the same object, is kept as it is). The catalog
        takes each (the policy checks it first) and sends back None, or the error the
        policy refused it with: then the capabilities that changed are withheld from
        programs until a later offer is taken. Yielding None says it cannot tell what it
        offers now: all of them are withheld until its next offer."""
        ...

    async def close(self) -> None:
        """End what `open` started (called once, also after an `open` that failed)."""
        ...


__all__ = ["Source"]
