"""The tests' pet store on loopback, and a CodeMode serving it as REST API `pets`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import codemode
from codemode import CodeMode
from codemode.authz import AllowAll
from tests.conftest import run_error
from tests.sources.openapi.pets import PetStore, pet_store

SECRET = "SECRET-api-token-7f3a"
"""The credentials' canary (the server plants CANARY in what it writes)."""
TOKEN = "policy-token-1"
"""A bearer token for the tests that are not about credentials."""


@pytest.fixture(scope="module")
def store() -> Iterator[PetStore]:
    with pet_store() as running:
        yield running


@pytest.fixture
def events() -> list[Any]:
    return []


@pytest.fixture
def cm(store: PetStore, events: list[Any]) -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as host:
        host.add_openapi(
            "pets",
            spec=store.spec_url,
            auth={"bearer": SECRET, "key": SECRET + "-q", "basic": ("ada", SECRET + "-b")},
            timeout=2,
        )
        yield host


def run(cm: CodeMode, body: str) -> Any:
    source = "def main():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return cm.execute(source, subject="alice").value


def fail(cm: CodeMode, body: str) -> codemode.CodeModeError:
    return run_error(cm, "def main():\n" + "".join(f"    {line}\n" for line in body.splitlines()))
