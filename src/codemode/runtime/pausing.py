"""Pausing a program at a call a person must answer, and going on from such a pause.

When the authorizer asks a person about a call (`RequireApproval`) and someone can be
asked, the call waits here (an `Ask`); the program pauses once a person is all it waits
for: the interpreter's dump and everything else the execution needs to go on (its calls
and their records, budgets used, printed output, time left, errors raised inside it) are
written as one `PausedState`, its dump compressed and the whole bounded by
`Limits.max_paused_bytes` as sent (what it holds before compression is bounded too, before
anything more is made of it), and the caller is answered with the requests and the state.
A program that resumes is restored from that state here, with the person's verdicts: the
calls they answered for run again, bound exactly as they were when they were asked.

This is the only part of an execution that knows of approvals: the execution asks it to
pause and to restore, the driver asks it about each call that needs a person.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set

from codemode.clock import wall
from codemode.continuations import (
    VERSIONS,
    Ask,
    Paused,
    PausedState,
    Verdict,
    decide,
    freeze,
    new_id,
    over_bound,
    over_inflation,
    paused_as,
    state_seconds,
    thaw,
)
from codemode.continuations import Injected as Raised
from codemode.errors import InternalError, Where
from codemode.limits import LimitKind, exceeded, seconds
from codemode.questions import arguments_text
from codemode.runtime.calllog import CallLog
from codemode.runtime.classify import FailureContext, StopError
from codemode.runtime.deadline import Deadline, Locate
from codemode.runtime.dispatch import Approval, Asked, Plan, abandon
from codemode.runtime.printed import Printed
from codemode.runtime.program import Program
from codemode.runtime.sandbox import Call, Run, SandboxFailure
from codemode.runtime.setup import Setup
from codemode.runtime.state import Status
from codemode.runtime.waits import Waits

log = logging.getLogger("codemode")


class Pausing:
    """The calls of one execution that wait for a person; its pause, and its restore."""

    def __init__(
        self,
        status: Status,
        waits: Waits,
        *,
        pausable: bool,
        restored: PausedState | None,
        setup: Setup,
        source: str,
        subject: str,
        execution_id: str,
        deadline: Deadline,
        printed: Printed,
        calls: CallLog,
        failures: FailureContext,
        elapsed: Callable[[], float],
        settle: Callable[[Paused], None],
    ) -> None:
        self.status = status
        self.waits = waits
        self.pausable = pausable
        """Whether a call that needs a person's approval pauses the program (else it
        fails: no one can be asked)."""
        self.restored = restored
        """The paused program this execution goes on from, if it resumes one."""
        self.setup = setup
        self.source = source
        self.subject = subject
        self.execution_id = execution_id
        self.deadline = deadline
        self.printed = printed
        self.calls = calls
        self.failures = failures
        self._elapsed = elapsed
        self._settle = settle
        self._asks: dict[int, Ask] = {}
        """Calls waiting for a person's answer, by call id."""
        self._answered: dict[int, tuple[Ask, Asked]] = {}
        """On resume: the calls a person answered for, with the answer, by call id."""
        self._approvals = 0

    # -- going on from a pause --------------------------------------------------------------

    def restore(self, verdicts: Mapping[str, Verdict]) -> None:
        """Go on where the paused program stopped: its calls, budgets, output and errors,
        and the person's verdict on each call they were asked about (declined when none
        is given)."""
        state = self.restored
        assert state is not None
        self.printed.restore(state.printed)
        self.calls.restore(
            state.calls,
            state.records,
            result_bytes=state.result_bytes,
            sandbox_seconds=state.sandbox_seconds,
            capability_seconds=state.capability_seconds,
        )
        self._approvals = state.approvals
        self.failures.injected.extend(
            (item.where, item.exc_type, item.message, item.error()) for item in state.injected
        )
        for ask in state.asks:
            verdict = verdicts.get(ask.key, decide(None))  # none given: declined
            answer = Asked(verdict, ask.message, seconds(ask.wait_seconds), ask.arguments)
            self._answered[ask.call_id] = (ask, answer)

    @property
    def snapshot(self) -> bytes | None:
        """The interpreter's dump the program goes on from, if it resumes."""
        return None if self.restored is None else self.restored.snapshot

    def resumed_calls(self) -> list[Call]:
        """The calls a person answered for (an `async def main` runs them as it resumes,
        as they would have run)."""
        return [_call(ask) for ask, _ in list(self._answered.values())]

    def resumed(self, call_id: int) -> Call | None:
        """The call a person answered for, if `call_id` is one (a sync `main()` resumes
        at it)."""
        answered = self._answered.get(call_id)
        return None if answered is None else _call(answered[0])

    def answer_for(self, call_id: int) -> Asked | None:
        """How a person answered for this call, for its plan (once)."""
        answered = self._answered.pop(call_id, None)
        return None if answered is None else answered[1]

    # -- asking -----------------------------------------------------------------------------

    def ask(
        self, call: Call, name: str, plan: Plan, approval: Approval, locate: Locate
    ) -> Verdict | None:
        """The authorizer asks a person about this call: None when the call now waits for
        their answer (its plan ends here; the call runs again on resume); else, when no
        one can be asked, the verdict its plan goes on with (it fails: fail closed). No
        one is asked about arguments too large to show them faithfully
        (`codemode.questions`) either."""
        if not self.pausable:
            return decide(None, asked=False)
        if arguments_text(approval.arguments) is None:
            log.warning(
                "execution %s: %s needs approval, but its arguments are too large to show a "
                "person faithfully, so no one is asked",
                self.execution_id,
                name,
            )
            return decide(None, asked=False)
        approval.span.approval("asked")
        abandon(plan)
        limits = self.setup.limits
        self._approvals += 1
        if self._approvals > limits.max_approvals:
            raise StopError(exceeded(LimitKind.APPROVALS, limits, where=locate()))
        capability = self.setup.capabilities[name]
        try:
            written = freeze([list(call.args), call.kwargs])
        except TypeError:
            log.warning("execution %s: a call of %s cannot pause", self.execution_id, name)
            raise StopError(InternalError()) from None
        ask = Ask(
            key=f"approval-{call.call_id}",
            call_id=call.call_id,
            capability=name,
            capability_id=capability.id,
            written=written,
            arguments=approval.arguments,
            span=call.span,
            message=approval.message,
            asked_at=wall(self.deadline.clock),
            wait_seconds=limits.max_approval_wait_seconds,
        )
        with self.status.lock:
            self._asks[call.call_id] = ask
        return None

    def asked(self) -> Set[int]:
        """The calls waiting for a person now (they never run in this execution): a live
        view."""
        return self._asks.keys()

    def due(self) -> bool:
        """Whether an `async def main` is to pause now: all it waits for is a person (every
        other call and sleep has ended and the program has taken their answers, so the
        dump holds them, and no host coroutine is left behind). Then it waits no more."""
        if not self._asks:  # read unlocked: a call asked about calls this again after
            return False
        with self.status.lock:
            return bool(self._asks) and self.waits.only_for(self._asks.keys())

    # -- pausing ----------------------------------------------------------------------------

    def pause(self, run: Run, program: Program) -> None:
        """Dump the program where it waits and answer the caller with what a person is
        asked; the worker is let go and nothing of the execution stays behind."""
        limits = self.setup.limits
        deadline = self.deadline
        calls = self.calls
        where = program.where_at(*next(iter(self._asks.values())).span)
        overdue = deadline.check(deadline.clock.now())
        if overdue is not None:  # no time left to go on with: no one is asked
            raise StopError(overdue)
        snapshot = self._dump(run, where)
        state = PausedState(
            id=new_id(),
            execution_id=self.execution_id,
            subject=self.subject,
            source=self.source,
            snapshot=snapshot,
            catalog=self.setup.digest(),
            asks=tuple(self._asks.values()),
            calls=tuple(calls.names),
            records=calls.records(program),
            injected=tuple(
                Raised(
                    where,
                    exc_type,
                    message,
                    error.code.value,
                    error.detail,
                    None if error.facts is None else error.facts.to_dict(),
                )
                for where, exc_type, message, error in self.failures.injected
            ),
            printed=self.printed.text,
            seconds_left=deadline.remaining(),
            elapsed=self._elapsed(),
            sandbox_seconds=calls.sandbox_seconds,
            capability_seconds=calls.capability_seconds,
            result_bytes=calls.result_bytes,
            approvals=self._approvals,
            versions=dict(VERSIONS),
            expires_at=wall(deadline.clock) + state_seconds(limits),
            carried="" if program.appendix is None else program.appendix.carried,
        )
        encoded = state.encode()
        too_large = over_bound(len(encoded), limits, where)  # what is sent, and held
        if too_large is not None:
            del state, encoded
            raise StopError(too_large)
        self._settle(paused_as(state, encoded))

    def _dump(self, run: Run, where: Where | None) -> bytes:
        """The interpreter's dump, measured as soon as it is in hand (with the printed
        output, as `PausedState.size` counts it): one past `INFLATION` times
        `Limits.max_paused_bytes` is let go before anything more is made of it
        (compressed, encoded), so a program that holds much costs no more than its dump,
        and only for an instant."""
        limits = self.setup.limits
        try:
            snapshot = run.dump()
        except SandboxFailure:  # the worker could not write out all it holds
            log.warning("execution %s: the program could not be dumped", self.execution_id)
            raise StopError(exceeded(LimitKind.PAUSED_SIZE, limits, where=where)) from None
        too_large = over_inflation(len(snapshot) + self.printed.size, limits, where)
        if too_large is not None:
            del snapshot  # not kept alive by the traceback of the error below
            raise StopError(too_large)
        return snapshot


def _call(ask: Ask) -> Call:
    """The call a person answered for, as the program made it (bound again, it must give
    the arguments they saw)."""
    args, kwargs = thaw(ask.written)
    return Call(ask.capability, tuple(args), kwargs, ask.call_id, ask.span)


__all__ = ["Pausing"]
