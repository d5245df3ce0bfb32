"""Reads of a capability's result that its shape says fail, refused before the program runs:
in the runtime's own words, at the read's position, beside the argument mistakes; never a
program that could run correctly, and never a name the subject may not see."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NotRequired

import pytest
from click.testing import CliRunner
from typing_extensions import TypedDict

from codemode import CodeMode, CodeModeError, InvalidProgramError, preflight, syntax
from codemode.authz import AllowAll
from codemode.capabilities import Capability, Node, merge, observe, shown_to, subject_digest
from codemode.cli import main
from codemode.demo import create
from codemode.preflight import Outline
from codemode.runtime.program import Programs, split_lines
from tests.runtime.running import capability

M = "def main():\n"


class Entity(TypedDict):
    name: str
    entityType: str


class InstancePage(TypedDict):
    items: list[Entity]
    total: int
    next_offset: NotRequired[int]


@dataclasses.dataclass
class Instance:
    sandbox: str
    name: str
    memory_mb: int


def page() -> InstancePage:
    return {"items": [{"name": "a", "entityType": "t"}], "total": 1, "next_offset": 1}


def get(*, name: str) -> Instance:
    return Instance("dev", name, 512)


def info(*, path: str) -> dict[str, Any]:
    return {}


def graph() -> dict[str, Any]:
    return {}


CAPABILITIES: Mapping[str, Capability] = {
    "inst.page": capability("inst.page", page),
    "inst.get": capability("inst.get", get),
    "fs.get_file_info": capability("fs.get_file_info", info),
    "memory.read_graph": capability("memory.read_graph", graph),
}
ALICE = subject_digest("alice")


def learned(value: Any, results: int = 7, digest: str = ALICE) -> Node:
    """The shape `results` observations of `value` give (the same value each time)."""
    node = observe(value, digest)
    for _ in range(results - 1):
        node = merge(node, observe(value, digest))
    return node


LEARNED = {
    "fs.get_file_info": Outline(learned({"kind": "file", "size": 3}), results=7),
    "memory.read_graph": Outline(
        learned({"entities": [{"name": "a", "entityType": "p", "observations": ["x"]}]}), 7
    ),
}


def found(body: str, outlines: Mapping[str, Outline] | None = None, **kw: Any) -> list[str]:
    """`L:C: message` for each problem the preflight finds in `main()` with `body`."""
    source = M + body
    tree = syntax.parse(source)
    shapes = outlines if outlines is not None else {**Programs(CAPABILITIES).declared, **LEARNED}
    problems = preflight.check(tree, split_lines(source), CAPABILITIES, outlines=shapes, **kw)
    return [f"{p.line}:{p.column}: {p.message}" for p in problems]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (  # declared dict, a close key
            "    r = inst.page()\n    return r['totl']\n",
            "3:12: KeyError: 'totl'; did you mean \"total\"?",
        ),
        (  # declared dict, none close
            "    r = inst.page()\n    return r['count']\n",
            "3:12: KeyError: 'count'; InstancePage has: items, total, next_offset",
        ),
        (  # declared record, an attribute close or not
            "    r = inst.get(name='a')\n    return r.memory\n",
            "3:12: AttributeError: 'Instance' object has no attribute 'memory'; "
            'did you mean "memory_mb"?',
        ),
        (
            "    r = inst.get(name='a')\n    return r.region\n",
            "3:12: AttributeError: 'Instance' object has no attribute 'region'; "
            "Instance has: sandbox, name, memory_mb",
        ),
        (  # a subscript of a record
            "    r = inst.get(name='a')\n    return r['name']\n",
            "3:12: TypeError: 'Instance' object is not subscriptable; Instance is an object: "
            "read its fields as attributes, r.name",
        ),
        (
            "    return inst.get(name='a')['zone']\n",
            "2:12: TypeError: 'Instance' object is not subscriptable; Instance is an object: "
            "read its fields as attributes, e.g. x.sandbox",
        ),
        (  # an attribute of a dict
            "    info = inst.page()\n    return info.size\n",
            "3:12: AttributeError: 'dict' object has no attribute 'size'; to read its key "
            '"size", write info["size"]',
        ),
        (  # learned, close
            "    r = fs.get_file_info(path='a')\n    return r['sise']\n",
            "3:12: KeyError: 'sise'; did you mean \"size\"? the result has: kind, size "
            "(learned from the results of fs.get_file_info, not declared)",
        ),
        (  # learned, none close
            "    r = fs.get_file_info(path='a')\n    return r['bytes']\n",
            "3:12: KeyError: 'bytes'; the result has: kind, size "
            "(learned from the results of fs.get_file_info, not declared)",
        ),
        (  # .get of a declared absent key, through a comprehension
            "    r = inst.page()\n    return [e.get('nmae') for e in r['items']]\n",
            "3:13: .get('nmae') always gives None: Entity has no key 'nmae'; "
            'did you mean "name"?',
        ),
        (  # .get of a learned absent key, through a for loop
            "    g = memory.read_graph()\n    for e in g['entities']:\n"
            "        print(e.get('nmae'))\n",
            "4:15: .get('nmae') gives None: no result had the key 'nmae'; did you mean "
            '"name"? (learned from the results of memory.read_graph, not declared)',
        ),
        (  # followed through a key, an item and await
            "    r = inst.page()\n    first = r['items'][0]\n    return first['type']\n",
            "4:12: KeyError: 'type'; Entity has: name, entityType",
        ),
        (
            "    for e in inst.page()['items']:\n        print(e.entity_type)\n",
            "3:15: AttributeError: 'dict' object has no attribute 'entity_type'; to read its "
            'key "entity_type", write e["entity_type"]',
        ),
    ],
)
def test_each_read_a_shape_lacks_is_reported_in_the_runtimes_words(body: str, says: str) -> None:
    assert found(body) == [says]


def test_an_awaited_call_is_followed_too() -> None:
    source = "async def main():\n    r = await inst.page()\n    return r['totl']\n"
    tree = syntax.parse(source)
    shapes = Programs(CAPABILITIES).declared
    problems = preflight.check(tree, split_lines(source), CAPABILITIES, outlines=shapes)
    assert [p.message for p in problems] == ["KeyError: 'totl'; did you mean \"total\"?"]


@pytest.mark.parametrize(
    "body",
    [
        # a read inside a try with a handler
        "    r = inst.page()\n    try:\n        return r['count']\n    except KeyError:\n"
        "        return 0\n",
        # under a test of the key, of the same expression
        "    r = inst.page()\n    if 'count' in r:\n        return r['count']\n",
        "    r = inst.get(name='a')\n    if hasattr(r, 'region'):\n        return r.region\n",
        # under a test of its keys
        "    r = inst.page()\n    if 'count' in r.keys():\n        return r['count']\n",
        "    r = inst.page()\n    if {'count', 'total'} <= r.keys():\n        return r['count']\n",
        "    r = inst.page()\n    if r.keys() >= {'count'}:\n        return r['count']\n",
        # .get with a default gives the default the program chose, not None
        "    r = inst.page()\n    return r.get('count', 0)\n",
        # .get with a key known only as it runs
        "    r = inst.page()\n    key = 'nmae'\n    return r.get(key)\n",
        # stored into, mutated, passed on, another name, bound twice, read in a nested def
        "    r = inst.page()\n    r['count'] = 1\n    return r['count']\n",
        "    r = inst.page()\n    r.update({'count': 1})\n    return r['count']\n",
        "    r = inst.page()\n    r['items'][0]['type'] = 'x'\n    return r['items'][0]['type']\n",
        "    r = inst.page()\n    fill(r)\n    return r['count']\n",
        "    r = inst.page()\n    x = r\n    return x['count']\n",
        "    r = inst.page()\n    r = {'count': 1}\n    return r['count']\n",
        "    r = inst.page()\n    def more():\n        r['count'] = 1\n    more()\n"
        "    return r['count']\n",
        # the items passed on through a list the checker does not follow
        "    r = inst.page()\n    rows = [e for e in r['items']]\n    rows[0]['type'] = 1\n"
        "    return r['items'][0]['type']\n",
        "    r = inst.page()\n    for k, v in r.items():\n        print(k)\n    return r['count']\n",
        # a learned read a test of the same result chose: its results were of one kind
        "    r = fs.get_file_info(path='a')\n    if r['kind'] == 'dir':\n"
        "        return r['entries']\n",
        "    r = fs.get_file_info(path='a')\n    kind = r['kind']\n    if kind != 'file':\n"
        "        return r['entries']\n    return r['size']\n",
        "    r = fs.get_file_info(path='a')\n    return r['kind'] == 'dir' and r['entries']\n",
        "    r = fs.get_file_info(path='a')\n    return r['entries'] if r['kind'] == 'dir' else 0\n",
        "    g = memory.read_graph()\n"
        "    return [e['members'] for e in g['entities'] if e['entityType'] == 'group']\n",
        # a learned shape that is open (not every result had the same keys)
        "    r = fs.open_info(path='a')\n    return r['bytes']\n",
    ],
)
def test_a_read_that_could_succeed_is_never_reported(body: str) -> None:
    some = merge(learned({"kind": "file", "size": 3}, 3), learned({"kind": "dir"}, 3))
    assert not some.checkable()
    outlines = {**Programs(CAPABILITIES).declared, **LEARNED, "fs.open_info": Outline(some, 6)}
    capabilities = {**CAPABILITIES, "fs.open_info": capability("fs.open_info", info)}
    source = M + body
    tree = syntax.parse(source)
    problems = preflight.check(tree, split_lines(source), capabilities, outlines=outlines)
    assert problems == []


def test_a_get_in_a_test_is_reported_and_the_read_it_guards_is_not() -> None:
    body = "    r = inst.page()\n    if r.get('count'):\n        return r['count']\n"
    assert found(body) == [
        "3:8: .get('count') always gives None: InstancePage has no key 'count'; "
        "InstancePage has: items, total, next_offset"
    ]


def test_names_hidden_from_the_subject_are_never_printed_nor_offered() -> None:
    """A name seen only in alice's results is neither listed nor offered to bob, and the
    level holding it is open to him: whether his read is refused tells him nothing of
    alice's names (no guess confirmed); seen from two subjects, it is shown."""
    carol = subject_digest("carol")
    both = merge(
        learned({"size": 1, "canary_owner": 2}, 4),
        learned({"size": 1, "canary_owner": 2}, 3, carol),
    )
    fields = tuple(
        (
            name,
            dataclasses.replace(field, subjects=frozenset({ALICE}))
            if name == "canary_owner"
            else field,
        )
        for name, field in both.fields or ()
    )
    alices = dataclasses.replace(both, fields=fields)
    outlines = {"fs.get_file_info": Outline(alices, 7)}
    bob = shown_to(subject_digest("bob"))
    typo = "    r = fs.get_file_info(path='a')\n    return r['canary_ownr']\n"
    exists = "    r = fs.get_file_info(path='a')\n    return r['canary_owner']\n"
    assert found(typo, outlines, shown=bob) == found(exists, outlines, shown=bob) == []
    assert found(typo, outlines, shown=shown_to(ALICE)) != []
    assert 'did you mean "canary_owner"?' in found(typo, outlines, shown=shown_to(ALICE))[0]
    shared = found(typo, {"fs.get_file_info": Outline(both, 7)}, shown=bob)
    assert 'did you mean "canary_owner"?' in shared[0]
    alone = {"fs.get_file_info": Outline(learned({"canary_owner": 2}), 7)}
    assert found(typo, alone, shown=bob) == found(exists, alone, shown=bob) == []


