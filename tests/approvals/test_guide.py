"""The approvals guide says what the code does: its host is the file it names, its Cedar
and Rego policies ask before destructive calls, and its texts are the real ones."""

from __future__ import annotations

import asyncio
import re
import runpy
from pathlib import Path

from codemode import CodeMode
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.authz.rego import RegoAuthorizer
from codemode.mcp.approvals import question

ROOT = Path(__file__).parents[2]
GUIDE = (ROOT / "docs/guides/approvals.md").read_text()
HOST = ROOT / "docs/guides/approvals_host.py"


def block(language: str, index: int = 0) -> str:
    """The guide's `index`-th block of `language`, fenced with three backticks or more."""
    found = re.findall(rf"^(```+){language}\n(.*?)^\1$", GUIDE, re.S | re.M)
    text: str = found[index][1]
    return text


def test_the_guide_shows_its_host_file_as_it_is() -> None:
    assert block("python") == HOST.read_text()


def test_the_cedar_policy_asks_before_destructive_calls_only() -> None:
    cm: CodeMode = runpy.run_path(str(HOST))["cm"]
    program = block("python", 2)
    with cm:
        outcome = asyncio.run(cm.start_async(program, subject="alice"))
        assert isinstance(outcome, Paused)
        (request,) = outcome.requests
        assert (request.capability_name, request.arguments) == ("tickets.delete", {"id": 1})
        assert question(request) + "\n" == block("text")
        assert request.message in block("text")


def test_the_rego_policy_asks_as_the_cedar_one_does() -> None:
    rego = RegoAuthorizer(modules={"ask.rego": block("rego")})

    def decide(name: str, **hints: bool) -> object:
        return rego(AuthorizationRequest("alice", name, name, {}, annotations=hints))

    assert decide("tickets.list", readOnlyHint=True) is True
    assert decide("tickets.delete", destructiveHint=True) == RequireApproval(
        "Allow tickets.delete?"
    )


def test_the_outcome_table_quotes_the_real_texts() -> None:
    cm: CodeMode = runpy.run_path(str(HOST))["cm"]
    answers = iter([True, False])

    async def approve(request: ApprovalRequest) -> bool:
        return next(answers)

    with cm:
        unavailable = cm.execute(block("python", 2), subject="alice").value
        decided = asyncio.run(cm.execute_async(block("python", 2), subject="bob", approve=approve))
    assert isinstance(unavailable, list) and isinstance(decided.value, list)
    table = GUIDE.split("| the person | the call |")[1].split("\n\n")[0]
    assert f"`{unavailable[0]}`" in table
    assert decided.value[0] is True and f"`{decided.value[1]}`" in table
