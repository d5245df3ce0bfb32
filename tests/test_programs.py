"""Saved programs: the interface the front door, discovery and the runner hold them by."""

from __future__ import annotations

import os

from codemode.capabilities import View
from codemode.programs import NAMESPACE, SaveAs, Saved, SavedPrograms
from codemode.runtime import ExecutionResult
from codemode.runtime.appendix import Appendix


class Kept:
    """The least that answers the interface: host programs by name, nothing saved."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    def add(self, name: str, source: str, *, summary: str) -> str:
        self.kept[f"{NAMESPACE}.{name}"] = source
        return f"{NAMESPACE}.{name}"

    def add_folder(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        return ()

    def overlay(self, view: View, subject: str) -> View:
        return view

    def appendix(self, source: str, subject: str, save_as: SaveAs | None) -> Appendix | None:
        return None

    def entered(self, execution_id: str) -> int | None:
        return None

    def commit(self, execution_id: str, result: ExecutionResult) -> Saved | None:
        return None

    def names(self, owner: str | None = None) -> tuple[str, ...]:
        return tuple(self.kept)

    def show(self, name: str, owner: str | None = None) -> str | None:
        return self.kept.get(name)

    def delete(self, name: str, owner: str | None = None) -> bool:
        return self.kept.pop(name, None) is not None


def test_an_object_with_every_method_is_saved_programs_and_one_without_is_not() -> None:
    kept = Kept()
    assert isinstance(kept, SavedPrograms)
    assert kept.add("weekly_report", "def main():\n    return 1\n", summary="S.") == (
        "programs.weekly_report"
    )
    assert Saved("programs.weekly_report", "saved").status == "saved"
    assert not isinstance(object(), SavedPrograms)
