"""What a watcher has of a run: how far the program is, told as notes built from the
calls it made and its own `progress()` reports (rising, rate-limited, host-blind), and a
way to stop it that still answers its caller.

A watcher (an adapter serving a client that asked for progress, or a task) sets a
`RunWatch` around a run with `watching`; the execution reads it once, as it is built on
its caller's task or thread, so no public method needs a keyword for it. A note echoes
only what the program's author already has: how many calls it made, the name it called
last, the time it has run, and its own text. Never an argument, an outcome, an error or
anything a handler, an authorizer or an upstream said. A watcher that stops a run
(`Stop`, a task's cancel) needs the answer a cancelled program gives, with the calls it
made: cancelling the caller would lose it.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from codemode.clock import Clock, Timer

log = logging.getLogger("codemode")

MAX_PROGRESS_MESSAGE = 200
"""Characters of the program's own message a note carries (longer ones end in `…`)."""

PROGRESS_INTERVAL = 0.25
"""Seconds between two notes, and before the first: at most 4 a second, the latest pending
one goes out. A run answered within its first interval sends no note: its reply comes as
soon as the note would, and says more; and a note sent while a fast program runs costs it
more than its calls do (over stdio, about 5% of a program of 100 fast calls a note)."""

RISE = 0.001
"""How much a note rises when the program's own `done` would not (progress must rise)."""


@dataclass(frozen=True, slots=True)
class ProgressNote:
    """One note: `progress` rises from note to note; `total` only when the program gave
    one at least `progress`."""

    progress: float
    total: float | None
    message: str
    numbers: str = field(default="", compare=False)
    """The program's own numbers (` (10/40)`) when it gave `done` and `message` does not
    carry them already: a notification has them as `progress`/`total`, but a task's
    `statusMessage` is text alone (`status`). Not part of the note on the wire."""

    @property
    def status(self) -> str:
        """The note as one line of text: its message, with the program's numbers."""
        return _told(self.message, self.numbers) if self.numbers else self.message


ProgressSink = Callable[[ProgressNote], None]
"""Where notes go: called in order, never at once from two threads, and must not block
(an adapter's sink only hands the note on to its own loop)."""


