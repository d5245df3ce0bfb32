"""What each subject may see of each catalog snapshot, remembered for a while.

A `VisibilityPolicy` answers per capability, and asking it for every capability at every
search would cost a policy evaluation each; so what a subject sees of one snapshot (by
its version) is remembered for `VISIBILITY_SECONDS`. A new snapshot is asked about at
once; a change of the policy's own data shows within that time. Requests of one subject
that come while its checks run wait for those checks rather than start their own, so a
subject whose `can_see` hangs has one set of checks in flight, not one per request. A
view some check did not answer in time for is used by the requests that waited for it
and not remembered: the next request asks again.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import OrderedDict
from collections.abc import Callable

from codemode.capabilities import Capability, Snapshot, View

VISIBILITY_SECONDS = 30.0
"""How long what a subject may see is remembered before `can_see` is asked again."""
SUBJECTS_KEPT = 4096
"""How many (snapshot, subject) views are remembered at most, the least recent dropped."""

Asked = tuple[frozenset[str], bool]
"""The ids of the capabilities a subject may see, and whether every check answered."""
Ask = Callable[[list[Capability]], "concurrent.futures.Future[Asked]"]
"""Starts the checks of these capabilities for one subject; their answer, on time."""


class Visibility:
    """The views of subjects, by snapshot version and subject, on the clock `now` reads."""

    def __init__(self, now: Callable[[], float], seconds: float = VISIBILITY_SECONDS) -> None:
        self._now = now
        self.seconds = seconds
        self._views: OrderedDict[tuple[int, str], tuple[View, float]] = OrderedDict()
        self._asking: dict[tuple[int, str], concurrent.futures.Future[View]] = {}
        self._lock = threading.Lock()

    def view(self, snapshot: Snapshot, subject: str, ask: Ask) -> concurrent.futures.Future[View]:
        """The enabled capabilities of `snapshot` that `subject` may see: remembered, or
        being asked already, or asked now with `ask` (once the remembered answer is
        older than `seconds`)."""
        key = (snapshot.version, subject)
        now = self._now()
        with self._lock:
            found = self._views.get(key)
            if found is not None and found[1] > now:
                return answered(found[0])
            asking = self._asking.get(key)
            if asking is not None:
                return asking
            asking = self._asking[key] = concurrent.futures.Future()
        try:
            asked = ask(list(snapshot.enabled.values()))
        except BaseException:
            with self._lock:
                del self._asking[key]
            asking.set_result(snapshot.view(()))  # nothing asked: nothing shown
            raise
        asked.add_done_callback(lambda done: self._answered(key, snapshot, done, asking))
        return asking

    def _answered(
        self,
        key: tuple[int, str],
        snapshot: Snapshot,
        done: concurrent.futures.Future[Asked],
        asking: concurrent.futures.Future[View],
    ) -> None:
        view, complete = snapshot.view(()), False  # whatever goes wrong: nothing shown
        try:
            visible, complete = done.result()
            view = snapshot.view(c for c in snapshot.enabled.values() if c.id in visible)
        finally:
            with self._lock:
                del self._asking[key]
                if complete:
                    self._views[key] = (view, self._now() + self.seconds)
                    self._views.move_to_end(key)
                    while len(self._views) > SUBJECTS_KEPT:
                        self._views.popitem(last=False)
            asking.set_result(view)


def answered(view: View) -> concurrent.futures.Future[View]:
    """A view known now, as the future a view that must be asked for is."""
    future: concurrent.futures.Future[View] = concurrent.futures.Future()
    future.set_result(view)
    return future


__all__ = ["SUBJECTS_KEPT", "VISIBILITY_SECONDS", "Ask", "Asked", "Visibility", "answered"]
