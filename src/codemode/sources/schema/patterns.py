"""The patterns of one schema, each made once and matched at a cost known before it runs.

Patterns are matched by the Rust regex crate that pydantic-core carries: linear in the
text, but not cheap whatever the pattern. Its cost is set by the automaton a pattern
compiles to, which its text hardly shows: `a{5000}x` is eight characters, and matching
it against a 1 MB string walks 5,000 states per byte, half a minute with the GIL held;
`\\w{120}` holds seven megabytes and takes 30 ms to compile, also with the GIL held (a
Unicode class is hundreds of states). So, before a pattern is compiled, its automaton is
measured from its text (`cost`): how many states a byte of text may visit, and how much
building it costs. A check spends by that measure, before the engine runs:

- a pattern is compiled at its first use by a schema's check, and kept by that schema's
  check (`Patterns`), never in a cache another schema's patterns could evict (a schema
  of more patterns than a shared cache holds would compile each at every check);
- building one costs its `build` measure, once;
- matching one costs a step per `STATE_BYTES_PER_STEP` of its states times the text's
  UTF-8 bytes, and one match may cost at most `MAX_MATCH_STEPS` (the engine holds the
  GIL), so a large text against a large pattern is refused before it runs;
- a pattern past `MAX_PATTERN_COST` is not checked, as one the engine cannot read
  (lookaround, backreferences) is not: arguments are checked again by the upstream,
  which wrote it, and a result's string still crosses only as its declared type;
- a schema whose patterns together measure past `MAX_SCHEMA_PATTERN_COST` is one no
  check may afford: `SchemaError`, so its tool or operation is skipped when it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic_core import core_schema

STATE_BYTES_PER_STEP = 256
"""States times bytes of text one step of a match stands for: a state costs at most about
7 ns a byte (`a{5000}x` against `"a" * 10**6`), so a step is under 2 µs."""
HEAVY = 128
"""What building a class of a large Unicode category (`\\w`, `\\p{L}`) costs: about 0.25 ms,
a unit being about 2 µs of compiling."""
LIGHT = 16
"""What building any other class costs (`\\d`, `.`, `[a-z]`, a letter under `(?i)`)."""
OVERHEAD = 64
"""What making any matcher costs, however small its pattern."""
MAX_MATCH_STEPS = 32_768
"""The most one match may cost (its states times the text's bytes, about 60 ms at worst):
the engine holds the GIL while it runs, so a longer match would hold up every thread of
the process, whatever the budget left. A string past it is one the check cannot judge (a
large pattern's legitimate matches are short: `^\\w{1,64}$` still reads 16 KB, `^.*$` a
megabyte)."""
MAX_PATTERN_COST = 10_000
"""The largest pattern checked (`^\\w{1,64}$` measures 8,258): about 20 ms to compile and
a few megabytes kept."""
MAX_SCHEMA_PATTERN_COST = 50_000
"""What all of one schema's distinct patterns may measure together: about 0.1 s of
compiling and a few tens of megabytes kept, for a schema any check of it compiles."""
_HUGE = 10**9


class TooCostly(ValueError):
    """A schema whose patterns together measure past `MAX_SCHEMA_PATTERN_COST`."""


class Unaffordable(Exception):
    """A match that would cost more than `MAX_MATCH_STEPS`: the engine would hold the GIL,
    and so every thread of the process, for too long."""


class Undeclared(LookupError):
    """A pattern met in a check that its schema, as `declared` read it, does not hold."""


@dataclass(frozen=True, slots=True)
class Cost:
    """What a pattern's automaton costs: `states` a byte of text may visit, `build` units
    to compile it."""

    states: int
    build: int


def cost(pattern: str) -> Cost | None:
    """The measure of `pattern`'s automaton, an upper bound of the engine's own; None for
    one that cannot be measured (lookaround, verbose mode, unbalanced), which the engine
    is not asked to read."""
    try:
        return _Measure(pattern).cost()
    except (_Unmeasured, RecursionError):
        return None


class _Unmeasured(Exception):
    pass


class _Measure:
    """One pass over a pattern: each atom's states and build units, a group the sum of its
    alternatives, a repetition `{n,m}` its atom `m` times (`{n,}` n + 1 times)."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0
        self.folded = False
        """Whether a `(?i)` appears: each literal is then a class of its case forms."""

    def cost(self) -> Cost:
        states, build = self.alternatives(top=True)
        return Cost(max(states, 1), min(build, _HUGE) + OVERHEAD)

    def alternatives(self, *, top: bool = False) -> tuple[int, int]:
        states = build = 0
        seq_states = seq_build = 0
        last: tuple[int, int] | None = None
        while self.at < len(self.text):
            char = self.text[self.at]
            self.at += 1
            if char == ")":
                if top:
                    raise _Unmeasured
                return states + seq_states, build + seq_build
            if char == "|":
                states, build = states + seq_states, build + seq_build
                seq_states = seq_build = 0
                last = None
                continue
            if char in "*+?":
                if self.at < len(self.text) and self.text[self.at] in "?+":
                    self.at += 1
                continue  # one copy of its atom, already counted
            if char == "{":
                copies = self.repetition()
                if copies is not None and last is not None:
                    extra = copies - 1
                    seq_states = min(seq_states + last[0] * extra, _HUGE)
                    seq_build = min(seq_build + last[1] * extra, _HUGE)
                    last = (min(last[0] * copies, _HUGE), min(last[1] * copies, _HUGE))
                    continue
                if copies is not None:
                    continue
            atom = self.atom(char)
            if atom is None:
                continue
            last = atom
            seq_states, seq_build = seq_states + atom[0], seq_build + atom[1]
        if not top:
            raise _Unmeasured
        return states + seq_states, build + seq_build

    def atom(self, char: str) -> tuple[int, int] | None:
        """The atom `char` begins: (states, build), or None for a flag group."""
        if char == "(":
            return self.group()
        if char == "[":
            return self.bracket()
        if char == "\\":
            return self.escape()
        if char == ".":
            return 2, LIGHT
        size = len(char.encode("utf-8", "surrogatepass"))  # a state per byte it spells
        return (size + 1, LIGHT) if self.folded else (size, size)

    def group(self) -> tuple[int, int] | None:
        if self.text.startswith("?", self.at):
            rest = self.text[self.at + 1 :]
            if rest[:1] in ("=", "!") or rest[:2] in ("<=", "<!"):
                raise _Unmeasured  # lookaround: the engine cannot read it either
            if rest[:2] == "P<" or rest[:1] == "<":
                end = self.text.find(">", self.at)
                if end < 0:
                    raise _Unmeasured
                self.at = end + 1
            else:
                end = self.at + 1
                while end < len(self.text) and self.text[end] not in ":)":
                    end += 1
                flags = self.text[self.at + 1 : end]
                if end >= len(self.text) or "x" in flags:
                    raise _Unmeasured  # verbose mode: its comments hide what they hold
                if "i" in flags:
                    self.folded = True
                self.at = end + 1
                if self.text[end] == ")":
                    return None  # flags for what follows
        return self.alternatives()

    def bracket(self) -> tuple[int, int]:
        start, depth, first = self.at - 1, 1, True
        heavy = False
        while depth:
            if self.at >= len(self.text):
                raise _Unmeasured
            char = self.text[self.at]
            self.at += 1
            if char == "^" and first:
                continue
            if char == "]" and not first:
                depth -= 1
            elif char == "[":
                depth, first = depth + 1, True
                continue
            elif char == "\\":
                heavy = self.escape()[0] > 2 or heavy
            first = False
        size = self.at - start
        return (8, HEAVY + size) if heavy else (2, LIGHT + size)

    def escape(self) -> tuple[int, int]:
        if self.at >= len(self.text):
            raise _Unmeasured
        char = self.text[self.at]
        self.at += 1
        if char in "pPxuU" and self.text.startswith("{", self.at):
            end = self.text.find("}", self.at)
            if end < 0:
                raise _Unmeasured
            self.at = end + 1
        elif char in "pP":
            self.at += 1
        if char in "pPwW":
            return 8, HEAVY
        if char in "dDsS":
            return 2, LIGHT
        if char in "bB":
            return 4, 1  # a Unicode word boundary reads the characters beside it
        return (2, LIGHT) if self.folded else (1, 1)

    def repetition(self) -> int | None:
        """The copies `{n}`, `{n,}` or `{n,m}` makes of its atom; None (a literal `{`)
        when it is none of them."""
        end = self.text.find("}", self.at)
        if end < 0:
            return None
        bounds = self.text[self.at : end].replace(" ", "").split(",")
        if len(bounds) > 2 or not bounds[0] or not all(map(_digits, bounds)):
            return None
        self.at = end + 1
        if self.text.startswith(("?", "+"), self.at):
            self.at += 1
        low = int(bounds[0]) if len(bounds[0]) < 10 else _HUGE
        if len(bounds) == 1:
            return max(low, 1)
        if bounds[1] == "":
            return low + 1
        high = int(bounds[1]) if len(bounds[1]) < 10 else _HUGE
        return max(high, 1)


def _digits(text: str) -> bool:
    """Whether `text` is ASCII digits only (or nothing: `{2,}`)."""
    return all(c in "0123456789" for c in text)


def declared(schema: Any) -> set[str]:
    """Every pattern a schema holds: each `pattern` and the keys of each
    `patternProperties`, wherever it is (in a `const` or an `enum` too: a property may
    be named `enum`, and counting too many costs nothing)."""
    found: set[str] = set()
    stack, seen = [schema], set()
    while stack:
        node = stack.pop()
        if not isinstance(node, list | Mapping) or id(node) in seen:
            continue
        seen.add(id(node))  # a schema made in Python may share a part: read it once
        if isinstance(node, list):
            stack.extend(node)
            continue
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                found.add(value)
            elif key == "patternProperties" and isinstance(value, Mapping):
                found.update(k for k in value if isinstance(k, str))
            stack.append(value)
    return found


Matcher = pydantic_core.SchemaValidator


class Patterns:
    """A schema's patterns, measured when it is read and each compiled at its first use
    (kept as long as the schema's check is)."""

    def __init__(self, schema: Any) -> None:
        self._costs = {pattern: cost(pattern) for pattern in declared(schema)}
        total = sum(c.build for c in self._costs.values() if c and c.build <= MAX_PATTERN_COST)
        if total > MAX_SCHEMA_PATTERN_COST:
            raise TooCostly(
                f"its {len(self._costs)} patterns measure {total} to compile, past the "
                f"{MAX_SCHEMA_PATTERN_COST} a schema may"
            )
        self._matchers: dict[str, Matcher | None] = {}

    def matches(self, pattern: str, text: str, spend: Callable[[int], None]) -> bool:
        """Whether `text` holds a match of `pattern`, after `spend`ing what it costs; True
        when the pattern is not checked (see the module's docstring)."""
        try:
            measure = self._costs[pattern]
        except KeyError:  # never met: every pattern a check meets is in its schema
            raise Undeclared(pattern) from None
        if measure is None or measure.build > MAX_PATTERN_COST:
            return True
        if pattern not in self._matchers:
            spend(measure.build)
            self._matchers[pattern] = compiled(pattern)
        matcher = self._matchers[pattern]
        if matcher is None:
            return True
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        steps = 1 + size * measure.states // STATE_BYTES_PER_STEP
        if steps > MAX_MATCH_STEPS:
            raise Unaffordable(pattern)
        spend(steps)
        try:
            matcher.validate_python(text)
        except pydantic_core.ValidationError:
            return False
        return True


def compiled(pattern: str) -> Matcher | None:
    """A linear-time matcher of `pattern`, or None when the engine cannot read it."""
    try:
        return pydantic_core.SchemaValidator(
            core_schema.str_schema(pattern=pattern, regex_engine="rust-regex")
        )
    except pydantic_core.SchemaError:
        return None


__all__ = [
    "HEAVY",
    "LIGHT",
    "MAX_MATCH_STEPS",
    "MAX_PATTERN_COST",
    "MAX_SCHEMA_PATTERN_COST",
    "STATE_BYTES_PER_STEP",
    "Cost",
    "Matcher",
    "Patterns",
    "TooCostly",
    "Unaffordable",
    "Undeclared",
    "cost",
    "declared",
]
