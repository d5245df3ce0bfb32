"""Discovery: what each subject sees of the catalog's newest snapshot, and its search index.

Search, describe and every execution start here: the newest snapshot, and the view of
it a subject may see (all its enabled capabilities, or with `hide_forbidden` those the
policy's `can_see` shows, remembered per snapshot and subject by `runtime.visibility`).
Views are interned by their snapshot, so the search index built for one serves every
subject who sees the same capabilities; the most recent `VIEWS_KEPT` are kept.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import anyio

from codemode.authz import VisibilityPolicy
from codemode.capabilities import (
    SAVE,
    CapabilityInfo,
    Catalog,
    SearchIndex,
    SearchResult,
    Snapshot,
    View,
    capability_hint,
)
from codemode.errors import NotFoundError
from codemode.options import Options
from codemode.runtime import Clock, Engine, Visibility, asking

VIEWS_KEPT = 64
"""How many views' search indexes are kept, the least recently used dropped."""


class Discovery:
    """The views of one catalog per subject, and the search index of each view.

    **Parameters:**

    - `catalog`: the capabilities, read at its newest snapshot on every request.
    - `engine`: the running engine, on which `can_see` checks run (started when needed).
    - `clock`: the clock a subject's view is remembered by, when the host gave one
      (read at each request: a host may set it until first use); else the system's.
    """

    def __init__(
        self,
        catalog: Catalog,
        engine: Callable[[], Engine],
        clock: Callable[[], Clock | None],
        overlay: Callable[[View, str | None], View] | None = None,
    ) -> None:
        self._catalog = catalog
        self._overlay = overlay
        """Adds what one subject alone sees (its saved programs) to its view."""
        self._engine = engine
        self._clock = clock
        self._visibility = Visibility(self._now)
        self._lock = threading.Lock()
        self._indexes: OrderedDict[tuple[int, frozenset[str]], SearchIndex] = OrderedDict()
        """The search index of each view, by its key (snapshot version and ids)."""

    def _now(self) -> float:
        clock = self._clock()
        return clock.now() if clock is not None else time.monotonic()

    def prepare(self) -> None:
        """Build what discovery reads of the newest snapshot now: its search index, and
        each capability's description and schemas (cached on the capability)."""
        enabled = self._catalog.enabled
        self.index(enabled)
        for capability in enabled.values():
            capability.info  # noqa: B018 - built once, cached on the capability

    def index(self, visible: View) -> SearchIndex:
        """The search index of a view (built once per view)."""
        with self._lock:
            found = self._indexes.get(visible.key)
            if found is not None:
                self._indexes.move_to_end(visible.key)
                return found
        shown = [c for c in visible.values() if c.name != SAVE]  # the host's trailer calls it
        index = SearchIndex(shown)  # outside the lock: it may take a while
        with self._lock:
            self._indexes[visible.key] = index
            while len(self._indexes) > VIEWS_KEPT:
                self._indexes.popitem(last=False)
        return index

    def is_indexed(self, visible: View) -> bool:
        """Whether the search index of this view is built already (serving builds the
        whole catalog's before its first request)."""
        with self._lock:
            return visible.key in self._indexes

    async def search_async(
        self,
        options: Options,
        subject: str | None,
        query: str,
        *,
        limit: int,
        offset: int,
    ) -> SearchResult:
        """Search what `subject` sees without blocking the event loop: a view that may be
        one of a subject's own, whose index may not be built yet, is indexed on a thread;
        the whole catalog's was built before serving began."""
        view = (await self.visible_async(options, subject))[1]

        def search() -> SearchResult:
            return self.index(view).search(query, limit=limit, offset=offset)

        if options.hide_forbidden and subject is not None:
            return await anyio.to_thread.run_sync(search)
        return search()

    def visible(
        self, options: Options, subject: str | None, execution_id: str = ""
    ) -> tuple[Snapshot, View]:
        """The newest snapshot, and what `subject` sees of it (waiting for `can_see`)."""
        snapshot, view = self._seeing(options, subject, execution_id)
        return snapshot, self._own(view if isinstance(view, View) else view.result(), subject)

    async def visible_async(
        self, options: Options, subject: str | None, execution_id: str = ""
    ) -> tuple[Snapshot, View]:
        """As `visible`, awaiting (a cancelled caller leaves the checks to others)."""
        snapshot, view = self._seeing(options, subject, execution_id)
        if isinstance(view, View) or view.done():
            # Known already (every subject sees it, or `can_see` answered before): no
            # hand-off through the loop from another thread, which costs a request more
            # than the rest of this; still a point where a cancel reaches the caller, as
            # that wait was.
            await asyncio.sleep(0)
            return snapshot, self._own(view if isinstance(view, View) else view.result(), subject)
        return snapshot, self._own(await asyncio.shield(asyncio.wrap_future(view)), subject)

    def _own(self, view: View, subject: str | None) -> View:
        """`view`, with what `subject` alone sees added (its saved programs)."""
        return view if self._overlay is None else self._overlay(view, subject)

    def _seeing(
        self, options: Options, subject: str | None, execution_id: str
    ) -> tuple[Snapshot, View | concurrent.futures.Future[View]]:
        """The newest snapshot, and what `subject` sees of it once `can_see` answered
        (every check of one request under one deadline: `codemode.runtime.seeing`)."""
        snapshot = self._catalog.current
        if not options.hide_forbidden or subject is None:
            return snapshot, snapshot.enabled  # every subject sees it: nothing to ask
        authorizer = snapshot.policy
        if not isinstance(authorizer, VisibilityPolicy):  # the options check it
            raise TypeError("hide_forbidden needs a VisibilityPolicy authorizer")
        ask = asking(self._engine(), authorizer.can_see, subject, execution_id, options.on_event)
        return snapshot, self._visibility.view(snapshot, subject, ask)


def describe(visible: View, name: str) -> CapabilityInfo:
    """The capability of this exact name among those a subject sees, else NotFoundError
    whose hint names a close visible name (a hidden one is never hinted at)."""
    capability = visible.get(name) if isinstance(name, str) and name != SAVE else None
    if capability is None:
        raise NotFoundError(capability_hint(name, visible) if isinstance(name, str) else None)
    return capability.info


__all__ = ["VIEWS_KEPT", "Discovery", "describe"]
