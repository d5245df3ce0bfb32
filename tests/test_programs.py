"""Saved programs: a host's program is a typed capability any program calls by keyword; each
inner call is authorized as the caller, counted in the caller's budget, and fails at the
caller's line; a model's `save_as` is authorized, kept only after success, and seen by its
subject alone."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, Limits, SaveAs
from codemode.authz import AllowAll, AuthorizationRequest, Denied, RequireApproval
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer
from codemode.capabilities import View, program_capability
from codemode.continuations import ApprovalRequest, Paused, RedisStore
from codemode.errors import (
    CodeModeError,
    InvalidProgramError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RegistrationError,
    ResourceLimitError,
)
from codemode.events import Event, ProgramSaved
from codemode.payloads import describe_payload, execute_payload, search_payload
from codemode.programs import NAMESPACE, KeptPrograms, Saved, SavedPrograms, SaveStatus
from codemode.runtime import Appendix, ExecutionResult
from codemode.saving import Plan, document, sealed, unsealed
from tests.conftest import CANARY, assert_no_canary, eventually

WEEKLY = '''"""The weekly report."""
def main(*, week: int = 48, team: str = "core") -> list[int]:
    found = records.lookup(id=week)
    return [found, len(team)]
'''


def host(authorizer: object = None, limits: Limits | None = None) -> CodeMode:
    cm = CodeMode(authorizer=authorizer or AllowAll(), limits=limits)  # type: ignore[arg-type]

    @cm.capability("records.lookup", summary="Look up one record.")
    def lookup(*, id: int) -> int:
        return id * 10

    cm.add_program("weekly_report", WEEKLY, summary="The weekly report of a team.")
    return cm


@pytest.fixture(scope="module")
def cm() -> Iterator[CodeMode]:
    with host() as cm:
        yield cm


def failure(cm: CodeMode, source: str, subject: str = "alice", **options: object) -> CodeModeError:
    with pytest.raises(CodeModeError) as raised:
        cm.execute(source, subject=subject, **options)  # type: ignore[arg-type]
    return raised.value


class Kept:
    """The least that answers the interface: host programs by name, nothing saved."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    def add(self, name: str, source: str, *, summary: str) -> str:
        self.kept[f"{NAMESPACE}.{name}"] = source
        return f"{NAMESPACE}.{name}"

    def add_folder(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        return ()

    def overlay(self, view: View, subject: str | None) -> View:
        return view

    def appendix(
        self,
        source: str,
        subject: str,
        save_as: SaveAs | None,
        *,
        view: View,
        execution_id: str,
        can_ask: bool = False,
    ) -> Appendix | None:
        return None

    def watching(self, authorizer: object, execution_id: str, view: View) -> object:
        return authorizer

    def save_action(self) -> None:
        return None

    def saving(self, view: View) -> View:
        return view

    def planned(self, execution_id: str) -> bool:
        return False

    def commit(self, execution_id: str, result: ExecutionResult | None) -> Saved | None:
        return None

    def saved(self, execution_id: str) -> Saved | None:
        return None

    def names(self, owner: str | None = None) -> tuple[str, ...]:
        return tuple(self.kept)

    def show(self, name: str, owner: str | None = None) -> str | None:
        return self.kept.get(name)

    def delete(self, name: str, owner: str | None = None) -> bool:
        return self.kept.pop(name, None) is not None


def test_an_object_with_every_method_is_saved_programs_and_one_without_is_not() -> None:
    kept = Kept()
    assert isinstance(kept, SavedPrograms)
    assert kept.add("weekly_report", "def main():\n    return 1\n", summary="S.") == (
        "programs.weekly_report"
    )
    assert Saved("programs.weekly_report", "saved").status == "saved"
    assert not isinstance(object(), SavedPrograms)
    with host() as cm:
        assert isinstance(cm.saved_programs, KeptPrograms)
        assert isinstance(cm.saved_programs, SavedPrograms)


def test_a_host_program_is_searched_and_described_with_its_typed_parameters(cm: CodeMode) -> None:
    found = search_payload(cm.search("weekly report", subject="alice"))
    assert found["results"][0] == {  # type: ignore[index]
        "name": "programs.weekly_report",
        "signature": "programs.weekly_report(*, week: int = 48, team: str = 'core') -> list[int]",
        "summary": "The weekly report of a team.",
    }
    described = describe_payload(cm.describe("programs.weekly_report", subject="alice"))
    assert described["description"] == "The weekly report of a team.\n\nSaved program (host)."
    assert described["parameters"] == [
        {"name": "week", "type": "int", "required": False, "default": "48"},
        {"name": "team", "type": "str", "required": False, "default": "'core'"},
    ]
    assert described["result"] == {"type": "list[int]", "read_as": "value"}
    assert "programs.save" not in [h.name for h in cm.search("", limit=100).results]
    with pytest.raises(NotFoundError):
        cm.describe("programs.save")


def test_a_saved_programs_input_schema_carries_each_parameters_default(cm: CodeMode) -> None:
    described = describe_payload(cm.describe("programs.weekly_report"), schemas=True)
    assert described["input_schema"] == {
        "additionalProperties": False,
        "properties": {
            "week": {"title": "Week", "type": "integer", "default": 48},
            "team": {"title": "Team", "type": "string", "default": "core"},
        },
        "type": "object",
    }


def test_a_saved_program_is_called_by_keyword_and_runs_in_the_callers_execution(
    cm: CodeMode,
) -> None:
    source = "def main():\n    return programs.weekly_report(week=3, team='ab')\n"
    result = cm.execute(source, subject="alice")
    assert result.value == [30, 2]
    assert result.usage.capability_calls == ("programs.weekly_report", "records.lookup")
    assert cm.execute("def main():\n    return programs.weekly_report()\n", subject="a").value == [
        480,
        4,
    ]


def test_a_wrong_type_names_the_parameter_at_the_callers_line(cm: CodeMode) -> None:
    error = failure(cm, "def main():\n    return programs.weekly_report(week='x')\n")
    assert str(error) == (
        'invalid capability arguments: <codemode>:2:12: argument "week" must be an integer'
    )
    assert error.where is not None and error.where.line == 2


def test_a_host_program_that_cannot_be_a_capability_is_refused_with_its_text(
    cm: CodeMode,
) -> None:
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("weekly_report", WEEKLY, summary="Again.")
    assert str(raised.value) == "program weekly_report: the name is taken"
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("bad", "def main(week: int = 1):\n    return week\n", summary="B.")
    assert str(raised.value) == (
        "program bad: <codemode>:1:1: main() parameters must be keyword-only, each with an "
        "annotation and a default: def main(*, week: int = 48)"
    )
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("sets", "def main(*, s: set = 1):\n    return 1\n", summary="S.")
    assert str(raised.value) == (
        'program sets: main() parameter "s": its type must be written with int, float, str, '
        "bool, None, Any, list[...], dict[str, ...] and |"
    )
    with pytest.raises(RegistrationError) as raised:

        @cm.capability("programs.mine", summary="Taken.")
        def mine() -> int:
            return 1

    assert str(raised.value) == (
        'capability "programs.mine": the namespace "programs" is kept for saved programs'
    )


CEDAR = """
permit(principal == User::"alice", action, resource);
permit(principal == User::"bob", action, resource)
when { resource != Capability::"records.lookup" };
"""


def test_an_inner_call_is_authorized_as_the_caller_and_fails_at_the_callers_line() -> None:
    with host(CedarAuthorizer(CEDAR)) as cm:
        source = "def main():\n    n = 1\n    return programs.weekly_report(week=n)\n"
        assert cm.execute(source, subject="alice").value == [10, 4]
        error = failure(cm, source, subject="bob")
    assert isinstance(error, PermissionDeniedError)
    assert str(error) == "permission denied: in programs.weekly_report line 3"
    assert error.where is not None
    assert (error.where.line, error.where.source) == (
        3,
        "    return programs.weekly_report(week=n)",
    )
    assert "found = records.lookup" not in error.report()  # the saved text is never shown


def test_the_calls_inside_count_toward_the_callers_budget() -> None:
    with host(limits=Limits(max_capability_calls=3)) as cm:
        source = "def main():\n    return [programs.weekly_report(week=i) for i in range(2)]\n"
        error = failure(cm, source)
    assert isinstance(error, ResourceLimitError)
    assert str(error) == "resource limit exceeded: capability calls (limit 3) at <codemode>:2:13"
    assert error.where is not None
    assert error.where.source == (
        "    return [programs.weekly_report(week=i) for i in range(2)]"
    )  # the caller's line: the third call is the first one's records.lookup


def test_a_failure_inside_names_the_saved_line_never_its_text(cm: CodeMode) -> None:
    cm.add_program(
        "halves", "def main(*, n: int = 0):\n    x = 1\n    return x // n\n", summary="H."
    )
    error = failure(cm, "def main():\n    return programs.halves()\n")
    assert str(error) == (
        "invalid program: <codemode>:2:12: ZeroDivisionError: division by zero; "
        "in programs.halves line 3"
    )


def save(cm: CodeMode, source: str, name: str, subject: str = "alice") -> Saved | None:
    result = cm.execute(source, subject=subject, save_as={"name": name, "summary": "Mine."})
    return cm.saved_programs.saved(result.execution_id)


def test_a_program_is_saved_only_after_it_succeeds() -> None:
    with host() as cm:
        failing = "def main(*, n: int = 0):\n    return 1 // n\n"
        failure(cm, failing, save_as={"name": "div", "summary": "Divides."})
        assert cm.saved_programs.names("alice") == ()
        source = "def main(*, n: int = 2):\n    return programs.weekly_report(week=n)[0] + 1\n"
        outcome = save(cm, source, "plus")
        assert outcome == Saved("programs.plus", "saved")
        result = cm.execute("def main():\n    return programs.plus(n=5)\n", subject="alice")
        assert result.value == 51
        assert execute_payload(result, outcome)["saved"] == {
            "name": "programs.plus",
            "status": "saved",
        }
        assert save(cm, source.replace("+ 1", "+ 2"), "plus") == Saved("programs.plus", "replaced")
        assert cm.execute("def main():\n    return programs.plus()\n", subject="alice").value == 22


def test_a_save_as_that_cannot_be_kept_is_refused_before_anything_runs(cm: CodeMode) -> None:
    source = "def main():\n    return 1\n"
    cases: list[tuple[object, str]] = [
        ({"name": "x"}, 'save_as needs "name" and "summary"'),
        (
            {"name": "Bad-Name", "summary": "S."},
            'save_as "name" must be a lowercase identifier (letters, digits, _), at most 64 '
            "characters",
        ),
        (
            {"name": "weekly_report", "summary": "S."},
            "the name programs.weekly_report is the host's",
        ),
    ]
    for save_as, text in cases:
        error = failure(cm, source, save_as=save_as)
        assert isinstance(error, InvalidRequestError)
        assert str(error) == f"invalid request: {text}"
    with CodeMode(authorizer=AllowAll(), programs=False) as off:
        error = failure(off, source, save_as={"name": "x", "summary": "S."})
        assert str(error) == "invalid request: saving programs is off on this server"


def test_a_cycle_is_refused_before_anything_runs() -> None:
    with host() as cm:
        assert save(cm, "def main():\n    return 1\n", "b") == Saved("programs.b", "saved")
        assert save(cm, "def main():\n    return programs.b()\n", "a") == Saved(
            "programs.a", "saved"
        )
        error = failure(
            cm,
            "def main():\n    return programs.a()\n",
            save_as={"name": "b", "summary": "Closes a cycle."},
        )
        assert str(error) == (
            "invalid program: <codemode>:2:12: programs.b calls itself through programs.a"
        )
        assert cm.execute("def main():\n    return programs.a()\n", subject="alice").value == 1


def test_a_chain_deeper_than_the_limit_is_refused() -> None:
    with host(limits=Limits(max_saved_program_depth=2)) as cm:
        save(cm, "def main():\n    return 1\n", "c")
        save(cm, "def main():\n    return programs.c()\n", "b")
        save(cm, "def main():\n    return programs.b()\n", "a")
        error = failure(cm, "def main():\n    return programs.a()\n")
    assert str(error) == (
        "invalid program: <codemode>:2:12: programs.a calls saved programs more than 2 deep"
    )


def asking(answer: bool, asked: list[ApprovalRequest]) -> object:
    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return answer

    return approve


def saves_need_approval(request: AuthorizationRequest) -> RequireApproval | None:
    if request.capability_name == "programs.save":
        return RequireApproval(f"Keep {request.arguments['name']}?")
    return None


@pytest.mark.parametrize(("answer", "status"), [(True, "saved"), (False, "declined")])
def test_a_save_that_needs_approval_asks_and_a_declined_one_keeps_nothing(
    answer: bool, status: SaveStatus
) -> None:
    with host(saves_need_approval) as cm:
        asked: list[ApprovalRequest] = []
        source = "def main(*, n: int = 1):\n    return n\n"
        result = asyncio.run(
            cm.execute_async(
                source,
                subject="alice",
                approve=asking(answer, asked),  # type: ignore[arg-type]
                save_as={"name": "one", "summary": "One."},
            )
        )
        assert result.value == 1
        assert [r.message for r in asked] == ["Keep one?"]
        assert cm.saved_programs.saved(result.execution_id) == Saved("programs.one", status)
        assert cm.saved_programs.names("alice") == (("programs.one",) if answer else ())


def test_a_denied_save_keeps_nothing_and_says_denied() -> None:
    def forbid(request: AuthorizationRequest) -> None:
        if request.capability_name == "programs.save":
            raise Denied(CANARY)

    with host(forbid) as cm:
        result = cm.execute(
            "def main():\n    return 1\n", subject="alice", save_as={"name": "x", "summary": "X."}
        )
        outcome = cm.saved_programs.saved(result.execution_id)
        assert outcome == Saved("programs.x", "denied")
        assert_no_canary(execute_payload(result, outcome))
        assert cm.saved_programs.names("alice") == ()


def test_a_subjects_program_is_invisible_to_another() -> None:
    with host() as cm:
        name = "canary_hunter2"
        source = f'def main():\n    return "{CANARY}"\n'
        cm.execute(source, subject="alice", save_as={"name": name, "summary": f"Keeps {CANARY}."})
        assert cm.execute(
            f"def main():\n    return programs.{name}()\n", subject="alice"
        ).value == (CANARY)
        listed = [
            search_payload(cm.search("", limit=100, subject="bob")),
            search_payload(cm.search("canary hunter2", subject="bob")),
        ]
        assert name not in str(listed)
        answers = []
        for text in (name, "never_saved_xy"):
            with pytest.raises(NotFoundError) as missing:
                cm.describe(f"programs.{text}", subject="bob")
            error = failure(cm, f"def main():\n    return programs.{text}()\n", subject="bob")
            answers.append(
                str([missing.value.to_payload(), error.to_payload(), error.report()]).replace(
                    text, "NAME"
                )
            )
        assert answers[0] == answers[1]  # exactly as a name that never existed
        assert_no_canary(*listed, *answers)
        assert isinstance(
            failure(cm, f"def main():\n    return programs.{name}()\n", subject="bob"),
            InvalidProgramError,
        )


KEY = "a-request-state-key-of-32-bytes!"


def test_a_folder_shelf_keeps_a_subjects_programs_across_a_restart(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    source = "def main(*, n: int = 2):\n    return n * 3\n"
    with CodeMode(authorizer=AllowAll(), programs=folder, request_state_key=KEY) as first:
        assert save(first, source, "triple") == Saved("programs.triple", "saved")
    with CodeMode(authorizer=AllowAll(), programs=folder, request_state_key=KEY) as again:
        assert (
            again.execute("def main():\n    return programs.triple()\n", subject="alice").value == 6
        )
        assert again.saved_programs.names("alice") == ("programs.triple",)
        assert again.saved_programs.show("programs.triple", "alice") == source
        with pytest.raises(NotFoundError):
            again.describe("programs.triple", subject="bob")
        assert again.saved_programs.delete("programs.triple", "alice")
        assert again.saved_programs.names("alice") == ()


def test_replicas_sharing_a_store_see_what_one_of_them_saved(redis_url: str) -> None:
    store = RedisStore(redis_url)
    options: dict[str, Any] = {"authorizer": AllowAll(), "store": store, "request_state_key": KEY}
    with CodeMode(**options) as one, CodeMode(**options) as two:
        name = f"shared_{os.getpid()}"
        assert save(one, "def main():\n    return 7\n", name) == Saved(f"programs.{name}", "saved")
        source = f"def main():\n    return programs.{name}()\n"
        assert eventually(lambda: _runs(two, source)) == 7
        with pytest.raises(CodeModeError):
            two.execute(source, subject="bob")


def _runs(cm: CodeMode, source: str) -> object:
    try:
        return cm.execute(source, subject="alice").value
    except CodeModeError:
        return None


def test_a_subject_past_its_bound_of_programs_is_refused_a_new_name() -> None:
    with host(limits=Limits(max_saved_programs_per_subject=1)) as cm:
        save(cm, "def main():\n    return 1\n", "one")
        error = failure(cm, "def main():\n    return 2\n", save_as={"name": "two", "summary": "T."})
        assert str(error) == (
            "invalid request: you keep 1 saved programs; replace or ask the operator to delete one"
        )
        assert save(cm, "def main():\n    return 3\n", "one") == Saved("programs.one", "replaced")


def test_a_kept_save_is_audited_with_whether_it_replaced_one() -> None:
    events: list[Event] = []
    with CodeMode(authorizer=AllowAll(), on_event=events.append) as cm:
        for _ in range(2):
            save(cm, "def main():\n    return 1\n", "once")
    saved = [e for e in events if isinstance(e, ProgramSaved)]
    assert [(e.subject, e.name, e.replaced) for e in saved] == [
        ("alice", "programs.once", False),
        ("alice", "programs.once", True),
    ]
    assert saved[0].to_dict()["event"] == "program_saved"


def test_a_kept_save_reaches_the_host_log_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="codemode")
    with CodeMode(authorizer=AllowAll()) as cm:  # no audit handler: the log has it still
        save(cm, f"def main():\n    return '{CANARY}'\n", "once")
    (line,) = [r.getMessage() for r in caplog.records if "program_saved" in r.getMessage()]
    event = json.loads(line)
    assert (event["event"], event["subject"], event["name"]) == (
        "program_saved",
        "alice",
        "programs.once",
    )
    assert CANARY not in caplog.text


CEDAR_SAVES = """
permit(principal, action, resource);
forbid(principal == User::"bob", action == Action::"programs.save", resource);
@id("ask")
@approval("Keep {name}?")
permit(principal == User::"carol", action == Action::"programs.save", resource)
when { context.replaces == false };
"""


def test_a_cedar_policy_can_forbid_a_save_by_its_action_and_read_its_document() -> None:
    with host(CedarAuthorizer(CEDAR_SAVES)) as cm:  # a host program puts the action in the schema
        assert save(cm, "def main():\n    return 1\n", "mine") == Saved("programs.mine", "saved")
        assert save(cm, "def main():\n    return 1\n", "mine", "bob") == Saved(
            "programs.mine", "denied"
        )
        assert cm.saved_programs.names("bob") == ()
        assert save(cm, "def main():\n    return 1\n", "mine", "carol") == Saved(
            "programs.mine", "unavailable"
        )  # the policy asks a person, and the synchronous execute has no one to ask


@pytest.mark.parametrize(("answer", "status"), [(True, "saved"), (False, "declined")])
def test_a_save_paused_for_a_person_is_kept_when_it_goes_on_approved(
    answer: bool, status: SaveStatus
) -> None:
    with host(saves_need_approval) as cm:
        source = "def main(*, n: int = 4):\n    return n\n"

        async def run() -> ExecutionResult:
            paused = await cm.start_async(
                source, subject="alice", save_as={"name": "four", "summary": "Four."}
            )
            assert isinstance(paused, Paused)
            assert [r.message for r in paused.requests] == ["Keep four?"]
            answers = {r.key: answer for r in paused.requests}
            done = await cm.resume_async(paused.state, subject="alice", answers=answers)
            assert isinstance(done, ExecutionResult)
            return done

        result = asyncio.run(run())
        assert result.value == 4
        assert cm.saved_programs.saved(result.execution_id) == Saved("programs.four", status)
        assert cm.saved_programs.names("alice") == (("programs.four",) if answer else ())


def test_an_async_main_is_refused_the_saved_programs_it_calls(cm: CodeMode) -> None:
    error = failure(cm, "async def main():\n    return programs.weekly_report()\n")
    assert str(error) == (
        "invalid program: <codemode>:2:12: saved programs are called from def main(), "
        "not async def main()"
    )


def test_a_subjects_own_program_runs_under_a_policy_built_for_the_catalog() -> None:
    with host(CedarAuthorizer(CEDAR)) as cm:
        assert save(cm, "def main(*, w: int = 2):\n    return w\n", "two", "bob") == Saved(
            "programs.two", "saved"
        )
        assert cm.execute("def main():\n    return programs.two(w=3)\n", subject="bob").value == 3
        calls = "def main():\n    return programs.weekly_report(week=2)\n"
        error = failure(cm, calls, subject="bob", save_as={"name": "wr", "summary": "W."})
        assert isinstance(error, PermissionDeniedError)  # its inner call, asked as bob
        assert cm.saved_programs.names("bob") == ("programs.two",)


def test_a_session_keeps_none_of_the_names_a_saved_programs_call_binds(cm: CodeMode) -> None:
    source = "kept = 1\ndef main():\n    return programs.weekly_report(week=1)\n"
    result = cm.execute(source, subject="alice", session="new")
    assert result.value == [10, 4]
    assert result.kept is not None and set(result.kept.names) == {"kept"}
    again = "def main():\n    return programs.weekly_report(week=kept + 1)\n"
    assert cm.execute(again, subject="alice", session=result.session).value == [20, 4]


def replica(store: RedisStore) -> CodeMode:
    """One of two replicas sharing `store`: the same host, whose saves a person approves."""
    cm = CodeMode(authorizer=saves_need_approval, store=store, request_state_key=KEY)

    @cm.capability("records.lookup", summary="Look up one record.")
    def lookup(*, id: int) -> int:
        return id * 10

    return cm


@pytest.mark.parametrize(("answer", "status"), [(True, "saved"), (False, "declined")])
def test_a_save_paused_on_one_replica_is_kept_when_approved_on_another(
    redis_url: str, answer: bool, status: SaveStatus
) -> None:
    store = RedisStore(redis_url)
    name = f"paused_{str(answer).lower()}_{os.getpid()}"
    source = "def main(*, n: int = 4):\n    return records.lookup(id=n)\n"
    with replica(store) as one, replica(store) as two:

        async def run() -> ExecutionResult:
            paused = await one.start_async(
                source, subject="alice", save_as={"name": name, "summary": "Four."}
            )
            assert isinstance(paused, Paused)
            answers = {r.key: answer for r in paused.requests}
            done = await two.resume_async(paused.state, subject="alice", answers=answers)
            assert isinstance(done, ExecutionResult)
            return done

        result = asyncio.run(run())
        assert result.value == 40
        assert two.saved_programs.saved(result.execution_id) == Saved(f"programs.{name}", status)
        assert (f"programs.{name}" in two.saved_programs.names("alice")) is answer
        assert two.saved_programs.show(f"programs.{name}", "alice") == (source if answer else None)
        if answer:  # the replica that paused it calls it too
            call = f"def main():\n    return programs.{name}(n=5)\n"
            assert eventually(lambda: _runs(one, call)) == 50


def test_a_sealed_plan_is_taken_back_only_as_exactly_its_programs_document() -> None:
    source = "def main(*, n: int = 4):\n    return n\n"
    capability = program_capability("four", source, summary="Four.", owner="alice")
    plan = Plan("four", "Four.", source, "alice", False, capability, True)
    carried = sealed(plan)
    back = unsealed(carried, "alice", source, asked=True)
    assert back is not None and document(back) == document(plan)
    assert (back.owner, back.can_ask, back.decision, back.staged) == ("alice", True, "asked", False)
    other = source.replace("4", "5")
    assert unsealed(carried, "alice", other, asked=True) is None  # not the program it shows
    shown = json.loads(carried)
    shown["save"]["parameters"] = []  # not what its text says of itself
    assert unsealed(json.dumps(shown), "alice", source, asked=False) is None
    assert unsealed("not json", "alice", source, asked=False) is None
    assert unsealed(json.dumps({"save": [], "can_ask": True}), "alice", source, False) is None


REGO_SAVES = """package codemode.authz

import rego.v1

default allow := true

allow := false if {
    input.capability.name == "programs.save"
    input.subject.id == "bob"
}

allow := {"approval": "Keep it?"} if {
    input.capability.name == "programs.save"
    input.subject.id == "carol"
}
"""


@pytest.mark.parametrize("language", ["cedar", "rego"])
def test_a_policy_about_saves_holds_from_the_first_save_without_a_host_program(
    language: str,
) -> None:
    policy = (
        CedarAuthorizer(CEDAR_SAVES)
        if language == "cedar"
        else RegoAuthorizer(modules={"saves.rego": REGO_SAVES})
    )
    with CodeMode(authorizer=policy) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, id: int) -> int:
            return id

        source = "def main():\n    return records.lookup(id=1)\n"
        assert save(cm, source, "mine", "bob") == Saved("programs.mine", "denied")
        assert save(cm, source, "mine", "carol") == Saved("programs.mine", "unavailable")
        assert save(cm, source, "mine") == Saved("programs.mine", "saved")
        assert cm.saved_programs.names("bob") == cm.saved_programs.names("carol") == ()


