"""What `codemode shapes` shows: the result shapes a server learned, as JSON Schema.

A server that keeps its learned shapes in a file (`--shapes`, `CodeMode(shapes=...)`)
knows what its undeclared capabilities answer; the operator may want that written down
upstream, as the tool's `outputSchema`. This reads the file as the operator's view: every
name, whoever's results it was seen in (the model sees only its own), and no counts (they
are the file's, not a schema's). Rendering only: `cli.commands` prints and picks exit codes.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codemode.capabilities import to_schema
from codemode.continuations import read_shapes
from codemode.types import JSONObject


@dataclass(frozen=True, slots=True)
class Printed:
    """One capability's learned shape, as `codemode shapes` prints it."""

    name: str
    results: int
    """Results it was learned from."""
    schema: JSONObject
    """Draft 2020-12, without the file's counts: what could be its `outputSchema`."""

    @property
    def is_object(self) -> bool:
        """Whether the result is always an object, as an MCP `outputSchema` must be."""
        return self.schema.get("type") == "object"

    def entry(self) -> JSONObject:
        """Its value in the listing of every shape."""
        return {"observed_results": self.results, "schema": self.schema}

    def warning(self) -> str:
        """The operator's line for a shape that cannot be pasted as an `outputSchema`."""
        return f"{self.name}: its result is not an object; MCP's outputSchema must be one"


def learned_under(path: str | os.PathLike[str], namespaces: Iterable[str]) -> list[Printed]:
    """The shapes the file at `path` keeps for capabilities under `namespaces`, by name.

    Raises:
        ValueError: there is no such file, or it cannot be read; the message names it.
    """
    if not Path(path).exists():  # a server creates it; here it is a mistake
        raise ValueError(f"the shapes file {os.fspath(path)} cannot be read: there is no such file")
    roots = frozenset(namespaces)
    found = {
        learned.name: Printed(learned.name, learned.results, to_schema(learned.node, stats=False))
        for learned in read_shapes(path)
        if learned.name.partition(".")[0] in roots
    }
    return [found[name] for name in sorted(found)]


def listing(shapes: Iterable[Printed]) -> JSONObject:
    """Every shape by name: `{"fs.stat": {"observed_results": 7, "schema": {...}}}`."""
    return {printed.name: printed.entry() for printed in shapes}


def missing(name: str, path: str | os.PathLike[str], shapes: Iterable[Printed]) -> str:
    """The operator's line for `--name` naming no shape of the file, with the closest."""
    names = [printed.name for printed in shapes]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f'no shape was learned for "{name}" in {os.fspath(path)}{hint}'


__all__ = ["Printed", "learned_under", "listing", "missing"]
