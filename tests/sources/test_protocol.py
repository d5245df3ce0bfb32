"""What is a source: the three kinds codemode makes, one of a host's own, and what is not."""

from __future__ import annotations

from typing import Any

from codemode.capabilities import Catalog
from codemode.sources import Source
from codemode.sources.mcp import McpServer
from codemode.sources.openapi import OpenApi
from codemode.sourcing import Functions


class Empty:
    name = "empty"

    async def open(self) -> None:
        pass

    def capabilities(self) -> list[Any]:
        return []

    def changes(self) -> None:
        return None

    async def close(self) -> None:
        pass


class NoClose:
    name = "half"

    async def open(self) -> None:
        pass

    def capabilities(self) -> list[Any]:
        return []

    def changes(self) -> None:
        return None


def test_the_host_functions_mcp_servers_and_rest_apis_are_sources() -> None:
    """Made without connecting or reading anything: that is `open`'s."""
    kinds: list[Any] = [
        Functions(Catalog()),
        McpServer("fs", command="python", args=["server.py"]),
        OpenApi("pets", spec={"openapi": "3.1.0", "info": {}, "paths": {}}),
        Empty(),
    ]
    assert [isinstance(kind, Source) for kind in kinds] == [True, True, True, True]
    assert [kind.name for kind in kinds] == ["", "fs", "pets", "empty"]


def test_a_class_without_every_member_is_not_a_source() -> None:
    assert not isinstance(NoClose(), Source)
    assert not isinstance(object(), Source)
