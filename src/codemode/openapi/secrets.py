"""Which of the host's texts are credentials, and every form one may come back in.

An API may echo what a request carried: a debug endpoint, an error that quotes the
request, a URL with the query it was sent. So the host's secrets are blanked out of
whatever the API answers before it crosses, and out of the host log too; and only the
secrets, as blanking any other text would change the API's data for nothing.

A credential is: each `auth` secret; the password of a `base_url`'s `user:password@`
(the user name alone when the password is empty, as an API key given as the user is);
and in `headers`, the token of `Authorization` (after its scheme; a Basic one's
password too), each cookie's value in `Cookie`, and the value of every other header but
the public ones (`Accept`, `Content-Type`, `User-Agent`, `*-Version`, ...). A user name
beside a password is an identity, which the API routinely answers with (an owner, an
account id): only the `user:password` pair and its base64 are blanked.

A secret shorter than `MIN_SECRET` characters cannot be told from the API's own data
(blanking `en` would blank every `en` the API answers), so where the host says it is a
secret (`auth`, a password, `Authorization`, a header or cookie whose name says so, or
that a security scheme names) it is refused at registration; a value that short in
another header or cookie (`X-Tenant: 42`, `lang=en`) is taken as no secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import httpx2

from codemode.openapi.document import SpecError

MIN_SECRET = 8
"""The fewest characters a secret may have: a shorter one cannot be blanked safely."""
REDACTED = "[redacted]"

_PUBLIC_HEADERS = frozenset(
    [
        "accept",
        "accept-charset",
        "accept-language",
        "cache-control",
        "content-language",
        "content-type",
        "dnt",
        "pragma",
        "prefer",
        "user-agent",
        "x-requested-with",
    ]
)
"""Host headers whose value is never a secret (nor is any `*-Version`, an API's version):
they are not blanked, so `application/json` stays in the results that hold it."""
_SECRET_NAME = re.compile(
    r"(?i)auth|token|secret|key|passw|pwd|session|cookie|credential|signature|csrf|xsrf|jwt"
    r"|bearer|(?:^|[-_.])sid(?:$|[-_.])"
)
"""A header or cookie name that says its value is a secret (`X-Api-Key`, `sid`)."""


def _short(what: str) -> SpecError:
    return SpecError(
        f"{what} holds a secret shorter than {MIN_SECRET} characters, too short to blank "
        "out of what the API answers"
    )


def token(secret: str, what: str) -> list[str]:
    """A secret sent as it is (a bearer token, an API key)."""
    if len(secret) < MIN_SECRET:
        raise _short(what)
    return [secret]


def basic(user: str, password: str, what: str) -> list[str]:
    """HTTP basic's secret (the password; the user when there is none), the pair and the
    pair's base64, as the `Authorization` header carries it."""
    pair = f"{user}:{password}"
    return [*token(password or user, what), pair, base64.b64encode(pair.encode()).decode()]


def header(name: str, value: str, declared: frozenset[str]) -> list[str]:
    """The secrets of one host header (see the module docstring); `declared` are the
    lower-case header and cookie names the document's security schemes send keys in."""
    lower = name.lower()
    if lower in _PUBLIC_HEADERS or lower.endswith("-version"):
        return []
    what = f'header "{name}"'
    if lower in ("authorization", "proxy-authorization"):
        scheme, _, credentials = value.strip().partition(" ")
        credentials = credentials.strip() or scheme
        found = token(credentials, what)
        if scheme.lower() == "basic" and credentials != scheme:
            try:
                pair = base64.b64decode(credentials, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return found
            user, _, password = pair.partition(":")
            found += basic(user, password, what)
        return found
    if lower == "cookie":
        found = []
        for part in value.split(";"):
            cookie, _, text = part.strip().partition("=")
            found += _named(cookie, text, f'cookie "{cookie}" in {what}', declared)
        return found
    return _named(name, value, what, declared)


def _named(name: str, value: str, what: str, declared: frozenset[str]) -> list[str]:
    """A value a name says is a secret (refused if short), else one that is a secret if
    it is long enough to be one."""
    if _SECRET_NAME.search(name) or name.lower() in declared:
        return token(value, what)
    return [value] if len(value) >= MIN_SECRET else []


def forms(secret: str) -> set[str]:
    """Every spelling of `secret` an API may answer with: as sent, percent-encoded as a
    query, a path or a form encodes it (`quote`, `quote_plus`, httpx's query), each as a
    server decodes it (`unquote` and `unquote_plus` differ on `+`), and each as JSON
    escapes it (`\\/`, `\\u0026`, `\\u00e9`). The case of hex digits is matched loosely
    (`Redactor`); a form shorter than `MIN_SECRET` is left alone."""
    encoded = {
        quote(secret, safe=""),
        quote(secret, safe="/"),
        quote_plus(secret, safe=""),
        quote_plus(secret, safe="/"),
        str(httpx2.QueryParams({"k": secret})).removeprefix("k="),
    }
    plain = {secret, unquote(secret), unquote_plus(secret)}
    plain |= {unquote(text) for text in encoded} | {unquote_plus(text) for text in encoded}
    found = plain | encoded
    for text in list(found):
        for escaped in (json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]):
            for slashed in (escaped, escaped.replace("/", "\\/")):
                found |= {slashed, _html_safe(slashed)}
    return {text for text in found if len(text) >= MIN_SECRET}


def _html_safe(escaped: str) -> str:
    """JSON as Go's encoder (and others) writes it: `<`, `>`, `&` as `\\u003c`, ..."""
    return escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}")


def _pattern(text: str) -> str:
    """A regular expression matching `text`, the hex digits of its escapes in any case."""
    out: list[str] = []
    at = 0
    for match in _ESCAPE.finditer(text):
        escape = match.group()
        lead = 1 if escape[0] == "%" else 2
        out.append(re.escape(text[at : match.start()] + escape[:lead]))
        out += [f"[{d.upper()}{d.lower()}]" if d.isalpha() else d for d in escape[lead:]]
        at = match.end()
    out.append(re.escape(text[at:]))
    return "".join(out)


class Redactor:
    """Blanks out every form of some secrets as `[redacted]`, in one pass of one pattern
    (the longest form first, as one secret may begin another)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found = sorted({f for s in secrets for f in forms(s)}, key=lambda f: (-len(f), f))
        self._pattern = re.compile("|".join(map(_pattern, found))) if found else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """`text` with every form of every secret as `[redacted]`."""
        return text if self._pattern is None else self._pattern.sub(REDACTED, text)

    def scrub(self, value: Any) -> Any:
        """A parsed body with every secret it echoes blanked out, in any string, key or
        number (a number that is one becomes `[redacted]`). Iterative, as a body may nest
        deeper than Python's recursion; it changes the body in place."""
        if self._pattern is None:
            return value
        root = [value]
        stack: list[tuple[Any, Any]] = [(root, 0)]
        while stack:
            holder, key = stack.pop()
            item = holder[key]
            if isinstance(item, str):
                holder[key] = self.redact(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                if self.redact(str(item)) != str(item):
                    holder[key] = REDACTED
            elif isinstance(item, list):
                stack.extend((item, i) for i in range(len(item)))
            elif isinstance(item, dict):
                if any(self.redact(k) != k for k in item):  # rare: a key that is a secret
                    renamed = {self.redact(k): v for k, v in item.items()}
                    item.clear()
                    item.update(renamed)
                stack.extend((item, k) for k in item)
        return root[0]


__all__ = ["MIN_SECRET", "REDACTED", "Redactor", "basic", "forms", "header", "token"]
