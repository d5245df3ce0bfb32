"""Token files: what an editor writes is read as the host meant it, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codemode.http import load_token_file
from codemode.serving import http_app
from tests.conftest import CANARY
from tests.http.conftest import body, noting_host

BOM = "\ufeff"


def served_api(tokens: dict[str, str], effects: list[str]) -> TestClient:
    app = http_app(noting_host(effects), tokens=tokens, web=True)
    return TestClient(app, base_url="http://127.0.0.1:8000")


def test_a_json_file_with_a_byte_order_mark_maps_its_real_token(
    tmp_path: Path, effects: list[str]
) -> None:
    """Read as lines, this file made `"alice"}` a token of a subject holding the secret."""
    path = tmp_path / "tokens.json"
    path.write_bytes(f'{BOM}{{"{CANARY}": "alice"}}'.encode())
    tokens = load_token_file(path)
    assert tokens == {CANARY: "alice"}
    with served_api(tokens, effects) as client:
        add = body(source='def main():\n    return notes.add(text="hi")\n')
        guessed = client.post(
            "/api/execute",
            content=add,
            headers={"Content-Type": "application/json", "Authorization": 'Bearer "alice"}'},
        )
        real = client.post(
            "/api/execute",
            content=add,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {CANARY}"},
        )
    assert (guessed.status_code, real.status_code) == (401, 200)
    assert effects == ["alice:hi"]  # the subject is the name, never the secret


def test_a_line_file_with_a_byte_order_mark_keeps_its_first_subject(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_bytes(f"{BOM}alice:{CANARY}\nbob:tok-bob\n".encode())
    assert load_token_file(path) == {CANARY: "alice", "tok-bob": "bob"}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (f'{BOM}{{"{CANARY}": "alice"', 1),
        (f'\n  {{"{CANARY}": "alice",\n  "tok-bob" "bob"}}\n', 3),
        (f'{{"{CANARY}": "alice"}}\nbob:tok-bob\n', 2),
    ],
)
def test_text_that_looks_like_json_but_does_not_parse_is_refused(
    tmp_path: Path, content: str, line: int
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_token_file(path)
    assert str(caught.value) == (
        f"{path}:{line}: this looks like JSON but does not parse;"
        " a JSON token file is one object of token -> subject"
    )
    assert CANARY not in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f'# prod\n{{"{CANARY}": "alice"}}\n', ":2: a token is one word of printable characters"),
        (f'[{{"{CANARY}": "alice"}}]', ":1: a token is one word of printable characters"),
        (f'\u200b{{"{CANARY}": "alice"}}', ":1: a token is one word of printable characters"),
        (f"{CANARY}: alice\n", ":1: a token is one word of printable characters"),
        (f"alice:{CANARY} x\n", ":1: a token is one word of printable characters"),
        (f'{{"{CANARY}": "alice", "{CANARY}": "bob"}}', ": a token is given twice"),
        (f'{{" {CANARY}": "alice"}}', ": a token is one word of printable characters"),
        (
            f'{{"{CANARY}": "alice\\nbob"}}',
            ": a subject is one word of printable characters, without quotes or brackets",
        ),
    ],
    ids=[
        "comment-then-json",
        "json-array",
        "zero-width",
        "yaml",
        "space",
        "twice",
        "padded",
        "newline",
    ],
)
def test_a_file_that_could_be_misread_is_refused(
    tmp_path: Path, content: str, message: str
) -> None:
    """Each of these, read as lines, made a guessable token or put the secret into a
    subject name (which every log line shows)."""
    path = tmp_path / "tokens"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_token_file(path)
    assert str(caught.value) == f"{path}{message}"
    assert CANARY not in str(caught.value)


def test_utf16_without_its_mark_is_not_read_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_bytes(f"alice:{CANARY}\n".encode("utf-16-be"))
    with pytest.raises(ValueError) as caught:
        load_token_file(path)
    assert str(caught.value) == f"{path}: not UTF-8 text"


def test_an_unclosed_object_is_placed_at_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"tok-1": "x:y"\n', encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_token_file(path)
    assert str(caught.value).startswith(f"{path}:1: this looks like JSON but does not parse")
