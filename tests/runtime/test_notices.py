"""Audit notices sent from where no host code may run: delivered in order on a thread of
their own, a failing one logged and the next still delivered, a bounded queue, and no
wait for the sink when they close."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

import pytest

from codemode.runtime.notices import MAX_WAITING, Notices
from tests.conftest import GUARD, eventually


def test_notices_are_delivered_in_order_on_a_thread_of_their_own() -> None:
    notices = Notices()
    got: list[tuple[int, str]] = []
    done = threading.Event()

    def note(n: int) -> Callable[[], None]:
        return lambda: got.append((n, threading.current_thread().name))

    try:
        for n in range(5):
            notices.send(note(n))
        notices.send(done.set)
        assert done.wait(GUARD)
        assert got == [(n, "codemode-notices") for n in range(5)]
    finally:
        notices.close()


def test_a_delivery_that_fails_is_logged_and_the_next_one_still_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notices = Notices()
    done = threading.Event()

    def broken() -> None:
        raise RuntimeError("the sink is down")

    try:
        with caplog.at_level(logging.ERROR, logger="codemode"):
            notices.send(broken)
            notices.send(done.set)
            assert done.wait(GUARD)
        assert "an audit notice failed" in caplog.text
    finally:
        notices.close()


def test_close_never_waits_for_the_sink_and_the_waiting_notices_still_come(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The thread delivers what waits, then ends; a notice sent after close is dropped."""
    notices = Notices()
    release = threading.Event()
    threads: list[threading.Thread] = []
    got: list[str] = []

    def slow() -> None:
        threads.append(threading.current_thread())
        release.wait(GUARD)

    try:
        with caplog.at_level(logging.ERROR, logger="codemode"):
            notices.send(slow)
            notices.send(lambda: got.append("waiting"))
            notices.close()  # returns while the sink is still busy
            notices.send(lambda: got.append("late"))
        assert "it came after its CodeMode closed" in caplog.text
        assert eventually(lambda: threads)
        assert got == []
        release.set()
        threads[0].join(GUARD)
        assert not threads[0].is_alive()
        assert got == ["waiting"]
    finally:
        release.set()


def test_past_its_bound_a_notice_for_a_slow_sink_is_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    notices = Notices()
    entered, release = threading.Event(), threading.Event()
    got: list[int] = []

    def slow() -> None:
        entered.set()
        release.wait(GUARD)

    try:
        with caplog.at_level(logging.ERROR, logger="codemode"):
            notices.send(slow)
            assert entered.wait(GUARD)  # taken off the queue: the queue is empty
            for n in range(MAX_WAITING + 1):
                notices.send(functools.partial(got.append, n))
        assert f"{MAX_WAITING} wait for a slow sink" in caplog.text
        release.set()
        assert eventually(lambda: len(got) == MAX_WAITING)
        assert got == list(range(MAX_WAITING))
    finally:
        release.set()
        notices.close()
