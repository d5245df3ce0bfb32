"""Where one execution is: one `State` at a time, behind one lock, for every part of it.

The execution, its driver, its waits and its pausing each change the state, and only
under `Status.lock`, so that a job, a timer and a caller that gives up never disagree
about whether the caller has its answer.
"""

from __future__ import annotations

import threading
from enum import StrEnum


class State(StrEnum):
    """Where an execution is; one at a time."""

    QUEUED = "queued"
    """Admitted, waiting for a slot: holds nothing."""
    RUNNING = "running"
    """Its job is on the pool: the interpreter runs a step, or is about to."""
    IN_HOST = "in host code"
    """Its job runs sync host code (a call of a sync `main()`, the audit sink)."""
    AWAITING = "awaiting"
    """Holds its worker and no thread: waits for calls and sleeps (tasks and timers)."""
    SETTLED = "settled"
    """The caller has its answer; only host code left running may still run."""


class Answered(Exception):
    """The caller was answered while a job worked: the job stops where it is."""


class Status:
    """One execution's state and the lock that guards it (and all its parts' waits)."""

    __slots__ = ("lock", "state")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state = State.QUEUED

    @property
    def settled(self) -> bool:
        """Whether the caller has its answer (read without the lock: it never goes back)."""
        return self.state is State.SETTLED

    def enter(self, state: State) -> None:
        """Move between the states of a running program (never out of SETTLED: a job
        that finds its caller answered stops, by `Answered`)."""
        with self.lock:
            if self.state is State.SETTLED:  # as `check`, without a call: every step does this
                raise Answered()
            self.state = state

    def check(self) -> None:
        """Stop the job (`Answered`) if the caller has its answer; the lock is held."""
        if self.state is State.SETTLED:
            raise Answered()


__all__ = ["Answered", "State", "Status"]
