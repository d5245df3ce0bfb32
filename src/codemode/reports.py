"""How a failure report words the calls a program completed before it: what they were,
how they repeated, and what stands of their effects.

A program that failed part way runs again from the top, so the report must say what is
already done (the writes to skip), whether a loop went round the same arguments (a paging
loop that never advanced), and whether what completed may have changed something. Kept
apart from the error classes, which only carry the calls and put this line in their report.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemode.types import JSONObject


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One capability call a program made: what it called, where, and how it ended.

    Every field is the program's own: the name it wrote, a line of its source, the error
    code of the outcome (or "ok"), and for a completed call the arguments it passed.
    """

    capability: str
    line: int | None
    outcome: str
    arguments: str | None = None
    """The keyword arguments as the program passed them (`id='T-7'`), cut short."""
    digest: str | None = None
    """What tells two calls' whole arguments apart (their canonical JSON's digest)."""
    changes: bool = True
    """Whether the call may have changed something (not declared read-only)."""
    declared: bool = True
    """Whether the host declared the capability's effects (any of MCP's hints): a call
    that may have changed something only because nothing was declared is not said to have
    effects that stand."""

    def to_dict(self) -> JSONObject:
        """The call as an item of an error payload's `calls`."""
        return {"capability": self.capability, "line": self.line, "outcome": self.outcome}


MAX_SPELLED_CALLS = 10
"""How many completed calls that may have changed something a report spells out."""


def progress(calls: tuple[CallRecord, ...]) -> str | None:
    """What completed before a failure, or None when nothing did.

    `after 2 completed capability calls: tickets.update(id='T-1') (line 4),
    instances.list x100 (line 5), all with the same arguments; its effects stand`: each
    call that may have changed something with its arguments (the first
    MAX_SPELLED_CALLS kinds of them; a repeat as `x3`), so the program knows what to skip
    when it runs again; read-only calls by name, said to repeat their arguments when they
    did (a paging loop that never advanced, or one that went round in a cycle); and what
    stands of their effects (`effects`)."""
    done = [call for call in calls if call.outcome == "ok"]
    if not done:
        return None
    groups: dict[tuple[str, str | None], list[CallRecord]] = {}
    for call in done:
        spelled = call.changes and call.arguments is not None
        key = (call.capability, call.digest if spelled else None)
        if spelled and key not in groups and len(groups) >= MAX_SPELLED_CALLS:
            key = (call.capability, None)  # beyond the bound: counted by name
        groups.setdefault(key, []).append(call)
    parts = []
    for (name, digest), group in groups.items():
        lines = sorted({call.line for call in group if call.line is not None})
        text = name if digest is None else f"{name}({group[0].arguments})"
        if len(group) > 1:
            text += f" x{len(group)}"
        if lines:
            text += f" ({'line' if len(lines) == 1 else 'lines'} {', '.join(map(str, lines))})"
        if digest is None:
            text += repeats([call.digest for call in group])
        parts.append(text)
    noun = "call" if len(done) == 1 else "calls"
    return f"after {len(done)} completed capability {noun}: {', '.join(parts)}" + effects(done)


def repeats(digests: list[str | None]) -> str:
    """How a capability's calls repeated their arguments, when they went round: `, all
    with the same arguments`, `, the same 2 argument sets in turn`, each at least twice
    over, and `after 3 other(s)` when they began to only after some calls that did not."""
    if len(digests) < 2 or None in digests:
        return ""
    last = len(digests) - 1
    earlier = [i for i in range(last) if digests[i] == digests[last]]
    if not earlier:
        return ""
    period = last - earlier[-1]
    start = last - period
    while start > 0 and digests[start - 1] == digests[start - 1 + period]:
        start -= 1
    if len(set(digests[start : start + period])) != period or len(digests) - start < 2 * period:
        return ""
    text = (
        ", all with the same arguments"
        if period == 1
        else f", the same {period} argument sets in turn"
    )
    return text if start == 0 else f"{text} after {start} other{'s' if start > 1 else ''}"


def effects(done: list[CallRecord]) -> str:
    """What stands of the completed calls' effects: `; its effects stand` (or `their`)
    for calls whose capabilities declare they may change something; `; tickets.list may
    have had effects: the host declares none` for those whose capabilities declare
    nothing (most are reads, so they are not presumed to have written); both, by name,
    when there are both; nothing for calls declared read-only."""
    stand = [call for call in done if call.changes and call.declared]
    unsure = list(dict.fromkeys(c.capability for c in done if c.changes and not c.declared))
    undeclared = f"{', '.join(unsure)} may have had effects: the host declares none"
    if not unsure:
        return (
            ""
            if not stand
            else "; its effects stand"
            if len(stand) == 1
            else "; their effects stand"
        )
    if not stand:
        return f"; {undeclared}"
    names = ", ".join(dict.fromkeys(call.capability for call in stand))
    return f"; the effects of {names} stand; {undeclared}"


__all__ = ["MAX_SPELLED_CALLS", "CallRecord", "effects", "progress", "repeats"]
