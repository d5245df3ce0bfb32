"""A JSON Schema -> the type hints a native capability would declare.

With the schema read as hints, an upstream tool or a REST operation is described, bound,
preflighted and projected by the same code as a host function: `describe` shows `list[str] | None`,
binding says `argument "limit" must be from 1 to 100`, and a result's keys are known for
did-you-mean. What hints cannot say (`not`, formats, a part with no shape) is read as
`Any` here, and the schema itself stays the authority: every bound call is checked
against it before it is sent, by a check bounded whatever the schema says
(`codemode.sources.schema.checking`). An object is never
`Any` while any part of its schema declares keys: its result crosses with exactly those
keys, however its `if`/`then`/`else` and `*Of` combinators branch (see `Hints`).
"""

from __future__ import annotations

import functools
import json
import re
import types
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

import pydantic
from typing_extensions import TypedDict

from codemode.sources.schema.checking import SchemaError

NoneType = type(None)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A string pattern, shown by `describe` and checked by the schema (not by pydantic,
    whose regex dialect is not JSON Schema's)."""

    pattern: str


@functools.lru_cache(maxsize=65536)
def camel(name: str) -> str:
    """`read_text-file` -> `ReadTextFile`, for the names of shapes."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[\W_]+", name) if part)


DEPTH = 32
"""How deep references and combinators are followed to read an object's keys."""


class Hints:
    """Reads one tool's schemas as type hints, naming its shapes after the tool.

    An object is one shape (a TypedDict) with every key its schema declares in
    `properties`: at its top and in each `allOf`, `anyOf`, `oneOf`, `then` and `else`
    member (through references). A result crosses into the program by that shape, so the
    keys some part of the schema declares cross and no other key does. Within the shape:

    - a key is required only when every path the schema allows declares and requires it
      (a key only some branches declare is optional);
    - a key that alternatives declare differently has the union of their types, and Any
      when one of them leaves it unconstrained (`{}`), as a union cannot say less;
    - a member without `properties` (`{"required": [...]}`, `not`, `minProperties`) adds
      no keys, and never widens the shape to `dict[str, Any]`.

    Only an object whose schema declares no key anywhere is a dict: `dict[str, V]` by
    its `additionalProperties`, else `dict[str, Any]`. The same holds at every level, as
    each key's own schema is read by `of` again.
    """

    def __init__(self, root: Mapping[str, Any], prefix: str) -> None:
        self.root = root
        self.prefix = prefix
        self._names: set[str] = set()
        self._tried: dict[str, int] = {}
        """The number each name's next copy tries first: those below it are taken."""
        self._resolving: set[str] = set()
        self._scalars: dict[str, Any] = {}
        """The hint of each scalar schema met, by its text: one hint (and one check of
        it, one reading of its bounds) for the `limit` ten thousand operations take."""
        self._made: dict[str, Any] = {}
        """The shape made for each referenced object schema (recursion ends there)."""
        self._views: dict[str, _Keys] = {}
        """The keys each referenced schema declares (read once, however often it is met)."""
        self._objects: dict[str, bool] = {}
        """Whether each referenced schema is an object's."""
        self._wrapped: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        """Each hint made around another (its list, its optional form, it described), by
        that hint's identity and the words: one object for the `owner` a thousand
        operations take, which is then read once by whatever reads hints."""

    def _wrap(self, kind: object, hint: Any, made: Callable[[], Any], *words: Any) -> Any:
        key = (kind, id(hint), *words)
        found = self._wrapped.get(key)
        if found is None or found[0] is not hint:
            found = self._wrapped[key] = (hint, made())
        return found[1]

    def listed(self, item: Any) -> Any:
        """`list[item]`, one object per item hint."""
        return self._wrap(list, item, lambda: list[item])

    def optional(self, hint: Any) -> Any:
        """`hint | None`, one object per hint."""
        return self._wrap(None, hint, lambda: hint | None)

    def described(self, hint: Any, schema: Any) -> Any:
        """`described(hint, schema)`, one object per hint, description and examples."""
        if not isinstance(schema, Mapping):
            return hint
        description, examples = schema.get("description"), schema.get("examples")
        try:  # the words described() reads, as they are written
            words = (
                description if isinstance(description, str) else None,
                json.dumps(examples) if isinstance(examples, list) else None,
            )
        except (TypeError, ValueError):
            return described(hint, schema)
        return self._wrap(described, hint, lambda: described(hint, schema), *words)

    def of(self, schema: Any, name: str) -> Any:
        """The hint for `schema`; `name` names its shape if it is an object."""
        key = _scalar_key(schema)
        if key is None:
            return self._of(schema, name)
        found = self._scalars.get(key)
        if found is None:
            found = self._scalars[key] = self._of(schema, name)
        return found

    def _of(self, schema: Any, name: str) -> Any:
        if schema is True or not isinstance(schema, Mapping) or not schema:
            return Any
        kinds = schema.get("type")
        if isinstance(kinds, list) and "object" in kinds:  # a nullable object, say
            rest = {k: v for k, v in schema.items() if k != "type"}
            return union([self.of({**rest, "type": kind}, name) for kind in kinds])
        if kinds == "object" or (kinds is None and _declares(schema)):
            return self._object(schema, name)
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return self._all_of(schema, name)
        if isinstance(schema.get("$ref"), str):
            return self._ref(schema["$ref"])
        if "const" in schema:
            return _literal([schema["const"]])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return _literal(schema["enum"])
        branches = [schema[k] for k in ("then", "else") if isinstance(schema.get(k), Mapping)]
        if branches and not kinds:  # what `if` picks: one of the branches
            return self._alternatives(branches, name, open=len(branches) < 2 or "if" not in schema)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._alternatives(schema[key], name)
        if isinstance(kinds, list):
            rest = {k: v for k, v in schema.items() if k != "type"}
            return union([self.of({**rest, "type": kind}, name) for kind in kinds])
        if kinds is None and isinstance(schema.get("properties"), Mapping):
            kinds = "object"
        return self._typed(schema, kinds, name)

    def _typed(self, schema: Mapping[str, Any], kind: object, name: str) -> Any:
        if kind == "string":
            return _bounded(str, schema, min_length="minLength", max_length="maxLength")
        if kind in ("integer", "number"):
            numeric = int if kind == "integer" else float
            bounds = {"ge": "minimum", "le": "maximum", "multiple_of": "multipleOf"}
            for key, word in (("gt", "exclusiveMinimum"), ("lt", "exclusiveMaximum")):
                if _number(schema.get(word)) is not None:  # draft 4's booleans are left out
                    bounds[key] = word
            return _bounded(numeric, schema, **bounds)
        if kind == "boolean":
            return bool
        if kind == "null":
            return NoneType
        if kind == "array":
            items = schema.get("items")
            prefix = schema.get("prefixItems")
            kinds = list(prefix) if isinstance(prefix, list) else []
            kinds += [items] if isinstance(items, Mapping) else []
            if isinstance(items, list):  # draft 4 to 2019-09 tuples
                kinds += items
            item = union([self.of(k, name + "Item") for k in kinds]) if kinds else Any
            return _bounded(self.listed(item), schema, min_length="minItems", max_length="maxItems")
        if kind == "object":
            return self._object(schema, name)
        return Any

    def _object(self, schema: Mapping[str, Any], name: str, ref: str | None = None) -> Any:
        """The shape of every key the object schema declares (see the class docstring)."""
        keys = self._keys(schema)
        if not keys.properties:
            values = keys.values
            value = self.of(values, name + "Value") if isinstance(values, Mapping) else Any
            return dict[str, value]  # type: ignore[valid-type]
        required = keys.required - keys.partial
        kinds = {key: Required if key in required else NotRequired for key in keys.properties}
        title = schema.get("title")
        shape: Any = TypedDict(  # type: ignore[misc]
            self._unique(title if isinstance(title, str) and title.isidentifier() else name),
            {key: kind[Any] for key, kind in kinds.items()},
        )
        if ref is not None:  # a reference to it inside its own fields is this very shape
            self._made[ref] = shape
        for key, sub in keys.properties.items():
            hint = self.of(sub, name + camel(key))
            # no Required wrapper: `__required_keys__`, set as the shape was made, says it
            shape.__annotations__[key] = self.described(hint, sub)
        return shape

    def _keys(self, schema: Any, depth: int = 0) -> _Keys:
        """What an object schema declares of its keys, on every path it allows: its own
        `properties` held with each `allOf` member's, and with what one of its `anyOf`
        (`oneOf`, `then`/`else`) members declares. `then` and `else` are read even
        without `if` (which then never picks): their keys are optional."""
        if depth > DEPTH or not isinstance(schema, Mapping):
            return _Keys()
        properties = schema.get("properties")
        listed = schema.get("required")
        extra = schema.get("additionalProperties")
        view = _Keys(
            {str(k): v for k, v in properties.items()} if isinstance(properties, Mapping) else {},
            set(),
            {k for k in listed if isinstance(k, str)} if isinstance(listed, list) else set(),
            extra if isinstance(extra, Mapping) else None,
        )
        if _is_ref(schema):
            view = _both(view, self._ref_keys(schema["$ref"], depth + 1))
        for member in _members(schema, "allOf"):
            view = _both(view, self._keys(member, depth + 1))
        for word in ("anyOf", "oneOf"):
            if members := _members(schema, word):
                view = _both(view, _either([self._keys(m, depth + 1) for m in members]))
        branches = [schema[w] for w in ("then", "else") if w in schema]
        if branches:
            if len(branches) < 2 or "if" not in schema:
                branches.append({})  # the path neither branch constrains
            view = _both(view, _either([self._keys(b, depth + 1) for b in branches]))
        return view

    def _ref_keys(self, ref: str, depth: int) -> _Keys:
        if ref not in self._views:
            self._views[ref] = _Keys()  # a reference met inside its own keys adds none
            self._views[ref] = self._keys(self._target(ref), depth)
        return self._views[ref]

    def _objectish(self, schema: Any, depth: int = 0) -> bool:
        """Whether `schema` admits only objects by what it says: `"type": "object"`, or
        no type with `properties`, or combinators whose every alternative is an object."""
        if depth > DEPTH or not isinstance(schema, Mapping):
            return False
        kinds = schema.get("type")
        if kinds is not None:
            return bool(kinds == "object")
        if isinstance(schema.get("properties"), Mapping):
            return True
        if _is_ref(schema) and self._ref_objectish(schema["$ref"], depth + 1):
            return True
        if any(self._objectish(m, depth + 1) for m in _members(schema, "allOf")):
            return True
        for word in ("anyOf", "oneOf"):
            members = _members(schema, word)
            if members and all(self._objectish(m, depth + 1) for m in members):
                return True
        branches = [schema[w] for w in ("then", "else") if isinstance(schema.get(w), Mapping)]
        return bool(branches) and all(self._objectish(b, depth + 1) for b in branches)

    def _ref_objectish(self, ref: str, depth: int) -> bool:
        if ref not in self._objects:
            self._objects[ref] = False  # a reference met inside itself says nothing
            self._objects[ref] = self._objectish(self._target(ref), depth)
        return self._objects[ref]

    def _all_of(self, schema: Mapping[str, Any], name: str) -> Any:
        """Schemas that must all hold. With an object member, the value is one shape with
        every member's keys (a key two members declare must meet both); members without
        `properties` only constrain, and the SDK checks them. With no object member at all,
        the first member that is not merely a constraint says what the value is."""
        flat = self._flatten(schema["allOf"])
        if any(self._objectish(m) for m in flat):
            return self._object(schema, name)
        typed = [m for m in flat if m.get("type") or m.get("enum") or "const" in m or _picks(m)]
        return self.of(typed[0], name) if typed else Any

    def _alternatives(self, members: list[Any], name: str, *, open: bool = False) -> Any:
        """One of `members` holds (`anyOf`, `oneOf`, `then`/`else`; `open`: a path none of
        them constrains). Its object members are one shape, with every key one of them
        declares, beside the others' hints. Beside an object member, a member that says
        nothing of the value (`{"required": [...]}`, `not`) adds no keys, and no Any."""
        split: list[Any] = []
        for member in members:  # `"type": ["object", "null"]` is two alternatives
            kinds = member.get("type") if isinstance(member, Mapping) else None
            if isinstance(kinds, list) and "object" in kinds:
                given = {k: v for k, v in member.items() if k != "type"}
                split += [{**given, "type": kind} for kind in kinds]
            else:
                split.append(member)
        objectish = [self._objectish(m) for m in split]
        objects = [m for m, is_object in zip(split, objectish, strict=True) if is_object]
        others = [m for m, is_object in zip(split, objectish, strict=True) if not is_object]
        shaped = [m for m in others if not (isinstance(m, Mapping) and m.get("type") == "null")]
        hints = [
            (m, self.of(m, name if len(shaped) == 1 else f"{name}{i + 1}"))
            for i, m in enumerate(others)
        ]
        if not objects:
            return union([hint for _, hint in hints])
        loose = [m for m, hint in hints if hint is Any]
        if len(objects) == 1 and not loose and not open:
            shape = self.of(objects[0], name)  # a reference keeps its own name
        else:
            shape = self._object({"anyOf": [*objects, *loose, *([{}] if open else [])]}, name)
        return union([shape, *(hint for _, hint in hints if hint is not Any)])

    def _flatten(self, members: list[Any], depth: int = 0) -> list[Mapping[str, Any]]:
        """allOf members with references followed and nested allOfs opened."""
        found: list[Mapping[str, Any]] = []
        for member in members:
            while _is_ref(member) and depth < 32:
                member, depth = self._target(member["$ref"]), depth + 1
            if not isinstance(member, Mapping):
                continue
            if isinstance(member.get("allOf"), list) and depth < 32:
                found += self._flatten(member["allOf"], depth + 1)
                member = {k: v for k, v in member.items() if k != "allOf"}
            found.append(member)
        return found

    def _target(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        target: Any = self.root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                raise SchemaError(f"unresolvable reference {ref}")
            target = target[part]
        return target

    def _ref(self, ref: str) -> Any:
        """A local `#/...` reference. An object refers to itself as the same shape (a
        recursive type); any other cycle is read as Any (the schema still checks it)."""
        if ref in self._made:
            return self._made[ref]
        if not ref.startswith("#") or ref in self._resolving:
            return Any
        target = self._target(ref)
        label = camel(ref.rsplit("/", 1)[-1]) or self.prefix
        self._resolving.add(ref)
        try:
            if self._objectish(target):
                return self._object(target, label, ref)
            return self.of(target, label)
        finally:
            self._resolving.discard(ref)

    def _unique(self, name: str) -> str:
        """`name`, else the first of `name2`, `name3`... not taken, found from where the
        last copy stopped: a thousand operations' shapes of one title stay linear."""
        candidate, number = name, self._tried.get(name, 2)
        while candidate in self._names:
            candidate, number = f"{name}{number}", number + 1
        self._tried[name] = number
        self._names.add(candidate)
        return candidate


_SCALARS = frozenset(("string", "integer", "number", "boolean", "null"))
_NOTES = frozenset(("description", "examples", "title", "default", "deprecated"))
"""What describes a value without shaping its hint (`described` adds the first two)."""


def _scalar_key(schema: Any) -> str | None:
    """The text of a schema of one scalar type with no subschema and no reference (whose
    hint no name or reference can change), else None."""
    kinds = schema.get("type") if isinstance(schema, Mapping) else None
    if not isinstance(kinds, str) or kinds not in _SCALARS:
        return None
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NOTES:
            continue
        if key == "$ref" or isinstance(value, Mapping):
            return None
        if isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value):
            return None
        kept[key] = value
    try:
        return _KEYS.encode(kept)
    except (TypeError, ValueError):
        return None


_KEYS = json.JSONEncoder(sort_keys=True)
"""What `json.dumps(..., sort_keys=True)` writes, with one encoder for every key."""


@dataclass(slots=True)
class _Keys:
    """The keys an object schema declares, read across its combinators.

    `properties` has each declared key's value schema; `partial` the keys some path the
    schema allows leaves undeclared (their schema is what the declaring paths say);
    `required` the keys every path requires; `values` what `additionalProperties` says of
    other keys' values on every path (None: nothing).
    """

    properties: dict[str, Any] = field(default_factory=dict)
    partial: set[str] = field(default_factory=set)
    required: set[str] = field(default_factory=set)
    values: Any = None


def _both(a: _Keys, b: _Keys) -> _Keys:
    """Two views that both hold (`allOf`, or a schema's own keywords beside a combinator).
    A key both declare on every path must meet both; where one leaves it undeclared on a
    path, the other's schema alone is known there."""
    properties = dict(a.properties)
    partial = set(a.partial)
    for key, sub in b.properties.items():
        if key not in properties:
            properties[key] = sub
            if key in b.partial:
                partial.add(key)
        elif key in partial and key not in b.partial:
            properties[key] = sub
            partial.discard(key)
        elif key in partial:  # both partial: what either path that declares it says
            properties[key] = _combined("anyOf", [properties[key], sub])
        elif key not in b.partial:
            properties[key] = _combined("allOf", [properties[key], sub])
    values = b.values if a.values is None else a.values
    if a.values is not None and b.values is not None:
        values = _combined("allOf", [a.values, b.values])
    return _Keys(properties, partial, a.required | b.required, values)


def _either(views: list[_Keys]) -> _Keys:
    """Views of which one holds (`anyOf`, `oneOf`, `then`/`else`). Every key any of them
    declares is kept, with the union of what the declaring ones say of it; it is required
    only when every one requires it."""
    properties: dict[str, Any] = {}
    partial: set[str] = set()
    for key in dict.fromkeys(k for view in views for k in view.properties):
        declaring = [view for view in views if key in view.properties]
        properties[key] = _combined("anyOf", [view.properties[key] for view in declaring])
        if len(declaring) < len(views) or any(key in view.partial for view in declaring):
            partial.add(key)
    required = set.intersection(*(view.required for view in views)) if views else set()
    values = None
    if views and all(view.values is not None for view in views):
        values = _combined("anyOf", [view.values for view in views])
    return _Keys(properties, partial, required, values)


def _combined(word: str, schemas: list[Any]) -> Any:
    """`{word: schemas}` without repeats (one schema alone is itself), keeping the first
    description and examples for `describe`."""
    unique: list[Any] = []
    for sub in schemas:
        if not any(sub == u for u in unique):
            unique.append(sub)
    if len(unique) == 1:
        return unique[0]
    combined: dict[str, Any] = {word: unique}
    for note in ("description", "examples"):
        given = [s[note] for s in unique if isinstance(s, Mapping) and note in s]
        if given:
            combined[note] = given[0]
    return combined


DESCRIPTION_MAX_CHARS = 8192


def clean(text: str) -> str:
    """An upstream's description as the model reads it: control and bidirectional
    formatting characters become spaces (new lines and tabs stay), cut to
    `DESCRIPTION_MAX_CHARS` with a marker."""
    head = text[: DESCRIPTION_MAX_CHARS + 1]
    if head.replace("\n", "").replace("\t", "").isprintable():  # most text: nothing to blank
        kept = head.strip()
    else:
        kept = "".join(
            ch if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp") else " "
            for ch in head
        ).strip()
    if len(kept) > DESCRIPTION_MAX_CHARS:
        return kept[:DESCRIPTION_MAX_CHARS] + " ... (cut)"
    return kept


def _is_ref(schema: Any) -> bool:
    return isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str)


