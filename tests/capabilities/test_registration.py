"""Registration: every problem is a RegistrationError naming the capability."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import pydantic
import pytest
import typing_extensions

from codemode import CodeMode, RegistrationError
from codemode.authz import AllowAll


def register(
    name: str, handler: Callable[..., Any], cm: CodeMode | None = None, **kw: Any
) -> CodeMode:
    cm = cm or CodeMode(authorizer=AllowAll())
    cm.capability(name, summary=kw.pop("summary", "Does a thing."), **kw)(handler)
    return cm


def ok(*, key: str) -> str:
    return key


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("lookup", 'capability "lookup": name needs a namespace and a name, e.g. "records.lookup"'),
        ("records.2x", 'capability "records.2x": segment "2x" is not a Python identifier'),
        ("records.class", 'capability "records.class": segment "class" is a keyword'),
        (
            "json.lookup",
            'capability "json.lookup": namespace "json" is a builtin or standard library name of the guest language',
        ),
        (
            "len.x",
            'capability "len.x": namespace "len" is a builtin or standard library name of the guest language',
        ),
        (
            "print.x",
            'capability "print.x": namespace "print" is a builtin or standard library name of the guest language',
        ),
        (
            "main.x",
            'capability "main.x": namespace "main" is a builtin or standard library name of the guest language',
        ),
        ("records._x", 'capability "records._x": segment "_x" must not start with "_"'),
    ],
)
def test_bad_names_are_rejected(name: str, message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        register(name, ok)
    assert str(info.value) == message


def test_duplicates_and_namespace_collisions_are_rejected() -> None:
    cm = register("records.lookup", ok)
    with pytest.raises(RegistrationError, match=re.escape('"records.lookup": duplicate name')):
        register("records.lookup", ok, cm, id="other")
    with pytest.raises(RegistrationError, match=re.escape('duplicate id "records.lookup"')):
        register("records.other", ok, cm, id="records.lookup")
    with pytest.raises(
        RegistrationError, match=re.escape('"records.lookup" is a capability, not a namespace')
    ):
        register("records.lookup.detail", ok, cm)


def test_name_that_is_a_namespace_of_another_is_rejected() -> None:
    cm = register("a.b.c", ok)
    with pytest.raises(
        RegistrationError, match=re.escape('"a.b": it is also a namespace of "a.b.c"')
    ):
        register("a.b", ok, cm)
    with pytest.raises(RegistrationError, match=re.escape('"a.b.c.d": "a.b.c" is a capability')):
        register("a.b.c.d", ok, cm)


def test_missing_and_unsupported_hints_are_rejected() -> None:
    def no_hint(*, key):  # type: ignore[no-untyped-def]
        return key

    def no_return(*, key: str):  # type: ignore[no-untyped-def]
        return key

    def bad_type(*, when: object) -> str:
        return ""

    def bad_key(*, d: dict[int, str]) -> str:
        return ""

    def positional_only(key: str, /) -> str:
        return key

    def var_kw(**kw: str) -> str:
        return ""

    cases: list[tuple[Callable[..., Any], str]] = [
        (no_hint, 'capability "x.y": parameter "key" has no type hint'),
        (no_return, 'capability "x.y": the return type hint is missing'),
        (bad_type, 'capability "x.y": parameter "when": object is not supported'),
        (bad_key, 'capability "x.y": parameter "d": dict[int, str]: dict keys must be str'),
        (
            positional_only,
            'capability "x.y": parameter "key" must be passable by keyword (no *args, **kw, /)',
        ),
        (
            var_kw,
            'capability "x.y": parameter "kw" must be passable by keyword (no *args, **kw, /)',
        ),
    ]
    for handler, message in cases:
        with pytest.raises(RegistrationError) as info:
            register("x.y", handler)
        assert str(info.value) == message


def test_unknown_disabled_id_is_reported_before_anything_runs() -> None:
    cm = CodeMode(authorizer=AllowAll(), disabled={"records.typo"})
    register("records.lookup", ok, cm)
    with pytest.raises(
        RegistrationError, match=re.escape('unknown capability id in disabled: "records.typo"')
    ):
        cm.search("records")


def test_an_authorizer_is_required() -> None:
    with pytest.raises(TypeError, match="needs an authorizer"):
        CodeMode(authorizer=None)  # type: ignore[arg-type]


class Record(TypedDict):
    key: str
    count: int


@dataclass
class Instance:
    name: str
    nics: list[str]


class Owner(pydantic.BaseModel):
    id: int
    email: str | None = None


def test_describe_shows_signature_and_how_results_are_read() -> None:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("records.lookup", summary="Look up one record by key.")
    def lookup(*, key: str, limit: int | None = None) -> Record:
        return {"key": key, "count": 0}

    @cm.capability("instance.get", summary="Get one instance.")
    async def get(*, sandbox: str, name: str) -> Instance:
        return Instance(name, [])

    @cm.capability("owners.list", summary="List owners.")
    def owners() -> list[Owner]:
        return []

    lookup_cap = cm.describe("records.lookup")
    assert lookup_cap.signature == "records.lookup(*, key: str, limit: int | None = None) -> Record"
    assert list(lookup_cap.shapes) == ['Record: dict {key: str, count: int}, read as r["key"]']
    assert list(cm.describe("instance.get").shapes) == [
        "Instance: object (name: str, nics: list[str]), read as r.name"
    ]
    assert cm.describe("owners.list").signature == "owners.list() -> list[Owner]"
    assert list(cm.describe("owners.list").shapes) == [
        "Owner: object (id: int, email: str | None), read as r.id"
    ]
    assert cm.catalog.enabled["instance.get"].is_async


def test_annotations_are_mcps_four_hints_completed_as_mcp_presumes() -> None:
    from codemode.authz import AllowAll, AuthorizationRequest

    seen: list[AuthorizationRequest] = []
    cm = CodeMode(authorizer=seen.append)

    @cm.capability("notes.read", summary="Read.", annotations={"readOnlyHint": True})
    def read() -> str:
        return "n"

    @cm.capability("notes.wipe", summary="Wipe.", annotations={"idempotentHint": True})
    def wipe() -> int:
        return 0

    @cm.capability("notes.plain", summary="Says nothing.")
    def plain() -> int:
        return 0

    with cm:
        cm.execute(
            "def main():\n    return [notes.read(), notes.wipe(), notes.plain()]", subject="a"
        )
    assert [dict(request.annotations) for request in seen] == [
        {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
        {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": True,
        },
        {},  # a host function that says nothing, as before
    ]
    with CodeMode(authorizer=AllowAll()) as other:
        for annotations, says in (
            (
                {"readonly": True},
                "unknown annotation 'readonly'; the annotations are readOnlyHint, "
                "destructiveHint, idempotentHint, openWorldHint",
            ),
            ({"readOnlyHint": 1}, "annotation readOnlyHint must be True or False"),
        ):
            with pytest.raises(RegistrationError) as refused:
                other.capability("x.y", summary="X.", annotations=annotations)(read)  # type: ignore[arg-type]
            assert str(refused.value) == f'capability "x.y": {says}'


class OpenUser(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class InheritedOpen(OpenUser):
    """Keeps its base's config, as pydantic does."""


