"""Token files: what an editor writes is read as the host meant it, or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codemode.http import load_token_file
from tests.conftest import CANARY
from tests.http.conftest import body, noting_host

BOM = "\ufeff"


def served_api(tokens: dict[str, str], effects: list[str]) -> TestClient:
    app = noting_host(effects).http_app(tokens=tokens, web=True)
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