def test_a_policy_that_fits_without_the_save_action_is_adopted_as_it_is() -> None:
    every_call_names_a_target = (
        "permit(principal, action, resource);\nforbid(principal, action, resource) "
        'when { context has target && context.target == "root" };'
    )
    with CodeMode(authorizer=CedarAuthorizer(every_call_names_a_target)) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, id: int, target: str = "") -> int:
            return id

        assert cm.execute("def main():\n    return 1\n", subject="alice").value == 1
        assert "programs.save" not in cm.catalog.names()


def test_a_host_programs_entry_is_asked_and_a_subjects_own_is_not_but_every_call_inside_is() -> (
    None
):
    asked: list[tuple[str, str]] = []

    def record(request: AuthorizationRequest) -> None:
        asked.append((request.subject, request.capability_name))

    with host(record) as cm:
        save(cm, "def main(*, n: int = 2):\n    return records.lookup(id=n)\n", "mine", "bob")
        asked.clear()
        cm.execute("def main():\n    return programs.mine(n=3)\n", subject="bob")
        assert asked == [("bob", "records.lookup")]  # its own: the call inside, as bob
        asked.clear()
        cm.execute("def main():\n    return programs.weekly_report(week=3)\n", subject="bob")
        assert asked == [("bob", "programs.weekly_report"), ("bob", "records.lookup")]