def test_a_learned_shape_is_checked_from_the_version_it_reached() -> None:
    """Programs check a source again when the learned shapes' version changes: an open
    shape lets the program run, the same shape once closed refuses it."""
    view = {"fs.info": capability("fs.info", info)}
    state: dict[str, Any] = {"version": 1, "node": merge(learned({"a": 1}, 2), learned({"b": 1}))}

    def shapes() -> tuple[int, Mapping[str, Outline]]:
        return state["version"], {"fs.info": Outline(state["node"], 3)}

    programs = Programs(view, outlines=shapes)
    source = M + "    r = fs.info(path='x')\n    return r['c']\n"
    assert programs.prepare(source).source == source
    state.update(version=2, node=learned({"a": 1}, 3))
    with pytest.raises(InvalidProgramError) as refused:
        programs.prepare(source)
    assert str(refused.value) == (
        "invalid program: <codemode>:3:12: KeyError: 'c'; the result has: a "
        "(learned from the results of fs.info, not declared)"
    )


@pytest.fixture(scope="module")
def counted() -> Iterator[tuple[CodeMode, list[str]]]:
    calls: list[str] = []
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("inst.tag", summary="Tag an instance.")
    def tag(*, name: str, tags: list[str]) -> int:
        calls.append("tag")
        return len(tags)

    @cm.capability("inst.page", summary="A page of instances.")
    def listed() -> InstancePage:
        calls.append("page")
        return page()

    with cm:
        yield cm, calls


