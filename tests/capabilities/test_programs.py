"""A program's text as a capability: its signature read from main's annotations (never
evaluated), exact refusals, its result from the return annotation, its entry handing the
bound arguments back."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.capabilities import (
    SAVE,
    SignatureError,
    described_parameters,
    program_capability,
    program_signature,
    save_capability,
)
from codemode.context import CallContext

TYPES = "int, float, str, bool, None, Any, list[...], dict[str, ...] and |"


def test_the_signature_is_mains_keyword_only_parameters_and_its_return_annotation() -> None:
    source = (
        "def main(*, week: int = 48, team: str | None = None, tags: list[str] = [],"
        " extra: dict[str, Any] = {}, ratio: float = 1) -> dict[str, list[int]]:\n"
        "    return programs.other(x=week)\n"
    )
    capability = program_capability("weekly", source, summary="Weekly.")
    assert capability.signature == (
        "programs.weekly(*, week: int = 48, team: str | None = None, tags: list[str] = [], "
        "extra: dict[str, Any] = {}, ratio: float = 1) -> dict[str, list[int]]"
    )
    assert capability.calls == frozenset({"other"})
    assert capability.owner is None and capability.id == "programs.weekly"
    assert capability.description == "Weekly.\n\nSaved program (host)."
    assert described_parameters(capability)[0] == {"name": "week", "type": "int", "default": 48}
    assert capability.output_schema == {
        "additionalProperties": {"items": {"type": "integer"}, "type": "array"},
        "type": "object",
    }


def test_without_a_return_annotation_the_result_is_any_and_the_entry_hands_back_its_arguments() -> (
    None
):
    capability = program_capability("p", "def main(*, n: int = 1):\n    return n\n", summary="P.")
    assert capability.signature == "programs.p(*, n: int = 1) -> Any"
    assert capability.handler(n=3) == {"n": 3}
    assert capability.projection.project({"n": 3}, 1024).value == {"n": 3}


def test_a_subjects_own_program_is_another_capability_for_each_text_and_says_yours() -> None:
    first = program_capability("p", "def main():\n    return 1\n", summary="P.", owner="alice")
    again = program_capability("p", "def main():\n    return 2\n", summary="P.", owner="alice")
    assert first.name == again.name == "programs.p"
    assert first.id != again.id and "alice" not in first.id
    assert first.description == "P.\n\nSaved program (yours)."


@pytest.mark.parametrize(
    ("header", "text"),
    [
        (
            "def main(*, s: set = 1):",
            f'main() parameter "s": its type must be written with {TYPES}',
        ),
        (
            "def main(*, s: 'int' = 1):",
            f'main() parameter "s": its type must be written with {TYPES}',
        ),
        (
            "def main(*, s: int = __import__('os')):",
            'main() parameter "s": its default must be a literal of its type',
        ),
        (
            "def main(*, s: int = 'x'):",
            'main() parameter "s": its default must be a literal of its type',
        ),
        ("def main(*, _s: int = 1):", 'main() parameter "_s": its name must not start with "_"'),
        ("def main() -> set:", f"main() result: its type must be written with {TYPES}"),
        ("async def main():", "a saved program's main must be def main(), not async def main()"),
    ],
)
def test_a_main_that_cannot_be_a_signature_is_refused_with_its_text(header: str, text: str) -> None:
    with pytest.raises(SignatureError) as refused:
        program_signature(header + "\n    return 1\n")
    assert str(refused.value) == text


def test_the_save_action_takes_the_document_a_policy_reads() -> None:
    staged: list[dict[str, Any]] = []

    def stage(**arguments: Any) -> bool:
        staged.append(arguments)
        return True

    action = save_capability(stage)
    assert action.name == action.id == SAVE
    assert action.signature == (
        "programs.save(*, name: str, summary: str, parameters: list[dict[str, Any]], "
        "source: str, replaces: bool) -> bool"
    )
    context = CallContext("alice", SAVE, SAVE, "e1")
    document = {"name": "p", "summary": "P.", "parameters": [], "source": "s", "replaces": False}
    assert action.handler(**document, context=context) is True
    assert staged == [{**document, "context": context}]
