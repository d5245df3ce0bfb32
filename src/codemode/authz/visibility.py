"""What each subject may see of each catalog snapshot, remembered for a while.

A `VisibilityPolicy` answers per capability, and asking it for every capability at every
search would cost a policy evaluation each; so what a subject sees of one snapshot (by
its version) is remembered for `VISIBILITY_SECONDS`. A new snapshot is asked about at
once; a change of the policy's own data shows within that time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from codemode.capabilities import Capability, Snapshot, View

VISIBILITY_SECONDS = 30.0
"""How long what a subject may see is remembered before `can_see` is asked again."""
SUBJECTS_KEPT = 4096
"""How many (snapshot, subject) views are remembered at most, the least recent dropped."""


class Visibility:
    """The views of subjects, by snapshot version and subject, on the clock `now` reads."""

    def __init__(self, now: Callable[[], float], seconds: float = VISIBILITY_SECONDS) -> None:
        self._now = now
        self.seconds = seconds
        self._views: OrderedDict[tuple[int, str], tuple[View, float]] = OrderedDict()
        self._lock = threading.Lock()

    def view(self, snapshot: Snapshot, subject: str, sees: Callable[[Capability], bool]) -> View:
        """The enabled capabilities of `snapshot` that `sees` shows `subject`, asked again
        once the remembered answer is older than `seconds`."""
        key = (snapshot.version, subject)
        now = self._now()
        with self._lock:
            found = self._views.get(key)
        if found is None or found[1] <= now:  # asked outside the lock: it runs host code
            view = snapshot.view(c for c in snapshot.enabled.values() if sees(c))
            found = (view, now + self.seconds)
            with self._lock:
                self._views[key] = found
                while len(self._views) > SUBJECTS_KEPT:
                    self._views.popitem(last=False)
        return found[0]


__all__ = ["SUBJECTS_KEPT", "VISIBILITY_SECONDS", "Visibility"]
