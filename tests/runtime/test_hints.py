"""What to change, added to the interpreter's messages about the program's own code: built
from what the program may see (capabilities, their declared fields and keys), its own
names and values, and the language; never from a value a host produced.

A KeyError on a dict whose type declares no keys names the keys the value has: the
program already holds that dict, so they are its own data."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.payloads import describe_payload
from codemode.runtime.hints import Known, Vocabulary, explain
from tests.conftest import CANARY, run_error
from tests.runtime.running import capability
from tests.sources.mcp.conftest import FIXTURE, PYTHON

M = "def main():\n"


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("files.info", summary="A file's facts.", annotations={"readOnlyHint": True})
    def info(*, path: str) -> dict[str, Any]:
        return {"kind": "file", "size": len(path), "meta": {"owner": "ada"}}

    cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["json_text"])
    with cm:
        yield cm


def failure(cm: CodeMode, body: str) -> str:
    return str(run_error(cm, "def main():\n" + body))


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            "    r = files.info(path='a')\n    return r['bytes']\n",
            "invalid program: <codemode>:3:12: KeyError: 'bytes'; the result has: kind, size, meta",
        ),
        (
            "    return files.info(path='a')['meta']['name']\n",
            "invalid program: <codemode>:2:12: KeyError: 'name'; the result has: owner",
        ),
        (
            "    r = files.info(path='a')\n    return r['sise']\n",
            "invalid program: <codemode>:3:12: KeyError: 'sise'; did you mean \"size\"? "
            "the result has: kind, size, meta",
        ),
        (  # an upstream tool without an output schema, whose text is JSON
            "    page = up.json_text()\n    return page['text']\n",
            "invalid program: <codemode>:3:12: KeyError: 'text'; did you mean \"next\"? "
            "the result has: items, next",
        ),
    ],
)
def test_the_keys_of_the_value_are_named(host: CodeMode, body: str, says: str) -> None:
    assert failure(host, body) == says


def test_a_dict_the_program_built_itself_gets_no_list(host: CodeMode) -> None:
    """Only a capability's result, as the call gave it: a dict of the program's own making
    or one it changed since is not described from the call's value."""
    assert failure(host, "    r = {'a': 1}\n    return r['b']\n") == (
        "invalid program: <codemode>:3:12: KeyError: 'b'"
    )
    changed = "    r = files.info(path='a')\n    r['bytes'] = 1\n    r.pop('kind')\n    return r['kind']\n"
    assert failure(host, changed) == "invalid program: <codemode>:5:12: KeyError: 'kind'"


@dataclasses.dataclass
class Server:
    name: str
    region: str


def server() -> Server:
    return Server("api", "eu")


def known(*names: str, roots: tuple[str, ...] = ()) -> Known:
    """What a program binding `names` may be naming, over one capability, `servers.get`."""
    capabilities = {"servers.get": capability("servers.get", server)}
    return Known(
        vocabulary=Vocabulary.of(capabilities.values()),
        names=frozenset(names),
        keys=frozenset(),
        roots=frozenset(roots),
        capabilities=capabilities,
        source="",
    )


def test_the_fields_of_a_declared_result_are_what_an_attribute_is_matched_to() -> None:
    assert Vocabulary.of(known().capabilities.values()).objects == {"Server": ("name", "region")}
    assert explain("AttributeError", "'Server' object has no attribute 'nmae'", known(), None) == (
        "AttributeError: 'Server' object has no attribute 'nmae'; did you mean \"name\"?"
    )
    assert explain("AttributeError", "'Server' object has no attribute 'id'", known(), None) == (
        "AttributeError: 'Server' object has no attribute 'id'; Server has: name, region"
    )


def test_a_name_is_matched_to_the_programs_own_names_and_modules() -> None:
    assert explain("NameError", "name 'server' is not defined", known("servers"), None) == (
        "NameError: name 'server' is not defined; did you mean \"servers\"?"
    )
    assert explain("NameError", "name 'json' is not defined", known(), None) == (
        "NameError: name 'json' is not defined; add \"import json\" at the top of the program"
    )


def test_a_variable_named_as_a_namespace_is_told_to_take_another_name() -> None:
    message = "cannot access local variable 'servers' where it is not associated with a value"
    assert explain("UnboundLocalError", message, known(roots=("servers",)), None) == (
        f'UnboundLocalError: {message}; "servers" is a capability namespace: give the '
        "variable another name"
    )
    assert explain("UnboundLocalError", message, known(), None) == f"UnboundLocalError: {message}"


def test_a_message_with_no_hint_is_the_interpreters_own() -> None:
    assert explain("ValueError", "bad value", known(), None) == "ValueError: bad value"
    assert explain("StopIteration", "", known(), None) == "StopIteration"


