"""The book of learned shapes: which capabilities it learns, how it counts, what it offers
the preflight, and what it keeps for others."""

from __future__ import annotations

import logging
import threading
from typing import Any

import mcp_types as mt
import pytest

from codemode.capabilities import (
    Capability,
    Learned,
    ShapeBook,
    View,
    build_capability,
    shape_digest,
    subject_digest,
)
from codemode.capabilities.shapebook import SAMPLE_EVERY, STEADY_MERGES
from codemode.sources.mcp.tools import tool_capability

INPUT = {"type": "object", "properties": {"path": {"type": "string"}}}


async def send(*_: object) -> Any:
    raise AssertionError("not called")


def undeclared(name: str = "stat", input_schema: dict[str, Any] | None = None) -> Capability:
    """An MCP tool without an `outputSchema`, built as the MCP source builds it."""
    tool = mt.Tool(name=name, input_schema=INPUT if input_schema is None else input_schema)
    return tool_capability("fs", tool, send, expose_errors="none", timeout=None)


def info(size: int = 1, **more: Any) -> dict[str, Any]:
    return {"kind": "file", "size": size, **more}


def test_an_undeclared_tool_is_learned_and_a_declared_one_is_not() -> None:
    book = ShapeBook()
    declared = tool_capability(
        "fs",
        mt.Tool(
            name="info",
            input_schema=INPUT,
            output_schema={"type": "object", "properties": {"size": {"type": "integer"}}},
        ),
        send,
        expose_errors="none",
        timeout=None,
    )
    stat = undeclared()
    assert (book.learns(stat), book.learns(declared)) == (True, False)
    book.observe(stat, info(), "alice")
    book.observe(declared, {"size": 1}, "alice")
    learned = book.learned(stat)
    assert learned is not None
    assert (learned.capability_id, learned.name, learned.results) == ("fs.stat", "fs.stat", 1)
    assert learned.digest == shape_digest(stat)
    assert learned.node.key_names() == ("kind", "size")
    assert book.learned(declared) is None


def test_a_host_function_returning_any_is_not_learned() -> None:
    """The host can annotate its own function: `json_results` is False for it."""

    def lookup() -> Any:
        return info()

    function = build_capability(
        lookup, "records.lookup", id=None, summary="Look up.", description=None, search_terms=()
    )
    book = ShapeBook()
    book.observe(function, info(), "alice")
    assert (book.learns(function), book.learned(function), book.snapshot()) == (False, None, [])


def test_another_form_of_the_capability_starts_learning_again() -> None:
    """A tool whose input schema changed upstream is a new Capability with a new digest."""
    book = ShapeBook()
    old = undeclared()
    new = undeclared(input_schema={"type": "object", "properties": {"file": {"type": "string"}}})
    assert old.id == new.id and shape_digest(old) != shape_digest(new)
    for _ in range(3):
        book.observe(old, info(), "alice")
    assert book.learned(new) is None
    assert book.learned(old) is None  # dropped on the first touch of the new form
    book.observe(new, info(), "alice")
    learned = book.learned(new)
    assert learned is not None and learned.results == 1


def test_the_version_moves_only_when_what_checkable_answers_changes() -> None:
    book = ShapeBook(checked_after=3)
    stat = undeclared()
    view = View([stat])
    versions = []
    for _ in range(2):
        book.observe(stat, info(), "alice")
        versions.append(book.version)
    assert versions == [0, 0] and book.checkable(view) == {}
    book.observe(stat, info(), "alice")  # the third: the closed shape is offered
    third = book.version
    assert third == 1 and list(book.checkable(view)) == ["fs.stat"]
    revision = book.revision
    book.observe(stat, info(size=2), "alice")  # counts alone
    assert (book.version, book.revision) == (third, revision + 1)
    book.observe(stat, info(owner="bob"), "alice")  # another key set: the level opens
    assert book.version == third + 1 and book.checkable(view) == {}
    node = book.learned(stat)
    assert node is not None and not node.node.closed()


def test_a_name_seen_from_a_second_subject_moves_the_version() -> None:
    """Names shown to a subject are what the preflight names: shown to all, they change."""
    book = ShapeBook(checked_after=1)
    stat = undeclared()
    book.observe(stat, info(), "alice")
    first = book.version
    book.observe(stat, info(), "alice")
    assert book.version == first
    book.observe(stat, info(), "bob")
    assert book.version == first + 1


def test_the_reader_answers_the_version_with_the_shapes() -> None:
    book = ShapeBook(checked_after=1)
    stat = undeclared()
    read = book.reader(View([stat]))
    assert read() == (0, {})
    book.observe(stat, info(), "alice")
    version, shapes = read()
    learned = book.learned(stat)
    assert learned is not None
    assert (version, shapes) == (book.version, {"fs.stat": learned.node})
    assert read()[1] is shapes  # unchanged version: the same answer


def test_the_least_recently_observed_shape_goes_past_the_bound() -> None:
    book = ShapeBook(max_shapes=2)
    a, b, c = (undeclared(name) for name in ("a", "b", "c"))
    for capability in (a, b, a, c):
        book.observe(capability, info(), "alice")
    assert [learned.name for learned in book.snapshot()] == ["fs.a", "fs.c"]
    assert book.learned(b) is None


