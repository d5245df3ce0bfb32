"""Fixtures of the runtime's part tests: hosts on a scripted sandbox, closed at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.runtime.scripted import Host


@pytest.fixture
def make_host() -> Iterator[Callable[..., Host]]:
    made: list[Host] = []

    def make(*args: Any, **options: Any) -> Host:
        made.append(Host(*args, **options))
        return made[-1]

    yield make
    for host in made:
        host.close()
