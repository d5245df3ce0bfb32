"""A CodeMode's learned shapes: the options that turn learning on, off or into a file,
and what is never learned (a host function's results: the host can annotate them)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, ExecutionResult
from codemode.approvals import Paused
from codemode.authz import AllowAll, AuthorizationRequest, RequireApproval
from codemode.capabilities import Capability, ShapeBook
from codemode.continuations.shapes import read_shapes
from codemode.errors import RegistrationError
from codemode.payloads import describe_payload
from codemode.shaping import Shapes
from codemode.sources.remote import forwarded
from codemode.testing import ManualClock
from codemode.types import JSONObject, JSONValue
from tests.conftest import eventually


def test_the_options_are_checked() -> None:
    with pytest.raises(TypeError, match="shapes must be True, False or the path"):
        CodeMode(authorizer=AllowAll(), shapes=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shapes_checked_after must be at least 1"):
        CodeMode(authorizer=AllowAll(), shapes_checked_after=0)
    with pytest.raises(TypeError, match="shapes_checked_after must be an int"):
        CodeMode(authorizer=AllowAll(), shapes_checked_after=True)


def test_learning_is_on_in_memory_by_default_and_off_with_false(tmp_path: Path) -> None:
    assert isinstance(Shapes(True).book, ShapeBook)
    assert Shapes(True).file is None and Shapes(True).sync is None
    assert Shapes(False).book is None
    assert Shapes(tmp_path / "s.json", checked_after=5).book is not None


def test_a_file_that_is_not_a_shapes_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(RegistrationError) as refused:
        CodeMode(authorizer=AllowAll(), shapes=str(path))
    assert str(refused.value) == (
        f'the shapes file {path} cannot be read: its "format" is not "codemode-shapes/1"'
    )


def test_a_file_not_there_yet_is_made_at_close_once_something_was_learned(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.json"
    with CodeMode(authorizer=AllowAll(), shapes=path):
        pass
    assert not path.exists()  # nothing learned: nothing written


def test_a_host_functions_results_are_never_learned() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("host.facts", summary="Facts.")
        def facts() -> Any:
            return {"kind": "file", "size": 3}

        for _ in range(3):
            cm.execute("def main():\n    return host.facts()\n", subject="alice")
        described: Any = describe_payload(cm.describe("host.facts"))
        assert "observed" not in described["result"]
        refused = cm.check("def main():\n    return host.facts()['sise']\n", subject="alice")
        assert refused == []


class Relay:
    """A source of one forwarded capability that declares no result shape."""

    name = "relay"

    def __init__(self) -> None:
        self.offered: list[Capability] = []

    async def open(self) -> None:
        async def send(document: JSONObject) -> JSONValue:
            extra = {"extra": 1} if document.get("n") == 7 else {}  # one result in many
            return {"kind": "file", "size": document.get("n", 0), **extra}

        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        self.offered = [forwarded("relay.facts", send, summary="Facts.", input_schema=schema)]

    def capabilities(self) -> list[Capability]:
        return self.offered

    def changes(self) -> None:
        return None

    async def close(self) -> None:
        return None


def test_any_source_of_undeclared_results_is_learned_from_and_checked() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_source(Relay())
        program = "def main():\n    r = relay.facts(n=2)\n    return r['sise']\n"
        assert cm.check(program, subject="alice") == []
        for n in range(3):
            assert (
                cm.execute(
                    f"def main():\n    return relay.facts(n={n})['size']\n", subject="alice"
                ).value
                == n
            )
        assert [str(e) for e in cm.check(program, subject="alice")] == [
            "invalid program: <codemode>:3:12: KeyError: 'sise'; did you mean \"size\"? "
            "the result has: kind, size (learned from the results of relay.facts, not declared)"
        ]
        # the host's own check (no subject) names every name
        assert "the result has: kind, size" in str(cm.check(program)[0])


class AsksForRisky:
    """Every call allowed but `ops.risky`, which a person approves."""

    def __call__(self, request: AuthorizationRequest) -> RequireApproval | None:
        return RequireApproval("Go?") if request.capability_name == "ops.risky" else None


def test_a_shape_learned_while_a_program_waits_for_a_person_does_not_refuse_it() -> None:
    """The program was checked when it started; its resume runs it on, whatever was
    learned meanwhile (here: three results without `extra`, which its own result has)."""
    program = "def main():\n    ops.risky()\n    r = relay.facts(n=7)\n    return r['extra']\n"

    async def scenario(cm: CodeMode) -> object:
        paused = await cm.start_async(program, subject="alice")
        assert isinstance(paused, Paused)
        for n in range(3):
            await cm.execute_async(f"def main():\n    return relay.facts(n={n})\n", subject="alice")
        assert [e.code for e in cm.check(program, subject="alice")] == ["invalid_program"]
        answers = {request.key: True for request in paused.requests}
        resumed = await cm.resume_async(paused.state, subject="alice", answers=answers)
        assert isinstance(resumed, ExecutionResult)
        return resumed.value

    with CodeMode(authorizer=AsksForRisky()) as cm:
        cm.add_source(Relay())

        @cm.capability("ops.risky", summary="Needs a person.")
        def risky() -> int:
            return 0

        assert asyncio.run(scenario(cm)) == 1


def test_a_file_and_a_store_given_after_the_sources_started_are_kept_while_running(
    tmp_path: Path, redis_url: str
) -> None:
    """As the command line does: the app's sources run before `--shapes` and `--store`
    reach it; the file is written and Redis fed while the server runs, not only at close."""
    import redis

    from codemode.continuations import RedisStore
    from codemode.continuations.shapes import INDEX_KEY, WRITE_SECONDS

    clock = ManualClock()
    path = tmp_path / "shapes.json"
    admin = redis.Redis.from_url(redis_url)
    admin.delete(INDEX_KEY)
    with CodeMode(authorizer=AllowAll(), clock=clock, request_state_key="k" * 32) as cm:
        cm.add_source(Relay())  # the sources' loop runs from here on
        cm.configure(shapes=path)
        cm.store = RedisStore(redis_url)
        cm.execute("def main():\n    return relay.facts(n=1)\n", subject="alice")

        def kept() -> bool:
            clock.skip(WRITE_SECONDS)
            return path.exists() and bool(admin.exists(INDEX_KEY))

        assert eventually(kept)
        assert [entry.name for entry in read_shapes(path)] == ["relay.facts"]


def test_a_shapes_file_in_a_folder_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "shapes.json"
    with pytest.raises(RegistrationError) as refused:
        CodeMode(authorizer=AllowAll(), shapes=missing)
    assert str(refused.value) == (
        f"the shapes file {missing} cannot be kept: its folder {missing.parent} does not exist"
    )
