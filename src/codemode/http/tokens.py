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

    Nothing is guessed, since a file misread as lines makes a guessable token of one part
    and puts the real secret into a subject name, which logs and policies see: a
    byte-order mark (what some editors write first) is dropped, text that starts like
    JSON must parse as JSON, and each token and subject must be one word (`_problem`).
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    if "\x00" in text:  # UTF-16 without its mark reads as UTF-8 with NULs between
        raise ValueError(f"{path}: not UTF-8 text")
    if text.lstrip().startswith("{"):
        return _json_tokens(path, text)
    tokens: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        subject, sep, token = line.partition(":")
        if not sep or not subject or not token:
            raise ValueError(f"{path}:{number}: expected subject:token")
        problem = _problem(token, subject)
        if problem:
            raise ValueError(f"{path}:{number}: {problem}")
        if token in tokens:
            raise ValueError(f"{path}:{number}: this token is already given on another line")
        tokens[token] = subject
    return tokens


def _json_tokens(path: str | Path, text: str) -> dict[str, str]:
    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if len({key for key, _ in pairs}) < len(pairs):
            raise ValueError(f"{path}: a token is given twice")
        return dict(pairs)

    try:
        data = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        written = len(text.rstrip().splitlines())  # an unclosed object ends at its last line
        raise ValueError(
            f"{path}:{min(exc.lineno, written)}: this looks like JSON but does not parse;"
            " a JSON token file is one object of token -> subject"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"{path}: expected a JSON object of token -> subject, each a string")
    for token, subject in data.items():
        problem = _problem(token, subject)
        if problem:
            raise ValueError(f"{path}: {problem}")
    return data


_NOT_IN_SUBJECTS = frozenset('{}[]"')


def _problem(token: str, subject: str) -> str | None:
    """Why a token or subject cannot be as written, or None. Each is one word of printable
    characters (so `name: secret` or a line of JSON is never read as one), and a subject
    has no quotes or brackets either: it goes into every log line as it is."""
    if not token or not token.isprintable() or any(ch.isspace() for ch in token):
        return "a token is one word of printable characters"
    if (
        not subject
        or not subject.isprintable()
        or any(ch.isspace() or ch in _NOT_IN_SUBJECTS for ch in subject)
    ):
        return "a subject is one word of printable characters, without quotes or brackets"
    return None


__all__ = ["StaticTokens", "load_token_file"]