def test_an_argument_and_a_result_key_mistake_come_in_one_reply_before_any_call(
    counted: tuple[CodeMode, list[str]],
) -> None:
    cm, calls = counted
    source = (
        M + "    inst.tag(name='db', tag=['seen'])\n"
        "    r = inst.page()\n"
        "    return [e['nmae'] for e in r['items']]\n"
    )
    with pytest.raises(CodeModeError) as caught:
        cm.execute(source, subject="model")
    assert isinstance(caught.value, InvalidProgramError)
    assert str(caught.value) == (
        'invalid program: <codemode>:2:5: unknown argument "tag"; did you mean "tags"?\n'
        "<codemode>:4:13: KeyError: 'nmae'; did you mean \"name\"?"
    )
    assert [str(error) for error in cm.check(source, subject="model")] == [
        'invalid capability arguments: <codemode>:2:5: unknown argument "tag"; did you mean "tags"?',
        "invalid program: <codemode>:4:13: KeyError: 'nmae'; did you mean \"name\"?",
    ]
    assert calls == []
    assert cm.execute(source.replace("tag=", "tags=").replace("nmae", "name"), subject="m").value
    assert calls == ["tag", "page"]


def test_a_write_before_a_wrong_key_no_longer_runs(tmp_path: Path) -> None:
    """What once failed after its write (tests/test_mistakes.py) is refused before it."""
    source = (
        M + '    tags = instances.tag(sandbox="dev", name="db", tags=["seen"])\n'
        "    page = instances.list()\n"
        "    return page['count']\n"
    )
    with create(tmp_path / "demo.sqlite3") as demo:
        with pytest.raises(CodeModeError) as caught:
            demo.execute(source, subject="model")
        assert caught.value.report() == (
            "invalid program: <codemode>:4:12: KeyError: 'count'; InstancePage has: items, "
            "total, next_offset\n"
            "    return page['count']\n"
            "           ^^^^^^^^^^^^^"
        )


def test_codemode_check_reports_a_result_key_as_execute_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "program.py"
    path.write_text('def main():\n    r = records.lookup(key="a")\n    return r["cont"]\n')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout == (
        "invalid program: <codemode>:3:12: KeyError: 'cont'; did you mean \"count\"?\n"
        '    return r["cont"]\n'
        "           ^^^^^^^^^\n"
    )
