"""The Cedar schema codemode checks policies, entities and requests against.

It is the types of the host's own entities (derived from the entities given, unless the
host gives a schema) plus what the catalog declares: the `Capability` entity type with
its hint attributes, and one action per capability whose context is its arguments. An
entity attribute with two types, or a value Cedar cannot type, is a start-up error naming
the entity and the attribute, never a denial of every call.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, get_args, get_origin

from typing_extensions import is_typeddict

from codemode import capabilities as t
from codemode.authz import HINTS, PolicyError
from codemode.capabilities import Capability

NoneType = type(None)


class CedarPolicyError(PolicyError):
    """Policies that do not parse or do not validate, or entities Cedar would refuse; the
    message names the policy, line and column, or the entity and attribute."""


def cedar_string(text: str) -> str:
    """A Cedar string literal with the text's own characters (Cedar reads no \\uXXXX)."""
    return json.dumps(text, ensure_ascii=False)


def cedar_schema(
    capabilities: Iterable[Capability], entities: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A Cedar schema: the types of the host's entities (User a member of Role, Role, and
    every type the entities use, with their attributes), Capability, and one action per
    capability.

    Raises CedarPolicyError for an attribute the entities give two types, or one Cedar
    cannot type."""
    schema: dict[str, Any] = {}
    try:
        types = _entity_types(entities)
    except RecursionError:
        raise CedarPolicyError("the entities' attributes are nested too deeply") from None
    for name, declaration in types.items():
        namespace, _, base = name.rpartition("::")
        part = schema.setdefault(namespace, {"entityTypes": {}, "actions": {}})
        part["entityTypes"][base] = declaration
    return with_catalog(schema, capabilities)


def with_catalog(schema: Mapping[str, Any], capabilities: Iterable[Capability]) -> dict[str, Any]:
    """The schema with what the catalog declares and it does not: the Capability type and
    one action per capability (a host's own declarations win). The resource of a
    capability with a `resource` resolver is one of the host's own entity types."""
    own = sorted(set(schema.get("", {}).get("entityTypes", {})) - {"User", "Role"})
    actions = {}
    for capability in capabilities:
        attributes = {}
        for parameter in capability.parameters:
            cedar_type = _cedar_type(parameter.annotation)
            if cedar_type is not None:
                attributes[parameter.key] = {
                    **cedar_type,
                    "required": (parameter.required or parameter.filled)
                    and not _optional(parameter.annotation),
                }
        actions[capability.id] = {
            "appliesTo": {
                "principalTypes": ["User"],
                "resourceTypes": own if capability.resource and own else ["Capability"],
                "context": {"type": "Record", "attributes": attributes},
            }
        }
    root = dict(schema.get("", {}))
    root["entityTypes"] = {"Capability": _CAPABILITY, **root.get("entityTypes", {})}
    root["actions"] = {**actions, **root.get("actions", {})}
    return {**schema, "": root}


def untyped_arguments(capability: Capability) -> list[str]:
    """The capability's arguments Cedar has no type for (a value of several types, or of
    any), which its context leaves out."""
    return [p.key for p in capability.parameters if _cedar_type(p.annotation) is None]


CATALOG_TYPES = ("Action", "Capability")
"""The entity types the catalog declares, never derived from the host's entities."""


_CAPABILITY = {
    "shape": {
        "type": "Record",
        "attributes": {hint: {"type": "Boolean", "required": False} for hint in HINTS},
    }
}


_EXTENSIONS = {"ip": "ipaddr", "decimal": "decimal", "datetime": "datetime", "duration": "duration"}
"""Cedar's extension constructors (`{"__extn": {"fn": "ip", ...}}`) and the types they make."""


class _Conflict(Exception):
    """Two values of one attribute have different types."""

    def __init__(self, path: str, seen: dict[str, Any], new: dict[str, Any]) -> None:
        super().__init__(path)
        self.path, self.seen, self.new = path, seen, new


class _Untyped(Exception):
    """An attribute value Cedar has no type for, and why."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path)
        self.path, self.problem = path, problem


def _entity_types(entities: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each entity type the host's entities use (as an entity, a parent or a reference),
    by name: the attributes as the entities have them, required when every entity of the
    type has one, and the types of their parents."""
    types: dict[str, dict[str, Any]] = {"User": {"memberOfTypes": ["Role"]}, "Role": {}}
    shapes: dict[str, dict[str, Any]] = {}
    first: dict[tuple[str, str, bool], str] = {}
    """The entity that first had each attribute of each type (with its type known, and at
    all), as a conflict names it."""
    for entity in entities:
        kind, name = entity_uid(entity.get("uid"))
        if kind is None or kind in CATALOG_TYPES:
            continue
        declaration = types.setdefault(kind, {})
        referenced = [entity_uid(parent)[0] for parent in entity.get("parents") or ()]
        parents = [p for p in referenced if p is not None]
        if parents:
            members = declaration.setdefault("memberOfTypes", [])
            members.extend(p for p in dict.fromkeys(parents) if p not in members)
        attrs = entity.get("attrs") or {}
        try:  # attributes that are not an object are Cedar's to refuse
            shape = _value_type(attrs if isinstance(attrs, dict) else {}, "", referenced)
            shapes[kind] = _merge(shapes[kind], shape, "") if kind in shapes else shape
        except _Untyped as exc:
            raise CedarPolicyError(
                f"entity {name}: attribute {cedar_string(exc.path)} {exc.problem}"
            ) from None
        except _Conflict as exc:
            raise CedarPolicyError(
                f"entity {name}: attribute {cedar_string(exc.path)} is {_a(exc.new)}, "
                f"but {_a(exc.seen)} on "
                f"{first.get((kind, exc.path, True)) or first[(kind, exc.path, False)]}"
            ) from None
        for path, known in attribute_paths(shape):
            first.setdefault((kind, path, known), name)
        for other in referenced:
            if other is not None and other not in CATALOG_TYPES:
                types.setdefault(other, {})
    for kind, shape in shapes.items():
        if shape["attributes"]:
            types[kind]["shape"] = _settled(shape)
    return types


def entity_uid(value: Any) -> tuple[str | None, str]:
    """An entity reference's type and its Cedar text (`User::"alice"`), or None as type
    when it is not one (Cedar refuses it, and says why)."""
    if isinstance(value, Mapping):
        value = value.get("__entity", value)
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        return None, ""
    return value["type"], f"{value['type']}::{cedar_string(str(value.get('id')))}"


def _value_type(value: Any, path: str, referenced: list[str | None]) -> dict[str, Any]:
    """The Cedar type of an attribute value as Cedar's entity JSON writes it (every record
    attribute required); the entity types it refers to go to `referenced`."""
    if isinstance(value, bool):
        return {"type": "Boolean"}
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return {"type": "Long"}
    if isinstance(value, str):
        return {"type": "String"}
    if isinstance(value, list):
        spec: dict[str, Any] = {"type": "Set"}
        for item in value:
            element = _value_type(item, path, referenced)
            try:
                spec["element"] = (
                    _merge(spec["element"], element, path) if "element" in spec else element
                )
            except _Conflict as exc:
                raise _Untyped(
                    exc.path, f"mixes {_name(exc.seen)} and {_name(exc.new)} in one Set"
                ) from None
        return spec
    if isinstance(value, dict) and value.keys() == {"__entity"}:
        kind = entity_uid(value)[0]
        if kind is not None:
            referenced.append(kind)
            return {"type": "Entity", "name": kind}
    elif isinstance(value, dict) and value.keys() == {"__extn"}:
        extension = value["__extn"]
        function = extension.get("fn") if isinstance(extension, dict) else None
        if function in _EXTENSIONS:
            return {"type": "Extension", "name": _EXTENSIONS[function]}
    elif isinstance(value, dict):
        attributes = {}
        for key, inner in value.items():
            inner_path = f"{path}.{key}" if path else key
            attributes[key] = {**_value_type(inner, inner_path, referenced), "required": True}
        return {"type": "Record", "attributes": attributes}
    raise _Untyped(path, f"is {_kind(value)}, which Cedar cannot type")


def _kind(value: Any) -> str:
    """What a value is, never the value itself (an attribute may hold a secret)."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, int):
        return "an integer beyond 64 bits"
    if isinstance(value, dict) and "__extn" in value:
        return "an unknown extension value"
    if isinstance(value, dict) and "__entity" in value:
        return "an entity reference without a type"
    return f"a {type(value).__name__}"


def _merge(seen: dict[str, Any], new: dict[str, Any], path: str) -> dict[str, Any]:
    """One type for two values of an attribute: a record attribute is required when both
    have it, a set's element type is whichever value knows it (an empty set is any set),
    and two different types are a _Conflict."""
    if (seen["type"], seen.get("name")) != (new["type"], new.get("name")):
        raise _Conflict(path, seen, new)
    if seen["type"] == "Set" and "element" in seen and "element" in new:
        try:
            return {**seen, "element": _merge(seen["element"], new["element"], path)}
        except _Conflict as exc:  # the elements differ: say so of the sets
            raise _Conflict(path, seen, new) if exc.path == path else exc from None
    if seen["type"] == "Set":
        return seen if "element" in seen else new
    if seen["type"] != "Record":
        return seen
    attributes = {}
    for key in {**seen["attributes"], **new["attributes"]}:
        old, fresh = seen["attributes"].get(key), new["attributes"].get(key)
        if old is None or fresh is None:
            attributes[key] = {**(old or fresh), "required": False}
        else:
            merged = _merge(old, fresh, f"{path}.{key}" if path else key)
            attributes[key] = {**merged, "required": old["required"] and fresh["required"]}
    return {**seen, "attributes": attributes}


def attribute_paths(spec: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, bool]]:
    """The attribute paths a type has (`address`, `address.city`), each with whether its
    type is known yet (a set only ever seen empty has no element type)."""
    if spec.get("type") == "Set" and "element" in spec:
        yield from attribute_paths(spec["element"], prefix)
    for key, inner in spec.get("attributes", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        yield path, inner.get("type") != "Set" or "element" in inner
        yield from attribute_paths(inner, path)


def _settled(spec: dict[str, Any]) -> dict[str, Any]:
    """The type with an element type for every set: String for one only ever seen empty
    (Cedar's schema needs one, and an empty set is a set of anything)."""
    if spec["type"] == "Set":
        return {**spec, "element": _settled(spec.get("element", {"type": "String"}))}
    if spec["type"] == "Record":
        attributes = {key: _settled(inner) for key, inner in spec["attributes"].items()}
        return {**spec, "attributes": attributes}
    return spec


def _name(spec: Mapping[str, Any]) -> str:
    """A type as a message says it: `String`, `Set of Long`, `ipaddr`, `Role entity`."""
    if spec["type"] == "Set":
        return f"Set of {_name(spec['element'])}" if "element" in spec else "Set"
    if spec["type"] == "Entity":
        return f"{spec['name']} entity"
    return str(spec["name"] if spec["type"] == "Extension" else spec["type"])


def _a(spec: Mapping[str, Any]) -> str:
    """`a String`, `an ipaddr`."""
    name = _name(spec)
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _optional(annotation: Any) -> bool:
    return t.is_union(annotation) and NoneType in get_args(annotation)


def _cedar_type(annotation: Any) -> dict[str, Any] | None:
    """The Cedar type of a parameter, or None when Cedar cannot describe it."""
    annotation = t.strip_annotated(annotation)
    if t.is_union(annotation):
        members = [m for m in get_args(annotation) if m is not NoneType]
        return _cedar_type(members[0]) if len(members) == 1 else None
    origin = get_origin(annotation)
    if t.is_enum(annotation):
        return _scalars_type(tuple(member.value for member in annotation))
    if annotation is str or annotation is float or annotation in _TEXTS:
        return {"type": "String"}
    if annotation in _EXTENDED:
        return {"type": "Extension", "name": _EXTENDED[annotation]}
    if annotation is bool:
        return {"type": "Boolean"}
    if annotation is int:
        return {"type": "Long"}
    if origin is list:
        element = _cedar_type(get_args(annotation)[0])
        return {"type": "Set", "element": element} if element else None
    if t.is_record(annotation) or is_typeddict(annotation):
        attributes = {}
        for f in t.fields_of(annotation):
            inner = _cedar_type(f.annotation)
            if inner is not None:
                attributes[f.name] = {
                    **inner,
                    "required": f.required and not _optional(f.annotation),
                }
        return {"type": "Record", "attributes": attributes}
    if origin is Literal:
        return _scalars_type(get_args(annotation))
    return None


_EXTENDED: dict[Any, str] = {
    datetime.date: "datetime",
    datetime.datetime: "datetime",
    decimal.Decimal: "decimal",
}
"""Argument types a Cedar extension type holds: a policy compares them with its own
functions (`context.due < datetime("2027-01-01")`, `context.amount.lessThan(...)`)."""
_TEXTS = (datetime.time, uuid.UUID)
"""Argument types Cedar has no type for but their text (a time of day, a UUID)."""


def extension_value(name: str, text: str) -> dict[str, Any]:
    """An argument's canonical text as Cedar's extension value (`{"__extn": ...}`).

    Cedar's `datetime` takes `2026-01-31`, or a moment to the millisecond with `Z` or a
    `+hhmm` offset: a datetime is written so, its microseconds cut to milliseconds, and a
    datetime without an offset is read as UTC. Cedar's `decimal` takes at most four
    places: a Decimal with more makes the request one Cedar refuses, so the call is
    denied, never decided on a rounded amount."""
    if name == "decimal":
        fixed = format(decimal.Decimal(text).normalize(), "f")
        return {"__extn": {"fn": name, "arg": fixed if "." in fixed else f"{fixed}.0"}}
    moment = datetime.datetime.fromisoformat(text)
    if len(text) > 10:
        offset = moment.utcoffset()
        if offset is None or not offset:
            zone = "Z"
        else:
            minutes = int(offset.total_seconds()) // 60
            zone = f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        whole = moment.replace(tzinfo=None).isoformat(timespec="milliseconds")  # year 0999 too
        text = whole + zone
    return {"__extn": {"fn": name, "arg": text}}


def _scalars_type(values: tuple[Any, ...]) -> dict[str, Any] | None:
    """The Cedar type of a set of enum or Literal values, as they arrive (not as named)."""
    if all(isinstance(v, str) for v in values):
        return {"type": "String"}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return {"type": "Long"}
    if all(isinstance(v, bool) for v in values):
        return {"type": "Boolean"}
    return None


__all__ = [
    "CATALOG_TYPES",
    "CedarPolicyError",
    "attribute_paths",
    "cedar_schema",
    "cedar_string",
    "entity_uid",
    "extension_value",
    "with_catalog",
]
