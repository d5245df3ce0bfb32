"""The words of a result read a shape says fails: the runtime's own, so either finds it alike.

The runtime's hints (`runtime.hints`) word a failed key or field read after the fact; the
preflight words the same mistake before the program runs, from the same names, with the
same did-you-mean (`binding.close_key`). A learned shape's texts end by saying where the
names were observed, the one wording of their own: the model knows it is not a promise.
Only names the reader may see are listed or offered.
"""

from __future__ import annotations

import re

from codemode.binding import close_key
from codemode.capabilities import Node, Shown
from codemode.errors import printable

_KEY = re.compile(r"^'([^'\\]{1,200})'$")
"""A key the runtime hints on: its KeyError message is the key's repr in single quotes."""
_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]]{1,30}\])*")


def missing(node: Node, name: str, how: str, shown: Shown | None, observed: str) -> str:
    """A key (`how="key"`), attribute or `.get` of `name` that the level `node` lacks.

    `observed` is the learned suffix (empty for a declared level).
    """
    names = node.key_names(shown)
    close = close_key(name, names)
    listed = printable(", ".join(names))
    owner = node.title or node.record or "the result"
    if how == "attribute":
        head = f"AttributeError: '{owner}' object has no attribute '{name}'"
        return f"{head}; {close or f'{owner} has: {listed}'}"
    if how == "get":
        if not observed:
            head = f".get({name!r}) always gives None: {owner} has no key {name!r}"
            return f"{head}; {close or f'{owner} has: {listed}'}"
        head = f".get({name!r}) gives None: no result had the key {name!r}"
        if not names:
            return head + observed
        return f"{head}; {close or f'the result has: {listed}'}{observed}"
    head = f"KeyError: {name!r}"
    if not _KEY.match(repr(name)):
        return head + observed  # the runtime gives no hint either
    if not observed:
        return f"{head}; {close or f'{owner} has: {listed}'}"
    if not names:  # every result was an empty object
        return head + observed
    hint = f"{close} the result has: {listed}" if close else f"the result has: {listed}"
    return f"{head}; {hint}{observed}"


def not_subscriptable(node: Node, value: str, key: str) -> str:
    """`r["name"]` of a record, `value` being `r` as the program wrote it (unparsed)."""
    names = node.key_names()
    owner = node.record or "object"
    text = f"TypeError: '{owner}' object is not subscriptable"
    if not names:
        return text
    value = written(value)
    example = f"{value}.{key}" if key in names else f"e.g. {value}.{names[0]}"
    return f"{text}; {owner} is an object: read its fields as attributes, {example}"


def dict_attribute(attribute: str, value: str, observed: str) -> str:
    """`info.size` of a dict, `value` being `info` as the program wrote it."""
    return (
        f"AttributeError: 'dict' object has no attribute '{attribute}'; to read its key "
        f'"{attribute}", write {written(value)}["{attribute}"]{observed}'
    )


def observed(capability: str) -> str:
    """What a learned shape's text ends with: that the keys were learned, not declared (no
    count: a refusal is kept for its program while the shape holds, and counts move on)."""
    return f" (learned from the results of {printable(capability)}, not declared)"


def written(text: str) -> str:
    """As the runtime's hints: a short name or chain of names and subscripts, else `x`."""
    text = text.strip()
    return text if len(text) <= 40 and _CHAIN.fullmatch(text) else "x"


__all__ = ["dict_attribute", "missing", "not_subscriptable", "observed", "written"]