class ClosedAgain(OpenUser):
    model_config = pydantic.ConfigDict(extra="forbid")


class Team(pydantic.BaseModel):
    members: dict[str, list[InheritedOpen | None]]


@pydantic.dataclasses.dataclass(config=pydantic.ConfigDict(extra="allow"))
class OpenRow:
    name: str


@pydantic.dataclasses.dataclass
class OpenRowChild(OpenRow):
    age: int = 0


@pydantic.with_config(pydantic.ConfigDict(extra="allow"))
class OpenFilter(typing_extensions.TypedDict):  # Python 3.11's keeps no bases to inherit by
    name: str


class OpenFilterChild(OpenFilter):
    age: int


@dataclass
class PlainOpen:
    name: str


PlainOpen.__pydantic_config__ = pydantic.ConfigDict(extra="allow")  # type: ignore[attr-defined]


class OpenGrandBase(OpenFilter):
    """Open by its own base: pydantic takes the config in method resolution order."""


@pydantic.with_config(pydantic.ConfigDict(extra="forbid"))
class ClosedSide(typing_extensions.TypedDict):
    age: int


@dataclass
class Inner:  # a plain dataclass takes the config of the type that holds it
    name: str


class OpenByOrder(OpenGrandBase, ClosedSide):
    """`OpenFilter` comes before `ClosedSide` in its method resolution order, though it
    is one base further away."""

    inner: Inner


class OpenByMetaclass(type):
    __pydantic_config__ = pydantic.ConfigDict(extra="allow")


@dataclass
class MetaOpen(metaclass=OpenByMetaclass):
    name: str


class Tree(pydantic.BaseModel):
    children: list[Tree]
    row: OpenRow | None = None


class Keyed(typing_extensions.TypedDict):
    ref: OpenUser  # a field named as a core schema's own key


@pytest.mark.parametrize(
    ("annotation", "named"),
    [
        (OpenUser, "OpenUser"),
        (InheritedOpen, "InheritedOpen"),
        (Team, "InheritedOpen"),  # at any depth
        (list[OpenRow], "OpenRow"),
        (OpenRowChild, "OpenRowChild"),
        (OpenFilter | None, "OpenFilter"),
        (OpenFilterChild, "OpenFilterChild"),
        (PlainOpen, "PlainOpen"),
        (OpenByOrder, "OpenByOrder"),
        (MetaOpen, "MetaOpen"),
        (Tree, "OpenRow"),  # through a recursive type's definitions
        (dict[str, Keyed], "OpenUser"),
    ],
)
def test_an_argument_type_that_keeps_undeclared_fields_is_refused(
    annotation: Any, named: str
) -> None:
    """A handler would get fields that the authorizer, an approver and the audit never
    see (they read what the type declares, as describe shows it)."""

    def handler(*, user: str) -> str:
        return ""

    handler.__annotations__ = {"user": annotation, "return": str}
    with pytest.raises(RegistrationError) as refused:
        register("users.add", handler)
    assert str(refused.value) == (
        f'capability "users.add": parameter "user": {named} keeps undeclared fields '
        '(extra="allow"), which no policy, approver or audit would see; use extra="forbid" '
        'or "ignore"'
    )


def test_a_closed_argument_type_and_an_open_result_type_register() -> None:
    def add(*, user: ClosedAgain) -> OpenUser:  # a result crosses by its declared fields
        return OpenUser(name=user.name)

    assert register("users.add", add).describe("users.add").signature == (
        "users.add(*, user: ClosedAgain) -> OpenUser"
    )
