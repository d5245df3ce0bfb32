"""One `Execution` on an `Engine`, built from public parts, for the tests of its parts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from codemode.authz import AllowAll, Authorizer
from codemode.capabilities import Capability, View, build_capability
from codemode.clock import Clock
from codemode.events import Event
from codemode.limits import Limits
from codemode.runtime import Engine, Execution, ExecutionResult
from codemode.runtime.sandbox import Sandbox


def capability(name: str, handler: Callable[..., Any], **options: Any) -> Capability:
    """A capability as the host registers it."""
    return build_capability(
        handler,
        name,
        id=None,
        summary="A capability.",
        description=None,
        search_terms=(),
        **options,
    )


@contextlib.contextmanager
def engine(
    sandbox: Sandbox, *, clock: Clock | None = None, limits: Limits | None = None
) -> Iterator[Engine]:
    """An engine of its own, closed when the test ends."""
    built = Engine(limits or Limits(), sandbox, clock=clock)
    try:
        yield built
    finally:
        built.close()


def execution(
    on: Engine,
    source: str,
    capabilities: list[Capability],
    *,
    events: list[Event] | None = None,
    authorizer: Authorizer | None = None,
    **options: Any,
) -> Execution:
    """One execution of `source` by alice, over exactly these capabilities; its events go
    to `events` (or to the `emit` option)."""
    if events is not None:
        options["emit"] = events.append
    return Execution(
        source=source,
        subject="alice",
        setup=on.setup(View(capabilities)),
        authorizer=authorizer or AllowAll(),
        services=on.services,
        **options,
    )


def finished(on: Engine, run: Execution) -> ExecutionResult:
    """Run the execution; its result (it must neither fail nor pause)."""
    outcome = on.execute(run)
    assert isinstance(outcome, ExecutionResult)
    return outcome


def kinds(events: list[Event]) -> list[str]:
    """The events' kinds, in the order they came."""
    return [type(event).__name__ for event in events]
