"""Asking a person over MCP: the question they read (the host's message, then the call as
indented JSON in a fence nothing in it can close), the 2026 answer that carries it, and
the key that seals a paused program."""

from __future__ import annotations

import pytest
from mcp.types import ElicitRequest, ElicitRequestFormParams

from codemode import CodeMode
from codemode.approvals import ApprovalRequest, Paused
from codemode.authz import AllowAll
from codemode.mcp.approvals import KEY_VARIABLE, NOTHING_ASKED, input_required, question, security
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
