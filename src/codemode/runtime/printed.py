"""What a program printed, up to its cap: a flood past it stops the execution at once.

The interpreter hands each piece of `print()` output here as it is written (the run's
`Printer`), so the cap holds while the program runs, not only when it ends: a program
that prints without end is stopped at the byte that passes the cap, with what fits kept.
"""

from __future__ import annotations

from collections.abc import Callable


class Printed:
    """Collects print() output up to a cap; a flood past it stops the execution at once."""

    def __init__(self, cap: int, on_flood: Callable[[], None]) -> None:
        self.cap = cap
        """`Limits.max_printed_bytes`: UTF-8 bytes kept at most."""
        self.size = 0
        """UTF-8 bytes kept so far (a paused program's state counts them)."""
        self.flooded = False
        self._parts: list[str] = []
        self._on_flood = on_flood

    def __call__(self, stream: str, text: str) -> None:
        if self.flooded:
            return
        room = self.cap - self.size
        encoded = text.encode("utf-8", errors="surrogatepass")
        if len(encoded) > room:
            self._parts.append(encoded[:room].decode("utf-8", errors="ignore"))
            self.size = self.cap
            self.flooded = True
            self._on_flood()
            return
        self._parts.append(text)
        self.size += len(encoded)

    @property
    def text(self) -> str:
        """Everything kept, in the order it was printed."""
        return "".join(self._parts)

    def restore(self, text: str) -> None:
        """Go on from what a paused program had printed before it paused."""
        self._parts.append(text)
        self.size = len(text.encode("utf-8", errors="surrogatepass"))


__all__ = ["Printed"]