def _declares(schema: Mapping[str, Any]) -> bool:
    """Whether the schema itself declares keys (its `properties` are not empty)."""
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and bool(properties)


def _members(schema: Mapping[str, Any], word: str) -> list[Any]:
    members = schema.get(word)
    return members if isinstance(members, list) else []


def _picks(schema: Mapping[str, Any]) -> bool:
    """Whether the schema picks among alternatives (`anyOf`, `oneOf`, `then`/`else`)."""
    return bool(_members(schema, "anyOf") or _members(schema, "oneOf")) or any(
        isinstance(schema.get(w), Mapping) for w in ("then", "else")
    )


def described(hint: Any, schema: Any) -> Any:
    """`hint` with its schema's description and examples, as `describe` shows a field."""
    if not isinstance(schema, Mapping):
        return hint
    description = schema.get("description")
    examples = schema.get("examples")
    if not isinstance(description, str) and not isinstance(examples, list):
        return hint
    return Annotated[
        hint,
        pydantic.Field(
            description=clean(description) if isinstance(description, str) else None,
            examples=examples if isinstance(examples, list) else None,
        ),
    ]


def _bounded(tp: Any, schema: Mapping[str, Any], **words: str) -> Any:
    """`tp` with the schema's numeric and length bounds as pydantic constraints."""
    bounds = {key: _number(schema.get(word)) for key, word in words.items()}
    given = {key: value for key, value in bounds.items() if value is not None}
    pattern = schema.get("pattern") if tp is str else None
    metadata: list[Any] = [pydantic.Field(**given)] if given else []  # type: ignore[call-overload]
    if isinstance(pattern, str):
        metadata.append(Pattern(pattern))
    return Annotated[(tp, *metadata)] if metadata else tp


