"""Records as the program holds them: declared fields sent as they are, or converted once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codemode.runtime.records import GuestRecord, record_id


@dataclass
class Row:
    name: str
    size: int
    tags: list[str]
    secret: str = "never sent"


def test_scalar_fields_are_sent_as_they_are_and_the_rest_converted() -> None:
    converted: list[Any] = []

    def guest(value: Any) -> Any:
        converted.append(value)
        return ("converted", value)

    record = GuestRecord(Row("a", 3, ["x"]), eager_attrs=("name", "size", "tags"), guest=guest)
    assert record.get_eager_attrs() == {"name": "a", "size": 3, "tags": ("converted", ["x"])}
    assert converted == [["x"]]
    assert record.convert_value("tags", ["y"]) == ("converted", ["y"])


def test_record_ids_are_unique_in_the_process() -> None:
    ids = {record_id() for _ in range(10_000)}
    assert len(ids) == 10_000
