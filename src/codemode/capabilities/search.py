"""Ranking enabled capabilities for search_api.

Identifiers are split the way people type them (`createReview` -> create, review;
`XMLFile` -> xml, file; `GitHub` stays one token; dots, underscores and dashes separate),
connector words are dropped, and each query token is
scored against each field: an exact token beats a plural or prefix match, which beats a
word of the same meaning (`vm` for `instance`, from a small table of API vocabulary), which
beats a one-letter typo in a word of five or more letters; the name weighs most, then
search terms, summary and description; rare tokens weigh more than common ones. Nothing is
required to match every word: capabilities matching more of the query, and its rarer
words, come first; an exact dotted name always comes first, and ties go by name. An empty
query (or `*`) lists every capability in name order, a page at a time.

The index is built once per set of enabled capabilities, so a query costs a pass over the
vocabulary, not over every capability's text; and each capability's words are read once,
so the index of a changed catalog (a new tool, another subject's view) only gathers them.
"""

from __future__ import annotations

import bisect
import heapq
import math
import re
import weakref
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from codemode.capabilities.registry import Capability

MAX_QUERY_BYTES = 256
MAX_QUERY_TOKENS = 16
MAX_RESULTS = 50
MAX_RESPONSE_BYTES = 64 * 1024

CONNECTORS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "into", "is"}
    | {"it", "its", "me", "my", "of", "on", "or", "please", "some", "that", "the", "them"}
    | {"this", "to", "with", "you"}
)
SYNONYMS: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split())
    for group in (
        "create add new make insert",
        "delete remove destroy drop",
        "list all browse enumerate",
        "get read show fetch view describe",
        "update set change edit modify",
        "start run boot launch",
        "stop halt shutdown",
        "tag label",
        "instance vm server machine host node",
        "user person owner account member",
        "search find lookup query",
        "environment sandbox project",
    )
)
"""Words an API is often asked for by another name; each word stands for its whole group."""
_SAME_MEANING: dict[str, frozenset[str]] = {
    word: group - {word} for group in SYNONYMS for word in group
}
LIST_ALL = frozenset({"", "*"})
"""Queries that list the catalog instead of searching it."""

_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def tokenize(text: str) -> list[str]:
    """Lower-case tokens: `createReview` -> create, review; `XMLFile` -> xml, file.

    A word that starts with a capital keeps its lower-to-upper joints (`GitHub`, `MySQL`
    are names, not two words); an acronym before a word still splits.
    """
    tokens: list[str] = []
    for word in _SEPARATORS.split(text):
        if (word.isalpha() and word.islower()) or word.isdigit():  # most words: one token
            tokens.append(word)
            continue
        parts = _PARTS.findall(word)
        if word[:1].isupper():
            joined: list[str] = []
            for part in parts:
                if joined and joined[-1][-1].islower() and part[0].isupper():
                    joined[-1] += part
                else:
                    joined.append(part)
            parts = joined
        tokens.extend(part.lower() for part in parts)
    return tokens


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One capability a search found."""

    name: str
    signature: str
    """`records.lookup(*, key: str) -> Record`"""
    summary: str


NONE_AVAILABLE = "no capabilities are available to you"
"""What the model is told when its subject sees no capability (search's hint, a NameError
on a namespace), never whether any are hidden."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One page of what a search found, best first (an empty query lists all by name)."""

    results: tuple[SearchHit, ...]
    truncated: bool
    """Whether more capabilities matched than this page holds."""
    next_offset: int | None = None
    """Where the next page of a listing starts (an empty query), when there is one."""
    hint: str | None = None
    """What to try when nothing matched."""


