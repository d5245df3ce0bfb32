"""A corpus of ordinary mistakes, made as a model makes them against the demo host.

Each error must lead to the fix in one step: it names the line to change, and its text
(what an MCP client hands the model) names the replacement. The test then makes exactly
that replacement and runs the program again: it must succeed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.demo.host import create
from codemode.payloads import describe_payload


@dataclass(frozen=True)
class Mistake:
    name: str
    source: str
    line: int
    """The line the error must name."""
    wrong: str
    right: str
    """The fix: `wrong` becomes `right` on `fix_line` (the named line unless given)."""
    says: str | None = None
    """What the error text must contain (the replacement itself unless given)."""
    fix_line: int | None = None


M = "def main():\n"
GET = 'instances.get(sandbox="dev", name="api")'
MISTAKES = [
    Mistake(
        "namespace", M + "    return len(instance.list()['items'])\n", 2, "instance", "instances"
    ),
    Mistake(
        "local name",
        M + "    servers = instances.list()['items']\n    return len(server)\n",
        3,
        "server)",
        "servers)",
        says='did you mean "servers"?',
    ),
    Mistake("attribute", M + f"    i = {GET}\n    return i.memory\n", 3, "memory", "memory_mb"),
    Mistake(
        "result key",
        M + "    page = instances.list()\n    return page['count']\n",
        3,
        "count",
        "total",
        says="InstancePage has: items, total, next_offset",
    ),
    Mistake(
        "keyword",
        M + '    return instances.get(sandbox="dev", nam="api").name\n',
        2,
        "nam=",
        "name=",
        says='unknown argument "nam"; did you mean "name"?',
    ),
    Mistake(
        "capability",
        M + "    return instances.lst()['total']\n",
        2,
        "instances.lst",
        "instances.list",
    ),
    Mistake(
        "argument type",
        M + '    return instances.list(limit="5")["total"]\n',
        2,
        '"5"',
        "5",
        says='argument "limit" must be an integer',
    ),
    Mistake(
        "argument bound",
        M + "    return instances.list(limit=500)['total']\n",
        2,
        "500",
        "100",
        says='argument "limit" must be from 1 to 100',
    ),
    Mistake(
        "literal value",
        M + '    return instances.list(state="started")["total"]\n',
        2,
        '"started"',
        '"running"',
        says="one of 'running', 'stopped'",
    ),
    Mistake(
        "dict read as object",
        M + "    page = instances.list()\n    return page.total\n",
        3,
        "page.total",
        'page["total"]',
        says='write page["total"]',
    ),
    Mistake(
        "object read as dict",
        M + f"    i = {GET}\n    return i['name']\n",
        3,
        "i['name']",
        "i.name",
        says="read its fields as attributes",
    ),
    Mistake(
        "json of a result object",
        "import json\n" + M + f"    i = {GET}\n    return json.dumps(i)\n",
        4,
        "json.dumps(i)",
        "json.dumps(vars(i))",
        says="vars(x)",
    ),
    Mistake(
        "dataclasses.asdict",
        "import dataclasses\n" + M + f"    return dataclasses.asdict({GET})\n",
        3,
        "dataclasses.asdict(",
        "vars(",
        says="use vars(obj)",
    ),
    Mistake(
        "str.format_map",
        M + "    return '{a}'.format_map({'a': 1})\n",
        2,
        ".format_map({'a': 1})",
        ".format(**{'a': 1})",
        says="use str.format(**mapping)",
    ),
    Mistake("method typo", M + "    return 'abc'.uper()\n", 2, "uper", "upper"),
    Mistake(
        "module function typo", "import math\n" + M + "    return math.sqr(4)\n", 3, "sqr", "sqrt"
    ),
    Mistake(
        "missing import",
        M + "    return json.dumps([1])\n",
        2,
        "def main():",
        "import json\ndef main():",
        says="import 'json'",
        fix_line=1,
    ),
    Mistake(
        "own dict key",
        M + "    d = {'alpha': 1}\n    return d['alpah']\n",
        3,
        "alpah",
        "alpha",
    ),
    Mistake(
        "await outside async",
        M + "    page = await instances.list()\n    return page['total']\n",
        2,
        "def main",
        "async def main",
        says="define async def main():",
        fix_line=1,
    ),
    Mistake(
        "call while loading",
        "total = instances.list()['total']\n" + M + "    return 1\n",
        1,
        "total = instances.list()['total']",
        "",
        says="move the call into main()",
    ),
    Mistake(
        "not JSON",
        M + "    names = {i['name'] for i in instances.list()['items']}\n    return set(names)\n",
        3,
        "set(names)",
        "sorted(names)",
        says="result is a set",
    ),
    Mistake(
        "too many calls",
        M + f"    return [{GET}.cpus for _ in range(150)]\n",
        2,
        "range(150)",
        "range(50)",
        says="capability calls (limit 100)",
    ),
    Mistake(
        "class inheritance",
        "class Row(dict):\n    pass\n" + M + "    return 1\n",
        1,
        "class Row(dict):",
        "class Row:",
        says="(class Row(dict))",
    ),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodeMode]:
    with create(tmp_path_factory.mktemp("mistakes") / "demo.sqlite3") as cm:
        yield cm


def fix(mistake: Mistake) -> str:
    lines = mistake.source.split("\n")
    index = (mistake.fix_line or mistake.line) - 1
    assert mistake.wrong in lines[index], mistake.name
    lines[index] = lines[index].replace(mistake.wrong, mistake.right, 1)
    return "\n".join(lines)


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_each_error_leads_to_the_fix_in_one_step(demo: CodeMode, mistake: Mistake) -> None:
    with pytest.raises(CodeModeError) as caught:
        demo.execute(mistake.source, subject="model")
    error = caught.value
    assert error.where is not None and error.where.line == mistake.line, str(error)
    text = error.report()
    assert (mistake.says or f'"{mistake.right}"') in text, text
    demo.execute(fix(mistake), subject="model")


def test_two_mistakes_at_once_are_both_named(demo: CodeMode) -> None:
    source = M + '    a = instances.get(sandbox="dev", nam="api")\n    return instances.lst()\n'
    with pytest.raises(CodeModeError) as caught:
        demo.execute(source, subject="model")
    assert str(caught.value) == (
        'invalid program: <codemode>:2:9: unknown argument "nam"; did you mean "name"?\n'
        '<codemode>:3:12: unknown capability "instances.lst"; did you mean "instances.list"?'
    )


def test_a_write_before_a_mistake_is_reported_as_done(demo: CodeMode, tmp_path: Path) -> None:
    source = (
        M + '    tags = instances.tag(sandbox="dev", name="db", tags=["seen"])\n'
        "    page = instances.list(); rows = page\n"
        "    return rows['count']\n"
    )  # another name for the result: a mistake only the run finds (the preflight follows
    # one name; tests/test_preflight_results.py has the same mistake refused before any call)
    with pytest.raises(CodeModeError) as caught:
        demo.execute(source, subject="model")
    assert caught.value.report() == (
        "invalid program: <codemode>:4:12: KeyError: 'count'; InstancePage has: items, total, "
        "next_offset\n"
        "    return rows['count']\n"
        "           ^^^^^^^^^^^^^\n"
        "After 2 completed capability calls: instances.tag(sandbox='dev', name='db', "
        "tags=['seen']) (line 2), instances.list (line 3); its effects stand."
    )


def last_report_line(cm: CodeMode, body: str) -> str:
    """The last line of the report of `main()` with `body`, which must fail: what the
    report says of the calls that completed."""
    with pytest.raises(CodeModeError) as caught:
        cm.execute("def main():\n" + body, subject="model")
    return caught.value.report().splitlines()[-1]


# Each body fails on a key only known as it runs (`str('count')`): a constant key the
# result's declared shape lacks is refused before any call (tests/test_preflight_results.py).
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (  # a paging loop that never advanced: read-only, all the same, no effects
            "    for _ in range(3):\n        page = instances.list(sandbox='dev')\n"
            "    return page[str('count')]\n",
            "After 3 completed capability calls: instances.list x3 (line 3), all with the same "
            "arguments.",
        ),
        (  # a loop of writes: each one named, so a retry can skip them
            "    for name in ['api', 'db']:\n"
            "        instances.tag(sandbox='dev', name=name, tags=['x'])\n"
            "    return instances.list()[str('count')]\n",
            "After 3 completed capability calls: instances.tag(sandbox='dev', name='api', "
            "tags=['x']) (line 3), instances.tag(sandbox='dev', name='db', tags=['x']) (line 3), "
            "instances.list (line 4); their effects stand.",
        ),
        (  # the same write twice: one entry, counted
            "    for _ in range(2):\n"
            "        instances.tag(sandbox='dev', name='api', tags=['x'])\n"
            "    return instances.list()[str('count')]\n",
            "After 3 completed capability calls: instances.tag(sandbox='dev', name='api', "
            "tags=['x']) x2 (line 3), instances.list (line 4); their effects stand.",
        ),
        (  # a paging loop that went round: the offsets repeat in a cycle, said as such
            "    offset = 0\n    while True:\n"
            "        page = instances.list(sandbox='dev', offset=offset)\n"
            "        offset = 1 if offset == 0 else 0\n",
            "After 100 completed capability calls: instances.list x100 (line 4), the same 2 "
            "argument sets in turn.",
        ),
        (  # one that advanced once, then stuck: the repeat after the calls that did not
            "    offset = 0\n    while True:\n"
            "        page = instances.list(sandbox='dev', offset=offset)\n"
            "        offset = 1\n",
            "After 100 completed capability calls: instances.list x100 (line 4), all with the "
            "same arguments after 1 other.",
        ),
        (  # offsets that only grow: no repeat to speak of
            "    for offset in range(3):\n"
            "        page = instances.list(sandbox='dev', offset=offset)\n"
            "    return page[str('count')]\n",
            "After 3 completed capability calls: instances.list x3 (line 3).",
        ),
    ],
)
def test_partial_progress_says_what_the_completed_calls_did(
    demo: CodeMode, body: str, says: str
) -> None:
    assert last_report_line(demo, body) == says


@pytest.fixture(scope="module")
def undeclared() -> Iterator[CodeMode]:
    """A host whose capabilities say nothing of their effects but one, which writes."""
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("tickets.list", summary="The open tickets' ids.")
    def list_tickets() -> list[str]:
        return ["T-1", "T-2"]

    @cm.capability("tickets.get", summary="One ticket's title.")
    def get_ticket(*, id: str) -> str:
        return f"title of {id}"

    @cm.capability(
        "tickets.close", summary="Close a ticket.", annotations={"destructiveHint": False}
    )
    def close_ticket(*, id: str) -> None:
        return None

    @cm.capability("tickets.count", summary="How many.", annotations={"readOnlyHint": True})
    def count_tickets() -> int:
        return 2

    with cm:
        yield cm


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (  # reads on a host that declares nothing: not presumed to have written
            "    ids = tickets.list()\n    return ids['x']\n",
            "After 1 completed capability call: tickets.list() (line 2); tickets.list may have "
            "had effects: the host declares none.",
        ),
        (
            "    ids = tickets.list()\n    titles = [tickets.get(id=i) for i in ids]\n"
            "    return titles['x']\n",
            "After 3 completed capability calls: tickets.list() (line 2), tickets.get(id='T-1') "
            "(line 3), tickets.get(id='T-2') (line 3); tickets.list, tickets.get may have had "
            "effects: the host declares none.",
        ),
        (  # a declared write and an undeclared read: each said for what it is
            "    ids = tickets.list()\n    tickets.close(id=ids[0])\n    return ids['x']\n",
            "After 2 completed capability calls: tickets.list() (line 2), "
            "tickets.close(id='T-1') (line 3); the effects of tickets.close stand; tickets.list "
            "may have had effects: the host declares none.",
        ),
        (  # declared read-only: nothing said of effects
            "    n = tickets.count()\n    return n['x']\n",
            "After 1 completed capability call: tickets.count (line 2).",
        ),
    ],
)
def test_calls_of_capabilities_that_declare_no_effects_are_not_said_to_stand(
    undeclared: CodeMode, body: str, says: str
) -> None:
    assert last_report_line(undeclared, body) == says
    described = describe_payload(undeclared.describe("tickets.list", subject="model"))
    assert "effects" not in described  # as describe says: nothing declared
