"""The one suggestion a wrong capability name gets: a likely spelling of what was meant,
or what its namespace holds; never a different verb."""

from __future__ import annotations

import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.capabilities.naming import capability_hint, likely_spelling

FS = [
    "create_directory",
    "directory_tree",
    "edit_file",
    "get_file_info",
    "list_directory",
    "move_file",
    "read_file",
    "read_text_file",
    "write_file",
]


@pytest.mark.parametrize(
    ("word", "meant"),
    [
        ("read_flie", "read_file"),  # a swap
        ("raed_file", "read_file"),  # a swap in the verb
        ("wirte_file", "write_file"),
        ("lst_directory", "list_directory"),  # a letter dropped from a short verb
        ("get_file_inf", "get_file_info"),
        ("edit_files", "edit_file"),
    ],
)
def test_a_misspelling_gets_the_name_it_misspells(word: str, meant: str) -> None:
    assert likely_spelling(word, FS) == meant


@pytest.mark.parametrize(
    "word",
    [
        "delete_file",  # close to edit_file in letters, but another verb
        "set_file_info",  # one letter from get_file_info, another verb
        "read",  # the start of several names: none is its spelling
        "remove",
    ],
)
def test_another_verb_or_a_fragment_gets_no_name(word: str) -> None:
    assert likely_spelling(word, FS) is None


def test_the_hint_lists_the_namespace_when_no_name_is_a_likely_spelling() -> None:
    names = [f"fs.{leaf}" for leaf in FS]
    assert capability_hint("fs.read_flie", names) == 'did you mean "fs.read_file"?'
    assert capability_hint("fs.delete_file", names) == "fs has: " + ", ".join(FS)
    assert capability_hint("sf.read_file", names) == 'did you mean "fs.read_file"?'
    assert capability_hint("nothing.at_all", names) is None
    assert capability_hint("fs.read_file", []) is None  # a subject who sees nothing


def _host() -> CodeMode:
    cm = CodeMode(authorizer=AllowAll())
    for leaf in ("edit_file", "read_file"):

        @cm.capability(f"fs.{leaf}", summary="A file tool.")
        def tool(*, path: str) -> str:
            return path

    return cm


def test_a_program_and_describe_get_the_same_hint() -> None:
    with _host() as cm:
        with pytest.raises(CodeModeError) as caught:
            cm.execute("def main():\n    return fs.delete_file(path='a')", subject="alice")
        assert str(caught.value) == (
            'invalid program: <codemode>:2:12: unknown capability "fs.delete_file"; '
            "fs has: edit_file, read_file"
        )
        with pytest.raises(CodeModeError) as described:
            cm.describe("fs.delete_file")
        assert str(described.value) == "capability not found: fs has: edit_file, read_file"
        with pytest.raises(CodeModeError) as typo:
            cm.describe("fs.raed_file")
        assert str(typo.value) == 'capability not found: did you mean "fs.read_file"?'


def test_names_far_from_the_word_are_ruled_out_before_any_edit_distance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long or odd name against a big catalog costs a few cheap checks per name, not a
    full edit distance each (which took seconds, on the server's loop)."""
    from codemode.capabilities import naming

    computed: list[tuple[str, str]] = []
    edits = naming.edit_distance

    def counting(a: str, b: str, limit: int | None = None) -> int:
        computed.append((a, b))
        return edits(a, b, limit)

    monkeypatch.setattr(naming, "edit_distance", counting)
    names = [f"ns{i}.get_item_number_{i}" for i in range(2000)]
    assert capability_hint("a" * 200, names) is None
    assert capability_hint("z" * 21, names) is None
    words = {a for a, _ in computed}
    assert words <= {"a" * 200, "z" * 21} and len(computed) <= 2  # only verbs, if any
    computed.clear()
    assert capability_hint("ns5.get_item_numbr_5", names) == 'did you mean "ns5.get_item_number_5"?'
    assert len([pair for pair in computed if pair[0] == "get_item_numbr_5"]) <= 20