def singular(token: str) -> str:
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("es") and token[-3] in "sxz":
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def one_edit(a: str, b: str) -> bool:
    """Whether a and b differ by one substitution, insertion, deletion or transposition."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diffs = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diffs) == 1:
            return True
        i, j = [*diffs, 0, 0][:2]
        return len(diffs) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def match(query: str, word: str) -> float:
    """How well one query token matches one indexed word (0 when it does not)."""
    if query == word:
        return 1.0
    if singular(query) == singular(word):
        return 0.9
    if len(query) >= 3 and word.startswith(query):
        return 0.7
    if singular(word) in _SAME_MEANING.get(singular(query), ()):
        return 0.65
    if len(query) >= 5 and len(word) >= 5 and one_edit(query, word):
        return 0.6
    return 0.0


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


_WORDS: weakref.WeakKeyDictionary[Capability, dict[str, float]] = weakref.WeakKeyDictionary()


def _words(capability: Capability) -> dict[str, float]:
    """Each word of a capability's fields, with the weight of the weightiest field it is
    in. Read once per capability (and kept while it lives): every index that holds it,
    of each view and each later catalog, only gathers these, so building one over ten
    thousand capabilities costs a pass over their words, not tokenizing their text again.
    """
    found = _WORDS.get(capability)
    if found is None:
        found = {}
        fields = (
            (4.0, [capability.name]),
            (3.0, capability.search_terms),
            (2.0, [capability.summary]),
            (1.0, [capability.description]),
        )
        for weight, texts in fields:  # weightiest first: a word keeps its first weight
            for text in texts:
                for word in tokenize(text):
                    found.setdefault(word, weight)
        _WORDS[capability] = found
    return found


class SearchIndex:
    """Words of every field of every capability, and where each word occurs."""

    def __init__(self, capabilities: Sequence[Capability]) -> None:
        self.capabilities = list(capabilities)
        self.by_name = {c.name: c for c in self.capabilities}
        self.listing = sorted(self.capabilities, key=lambda c: c.name)
        """The catalog in name order, as an empty query lists it."""
        self.positions = {c.name: index for index, c in enumerate(self.capabilities)}
        self.rank = [0] * len(self.capabilities)
        """Each capability's place in name order, by its index: ties of score go by it."""
        for place, capability in enumerate(self.listing):
            self.rank[self.positions[capability.name]] = place
        # word -> {capability index: best field weight}
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        for index, capability in enumerate(self.capabilities):
            for word, weight in _words(capability).items():
                self.postings[word][index] = weight
        self.sorted_words = sorted(self.postings)
        self.by_singular: dict[str, list[str]] = defaultdict(list)
        self.by_deletion: dict[str, list[str]] = defaultdict(list)
        for word in self.sorted_words:
            self.by_singular[singular(word)].append(word)
            if len(word) >= 5:
                for variant in _deletions(word):
                    self.by_deletion[variant].append(word)

    def candidates(self, token: str) -> set[str]:
        """Indexed words that may match `token`: found by lookups, never by a full scan."""
        found = set(self.by_singular.get(singular(token), ()))
        for other in _SAME_MEANING.get(singular(token), ()):
            found.update(self.by_singular.get(other, ()))
        if token in self.postings:
            found.add(token)
        if len(token) >= 3:
            vocabulary = self.sorted_words
            at = bisect.bisect_left(vocabulary, token)  # no copy of the rest of it
            while at < len(vocabulary) and vocabulary[at].startswith(token):
                found.add(vocabulary[at])
                at += 1
        if len(token) >= 5:
            for variant in {token, *_deletions(token)}:
                found.update(self.by_deletion.get(variant, ()))
                if variant in self.postings:
                    found.add(variant)
        return found

    def search(self, query: str, *, limit: int = 20, offset: int = 0) -> SearchResult:
        """Rank capabilities for a query; an empty query or `*` lists them all by name."""
        if not isinstance(query, str):
            return SearchResult((), False)
        query = (
            query.encode("utf-8", errors="ignore")[:MAX_QUERY_BYTES]
            .decode("utf-8", errors="ignore")
            .strip()
        )
        limit = max(1, min(limit, MAX_RESULTS))
        if not self.capabilities:
            return SearchResult((), False, hint=f"{NONE_AVAILABLE.capitalize()}.")
        if query in LIST_ALL:
            return self._page(self.listing, limit, offset)
        exact = self.by_name.get(query)
        tokens = list(dict.fromkeys(t for t in tokenize(query) if t not in CONNECTORS))
        tokens = tokens[:MAX_QUERY_TOKENS]
        total = len(self.capabilities)

        # Index -> number maps only: a word that matches thousands makes no object per
        # match that the cycle collector would have to read (ints and floats it skips).
        scores: dict[int, float] = {}
        for token in tokens:
            best: dict[int, float] = {}
            for word in self.candidates(token):
                quality = match(token, word)
                if quality:
                    for index, weight in self.postings[word].items():
                        if quality * weight > best.get(index, 0.0):
                            best[index] = quality * weight
            rarity = math.log(1 + total / (1 + len(best)))
            for index, value in best.items():
                scores[index] = scores.get(index, 0.0) + value * rarity

        first = [exact] if exact is not None else []
        if exact is not None:
            scores.pop(self.positions[exact.name], None)
        if not first and not scores:
            return SearchResult((), False, hint=self._hint())
        offset = max(offset, 0)
        top = self._best(scores, offset + limit)
        ordered = first + [self.capabilities[index] for index in top]
        return self._page(ordered, limit, offset, total=len(first) + len(scores))

    def _best(self, scores: dict[int, float], count: int) -> list[int]:
        """The `count` best-scored indexes, best first and ties by name: only these are
        put in order (a common word may match thousands), found by the `count`-th best
        score, above which are fewer than `count`, and the first names of those at it."""
        rank = self.rank
        if len(scores) <= count:
            return sorted(scores, key=lambda index: (-scores[index], rank[index]))
        cut = heapq.nlargest(count, scores.values())[-1]
        above = [index for index, score in scores.items() if score > cut]
        above.sort(key=lambda index: (-scores[index], rank[index]))
        at_cut = [index for index, score in scores.items() if score == cut]
        return above + heapq.nsmallest(count - len(above), at_cut, key=rank.__getitem__)

    def _page(
        self, ordered: list[Capability], limit: int, offset: int, total: int | None = None
    ) -> SearchResult:
        """Up to `limit` hits from `offset` on, within the response budget (`ordered` holds
        at least the first `offset + limit` of `total`)."""
        offset = max(offset, 0)
        hits: list[SearchHit] = []
        size = 0
        for capability in ordered[offset : offset + limit]:
            hit = SearchHit(capability.name, capability.signature, capability.summary)
            size += len(hit.name) + len(hit.signature) + len(hit.summary) + 64
            if size > MAX_RESPONSE_BYTES:
                break
            hits.append(hit)
        following = offset + len(hits)
        more = following < (len(ordered) if total is None else total)
        return SearchResult(tuple(hits), more, following if more else None)

    def _hint(self) -> str:
        """What to try when nothing matched (names the model can see anyway)."""
        roots = sorted({c.name.split(".", 1)[0] for c in self.capabilities})
        return (
            f"Nothing matched. Namespaces: {', '.join(roots[:50])}. Try fewer or other words, "
            "or an empty query to list every capability."
        )


__all__ = [
    "LIST_ALL",
    "NONE_AVAILABLE",
    "SYNONYMS",
    "SearchHit",
    "SearchIndex",
    "SearchResult",
    "tokenize",
]
