"""Which of the host's texts are credentials, and every form one may come back in.

An API may echo what a request carried: a debug endpoint, an error that quotes the
request, a URL with the query it was sent. So the host's secrets are blanked out of
whatever the API answers before it crosses, and out of the host log too; and only the
secrets, as blanking any other text would change the API's data for nothing.

A credential is: each `auth` secret; the password of a `base_url`'s `user:password@`
(the user name alone when the password is empty, as an API key given as the user is);
and in `headers`, the token of `Authorization` (after its scheme; a Basic one's
password too), each cookie's value in `Cookie` (without the quotes of a quoted one,
`sid="..."`, as the server reads it), and the value of every other header but the
public ones (`Accept`, `Content-Type`, `User-Agent`, `*-Version`, ...). A user name
beside a password is an identity, which the API routinely answers with (an owner, an
account id): only the `user:password` pair and its base64 are blanked.

A secret may also come back inside base64 (an echoed `Authorization: Basic ...` or
`Bearer ...` value, a token in a JWT-like blob): wherever it sits in the encoded text,
the characters that encode only its bytes are one of three runs (`base64_runs`, with the
URL-safe alphabet's too), and those are blanked as well.

A secret comes back in whatever spelling the server's own encoders and escapers give
it, which are not Python's (Java's URL encoder encodes `~`, JavaScript's leaves `*()!'`
alone, an HTML page writes `&amp;`): so each of its characters is matched in every
spelling one may have (`spellings`), whichever the others have.

A secret shorter than `MIN_SECRET` characters cannot be told from the API's own data
(blanking `en` would blank every `en` the API answers), so where the host says it is a
secret (`auth`, a password, `Authorization`, a header or cookie whose name says so, or
that a security scheme names) it is refused at registration; a value that short in
another header or cookie (`X-Tenant: 42`, `lang=en`) is taken as no secret.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html.entities
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, unquote_plus

from codemode.sources.openapi.document import SpecError

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
            cookie, _, text = (half.strip() for half in part.partition("="))
            if len(text) >= 2 and text[0] == text[-1] == '"':  # read without its quotes
                text = text[1:-1]
            found += _named(cookie, text, f'cookie "{cookie}" in {what}', declared)
        return found
    return _named(name, value, what, declared)


def _named(name: str, value: str, what: str, declared: frozenset[str]) -> list[str]:
    """A value a name says is a secret (refused if short), else one that is a secret if
    it is long enough to be one."""
    if _SECRET_NAME.search(name) or name.lower() in declared:
        return token(value, what)
    return [value] if len(value) >= MIN_SECRET else []


def readings(secret: str) -> set[str]:
    """The texts a server may have read for `secret` and echo: as sent, and as `unquote`
    and `unquote_plus` decode it (which differ on `+`); one shorter than `MIN_SECRET` is
    left alone."""
    found = {secret, unquote(secret), unquote_plus(secret)}
    return {text for text in found if len(text) >= MIN_SECRET}


def base64_runs(secret: str) -> set[str]:
    """The runs of base64 that encode only `secret`'s bytes, at each of the three places
    its first byte may fall in a group of three (so it is found inside the base64 of any
    longer text, `Bearer <token>` say), in the standard and the URL-safe alphabets."""
    data = secret.encode("utf-8", errors="surrogatepass")
    runs = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode()
        start = -(-8 * offset // 6)  # the first character past the padding's bits
        end = 8 * (offset + len(data)) // 6  # the last one before the partial group
        run = encoded[start:end]
        if len(run) >= MIN_SECRET:
            runs |= {run, run.replace("+", "-").replace("/", "_")}
    return runs


def pattern(text: str) -> str:
    """A regular expression matching `text` in any spelling an echo may give it, each of
    its characters spelled its own way (`spellings`): as one encoder or another left it,
    or as a text that quotes it in JSON or in HTML escapes it. A run of alternations of
    fixed strings, with no quantifier over a group, so a match costs the text it reads
    (times the few ways the host's own secret may itself look like an escape, `&amp;`
    in a secret). Each spelling of the first character begins a branch of its own, so
    the engine passes over every position no spelling of the secret begins at."""
    rest = "".join(_character(ch) for ch in text[1:])
    return "|".join(first + rest for first in spellings(text[0]))


def _character(ch: str) -> str:
    """The pattern of one character: its spellings, one of which must be there."""
    found = spellings(ch)
    return found[0] if len(found) == 1 else "(?:" + "|".join(found) + ")"


def _hex(number: int, width: int) -> str:
    """`number` in hex as a pattern of its digits in either case (`[Ee]9`)."""
    digits = f"{number:0{width}X}"
    return "".join(f"[{d}{d.lower()}]" if d.isalpha() else d for d in digits)


def _entities() -> dict[str, list[str]]:
    """HTML's named references to each character (`amp;`, `AMP`, `lpar;`), as
    `html.unescape` reads them (a legacy one with no `;` too)."""
    found: dict[str, list[str]] = {}
    for name, text in html.entities.html5.items():
        if len(text) == 1:
            found.setdefault(text, []).append(name)
    return found


_ENTITIES = _entities()
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b"}
_JSON_SHORT |= {"\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
"""JSON's short escapes (`\\/` is how PHP and others write `/`)."""


@functools.lru_cache(maxsize=1024)
def spellings(ch: str) -> tuple[str, ...]:
    """Every spelling of one character an echo may hold, as patterns, the longest first:
    the character itself; percent-encoded, each byte of its UTF-8 as `%XX` in either case
    (whichever characters an encoder leaves alone: Java's encodes `~`, JavaScript's
    leaves `*()!'`), and `+` for a space; JSON-escaped (`\\u00e9` in either case, a pair
    of surrogates past the BMP, `\\/`, `\\"`); and as an HTML reference (`&amp;`,
    `&#39;`, `&#x27;`, `&lpar;`), as a text answer or an error page escapes it. An ASCII
    letter or digit is only itself: no encoder or escaper writes one otherwise, and a
    long token of them (a JWT) keeps a pattern that compiles at once."""
    if ch.isascii() and ch.isalnum():
        return (ch,)
    code = ord(ch)
    found = {re.escape(ch), "".join("%" + _hex(byte, 2) for byte in ch.encode())}
    if ch == " ":
        found.add(re.escape("+"))
    if code < 0x10000:
        found.add(r"\\u" + _hex(code, 4))
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        found.add(r"\\u" + _hex(high, 4) + r"\\u" + _hex(low, 4))
    if ch in _JSON_SHORT:
        found.add(re.escape(_JSON_SHORT[ch]))
    found |= {f"&#0*{code};?", f"&#[xX]0*{_hex(code, 1)};?"}
    found |= {re.escape(f"&{name}") for name in _ENTITIES.get(ch, ())}
    return tuple(sorted(found, key=lambda spelled: (-len(spelled), spelled)))


class Redactor:
    """Blanks out every spelling of some secrets as `[redacted]`, in one pass of one
    pattern (the longest secret first, as one secret may begin another)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found = sorted(
            {r for s in secrets for r in (*readings(s), *base64_runs(s))},
            key=lambda r: (-len(r), r),
        )
        self._pattern = re.compile("|".join(map(pattern, found))) if found else None

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


__all__ = [
    "MIN_SECRET",
    "REDACTED",
    "Redactor",
    "base64_runs",
    "basic",
    "header",
    "pattern",
    "readings",
    "spellings",
    "token",
]
