"""Asking a person over MCP, by what the request's channel can carry.

- A live session (stdio, in the 2025-era protocol) whose client declared elicitation:
  the server sends `elicitation/create` (form mode, asking for nothing) while the
  program waits, paused. Accept approves; decline and cancel refuse.
- The 2026-07-28 protocol, when the request declares elicitation: `execute` answers
  `input_required`, with one elicitation per call and the paused program as its
  `requestState`, which the SDK's `RequestStateBoundary` seals (AES-256-GCM; bound to the
  subject, the tool call and the server's name; expiring after the approval wait). The
  client's retry, on any replica holding the same key, resumes it.
- Anything else (no elicitation declared, a 2025-era client over stateless HTTP, which
  has no session to ask through) cannot ask: such a call fails with `approval
  unavailable` (fail closed).
"""

from __future__ import annotations

import json
import logging
import os
import unicodedata
from collections.abc import Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from codemode.app import CodeMode
from codemode.approvals import (
    ApprovalRequest,
    Approver,
    InProcessReplayGuard,
    Paused,
    state_seconds,
)
from codemode.mcp.tools import ok
from codemode.payloads import execute_payload

log = logging.getLogger("codemode")

KEY_VARIABLE = "CODEMODE_REQUEST_STATE_KEY"
"""Where every replica finds the key it seals paused programs with."""

INPUT_REQUIRED_SINCE = "2026-07-28"
"""The first protocol version whose requests a server may answer `input_required`."""

NOTHING_ASKED: dict[str, Any] = {"type": "object", "properties": {}}
"""The approval form: no field to fill, so accept approves and decline refuses."""


def _key(cm: CodeMode) -> str | bytes | None:
    """The sealing key the host gave: `cm.request_state_key`, else
    `CODEMODE_REQUEST_STATE_KEY` (an empty one is none)."""
    return cm.request_state_key or os.environ.get(KEY_VARIABLE) or None


def security(cm: CodeMode) -> RequestStateSecurity:
    """How paused programs are sealed: the host's key (its UTF-8 bytes; else one made
    now), valid as long as an approval may take. ValueError for a key shorter than 32
    bytes."""
    key = _key(cm)
    ttl = state_seconds(cm.limits)
    if key is None:
        return RequestStateSecurity.ephemeral(ttl=ttl)
    try:
        return RequestStateSecurity(keys=[key], ttl=ttl)
    except (TypeError, ValueError):
        raise ValueError(
            f"the request-state key ({KEY_VARIABLE}) must be a secret of at least 32 bytes; "
            'make one with: python -c "import secrets; print(secrets.token_hex(32))"'
        ) from None


def boundary(
    cm: CodeMode, principal: Callable[[ServerRequestContext[Any]], str | None], *, shared: bool
) -> RequestStateBoundary:
    """The SDK's request-state boundary for this server (`security`), bound to codemode's
    own subject and to the server's name. A `shared` server (HTTP, which replicas may
    stand beside) says at start what its key and replay guard cannot do."""
    sealing = security(cm)
    if shared and _key(cm) is None:
        log.warning(
            "%s is not set: programs paused for an approval resume only on this process "
            "(give every replica the same key, 32 bytes or more)",
            KEY_VARIABLE,
        )
    elif shared and isinstance(cm.replay_guard, InProcessReplayGuard):
        log.warning(
            "the replay guard is this process's own: programs paused for an approval "
            "resume only on this process, until it restarts (replicas share one with "
            "--replay-guard redis://...)"
        )
    sealing.bind_principal = principal
    return RequestStateBoundary(sealing, default_audience=cm.name)


def _elicits(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared form elicitation (an empty declaration means form)."""
    capabilities = ctx.session.client_capabilities
    elicitation = None if capabilities is None else capabilities.elicitation
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


def _modern(ctx: ServerRequestContext[Any]) -> bool:
    return ctx.protocol_version >= INPUT_REQUIRED_SINCE  # versions are dates


def question(request: ApprovalRequest) -> str:
    """What the person reads: the authorizer's message, then the call itself.

    The arguments are the program's: a character that would break or reorder a line (a
    separator, a bidirectional control) is shown escaped, so they cannot pose as more of
    the question, and past `QUESTION_ARGUMENTS` characters they are cut (with a note), so
    a program cannot make the question a burden to build or to read."""
    arguments = json.dumps(request.arguments, ensure_ascii=False, default=repr)
    if len(arguments) <= _INDENTED:
        arguments = json.dumps(request.arguments, ensure_ascii=False, indent=2, default=repr)
    if len(arguments) > QUESTION_ARGUMENTS:
        cut = len(arguments) - QUESTION_ARGUMENTS
        arguments = f"{arguments[:QUESTION_ARGUMENTS]}... ({cut} more characters)"
    shown = "".join(map(_shown, arguments))
    return f"{request.message}\n\nThe program calls {request.capability_name} with:\n{shown}"


QUESTION_ARGUMENTS = 4096
"""Characters of a call's arguments a question shows at most."""
_INDENTED = 1024
"""Arguments this short (as one line) are shown indented, one key a line."""


def _shown(character: str) -> str:
    """A control, format or separator character (but the line breaks of the indentation)
    as JSON escapes it, a pair of surrogates past U+FFFF; any other as it is."""
    if character == "\n" or unicodedata.category(character) not in ("Cc", "Cf", "Zl", "Zp"):
        return character
    units = character.encode("utf-16-be")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def live_approver(ctx: ServerRequestContext[Any]) -> Approver:
    """Asks over the live session, with `elicitation/create`."""

    async def approve(request: ApprovalRequest) -> bool:
        answer = await ctx.session.elicit_form(
            question(request), NOTHING_ASKED, related_request_id=ctx.request_id
        )
        return answer.action == "accept"

    return approve


def input_required(paused: Paused) -> InputRequiredResult:
    """The 2026 answer for a paused program: one elicitation per call, and its state
    (sealed by the boundary on its way out)."""
    return InputRequiredResult(
        input_requests={
            request.key: ElicitRequest(
                params=ElicitRequestFormParams(
                    message=question(request), requested_schema=NOTHING_ASKED
                )
            )
            for request in paused.requests
        },
        request_state=paused.state.decode("ascii"),
    )


async def execute(
    cm: CodeMode,
    ctx: ServerRequestContext[Any],
    params: CallToolRequestParams,
    source: str,
    subject: str,
) -> CallToolResult | InputRequiredResult:
    """`execute`, asking a person however this request's channel can."""
    if _modern(ctx):
        if params.request_state is not None:  # the boundary verified and unsealed it
            answers = {
                key: isinstance(response, ElicitResult) and response.action == "accept"
                for key, response in (params.input_responses or {}).items()
            }
            outcome = await cm.resume_async(
                params.request_state.encode("ascii"),
                subject=subject,
                answers=answers,
                pausable=_elicits(ctx),
            )
        else:
            outcome = await cm.start_async(source, subject=subject, pausable=_elicits(ctx))
        if isinstance(outcome, Paused):
            return input_required(outcome)
        return ok(execute_payload(outcome))
    approve = live_approver(ctx) if _elicits(ctx) and ctx.session.can_send_request else None
    result = await cm.execute_async(source, subject=subject, approve=approve)
    return ok(execute_payload(result))


__all__ = ["KEY_VARIABLE", "NOTHING_ASKED", "boundary", "execute", "input_required", "question"]