class Stop:
    """A watcher's way to stop the runs it watches and still have their answer: each ends
    `ExecutionCanceledError` carrying the calls it made, as a cancelled caller's does, but
    its caller is answered with that error rather than cancelled. A run that starts after
    `stop()` ends so as soon as it is admitted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._runs: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()

    @property
    def stopped(self) -> bool:
        """Whether `stop()` was called."""
        with self._lock:
            return self._stopped

    def stop(self) -> None:
        """Stop every run watched now, and every one that starts later (from any thread;
        a second call does nothing)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            runs, self._runs = list(self._runs.values()), {}
        for cancel in runs:
            cancel()

    def attach(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call `cancel` when stopped (at once if it was); what detaches it (a run that
        was answered lets go of it)."""
        with self._lock:
            stopped = self._stopped
            key = next(self._ids)
            if not stopped:
                self._runs[key] = cancel
        if stopped:
            cancel()

        def detach() -> None:
            with self._lock:
                self._runs.pop(key, None)

        return detach


@dataclass(frozen=True, slots=True)
class RunWatch:
    """What a watcher asks of one run: its notes (`sink`), a longer bound on its time
    (`seconds`, a task's; clamped to `Limits.max_task_seconds`; None: the execution time
    `Limits` sets), and a way to stop it with its answer (`stop`)."""

    sink: ProgressSink | None = None
    seconds: float | None = None
    stop: Stop | None = None


_WATCH: contextvars.ContextVar[RunWatch | None] = contextvars.ContextVar(
    "codemode_run_watch", default=None
)


@contextlib.contextmanager
def watching(watch: RunWatch) -> Iterator[None]:
    """Watch the runs started within (`cm.execute*`, `start_async`, `resume_async`)."""
    token = _WATCH.set(watch)
    try:
        yield
    finally:
        _WATCH.reset(token)


def current_watch() -> RunWatch | None:
    """The watch set around the run being built, if any."""
    return _WATCH.get()


class Progress:
    """The notes of one execution: a tally of ended calls, the program's own reports, and
    the rate at which notes go out (a timer of the clock sends the latest pending one)."""

    def __init__(self, sink: ProgressSink, clock: Clock, began: float) -> None:
        """`began`: when the execution started, on `clock` (earlier runs of a resumed
        program included), for the elapsed time a note tells."""
        self._sink = sink
        self._clock = clock
        self._began = began
        self._lock = threading.Lock()
        self.calls = 0
        """Calls of the program that ended (ok or not)."""
        self._last_call = ""
        self._own = False
        """Whether the program reported a `done`: from then on its numbers drive notes."""
        self._total: float | None = None
        self._value: float | None = None
        """The progress of the latest note made (sent or pending)."""
        self._sent_at = clock.now()
        """When the last note went out; at first, when the run started."""
        self._spoke = False
        """Whether a note has gone out: only then does the last one go before the answer."""
        self._pending: ProgressNote | None = None
        self._pending_call: float | None = None
        """When the call ended whose note waits, if one does: the note is written only as
        it goes out (most calls of a fast program never get one of their own)."""
        self._timer: Timer | None = None
        self._closed = False

    def call_ended(self, capability: str) -> None:
        """A call ended (`CallLog.end`): counted; a note, until the program reports its
        own `done`."""
        with self._lock:
            self.calls += 1
            self._last_call = capability
            if self._own or self._closed:
                return
            now = self._clock.now()
            self._value = self._rise(float(self.calls))
            if now - self._sent_at >= PROGRESS_INTERVAL:
                self._send(self._call_note(now), now)
            else:  # the latest call's note waits for its moment, written only then
                self._pending, self._pending_call = None, now
                self._arm()

    def reported(self, message: str, done: float | None, total: float | None) -> None:
        """The program's own `progress(message, done=, total=)`, its message bounded
        already. A `done` that does not rise goes into the message only."""
        with self._lock:
            if self._closed:
                return
            numbers = ""
            if done is not None:
                self._own = True
                self._total = total
                numbers = f" ({_number(done)}{_of(total)})"
                if self._value is not None and done <= self._value:
                    message, numbers = _told(message, numbers), ""
                target = done
            else:  # the message only: progress as it stands (calls, or the program's done)
                target = self._value if self._own and self._value is not None else self.calls
            value = self._value = self._rise(target)
            shown = self._total if self._total is not None and self._total >= value else None
            note = ProgressNote(value, shown, message, numbers)
            now = self._clock.now()
            if now - self._sent_at >= PROGRESS_INTERVAL:
                self._send(note, now)
            else:
                self._pending, self._pending_call = note, None
                self._arm()

    def flush(self) -> None:
        """The run is answered: the pending note goes out now, before the answer, and no
        note after it; none for a run that has sent none (answered within its first
        interval)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            note = self._waiting()
            if note is not None and self._spoke:
                self._deliver(note)

    # -- helpers (under the lock) -----------------------------------------------------------

    def _rise(self, target: float) -> float:
        """`target`, or a step above the last note's progress when it would not rise."""
        last = self._value
        return target if last is None or target > last else round(last + RISE, 6)

    def _call_note(self, at: float) -> ProgressNote:
        """The note of the latest call, which ended `at`: the count, the time run, the name."""
        n = self.calls
        message = f"{n} call{'s' * (n != 1)} · {at - self._began:.1f} s · {self._last_call}"
        return ProgressNote(self._value or 0.0, None, message)

    def _send(self, note: ProgressNote, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending, self._pending_call = None, None
        self._sent_at = now
        self._deliver(note)

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self._clock.call_at(self._sent_at + PROGRESS_INTERVAL, self._ring)

    def _waiting(self) -> ProgressNote | None:
        """The note that waits for its moment, if any (taken: it waits no more)."""
        note, at = self._pending, self._pending_call
        self._pending, self._pending_call = None, None
        return self._call_note(at) if at is not None else note

    def _ring(self) -> None:
        with self._lock:
            self._timer = None
            note = self._waiting()
            if note is None or self._closed:
                return
            self._sent_at = self._clock.now()
            self._deliver(note)

    def _deliver(self, note: ProgressNote) -> None:
        self._spoke = True
        try:
            self._sink(note)
        except Exception:  # a watcher's fault never fails the program
            log.exception("a progress note could not be delivered")


def bounded(message: str) -> str:
    """The program's message as a note carries it: control characters as spaces, at most
    `MAX_PROGRESS_MESSAGE` characters (a longer one cut, ending in `…`)."""
    text = "".join(ch if ch.isprintable() else " " for ch in message)
    if len(text) > MAX_PROGRESS_MESSAGE:
        text = text[: MAX_PROGRESS_MESSAGE - 1] + "…"
    return text


def _told(message: str, numbers: str) -> str:
    """`message` (bounded already) with `numbers` after it, within `MAX_PROGRESS_MESSAGE`
    characters: the message is cut to make room, so the numbers always show."""
    room = MAX_PROGRESS_MESSAGE - len(numbers)
    if len(message) > room:
        message = message[: room - 1] + "…"
    return message + numbers


def _number(value: float) -> str:
    """A number as a note tells it, compactly: `12`, `0.5`, `1e+20` (exact for integers
    of up to 15 digits), so the numbers after a message stay short."""
    return f"{value:.15g}"


def _of(total: float | None) -> str:
    return "" if total is None else f"/{_number(total)}"


__all__ = [
    "MAX_PROGRESS_MESSAGE",
    "PROGRESS_INTERVAL",
    "Progress",
    "ProgressNote",
    "ProgressSink",
    "RunWatch",
    "Stop",
    "bounded",
    "current_watch",
    "watching",
]
