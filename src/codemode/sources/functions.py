"""The builder of a capability from a Python function, for any source (the host's own
functions are one: `codemode.sourcing.Functions`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from codemode.capabilities import Capability, Resolver, build_capability


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
    resource: Resolver | None = None,
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
        resource=resource,
    )


__all__ = ["capability"]
