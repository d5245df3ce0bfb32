"""Printed output: kept up to its cap, and a flood past it stops the execution once."""

from __future__ import annotations

from codemode.runtime.printed import Printed


def test_output_is_kept_in_the_order_it_was_printed() -> None:
    floods: list[str] = []
    printed = Printed(100, lambda: floods.append("flood"))
    printed("stdout", "one\n")
    printed("stdout", "two\n")
    assert printed.text == "one\ntwo\n"
    assert printed.size == 8
    assert floods == [] and not printed.flooded


def test_a_flood_keeps_what_fits_and_is_told_once() -> None:
    floods: list[str] = []
    printed = Printed(5, lambda: floods.append("flood"))
    printed("stdout", "abc")
    printed("stdout", "defgh")
    printed("stdout", "more")
    assert printed.text == "abcde"
    assert printed.size == 5 and printed.flooded
    assert floods == ["flood"]


def test_the_cap_counts_bytes_and_never_cuts_a_character_in_two() -> None:
    printed = Printed(4, lambda: None)
    printed("stdout", "añé")  # 1 + 2 + 2 bytes: the é does not fit
    assert printed.text == "añ"


def test_a_resumed_program_goes_on_from_what_it_printed() -> None:
    printed = Printed(10, lambda: None)
    printed.restore("héllo")
    printed("stdout", "!")
    assert printed.text == "héllo!"
    assert printed.size == 7
