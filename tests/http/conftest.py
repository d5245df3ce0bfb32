"""A host whose one capability leaves a trace, so a test can tell whether a request ran."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codemode import CallContext, CodeMode
from codemode.authz import AllowAll

TOKENS = {"tok-alice": "alice"}
ADD = 'def main():\n    return notes.add(text="hi")\n'


def noting_host(effects: list[str]) -> CodeMode:
    """A CodeMode whose `notes.add` appends `subject:text` to `effects`."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("notes.add", summary="Add a note.")
    def add(*, text: str, ctx: CallContext) -> int:
        effects.append(f"{ctx.subject}:{text}")
        return len(effects)

    return cm


def body(**data: Any) -> bytes:
    return json.dumps(data).encode()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def effects() -> list[str]:
    return []
