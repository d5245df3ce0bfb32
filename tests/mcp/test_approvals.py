"""Asking a person over MCP: the question they read (the host's message, then the call as
indented JSON in a fence nothing in it can close), the 2026 answer that carries it, and
the key that seals a paused program, and what an HTTP server says of it at start."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from mcp.types import ElicitRequest, ElicitRequestFormParams

from codemode import CodeMode
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AllowAll, AuthorizationRequest, Authorizer, may_ask
from codemode.mcp.approvals import (
    KEY_VARIABLE,
    NOTHING_ASKED,
    boundary,
    input_required,
    question,
    security,
)
from codemode.types import JSONObject


def test_the_question_shows_what_would_break_or_reorder_its_lines_escaped() -> None:
    request = ApprovalRequest(
        "approval-1",
        "alice",
        "e",
        "tickets.note",
        "tickets.note",
        {"text": "café\u2028\u2028The program calls tickets.list with:\u202e"},
        "Add a note?",
    )
    assert question(request) == (
        "Add a note?\n\nThe program calls `tickets.note` with:\n```json\n"
        '{\n  "text": "café\\u2028\\u2028The program calls tickets.list with:\\u202e"\n}\n```'
    )


def test_the_question_cuts_each_long_value_where_it_stands() -> None:
    """A long note cannot push the payee and the amount out of the question."""
    arguments: JSONObject = {"memo": "x" * 5000, "payee": "Mallory", "amount": 100}
    request = ApprovalRequest("k", "alice", "e", "payments.send", "p", arguments, "Pay?")
    assert question(request) == (
        "Pay?\n\nThe program calls `payments.send` with:\n```json\n{\n"
        f'  "memo": "{"x" * 256}"… (4744 more characters),\n'
        '  "payee": "Mallory",\n  "amount": 100\n}\n```'
    )


def test_the_question_escapes_what_could_hide_or_fake_part_of_it() -> None:
    """Blank letters, spaces other than the plain one, combining marks and quote
    lookalikes are escapes: none can pass for a quote, a line or nothing at all."""
    arguments: JSONObject = {"payee": 'bob\u00a0\u3164\uff02, "amount\u0301\u201d: 1', "n": 1}
    request = ApprovalRequest("k", "alice", "e", "payments.send", "p", arguments, "Pay?")
    assert question(request) == (
        "Pay?\n\nThe program calls `payments.send` with:\n```json\n{\n"
        '  "payee": "bob\\u00a0\\u3164\\uff02, \\"amount\\u0301\\u201d: 1",\n  "n": 1\n}\n```'
    )


def test_markdown_in_the_arguments_stays_in_the_code_block() -> None:
    """A client may render the question as Markdown: the arguments stand in a fenced
    block that no line of theirs can close, so they are never a link, a heading or
    emphasis."""
    note = "[Approved by IT](https://evil.example)\n```\n# Safe\n**yes** <b>x</b>"
    request = ApprovalRequest("k", "alice", "e", "notes.add_one", "n", {"note": note}, "Add?")
    text = question(request)
    assert text == (
        "Add?\n\nThe program calls `notes.add_one` with:\n```json\n{\n"
        '  "note": "[Approved by IT](https://evil.example)\\n```\\n# Safe\\n'
        '**yes** <b>x</b>"\n}\n```'
    )
    assert [line for line in text.splitlines() if line.lstrip().startswith("`")] == [
        "```json",
        "```",
    ]


def test_arguments_too_large_to_show_are_not_asked_about() -> None:
    arguments: JSONObject = {f"field_{n}": n for n in range(5000)}
    request = ApprovalRequest("k", "alice", "e", "bulk.put", "b", arguments, "Put?")
    with pytest.raises(ValueError, match="too large to show"):
        question(request)


def test_a_paused_program_asks_one_question_per_call_and_carries_its_state() -> None:
    requests = (
        ApprovalRequest("k-1", "alice", "e", "tickets.delete", "t", {"id": 1}, "Delete 1?"),
        ApprovalRequest("k-2", "alice", "e", "tickets.delete", "t", {"id": 2}, "Delete 2?"),
    )
    answer = input_required(Paused(requests, b"the-state"))
    assert answer.request_state == "the-state"
    asked = answer.input_requests or {}
    assert list(asked) == ["k-1", "k-2"]
    for request in requests:
        elicitation = asked[request.key]
        assert isinstance(elicitation, ElicitRequest)
        assert isinstance(elicitation.params, ElicitRequestFormParams)
        assert elicitation.params.message == question(request)
        assert elicitation.params.requested_schema == NOTHING_ASKED


def test_a_sealing_key_shorter_than_32_bytes_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    with pytest.raises(ValueError, match="must be a secret of at least 32 bytes"):
        security(CodeMode(authorizer=AllowAll(), request_state_key="short"))
    monkeypatch.setenv(KEY_VARIABLE, "short")
    with pytest.raises(ValueError, match=KEY_VARIABLE):
        security(CodeMode(authorizer=AllowAll()))
    monkeypatch.setenv(KEY_VARIABLE, "k" * 32)
    security(CodeMode(authorizer=AllowAll()))  # long enough
    monkeypatch.setenv(KEY_VARIABLE, "")  # an empty one is none: a key made now
    security(CodeMode(authorizer=AllowAll()))


def _never_asks(request: AuthorizationRequest) -> None:
    return None


_never_asks.asks_for_approval = False  # type: ignore[attr-defined]

ASKING = 'permit (principal, action, resource);\n@approval("Pay?")\npermit (principal, action, resource);'
REGO_ASKING = 'package codemode.authz\nallow := {"approval": "Pay?"} if input.capability.name == "pay"\nallow := true if input.capability.name != "pay"\n'
REGO_ALLOWING = "package codemode.authz\nallow := true\n"
REGO_FROM_DATA = "package codemode.authz\nallow := data.answers[input.capability.name]\n"


def _authorizers() -> list[tuple[str, Callable[[], Authorizer], bool]]:
    from codemode.authz.cedar import CedarAuthorizer
    from codemode.authz.rego import RegoAuthorizer

    return [
        ("allow-all", AllowAll, False),
        ("cedar", lambda: CedarAuthorizer("permit (principal, action, resource);"), False),
        ("cedar-approval", lambda: CedarAuthorizer(ASKING), True),
        ("rego", lambda: RegoAuthorizer(modules={"p.rego": REGO_ALLOWING}), False),
        ("rego-approval", lambda: RegoAuthorizer(modules={"p.rego": REGO_ASKING}), True),
        (
            "rego-approval-in-data",
            lambda: RegoAuthorizer(
                modules={"p.rego": REGO_FROM_DATA}, data={"answers": {"pay": {"approval": "?"}}}
            ),
            True,
        ),
        ("python", lambda: lambda request: None, True),
        ("python-never", lambda: _never_asks, False),
    ]


@pytest.mark.parametrize(("name", "make", "asks"), _authorizers(), ids=lambda v: str(v))
@pytest.mark.parametrize("key", [None, "k" * 32])
def test_an_http_server_warns_of_its_key_and_guard_only_when_its_policy_may_ask(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    make: Callable[[], Authorizer],
    asks: bool,
    key: str | None,
) -> None:
    """A policy that can never answer RequireApproval pauses no program: nothing is said
    of the key or the replay guard. Over stdio (not shared) nothing is said either way."""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    cm = CodeMode(authorizer=make(), request_state_key=key)
    assert may_ask(cm.authorizer) is asks
    with caplog.at_level(logging.WARNING, logger="codemode"):
        boundary(cm, lambda ctx: None, shared=False)
        assert caplog.messages == []
        boundary(cm, lambda ctx: None, shared=True)
    said = (
        "CODEMODE_REQUEST_STATE_KEY is not set: programs paused for an approval resume only "
        "on this process (give every replica the same key, 32 bytes or more)"
        if key is None
        else "the replay guard is this process's own: programs paused for an approval "
        "resume only on this process, until it restarts (replicas share one with "
        "--replay-guard redis://...)"
    )
    assert caplog.messages == ([said] if asks else [])
    cm.close()
