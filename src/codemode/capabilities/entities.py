"""The resource a call names, as its capability's resolver finds it, for policies to read.

A policy that says "employees see only their own reports" needs the report, not its id:
a capability registered with `resource=report_of` has `report_of` (a host function, sync
or async) called with the call's bound arguments it names, and it returns the `Entity`
the call acts on, `Entity("Report", "42", {"owner": Entity("User", "alice")})`. Cedar
sees it as the request's resource (`resource.owner == principal`), Rego as
`input.resource` (`input.resource.owner.id == input.subject.id`).

It is resolved once per authorization of a call, after its arguments bound and before the
authorizer decides, never cached: a program that reassigns a report and then reads it is
judged on who owns it now, and a call a person approved is resolved again with the
decision that follows. Anything but an `Entity` from the resolver, and anything it raises,
denies the call (`permission denied`, nothing more: the model learns neither the
resolver's words nor whether the resource exists).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity a policy reads: its type, its id, and its attributes (JSON values, or
    an `Entity` for a reference to another, such as the report's owner)."""

    type: str
    id: str
    attributes: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type.isidentifier():
            raise TypeError("an Entity's type is a name, such as 'Report'")
        if not isinstance(self.id, str):
            raise TypeError("an Entity's id is a string")
        if not isinstance(self.attributes, Mapping) or {"type", "id"} & set(self.attributes):
            raise TypeError("an Entity's attributes are a mapping without 'type' or 'id'")

    @property
    def uid(self) -> dict[str, str]:
        """`{"type": ..., "id": ...}`, as the audit records it and Rego refers to it."""
        return {"type": self.type, "id": self.id}


Resolver: TypeAlias = Callable[..., Any]
"""A host function from a call's bound arguments (those it names) to its `Entity`."""


def resolver_parameters(resolver: object, parameters: list[str]) -> tuple[str, ...]:
    """The capability's parameters the resolver takes (every one for `**kwargs`); a
    ValueError says why it is no function of them."""
    if not callable(resolver):
        raise ValueError("resource must be a function of the call's arguments")
    try:
        signature = inspect.signature(resolver)
    except (TypeError, ValueError):
        return tuple(parameters)
    taken = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            return tuple(parameters)
        if parameter.name in parameters:
            taken.append(parameter.name)
        elif parameter.default is inspect.Parameter.empty:
            raise ValueError(
                f"resource: the resolver takes {parameter.name!r}, which is no parameter of "
                f"the capability (it has {', '.join(parameters) or 'none'})"
            )
    return tuple(taken)


__all__ = ["Entity", "Resolver", "resolver_parameters"]
