"""Bearer tokens -> subjects, compared in constant time."""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from pathlib import Path


class StaticTokens:
    """A fixed map of bearer token -> subject id.

    Every candidate is compared with `hmac.compare_digest`, so timing does not reveal how
    much of a token matched. The repr never shows a token.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        if not tokens:
            raise ValueError("at least one token is needed")
        for token, subject in tokens.items():
            if (
                not token
                or not subject
                or not isinstance(token, str)
                or not isinstance(subject, str)
            ):
                raise ValueError("tokens and subjects must be non-empty strings")
        self._tokens = [(token.encode(), subject) for token, subject in tokens.items()]

    def __repr__(self) -> str:
        return f"StaticTokens({len(self._tokens)} tokens)"

    def subject(self, token: str) -> str | None:
        """The subject `token` belongs to, or None; every candidate is compared."""
        given = token.encode()
        found: str | None = None
        for candidate, subject in self._tokens:
            if hmac.compare_digest(candidate, given):
                found = subject
        return found


def load_token_file(path: str | Path) -> dict[str, str]:
    """Read a token file: a JSON object of token -> subject, or lines `subject:token`.

    A byte-order mark (what some editors write first) is dropped, and text that starts
    like JSON must parse as JSON: read as lines, it would make a guessable token of its
    last part and put the real secret into a subject name, which logs show.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}:{exc.lineno}: this looks like JSON but does not parse;"
                " a JSON token file is one object of token -> subject"
            ) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ValueError(f"{path}: expected a JSON object of token -> subject")
        return data
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        subject, sep, token = line.partition(":")
        if not sep or not subject.strip() or not token.strip():
            raise ValueError(f"{path}:{number}: expected subject:token")
        if token.strip() in tokens:
            raise ValueError(f"{path}:{number}: this token is already given on another line")
        tokens[token.strip()] = subject.strip()
    return tokens


__all__ = ["StaticTokens", "load_token_file"]
