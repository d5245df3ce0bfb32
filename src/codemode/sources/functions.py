"""The host's own functions as a source, and the builder of a capability from a function."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

from codemode.capabilities import Capability, Catalog, build_capability


def capability(
    handler: Callable[..., Any],
    name: str,
    *,
    summary: str,
    id: str | None = None,
    description: str | None = None,
    search_terms: Iterable[str] = (),
    max_calls_per_execution: int | None = None,
    timeout: float | None = None,
    example: str | None = None,
    annotations: Mapping[str, bool] | None = None,
) -> Capability:
    """A capability of a sync or async function, as `CodeMode.capability` registers one:
    the program calls it by keyword as `name(...)`, its parameters and result are its
    type hints. A source of your own offers these (see `codemode.sources.Source`).

    The options are `CodeMode.capability`'s. Raises `RegistrationError` for a bad name,
    an example that does not fit, or type hints that cannot cross the sandbox boundary.
    """
    return build_capability(
        handler,
        name,
        id=id,
        summary=summary,
        description=description,
        search_terms=search_terms,
        max_calls_per_execution=max_calls_per_execution,
        timeout=timeout,
        example=example,
        annotations=annotations,
    )


class Functions:
    """The functions `CodeMode.capability` registers, as a source.

    It is the one source without a namespace of its own (its name is empty: each function
    names its own), and the one whose capabilities join the catalog as they are
    registered (`add`, at decoration time, where a clash or a refusing policy is raised),
    so it has nothing to open, no change stream and nothing to close.
    """

    name = ""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._registered: list[Capability] = []

    def add(self, capability: Capability) -> None:
        """Register one function's capability now (RegistrationError on a clash, or when
        the policy refuses it)."""
        self.catalog.add(capability)
        self._registered.append(capability)

    async def open(self) -> None:
        """Nothing to open: the functions are in the catalog already."""

    def capabilities(self) -> tuple[Capability, ...]:
        """The functions registered so far."""
        return tuple(self._registered)

    def changes(self) -> AsyncIterator[Sequence[Capability] | None] | None:
        """None: a function registered later joins the catalog at once (`add`)."""
        return None

    async def close(self) -> None:
        """Nothing to close: host code is never stopped from here."""


__all__ = ["Functions", "capability"]
