"""Limits on one execution: frozen, validated, with documented defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

from codemode.errors import ResourceLimitError, Where

KIB = 1024
MIB = 1024 * KIB


class LimitKind(StrEnum):
    """The kind of limit named in `resource limit exceeded: <kind> (limit <bound>)`."""

    SOURCE_SIZE = "source size"
    EXECUTION_TIME = "execution time"
    CAPABILITY_TIME = "capability time"
    INTERPRETER_TIME = "interpreter time"
    MEMORY = "memory"
    RECURSION_DEPTH = "recursion depth"
    CAPABILITY_CALLS = "capability calls"
    ARGUMENT_SIZE = "argument size"
    RESULT_SIZE = "result size"
    TOTAL_RESULT_SIZE = "total result size"
    RETURN_VALUE_SIZE = "return value size"
    VALUE_DEPTH = "value depth"
    PRINTED_OUTPUT = "printed output"
    HOST_CALLS = "host calls"
    """Everything a program asks of the host: capability calls, vars(), sleeps, clock reads."""
    CALLS_LEFT_RUNNING = "calls left running past their deadline"
    """A subject's host code still running past its deadline, across its executions (sync
    host code's threads, event loops its coroutines block, coroutines that ignored their
    cancellation): past its share, that subject's new executions are refused (see
    `subject_share`)."""
    PROGRAMS_WAITING = "programs waiting to run"
    """A subject's executions queued for a slot: past its share of the queue, or with the
    queue full, its new executions are refused (see `queued`)."""
    APPROVALS = "approvals"
    """Calls of one execution sent to a person for approval."""
    PAUSED_SIZE = "paused program size"
    """What a program paused for an approval holds (its interpreter's state and more)."""
    SESSION_SIZE = "session size"
    """What a session keeps after a program (its interpreter's state, before compression)."""
    RUNNING_TASKS = "running tasks"
    """Programs one subject runs as tasks at once."""


WORK_THREADS = 16
"""The fewest threads the engine runs interpreter steps and sync host code on."""


def work_threads(limits: Limits) -> int:
    """Threads the engine runs interpreter steps and sync host code on: 16, or twice the
    executions that may run at once, so each can step while as many wait in host code."""
    return max(WORK_THREADS, 2 * limits.max_concurrent_executions)


def queued(limits: Limits) -> int:
    """Executions that may wait for a slot, across subjects: 32 per slot."""
    return 32 * limits.max_concurrent_executions


def subject_share(total: int) -> int:
    """How much of a shared bound one subject may hold (threads in use, host code left
    running past its deadline): half, so no subject can take what the others need."""
    return max(total // 2, 1)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one execution may use, and how many executions may run at once per `CodeMode`
    (`max_concurrent_executions`, the one limit that is not per execution). Zero or
    negative is rejected: there is no "unlimited".

    **Parameters** (defaults in brackets):

    - `max_source_bytes` (64 KiB): UTF-8 size of the submitted program.
    - `max_execution_seconds` (10): wall-clock time of the whole execution, capability
      calls and waiting for a free slot included.
    - `max_interpreter_seconds` (5): time the interpreter itself runs the program,
      not counting time spent waiting on capabilities.
    - `max_memory_bytes` (256 MiB): interpreter heap.
    - `max_recursion_depth` (200): nested function calls in the program.
    - `max_capability_calls` (100): capability calls per execution.
    - `max_argument_bytes` (1 MiB): JSON size of one call's arguments.
    - `max_result_bytes` (1 MiB): JSON size of one capability result.
    - `max_total_result_bytes` (8 MiB): JSON size of all capability results together.
    - `max_return_bytes` (1 MiB): JSON size of the value `main()` returns.
    - `max_value_depth` (64): nesting of any value that crosses the sandbox boundary.
    - `max_printed_bytes` (64 KiB): captured `print()` output.
    - `max_concurrent_executions` (8): executions running at once per `CodeMode`, at
      most half of them (at least one) of one subject; up to 32 per slot more wait
      (half of them of one subject), within their own execution time.
    - `max_calls_per_capability` (100): calls of any one capability per execution,
      unless the capability sets `max_calls_per_execution`.
    - `max_capability_seconds` (10): how long one handler may run, unless the capability
      sets `timeout`; an async handler is cancelled, a sync one abandoned.
    - `max_approvals` (10): calls of one execution a person is asked to approve
      (`codemode.authz.RequireApproval`).
    - `max_approval_wait_seconds` (600): how long a person may take to answer one
      approval; the wait does not count against `max_execution_seconds`.
    - `max_paused_bytes` (1 MiB): what a program paused for an approval may carry as it
      is sealed into the reply (its interpreter's state compressed, its output and its
      record of calls); before compression it may hold 8 times that.
    - `max_session_bytes` (1 MiB): what a session keeps after each program (its
      interpreter's state, before anything is compressed or stored); a program that would
      leave more fails, and the session stays as it was.
    - `max_sessions_per_subject` (16): sessions one subject keeps; a new one past it
      ends that subject's least recently used.
    - `session_idle_seconds` (3600): how long a session no program ran in is kept.
    - `max_task_seconds` (600): wall-clock time of a program run as a task (a client
      that polls for its result), in place of `max_execution_seconds`.
    - `max_tasks_per_subject` (2): programs one subject runs as tasks at once, a task
      that waits for a person counted until it ends or its approval wait runs out. Below
      a subject's share of the execution slots (half of `max_concurrent_executions`: 4),
      so its tasks of minutes leave it slots for ordinary programs. Not checked against
      it: with 4 slots or fewer no value would be, and the share still bounds a subject.
    - `task_keep_seconds` (3600): how long a task's result is kept once it ended.
    - `max_ended_tasks_per_subject` (8): ended tasks one subject keeps; one that ends
      past it drops that subject's oldest ended one (four times the running bound: a client
      reads a task's result soon after it ends, and a subject then keeps at most 8
      records of at most about 5.3 MiB, a sixth of the memory store, however many tasks
      it runs).
    - `max_saved_programs_per_subject` (100): programs one subject keeps (`save_as`);
      a new name past it is refused, replacing one of them is not.
    - `max_saved_program_depth` (4): saved programs calling saved programs, nested.
    - `max_saved_programs_per_execution` (16): saved programs one program's text runs,
      counted once for each place it calls one (each is fed with it, so its text counts).
    """

    max_source_bytes: int = 64 * KIB
    max_execution_seconds: float = 10.0
    max_interpreter_seconds: float = 5.0
    max_memory_bytes: int = 256 * MIB
    max_recursion_depth: int = 200
    max_capability_calls: int = 100
    max_argument_bytes: int = 1 * MIB
    max_result_bytes: int = 1 * MIB
    max_total_result_bytes: int = 8 * MIB
    max_return_bytes: int = 1 * MIB
    max_value_depth: int = 64
    max_printed_bytes: int = 64 * KIB
    max_concurrent_executions: int = 8
    max_calls_per_capability: int = 100
    max_capability_seconds: float = 10.0
    max_approvals: int = 10
    max_approval_wait_seconds: float = 600.0
    max_paused_bytes: int = 1 * MIB
    max_session_bytes: int = 1 * MIB
    max_sessions_per_subject: int = 16
    session_idle_seconds: float = 3600.0
    max_task_seconds: float = 600.0
    max_tasks_per_subject: int = 2
    task_keep_seconds: float = 3600.0
    max_ended_tasks_per_subject: int = 8
    max_saved_programs_per_subject: int = 100
    max_saved_program_depth: int = 4
    max_saved_programs_per_execution: int = 16

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"Limits.{field.name} must be a number, not {value!r}")
            if field.type == "int" and not isinstance(value, int):
                raise TypeError(f"Limits.{field.name} must be an integer, not {value!r}")
            if not value > 0:
                raise ValueError(f"Limits.{field.name} must be positive, not {value!r}")


_FIELDS: dict[LimitKind, str] = {
    LimitKind.SOURCE_SIZE: "max_source_bytes",
    LimitKind.EXECUTION_TIME: "max_execution_seconds",
    LimitKind.CAPABILITY_TIME: "max_capability_seconds",
    LimitKind.INTERPRETER_TIME: "max_interpreter_seconds",
    LimitKind.MEMORY: "max_memory_bytes",
    LimitKind.RECURSION_DEPTH: "max_recursion_depth",
    LimitKind.CAPABILITY_CALLS: "max_capability_calls",
    LimitKind.ARGUMENT_SIZE: "max_argument_bytes",
    LimitKind.RESULT_SIZE: "max_result_bytes",
    LimitKind.TOTAL_RESULT_SIZE: "max_total_result_bytes",
    LimitKind.RETURN_VALUE_SIZE: "max_return_bytes",
    LimitKind.VALUE_DEPTH: "max_value_depth",
    LimitKind.PRINTED_OUTPUT: "max_printed_bytes",
    LimitKind.APPROVALS: "max_approvals",
    LimitKind.PAUSED_SIZE: "max_paused_bytes",
    LimitKind.SESSION_SIZE: "max_session_bytes",
    LimitKind.RUNNING_TASKS: "max_tasks_per_subject",
}
"""The `Limits` field behind each kind but `HOST_CALLS` (derived from the capability calls)
and `CALLS_LEFT_RUNNING` and `PROGRAMS_WAITING` (shares of the engine's bounds);
a test checks every kind has a bound."""


def host_calls(limits: Limits) -> int:
    """How often one program may ask the host for anything (its capability calls, each up
    to four steps in an `async def main`, and room for vars(), sleeps and clock reads)."""
    return 4 * limits.max_capability_calls + 4096


def bound(kind: LimitKind, limits: Limits) -> str:
    """The bound of a kind of limit as the model reads it: `100`, `1 MiB`, `10 s`."""
    if kind is LimitKind.HOST_CALLS:
        return str(host_calls(limits))
    if kind is LimitKind.CALLS_LEFT_RUNNING:
        return str(subject_share(work_threads(limits)))
    if kind is LimitKind.PROGRAMS_WAITING:
        return str(subject_share(queued(limits)))
    name = _FIELDS[kind]
    value = getattr(limits, name)
    if name.endswith("_bytes"):
        return size(value)
    if name.endswith("_seconds"):
        return seconds(value)
    return str(value)


def exceeded(
    kind: LimitKind, limits: Limits, *, amount: str | None = None, where: Where | None = None
) -> ResourceLimitError:
    """The error for a limit of `limits` that a program passed."""
    return ResourceLimitError(kind, bound=bound(kind, limits), amount=amount, where=where)


def size(n: int) -> str:
    """Bytes as a person reads them: `512 bytes`, `64 KiB`, `1.5 MiB`."""
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale:
            return f"{round(n / scale, 2):g} {unit}"
    return f"{n} bytes"


def seconds(value: float) -> str:
    return f"{round(value, 3):g} s"


def budget(limits: Limits, *, sessions: bool = False, tasks: bool = False) -> str:
    """The limits a program runs under, as one line of the execute description: the
    program's own budget, given up front so it need not find it by failing; with
    `sessions`, what a session may keep and how long it waits unused; with `tasks`, the
    longer bound of a program run as a task."""
    task = f"{duration(limits.max_task_seconds)} as a task; " if tasks else ""
    kept = (
        f", session state {size(limits.max_session_bytes)}, "
        f"idle {duration(limits.session_idle_seconds)}"
        if sessions
        else ""
    )
    return (
        f"Budget per program: {limits.max_capability_calls} capability calls, "
        f"{seconds(limits.max_execution_seconds)} in all "
        f"({task}{seconds(limits.max_interpreter_seconds)} running code), "
        f"{size(limits.max_return_bytes)} returned, {size(limits.max_printed_bytes)} printed, "
        f"{size(limits.max_memory_bytes)} of memory{kept}."
    )


def duration(value: float) -> str:
    """A longer time as a person says it: `1 h`, `10 min`, else seconds (a task's bound,
    an idle time)."""
    if value >= 3600 and value % 3600 == 0:
        return f"{int(value // 3600)} h"
    if value >= 60 and value % 60 == 0:
        return f"{int(value // 60)} min"
    return seconds(value)


__all__ = [
    "KIB",
    "MIB",
    "WORK_THREADS",
    "LimitKind",
    "Limits",
    "bound",
    "budget",
    "duration",
    "exceeded",
    "host_calls",
    "queued",
    "seconds",
    "size",
    "subject_share",
    "work_threads",
]
