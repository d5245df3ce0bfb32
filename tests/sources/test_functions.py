"""The host's own functions as a source, and the capability of a function."""

from __future__ import annotations

import asyncio

import pytest

from codemode.capabilities import Catalog
from codemode.errors import RegistrationError
from codemode.sources import capability
from codemode.sourcing import Functions


def lookup(key: str, limit: int = 10) -> list[str]:
    """Find records."""
    return [key] * limit


def test_a_function_becomes_a_capability_as_the_decorator_makes_it() -> None:
    made = capability(lookup, "records.lookup", summary="Find records.", timeout=2.0)
    assert made.signature == "records.lookup(*, key: str, limit: int = 10) -> list[str]"
    assert (made.id, made.timeout, made.is_async) == ("records.lookup", 2.0, False)


def test_a_bad_name_or_hint_is_a_registration_error() -> None:
    with pytest.raises(RegistrationError):
        capability(lookup, "Records lookup", summary="x")


def test_functions_join_the_catalog_as_they_are_registered() -> None:
    catalog = Catalog()
    functions = Functions(catalog)
    functions.add(capability(lookup, "records.lookup", summary="Find records."))
    assert catalog.names() == ["records.lookup"]
    assert [c.name for c in functions.capabilities()] == ["records.lookup"]
    with pytest.raises(RegistrationError, match="duplicate"):
        functions.add(capability(lookup, "records.lookup", summary="Again."))
    assert len(functions.capabilities()) == 1


def test_it_has_no_namespace_nothing_to_open_or_close_and_no_changes() -> None:
    functions = Functions(Catalog())
    assert functions.name == ""
    assert functions.changes() is None
    asyncio.run(functions.open())
    asyncio.run(functions.close())
