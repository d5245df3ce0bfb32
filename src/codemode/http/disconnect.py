"""What a client's dropped HTTP connection does to the call it was waiting for."""

from __future__ import annotations

from typing import Literal

OnDisconnect = Literal["cancel", "finish"]
"""End the call (`canceled`), or let it run to its end and drop its answer. An explicit
cancel ends it either way."""


def check_on_disconnect(value: object) -> None:
    """ValueError for anything but one of the two `OnDisconnect` choices."""
    if value not in ("cancel", "finish"):
        raise ValueError(f'on_disconnect must be "cancel" or "finish", not {value!r}')


__all__ = ["OnDisconnect", "check_on_disconnect"]
