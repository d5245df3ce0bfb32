"""The texts that lead a model to its fix: each finding of the mistakes study, pinned by its
exact text on the demo host, and each mistake seen since, on a small host of two
capabilities."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from codemode.demo.host import create
from codemode.payloads import describe_payload

M = "def main():\n"
GET = 'instances.get(sandbox="dev", name="api")'


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodeMode]:
    with create(tmp_path_factory.mktemp("guidance") / "demo.sqlite3") as cm:
        yield cm


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("ns.one", summary="One.")
    def one() -> int:
        return 1

    @cm.capability("ns.pair", summary="Two.")
    def pair(*, first: int, second: int = 0) -> list[int]:
        return [first, second]

    with cm:
        yield cm


def error_of(cm: CodeMode, source: str) -> CodeModeError:
    with pytest.raises(CodeModeError) as caught:
        cm.execute(source, subject="model")
    return caught.value


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            M + "    return networks.list()\n",
            "invalid program: <codemode>:2:12: NameError: name 'networks' is not defined; "
            "the capability namespaces are instances, owners, sandboxes",
        ),
        (
            M + "    return instance.list()\n",
            "invalid program: <codemode>:2:12: NameError: name 'instance' is not defined; "
            'did you mean "instances"?',
        ),
        (
            M + "    servers = instances.list()\n    return server\n",
            "invalid program: <codemode>:3:12: NameError: name 'server' is not defined; "
            'did you mean "servers"?',
        ),
        (
            M + f"    return {GET}.memory\n",
            "invalid program: <codemode>:2:12: AttributeError: 'Instance' object has no "
            "attribute 'memory'; did you mean \"memory_mb\"?",
        ),
        (
            M + f"    return {GET}.disk\n",
            "invalid program: <codemode>:2:12: AttributeError: 'Instance' object has no "
            "attribute 'disk'; Instance has: sandbox, name, state, cpus, memory_mb, owner, "
            "nics, tags",
        ),
        (
            M + "    page = instances.list()\n    return page['count']\n",
            "invalid program: <codemode>:3:12: KeyError: 'count'; InstancePage has: items, "
            "total, next_offset",
        ),
        (
            M + "    for item in instances.list()['items']:\n        return item['owner_id']\n",
            "invalid program: <codemode>:3:16: KeyError: 'owner_id'; did you mean \"owner\"?",
        ),
        (
            M + f"    changed = {GET}\n    return changed['owner']\n",
            "invalid program: <codemode>:3:12: TypeError: 'Instance' object is not "
            "subscriptable; Instance is an object: read its fields as attributes, changed.owner",
        ),
        (
            M + f"    changed = {GET}\n    return changed['who']\n",
            "invalid program: <codemode>:3:12: TypeError: 'Instance' object is not "
            "subscriptable; Instance is an object: read its fields as attributes, "
            "e.g. changed.sandbox",
        ),
        (
            M + "    return instances.lst()\n",
            'invalid program: <codemode>:2:12: unknown capability "instances.lst"; '
            'did you mean "instances.list"?',
        ),
    ],
)
def test_names_attributes_and_keys_get_a_did_you_mean(
    demo: CodeMode, source: str, text: str
) -> None:
    assert str(error_of(demo, source)) == text


def test_await_in_a_plain_main_is_refused_before_any_call_runs(demo: CodeMode) -> None:
    source = (
        M + '    instances.tag(sandbox="dev", name="gui", tags=["before-await"])\n'
        "    return await instances.list()\n"
    )
    error = error_of(demo, source)
    assert str(error) == (
        "invalid program: <codemode>:3:12: 'await' outside async function: define async def "
        "main(): (and async def for any helper that awaits), or call without await"
    )
    assert error.calls == ()
    tags = demo.execute(M + '    return instances.get(sandbox="dev", name="gui").tags', subject="m")
    assert "before-await" not in tags.value  # type: ignore[operator]


def test_a_result_object_becomes_a_dict_with_vars_and_then_json(demo: CodeMode) -> None:
    source = (
        "import json\n"
        + M
        + f"    i = {GET}\n    d = vars(i)\n    return [d, json.loads(json.dumps(d))]\n"
    )
    value: Any = demo.execute(source, subject="model").value
    first, again = value
    assert first == again == demo.execute(M + f"    return {GET}", subject="model").value
    assert first["nics"][0] == {"name": "eth0", "address": "10.0.0.11", "network": "dev-internal"}
    assert str(error_of(demo, M + "    return vars(1)\n")) == (
        "invalid program: <codemode>:2:12: TypeError: vars() takes a result object or a "
        "dataclass, not an int"
    )


def test_describe_shows_what_the_handler_enforces(demo: CodeMode) -> None:
    described: Any = describe_payload(demo.describe("instances.list"))
    parameters = {p["name"]: p for p in described["parameters"]}
    assert parameters["owner"] == {
        "name": "owner",
        "type": "str | None",
        "required": False,
        "default": "None",
        "doc": "Only instances of this owner id, like u-edsger.",
        "examples": ["u-edsger"],
    }
    assert parameters["limit"]["constraints"] == "from 1 to 100"
    assert described["example"] == 'instances.list(sandbox="dev", state="running", limit=50)'
    assert str(error_of(demo, M + "    return instances.list(limit=500)\n")) == (
        'invalid capability arguments: <codemode>:2:12: argument "limit" must be from 1 to 100'
    )
    error = error_of(demo, M + "    n = 0\n    return instances.list(limit=n)\n")
    assert str(error) == 'invalid capability arguments: argument "limit" must be from 1 to 100'
    assert error.where is not None and error.where.line == 3


@pytest.mark.parametrize("text", ["%", "_", "\\"])
def test_search_takes_sql_wildcards_literally(demo: CodeMode, text: str) -> None:
    found = demo.execute(M + f"    return instances.search(text={text!r})", subject="model")
    assert found.value == []
    plain: Any = demo.execute(M + "    return instances.search(text='10.1.')", subject="m").value
    assert len(plain) == 5


def test_a_host_may_keep_its_bounds_to_itself() -> None:
    cm = CodeMode(
        authorizer=AllowAll(), limits=Limits(max_capability_calls=2), disclose_limits=False
    )

    @cm.capability("x.one", summary="One.")
    def one() -> int:
        return 1

    with cm:
        error = error_of(cm, M + "    return [x.one() for _ in range(3)]\n")
    assert str(error) == "resource limit exceeded: capability calls at <codemode>:2:13"
    assert [c.outcome for c in error.calls] == ["ok", "ok"]


def test_a_non_json_value_is_placed_at_main_s_only_return(demo: CodeMode) -> None:
    error = error_of(demo, M + "    names = {'a'}\n    return names\n")
    assert str(error) == (
        "invalid program: <codemode>:3:12: main() returned a value that is not JSON: "
        "result is a set, which JSON cannot hold"
    )
    two = M + "    if 1:\n        return {'a'}\n    return []\n"
    assert error_of(demo, two).where is None  # two returns: which one is not known


@pytest.mark.parametrize(
    ("call", "text"),
    [
        ('instances.list(sandbox="stage")', 'no sandbox "stage"; sandboxes: dev, prod, staging'),
        (
            'instances.list(owner="Edsger")',
            'no owner id "Edsger"; did you mean "u-edsger" (Edsger Dijkstra)?',
        ),
        ('owners.list(team="Research")', 'no team "Research"; teams: platform, research'),
        (
            'instances.get(sandbox="dev", name="API")',
            'no instance "API" in sandbox "dev"; did you mean "api"?',
        ),
        (
            'instances.get(sandbox="dev", name="nope")',
            'no instance "nope" in sandbox "dev"; its instances: api, cache, db, gui, worker',
        ),
        (
            'owners.get(id="edsger")',
            'no owner id "edsger"; did you mean "u-edsger" (Edsger Dijkstra)?',
        ),
    ],
)
def test_the_demo_says_which_values_exist(demo: CodeMode, call: str, text: str) -> None:
    assert str(error_of(demo, M + f"    return {call}\n")) == f"capability failed: {text}"


# Mistakes seen since the study


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            M + "    d = {'items': 1}\n    return d.items\n",
            "invalid program: <codemode>:3:12: AttributeError: 'dict' object has no attribute "
            '\'items\'; to read its key "items", write d["items"]',
        ),
        (
            M + "    return 'a'.upper\n",
            "invalid program: <codemode>:2:12: AttributeError: 'str' object has no attribute "
            "'upper'; str.upper is a method: call it, x.upper(...)",
        ),
        (
            M + "    return ns.one()\nmain()\n",
            "invalid program: <codemode>:3:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            M + "    return 1\nif __name__ == '__main__':\n    main()\n",
            "invalid program: <codemode>:3:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            "import asyncio\nasync def main():\n    return 1\nasyncio.run(main())\n",
            "invalid program: <codemode>:4:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            M + "    return ns.stop()\n",
            'invalid program: <codemode>:2:12: unknown capability "ns.stop"; ns has: one, pair',
        ),
        (
            M + "    return ns.pair(first=1, sort=2)\n",
            'invalid capability arguments: <codemode>:2:12: unknown argument "sort"; ns.pair '
            "takes first, second",
        ),
        (
            "import ns\n" + M + "    return 1\n",
            "invalid program: <codemode>:1:1: ns is a capability namespace, ready to use: remove "
            "the import",
        ),
        (
            M + "    ns = ns.one()\n    return ns\n",
            "invalid program: <codemode>:2:10: UnboundLocalError: cannot access local variable "
            "'ns' where it is not associated with a value; \"ns\" is a capability namespace: give "
            "the variable another name",
        ),
        (
            "async def main():\n    return ns.pair(first=1)[0]\n",
            "invalid program: <codemode>:2:12: TypeError: 'coroutine' object is not subscriptable; "
            "in async def main() a capability call must be awaited: await it, as in "
            "x = await ns.name(...), or gather several with await asyncio.gather(...)",
        ),
        (
            "import asyncio\n" + M + "    return asyncio.gather(ns.one())\n",
            "invalid program: <codemode>:3:12: TypeError: An asyncio.Future, a coroutine or an "
            "awaitable is required; in def main() capability calls return their results "
            "directly; to run them together, define async def main() and await "
            "asyncio.gather(...)",
        ),
        (
            "async def main():\n    return ns.one()\n",
            "invalid program: <codemode>:2:12: main() returned a value that is not JSON: result "
            "is a capability call that was never awaited (await it), which JSON cannot hold",
        ),
        (
            M + "    return ns.one\n",
            "invalid program: <codemode>:2:12: main() returned a value that is not JSON: result "
            "is the capability ns.one itself, not called, which JSON cannot hold",
        ),
        (
            M + "    return vars({})\n",
            "invalid program: <codemode>:2:12: TypeError: vars() got a dict, which is already "
            "one: use it as it is",
        ),
        (
            M + "    return vars([1])\n",
            "invalid program: <codemode>:2:12: TypeError: vars() got a list: turn each item, "
            "[vars(x) for x in items]",
        ),
        (
            M + "    return open('/etc/hostname').read()\n",
            "invalid program: <codemode>:2:12: PermissionError: Permission denied: "
            "'/etc/hostname'; files are not available in the sandbox: use the capabilities",
        ),
    ],
)
def test_common_mistakes_get_the_text_that_fixes_them(
    host: CodeMode, source: str, text: str
) -> None:
    assert str(error_of(host, source)) == text
