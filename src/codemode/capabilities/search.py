"""Ranking enabled capabilities for search_api.

Identifiers are split the way people type them (`createReview` -> create, review; dots,
underscores and dashes separate), connector words are dropped, and each query token is
scored against each field: an exact token beats a plural or prefix match, which beats a
one-letter typo in a long word; the name weighs most, then search terms, summary and
description; rare tokens weigh more than common ones. Most of a multi-word query must
match, and an exact dotted name always comes first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from codemode.capabilities.registry import Capability

MAX_QUERY_BYTES = 256
MAX_QUERY_TOKENS = 16
MAX_RESPONSE_BYTES = 64 * 1024

CONNECTORS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "get",
        "i",
        "in",
        "into",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "some",
        "that",
        "the",
        "this",
        "to",
        "using",
        "want",
        "which",
        "with",
    ]
)
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+")
_FIELD_WEIGHTS = (("name", 4.0), ("terms", 3.0), ("summary", 2.0), ("description", 1.0))


def tokenize(text: str) -> list[str]:
    """Lower-case tokens: `createReview` -> create, review; `XMLFile` -> xml, file."""
    return [w.lower() for part in re.split(r"[^A-Za-z0-9]+", text) for w in _WORD.findall(part)]


@dataclass(frozen=True, slots=True)
class SearchHit:
    name: str
    signature: str
    summary: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    results: list[SearchHit]
    truncated: bool


def _singular(token: str) -> str:
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("es") and token[-3] in "sxz":
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def _one_edit(a: str, b: str) -> bool:
    """Whether a and b differ by one substitution, insertion, deletion or transposition."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diffs = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diffs) == 1 or (
            len(diffs) == 2
            and diffs[1] == diffs[0] + 1
            and a[diffs[0]] == b[diffs[1]]
            and a[diffs[1]] == b[diffs[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _match(query: str, token: str) -> float:
    """How well one query token matches one field token (0 when it does not)."""
    if query == token:
        return 1.0
    if _singular(query) == _singular(token):
        return 0.9
    if len(query) >= 3 and token.startswith(query):
        return 0.7
    if len(query) >= 5 and len(token) >= 5 and _one_edit(query, token):
        return 0.6
    return 0.0


def search(capabilities: Sequence[Capability], query: str, *, limit: int = 20) -> SearchResult:
    """Rank capabilities for a query; blank or connector-only queries find nothing."""
    if not isinstance(query, str):
        return SearchResult([], False)
    query = query.encode("utf-8")[:MAX_QUERY_BYTES].decode("utf-8", errors="ignore").strip()
    exact = next((c for c in capabilities if c.name == query), None)
    tokens = list(dict.fromkeys(t for t in tokenize(query) if t not in CONNECTORS))
    tokens = tokens[:MAX_QUERY_TOKENS]
    if not tokens and exact is None:
        return SearchResult([], False)

    fields = [
        {
            "name": tokenize(c.name),
            "terms": [t for term in c.search_terms for t in tokenize(term)],
            "summary": tokenize(c.summary),
            "description": tokenize(c.description),
        }
        for c in capabilities
    ]
    total = len(capabilities)

    def rarity(token: str) -> float:
        having = sum(
            1 for f in fields if any(_match(token, w) for words in f.values() for w in words)
        )
        return math.log(1 + total / (1 + having))

    weights = {token: rarity(token) for token in tokens}
    needed = max(1, math.ceil(len(tokens) * 0.6)) if tokens else 0
    scored: list[tuple[float, str, Capability]] = []
    for capability, f in zip(capabilities, fields, strict=True):
        score = 0.0
        matched = 0
        for token in tokens:
            best = max(
                (
                    weight * _match(token, word)
                    for field, weight in _FIELD_WEIGHTS
                    for word in f[field]
                ),
                default=0.0,
            )
            if best:
                matched += 1
                score += best * weights[token]
        if capability is exact:
            score = math.inf
        elif matched < needed or not score:
            continue
        scored.append((score, capability.name, capability))
    scored.sort(key=lambda item: (-item[0], item[1]))

    hits: list[SearchHit] = []
    size = 0
    truncated = len(scored) > limit
    for _, _, capability in scored[:limit]:
        hit = SearchHit(capability.name, capability.signature, capability.summary)
        size += len(hit.name) + len(hit.signature) + len(hit.summary) + 64
        if size > MAX_RESPONSE_BYTES:
            truncated = True
            break
        hits.append(hit)
    return SearchResult(hits, truncated)


__all__ = ["SearchHit", "SearchResult", "search", "tokenize"]