def test_a_settled_shape_learns_from_one_result_in_eight() -> None:
    book = ShapeBook()
    stat = undeclared()
    for _ in range(1 + STEADY_MERGES):
        book.observe(stat, info(), "alice")
    learned = book.learned(stat)
    assert learned is not None and learned.results == 1 + STEADY_MERGES
    for _ in range(2 * SAMPLE_EVERY):
        book.observe(stat, info(), "alice")
    learned = book.learned(stat)
    assert learned is not None and learned.results == 1 + STEADY_MERGES + 2
    assert learned.node.seen == learned.results


def test_eight_threads_observing_at_once_count_every_result() -> None:
    """Each capability gets 24 results from 8 threads (too few to settle): all counted."""
    book = ShapeBook()
    book.share()
    capabilities = [undeclared(f"c{index}") for index in range(40)]
    start = threading.Barrier(8)

    def work(thread: int) -> None:
        start.wait()
        for _ in range(3):
            for capability in capabilities:
                book.observe(capability, info(size=thread, rows=[{"n": thread}]), f"s{thread}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for capability in capabilities:
        learned = book.learned(capability)
        assert learned is not None
        assert (learned.results, learned.node.seen, learned.node.objects) == (24, 24, 24)
        assert learned.node.closed()
    assert {delta.results for delta in book.pending().values()} == {24}


def test_names_remember_the_subjects_they_were_seen_from() -> None:
    key = b"k" * 32
    book = ShapeBook(subject_key=key)
    stat = undeclared()
    book.observe(stat, info(), "alice")
    learned = book.learned(stat)
    assert learned is not None and learned.node.fields is not None
    alice = subject_digest("alice", key)
    assert book.digest("alice") == alice != subject_digest("alice")
    assert {name: field.subjects for name, field in learned.node.fields} == {
        "kind": frozenset({alice}),
        "size": frozenset({alice}),
    }
    assert ShapeBook().digest("alice") == subject_digest("alice")


def test_a_failure_stops_learning_that_capability_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = ShapeBook()
    stat = undeclared()
    with caplog.at_level(logging.ERROR, logger="codemode"):
        book.observe(stat, info(), None)  # type: ignore[arg-type]  # no subject: it fails
        book.observe(stat, info(), "alice")
        book.observe(stat, info(), None)  # type: ignore[arg-type]
    assert book.learned(stat) is None
    assert [record.getMessage() for record in caplog.records] == [
        "learning the result shape of fs.stat stopped"
    ]
    other = undeclared("other")
    book.observe(other, info(), "alice")
    assert book.learned(other) is not None


def test_pending_is_taken_given_back_and_confirmed_by_a_total() -> None:
    book = ShapeBook()
    stat = undeclared()
    book.observe(stat, info(), "alice")
    book.share()  # what was learned before is sent too
    book.observe(stat, info(), "alice")
    taken = book.pending()
    assert {k: v.results for k, v in taken.items()} == {"fs.stat": 2}
    book.observe(stat, info(), "alice")
    book.unsent(taken.values())
    again = book.pending()
    assert {k: v.results for k, v in again.items()} == {"fs.stat": 3}
    other = Learned("fs.stat", "fs.stat", shape_digest(stat), 5, again["fs.stat"].node)
    book.absorb(other, sent=True)  # a total that holds what was sent
    learned = book.learned(stat)
    assert learned is not None and learned.results == 5
    assert book.pending() == {}
    assert book.base_results("fs.stat", shape_digest(stat)) == 5


def test_a_book_that_does_not_share_keeps_nothing_to_send() -> None:
    book = ShapeBook()
    book.observe(undeclared(), info(), "alice")
    assert book.pending() == {}


def test_a_total_of_another_form_is_not_absorbed() -> None:
    book = ShapeBook()
    stat = undeclared()
    book.observe(stat, info(), "alice")
    learned = book.learned(stat)
    assert learned is not None
    book.absorb(Learned("fs.stat", "fs.stat", "0" * 16, 9, learned.node))
    assert book.learned(stat) == learned


def test_loaded_shapes_are_seeds_until_a_total_confirms_them() -> None:
    book = ShapeBook()
    stat = undeclared()
    source = ShapeBook()
    source.observe(stat, info(), "alice")
    kept = source.snapshot()
    book.load(kept)
    assert book.learned(stat) == kept[0] and book.seeds() == kept
    assert book.base_results("fs.stat", shape_digest(stat)) is None
    book.absorb(kept[0])
    assert book.seeds() == []
    assert book.known() == [("fs.stat", "fs.stat", shape_digest(stat))]


def test_a_loaded_shape_of_an_old_form_goes_when_its_total_comes() -> None:
    book = ShapeBook()
    stat = undeclared()
    source = ShapeBook()
    source.observe(stat, info(), "alice")
    [kept] = source.snapshot()
    old = Learned(kept.capability_id, kept.name, "f" * 16, kept.results, kept.node)
    book.load([old])
    assert book.learns(stat) and book.seeds() == [old]
    book.absorb(old)
    assert book.seeds() == [] and book.snapshot() == []
