"""The cycle collector's pace while a source's capabilities are built in bulk."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from codemode.sources.bulk import YOUNG_OBJECTS, building


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, ...]]:
    """The process's thresholds, put back whatever a test does."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*before)


def test_young_collections_wait_for_more_objects_while_building() -> None:
    enabled = gc.isenabled()
    with building():
        assert gc.get_threshold() == (YOUNG_OBJECTS, 10, 10)
        assert gc.isenabled() is enabled
    assert gc.get_threshold() == (700, 10, 10)


def test_what_the_process_had_is_put_back_after_a_failure() -> None:
    gc.set_threshold(500, 7, 3)
    with pytest.raises(ValueError, match="broken"), building():
        raise ValueError("broken")
    assert gc.get_threshold() == (500, 7, 3)


def test_a_higher_pace_or_none_is_kept() -> None:
    gc.set_threshold(YOUNG_OBJECTS * 2, 10, 10)
    with building():
        assert gc.get_threshold() == (YOUNG_OBJECTS * 2, 10, 10)
    gc.set_threshold(0, 10, 10)  # automatic collection off: the host's choice
    with building():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_overlapping_builds_put_the_pace_back_when_the_last_ends() -> None:
    """A build on another thread that starts during this one and ends after it: the
    process's thresholds come back only then."""
    started, finish = threading.Event(), threading.Event()
    seen: list[tuple[int, ...]] = []

    def other() -> None:
        with building():
            started.set()
            assert finish.wait(10)
        seen.append(gc.get_threshold())

    with building():
        thread = threading.Thread(target=other)
        thread.start()
        assert started.wait(10)
    assert gc.get_threshold() == (YOUNG_OBJECTS, 10, 10), "the other build still runs"
    finish.set()
    thread.join(10)
    assert seen == [(700, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_thresholds_set_by_someone_else_meanwhile_are_kept() -> None:
    with building():
        gc.set_threshold(1234, 5, 5)
    assert gc.get_threshold() == (1234, 5, 5)