def _number(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _literal(values: list[Any]) -> Any:
    if not all(v is None or isinstance(v, str | int | bool) for v in values):
        return Any
    kept = [v for v in values if v is not None]
    if not kept:
        return NoneType
    # Literal drops repeats itself, and keeps True beside 1 (which `dict.fromkeys` would not).
    literal = Literal[tuple(kept)]  # type: ignore[valid-type]
    return literal | None if None in values else literal


def union(members: list[Any]) -> Any:
    """The members as one union, its Literals as one (`Literal['a', 'b']`, as a Python
    programmer writes the values alternatives allow)."""
    if any(m is Any for m in members):
        return Any
    flat = [a for m in members for a in (get_args(m) if _is_union(m) else (m,))]
    literals = [m for m in flat if get_origin(m) is Literal]
    if len(literals) > 1:
        merged = Literal[tuple(v for m in literals for v in get_args(m))]  # type: ignore[valid-type]
        flat = [
            merged if m is literals[0] else m
            for m in flat
            if m is literals[0] or get_origin(m) is not Literal
        ]
    unique: list[Any] = []
    for member in flat:
        if not any(member is u for u in unique):
            unique.append(member)
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


__all__ = [
    "DEPTH",
    "DESCRIPTION_MAX_CHARS",
    "Hints",
    "Pattern",
    "camel",
    "clean",
    "described",
    "union",
]
