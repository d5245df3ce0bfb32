"""Asking a person over MCP, by what the request's channel can carry.

- A live session (stdio, in the 2025-era protocol) whose client declared elicitation:
  the server sends `elicitation/create` (form mode, asking for nothing) while the
  program waits, paused. Accept approves; decline and cancel refuse.
- The 2026-07-28 protocol, when the request declares elicitation: `execute` answers
  `input_required`, with one elicitation per call and the paused program as its
  `requestState`, which the SDK's `RequestStateBoundary` seals (AES-256-GCM; bound to the
  subject, the tool call and the server's name; expiring after the approval wait). The
  client's retry, on any replica holding the same key, resumes it.
- Anything else cannot ask: such a call fails with `approval unavailable` (fail
  closed). A 2025-era client over stateless HTTP is told why, and what would work
  (`NO_SESSION`).

Whichever way it asks, `execute` tells a client that asked for progress how far the
program is as it runs (`codemode.mcp.progress`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.types import (
    CallToolRequestParams,
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
from codemode.authz import may_ask
from codemode.mcp import progress
from codemode.mcp.tools import ToolResult, ok
from codemode.payloads import execute_payload
from codemode.programs import SaveAs
from codemode.questions import arguments_text
from codemode.runtime import ExecutionResult

log = logging.getLogger("codemode")

KEY_VARIABLE = "CODEMODE_REQUEST_STATE_KEY"
"""Where every replica finds the key it seals paused programs with."""

INPUT_REQUIRED_SINCE = "2026-07-28"
"""The first protocol version whose requests a server may answer `input_required`."""

NO_SESSION = (
    "this call needs a person's approval, and no one can be asked for it here: a 2025-era "
    "client over HTTP has no session with this stateless server, to declare elicitation on "
    "or be asked through; a client that declares elicitation is asked over HTTP in protocol "
    "2026-07-28, or over stdio"
)
"""Why a 2025-era client is never asked over HTTP: it declares elicitation at `initialize`,
which a stateless server (any replica may answer each request) keeps nothing of, and
`elicitation/create` would need a session to be sent on and answered through. The
2026-07-28 protocol declares it with each request and asks in the reply itself
(`input_required`), so it needs neither."""

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
    stand beside) whose authorizer may ask a person (`may_ask`) says at start what its
    key and replay guard cannot do; one that never asks pauses no program, so has
    nothing to say."""
    sealing = security(cm)
    shared = shared and may_ask(cm.authorizer)
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


def elicits(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client declared form elicitation (an empty declaration means form)."""
    capabilities = ctx.session.client_capabilities
    elicitation = None if capabilities is None else capabilities.elicitation
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None


def _modern(ctx: ServerRequestContext[Any]) -> bool:
    return ctx.protocol_version >= INPUT_REQUIRED_SINCE  # versions are dates


def question(request: ApprovalRequest) -> str:
    """What the person reads: the authorizer's message (the host's own text, as it is),
    then the call itself.

    A client may render the question as Markdown, and the arguments are the program's:
    they stand in a fenced code block, where nothing they hold is a link, a heading or
    emphasis, and where no line of them can close the fence (each is indented JSON, or
    opens with a brace). They are shown as `arguments_text` shows them: each long value
    cut in place, so every argument is named. ValueError for arguments too large to show
    (a call that needs approval is not asked about then: it fails `approval
    unavailable`)."""
    shown = arguments_text(request.arguments)
    if shown is None:
        raise ValueError("the arguments are too large to show")
    name = request.capability_name  # a dotted identifier: no backtick
    return f"{request.message}\n\nThe program calls `{name}` with:\n```json\n{shown}\n```"


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
    arguments: dict[str, Any],
    subject: str,
) -> ToolResult | InputRequiredResult:
    """`execute`, asking a person however this request's channel can, and telling its
    client how far the program is when the request asked (`progress.relayed`: the last
    note before the reply). A 2026-era retry needs no `session`, since its paused state
    carries the handle."""
    source, session = arguments["source"], arguments.get("session")

    def reply(result: ExecutionResult) -> ToolResult:  # with how its save_as ended, if any
        return ok(execute_payload(result, cm.saved_programs.saved(result.execution_id)))

    save_as = arguments.get("save_as")
    async with progress.relayed(ctx):
        return await run(cm, ctx, params, subject, source, session, reply, save_as=save_as)


async def run(
    cm: CodeMode,
    ctx: ServerRequestContext[Any],
    params: CallToolRequestParams,
    subject: str,
    source: str,
    session: str | None,
    reply: Callable[[ExecutionResult], ToolResult],
    *,
    save_as: SaveAs | None = None,
) -> ToolResult | InputRequiredResult:
    """Run `source` as `subject` for this tool call, kept as `save_as` says once it
    succeeded, asking a person however its channel can (a 2026-era retry resumes the
    program its paused state holds, and its save), and answer what it returned as
    `reply` says."""
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
                pausable=elicits(ctx),
            )
        else:
            outcome = await cm.start_async(
                source, subject=subject, pausable=elicits(ctx), session=session, save_as=save_as
            )
        if isinstance(outcome, Paused):
            return input_required(outcome)
        return reply(outcome)
    if not ctx.session.can_send_request:  # stateless HTTP: no session, nothing declared
        result = await cm.execute_async(
            source, subject=subject, unavailable=NO_SESSION, session=session, save_as=save_as
        )
    else:
        approve = live_approver(ctx) if elicits(ctx) else None
        result = await cm.execute_async(
            source, subject=subject, approve=approve, session=session, save_as=save_as
        )
    return reply(result)


__all__ = [
    "KEY_VARIABLE",
    "NOTHING_ASKED",
    "NO_SESSION",
    "boundary",
    "elicits",
    "execute",
    "input_required",
    "question",
    "run",
]
