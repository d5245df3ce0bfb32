"""Approval messages that name the call's arguments: filled escaped and bounded, checked at
start-up in Cedar, the same in Rego, and what the person reads wherever they are asked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemode import CodeMode
from codemode.approvals import ApprovalRequest
from codemode.authz import AuthorizationRequest, RequireApproval
from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError
from codemode.authz.rego import RegoAuthorizer
from codemode.authz.templates import fill, template_problem
from codemode.events import ApprovalAsked, Event
from codemode.types import JSONValue

PAYOUT = """\
permit(principal, action, resource);

@approval("Pay {amount_cents} cents to {payee}?")
permit(principal, action == Action::"payouts.pay", resource);
"""
PAY = 'def main():\n    return payouts.pay(amount_cents=34500, payee="ACME Ltd")\n'


def payouts(authorizer: Any, events: list[Event]) -> CodeMode:
    cm = CodeMode(authorizer=authorizer, on_event=events.append)

    @cm.capability("payouts.pay", summary="Pay a supplier.")
    def pay(amount_cents: int, payee: str, memo: str | None = None) -> str:
        return f"paid {payee}"

    return cm


def asked(cm: CodeMode, source: str = PAY) -> list[str]:
    messages: list[str] = []

    async def approve(request: ApprovalRequest) -> bool:
        messages.append(request.message)
        return True

    with cm:
        result = asyncio.run(cm.execute_async(source, subject="alice", approve=approve))
    assert result.value == "paid ACME Ltd"
    return messages


def test_fill_writes_each_argument_as_bounded_json_and_leaves_unknown_names() -> None:
    arguments: dict[str, JSONValue] = {
        "amount_cents": 34500,
        "payee": 'ACME\n"approved"',
        "memo": None,
    }
    assert (
        fill("Pay {amount_cents} to {payee} ({memo}, {other}) {{literal}}", arguments)
        == 'Pay `34500` to `"ACME\\n\\"approved\\""` ({memo}, {other}) {literal}'
    )
    assert fill("{payee}", {"payee": "x" * 200}) == '`"' + "x" * 78 + "…`"
    assert fill("{tags}", {"tags": ["a", "b"]}) == '`["a", "b"]`'
    assert fill("no fields, a lone { brace", {"a": 1}) == "no fields, a lone { brace"


def test_a_field_is_a_bare_name_never_an_attribute_index_or_format() -> None:
    assert template_problem("Pay {amount_cents}") is None
    assert template_problem("{payee.__class__}") == (
        "{payee.__class__} is not an argument's name (a field is a bare name, as {payee})"
    )
    assert template_problem("{payee[0]}") is not None
    assert template_problem("{amount_cents:>10}") is not None
    assert template_problem("{payee!r}") is not None
    assert template_problem("{0}") is not None
    assert fill("{payee.__class__}", {"payee": "x"}) == "{payee.__class__}"


def test_cedar_asks_the_person_with_the_arguments_filled_in_and_audits_that_text() -> None:
    events: list[Event] = []
    messages = asked(payouts(CedarAuthorizer(PAYOUT), events))
    assert messages == ['Pay `34500` cents to `"ACME Ltd"`?']
    assert [e.message for e in events if isinstance(e, ApprovalAsked)] == messages


def test_cedar_refuses_at_start_up_a_name_no_argument_has_and_a_broken_template() -> None:
    typo = PAYOUT.replace("{payee}", "{paye}")
    with pytest.raises(CedarPolicyError) as raised:
        CedarAuthorizer(typo).prepare(
            list(payouts(CedarAuthorizer(PAYOUT), []).catalog.enabled.values())
        )
    assert str(raised.value) == (
        "line 3: the @approval message names {paye}, which is no capability's argument"
    )
    with pytest.raises(CedarPolicyError) as raised:
        CedarAuthorizer(PAYOUT.replace("{payee}?", "{payee}? {"))
    assert str(raised.value) == (
        "line 3: the @approval message: Single '{' encountered in format string "
        "(write a literal brace as {{ or }})"
    )


def test_rego_approval_messages_are_filled_the_same_way() -> None:
    policy = RegoAuthorizer(
        modules={
            "p.rego": "package codemode.authz\n"
            'allow := {"approval": "Pay {amount_cents} cents to {payee}? {nothing}"}\n'
        }
    )
    request = AuthorizationRequest(
        "alice", "payouts.pay", "payouts.pay", {"amount_cents": 34500, "payee": "ACME"}
    )
    assert policy(request) == RequireApproval('Pay `34500` cents to `"ACME"`? {nothing}')


@pytest.mark.parametrize(
    ("payee", "shown"),
    [
        ("ACME <!--", '`"ACME \\u003c!--"`'),
        ("[ACME](https://evil.example/a)", '`"[ACME](https://evil.example/a)"`'),
        ("ACME\u2028**Verified**", '`"ACME\\u2028**Verified**"`'),
        ("ACME\u0085\u009b2J\u202eEMCA", '`"ACME\\u0085\\u009b2J\\u202eEMCA"`'),
        ("`x` ``y", '```"`x` ``y"```'),
        ("`", '``"`"``'),
        ("ACME\u301e to \u301dBob\uff40", '`"ACME\\u301e to \\u301dBob\\uff40"`'),
    ],
)
def test_a_value_is_an_inert_code_span_that_cannot_shape_the_question(
    payee: str, shown: str
) -> None:
    """A client may render the question as Markdown: a value stands in a code span longer
    than any run of backticks it holds (no link, image, emphasis or HTML comment), with
    every character that breaks, reorders or hides a line escaped, and `<` `>` too."""
    assert fill("Pay {payee}?", {"payee": payee}) == f"Pay {shown}?"


def test_the_line_named_is_the_approval_annotations_own() -> None:
    policy = '@id("pay")\n@approval("Pay {paye}?")\npermit(principal, action, resource);\n'
    with pytest.raises(CedarPolicyError) as raised:
        CedarAuthorizer(policy).prepare(
            list(payouts(CedarAuthorizer(PAYOUT), []).catalog.enabled.values())
        )
    assert str(raised.value) == (
        "line 2: the @approval message names {paye}, which is no capability's argument"
    )


def test_two_fields_side_by_side_are_two_spans_apart() -> None:
    """`{a}{b}`: the spans' fences would run together into one longer run and let the
    second value out of its span, so a space stands between them."""
    arguments: dict[str, JSONValue] = {"a": "``", "b": "[ACME](https://evil.example)"}
    assert fill("Pay {a}{b}?", arguments) == ('Pay ```"``"``` `"[ACME](https://evil.example)"`?')
