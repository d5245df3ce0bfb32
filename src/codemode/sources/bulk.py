"""Building a source's capabilities in bulk: the cycle collector paced for it.

A REST API's document or an upstream's listing becomes thousands of capabilities at once,
and nearly every object made for them lives as long as the catalog: building them makes
no garbage for the cycle collector to find. CPython's collector still runs a full
collection each time the objects that outlived its young collections grow by a quarter,
and a full collection reads every object of the process, those the host held before
included: ten thousand operations paid for six of them, some 40% of their time, and the
time per operation grew with the catalog's size. While `building()` holds, a young
collection waits for `YOUNG_OBJECTS` new objects (CPython's default is 700), and so full
collections wait too: the objects made are read about once by a young collection and
once by the next full one after the build, whatever their number (ten thousand
operations registered and prepared for serving: 0.7 s of collections, where there were
3.2 s). The thresholds the process had are put back when the last build running ends,
unless something else set others meanwhile (those are kept); whether the collector is
enabled, and what is frozen, is never touched.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

YOUNG_OBJECTS = 100_000
"""How many new objects a young collection waits for while capabilities are built."""

_lock = threading.Lock()
_builds = 0
_before: tuple[int, ...] = ()
"""The thresholds the process had when the first build running began."""
_paced: tuple[int, ...] = ()
"""The thresholds set for the builds."""


@contextlib.contextmanager
def building() -> Iterator[None]:
    """Pace the cycle collector for a bulk build while the block runs (on any thread; builds
    may overlap, and the first sets the pace, the last puts the process's back)."""
    global _builds, _before, _paced
    with _lock:
        if _builds == 0:
            _before = gc.get_threshold()
            young = _before[0]
            # 0 turns automatic collection off: a host that chose so keeps it
            _paced = (max(young, YOUNG_OBJECTS) if young else 0, *_before[1:])
            gc.set_threshold(*_paced)
        _builds += 1
    try:
        yield
    finally:
        with _lock:
            _builds -= 1
            if _builds == 0 and gc.get_threshold() == _paced:
                gc.set_threshold(*_before)


__all__ = ["YOUNG_OBJECTS", "building"]
