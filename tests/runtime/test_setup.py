"""What executions over one set of capabilities share: built once per view."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from codemode.capabilities import View
from codemode.limits import Limits
from codemode.testing import ScriptedSandbox
from tests.runtime.running import capability, engine


def nothing(program: Any) -> Generator[Any, Any, Any]:
    return (yield)


def get(*, id: str) -> str:
    return id


def test_executions_over_one_view_share_one_setup() -> None:
    users = capability("users.get", get)
    view = View([users])
    with engine(ScriptedSandbox(nothing), limits=Limits(max_execution_seconds=7)) as on:
        setup = on.setup(view)
        assert on.setup(view) is setup
        assert on.setup(View([users])) is setup  # the same capabilities: the same key
        other = on.setup(View([users, capability("users.put", get)]))
        assert other is not setup and other.programs is not setup.programs
    assert dict(setup.capabilities) == {"users.get": users}
    assert setup.modules == ("users.get",)  # what the sandbox made of them
    assert str(setup.overdue) == "resource limit exceeded: execution time (limit 7 s)"
    assert setup.digest() == setup.digest()