class Creds(pydantic.BaseModel):
    token_CANARY: str


class Account(pydantic.BaseModel):
    name: str
    creds: Creds = pydantic.Field(exclude=True)


def test_types_behind_excluded_fields_are_never_named() -> None:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("acct.get", summary="An account.")
    def get() -> Account:
        return Account(name="a", creds=Creds(token_CANARY=CANARY))

    with cm:
        shapes = describe_payload(cm.describe("acct.get"))["shapes"]
        assert shapes == ["Account: object (name: str), read as r.name"]
        own = "    raise AttributeError(\"'Creds' object has no attribute 'x'\")\n"
        text = str(run_error(cm, M + "    acct.get()\n" + own, subject="model"))
        assert "token" not in text and "CANARY" not in text


def _one() -> int:
    return 1


class HidesAdmin(AllowAll):
    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return not capability_name.startswith("admin.")


@pytest.mark.parametrize(
    ("call", "hint"),
    [
        ("admin.wipe()", "the capability namespaces are records"),
        ("recordz.keys()", 'did you mean "records"?'),
        ("jsn.dumps(1)", 'did you mean "json"?'),
        ("lenn([])", 'did you mean "len"?'),
    ],
)
def test_a_name_used_as_a_namespace_is_never_matched_to_a_builtin(call: str, hint: str) -> None:
    """`admin.wipe()` for a subject who cannot see `admin` once got `did you mean "min"?`:
    a namespace is suggested among namespaces, modules and the program's own names."""
    with CodeMode(authorizer=HidesAdmin(), hide_forbidden=True) as cm:
        for name in ("records.keys", "admin.wipe"):
            cm.capability(name, summary="A capability.")(_one)
        with pytest.raises(CodeModeError) as caught:
            cm.execute(f"{M}    return {call}", subject="alice")
    name = call.split(".")[0].split("(")[0]
    assert str(caught.value) == (
        f"invalid program: <codemode>:2:12: NameError: name '{name}' is not defined; {hint}"
    )


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (  # assigned in main from a helper's call: no read before, so no UnboundLocalError
            "def main():\n    records = fetch()\n    return records.keys(id=records[0])\n"
            "def fetch():\n    return [records.keys()]\n",
            "invalid program: <codemode>:3:12: AttributeError: 'list' object has no attribute "
            "'keys'; \"records\" is a capability namespace, which line 2 assigned: give the "
            "variable another name",
        ),
        (  # assigned twice: the assignment before the failing line is named
            "def main():\n    records = 1\n    records = [records]\n    return records.keys()\n",
            "invalid program: <codemode>:4:12: AttributeError: 'list' object has no attribute "
            "'keys'; \"records\" is a capability namespace, which line 3 assigned: give the "
            "variable another name",
        ),
        (  # a parameter of a helper
            "def main():\n    return show([1])\n\ndef show(records):\n    return records.keys()\n",
            "invalid program: <codemode>:5:12: AttributeError: 'list' object has no attribute "
            "'keys'; \"records\" is a capability namespace, which line 4 takes as a parameter: "
            "give the variable another name",
        ),
        (  # a loop's variable, bound after the line in the source but before it runs
            "def main():\n    for i in range(2):\n        if i:\n            return records.keys()\n"
            "        records = [i]\n",
            "invalid program: <codemode>:4:20: AttributeError: 'list' object has no attribute "
            "'keys'; \"records\" is a capability namespace, which line 5 assigned: give the "
            "variable another name",
        ),
    ],
)
def test_a_namespace_hidden_by_an_assignment_names_the_line_that_assigned_it(
    source: str, says: str
) -> None:
    with CodeMode(authorizer=HidesAdmin(), hide_forbidden=True) as cm:
        for name in ("records.keys", "admin.wipe"):
            cm.capability(name, summary="A capability.")(_one)
        with pytest.raises(CodeModeError) as caught:
            cm.execute(source, subject="alice")
    assert str(caught.value) == says


def test_a_hidden_namespace_is_never_named_for_an_assignment() -> None:
    """`admin` is hidden from alice: a variable of that name is just a variable to her."""
    with CodeMode(authorizer=HidesAdmin(), hide_forbidden=True) as cm:
        for name in ("records.keys", "admin.wipe"):
            cm.capability(name, summary="A capability.")(_one)
        source = "def main():\n    admin = [1]\n    return admin.wipe()\n"
        with pytest.raises(CodeModeError) as caught:
            cm.execute(source, subject="alice")
    assert str(caught.value) == (
        "invalid program: <codemode>:3:12: AttributeError: 'list' object has no attribute 'wipe'"
    )
