"""The static preflight: every sure mistake at once, and never a correct program refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.demo import create
from codemode.payloads import describe_payload
from codemode.runtime.program import NO_MAIN
from codemode.testing import started_engine
from tests.conftest import run_error

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))
EXPECTED = json.loads((Path(__file__).parent / "corpus" / "expected.json").read_text())


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodeMode]:
    with create(tmp_path_factory.mktemp("demo") / "demo.sqlite3") as cm:
        yield cm


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_correct_programs_pass_untouched_and_run(demo: CodeMode, path: Path) -> None:
    """Each program returns its expected value (they run in name order on one database)."""
    assert demo.execute(path.read_text(), subject="tester").value == EXPECTED[path.stem]


def test_three_mistakes_are_reported_together_and_nothing_runs() -> None:
    calls: list[str] = []
    cm = CodeMode(authorizer=lambda request: calls.append(request.capability_name))

    @cm.capability("records.lookup", summary="Look up one record.")
    def lookup(*, key: str, limit: int | None = None) -> int:
        return 1

    source = (
        "def main():\n"
        '    a = records.lookup(key="a")\n'
        '    b = records.lokup(key="b")\n'
        '    c = records.lookup(key="c", limit="ten")\n'
        "    d = records.lookup()\n"
        "    return [a, b, c, d]"
    )
    with cm:
        error = run_error(cm, source)
    assert str(error) == (
        'invalid program: <codemode>:3:9: unknown capability "records.lokup"; did you mean "records.lookup"?\n'
        '<codemode>:4:9: argument "limit" must be an integer or None\n'
        '<codemode>:5:9: missing required argument "key"'
    )
    assert error.where is not None and (error.where.line, error.where.column) == (3, 9)
    assert calls == []


@pytest.mark.parametrize(
    ("source", "code", "detail"),
    [
        (
            'def main():\n    return records.lookup(keu="a")',
            "invalid_arguments",
            '<codemode>:2:12: unknown argument "keu"; did you mean "key"?',
        ),
        (
            'def main():\n    return records.lookup("a")',
            "invalid_arguments",
            "<codemode>:2:12: positional arguments are not accepted; "
            "pass it by name: records.lookup(key='a')",
        ),
        (
            'def main():\n    return records.lookup("a", 3)',
            "invalid_arguments",
            "<codemode>:2:12: positional arguments are not accepted; "
            "pass them by name: records.lookup(key='a', limit=3)",
        ),
        (
            "def main():\n    return records.lookup(n, limit=3)",
            "invalid_arguments",
            "<codemode>:2:12: positional arguments are not accepted; "
            "pass it by name: records.lookup(key=n, limit=3)",
        ),
        (
            'def main():\n    return records.lookup("a", 3, 4)',  # more than it takes
            "invalid_arguments",
            "<codemode>:2:12: positional arguments are not accepted\n"
            '<codemode>:2:12: missing required argument "key"',
        ),
        (
            'def main():\n    return records.search(filter={"owner": 1, "tags": []})',
            "invalid_arguments",
            '<codemode>:2:12: argument "filter.owner" must be a string',
        ),
        (
            'def main():\n    return records.search(filter={"owner": "o", "tags": []}, order="up")',
            "invalid_arguments",
            "<codemode>:2:12: argument \"order\" must be one of 'asc', 'desc'",
        ),
        ("def main():\n    return records()", "invalid_program", None),
        (
            "def main():\n    return records.nothing_like_it()",
            "invalid_program",
            '<codemode>:2:12: unknown capability "records.nothing_like_it"; records has: '
            "badresult, fail, flaky, lookup, missing, search, secret, whoami",
        ),
        (
            'x = records.lookup(key="a")\ndef main():\n    return x',
            "invalid_program",
            "<codemode>:1:5: records.lookup can only be called while main() runs, not when the "
            "module loads: move the call into main()",
        ),
        (
            "def gen():\n    yield 1\ndef main():\n    return 1",
            "invalid_program",
            "<codemode>:2:5: yield is not supported: build a list and return or loop over it",
        ),
        (
            "class E(Exception):\n    pass\ndef main():\n    return 1",
            "invalid_program",
            "<codemode>:1:1: class inheritance is not supported (class E(Exception)): use a plain "
            "class, a dict, or raise a built-in exception",
        ),
        (
            "def main():\n    d = {'a': 1}\n    del d['a']\n    return d",
            "invalid_program",
            "<codemode>:3:5: del is not supported: use dict.pop(key) or rebuild the list",
        ),
        (
            "from json import *\ndef main():\n    return 1",
            "invalid_program",
            "<codemode>:1:1: from module import * is not supported: import the names you need",
        ),
        (
            "import requests\ndef main():\n    return 1",
            "invalid_program",
            '<codemode>:1:1: module "requests" is not available in the sandbox',
        ),
        (
            "import statistics\ndef main():\n    return 1",
            "invalid_program",
            '<codemode>:1:1: module "statistics" is not available in the sandbox',
        ),
        (
            "def main(a, b):\n    yield a",
            "invalid_program",
            "<codemode>:1:1: main() parameters must be keyword-only, each with an annotation and a default: def main(*, week: int = 48)\n<codemode>:2:5: yield is not supported: build a list and return or loop over it",
        ),
        (
            "def helper():\n    yield 1",
            "invalid_program",
            "<codemode>:2:5: yield is not supported: build a list and return or loop over it\nthe program must define main(): add def main(): at top level",
        ),
    ],
)
def test_each_rule(cm: CodeMode, source: str, code: str, detail: str | None) -> None:
    error = run_error(cm, source)
    assert error.code.value == code
    if detail is not None:
        assert error.detail == detail


def test_namespace_call_is_named(cm: CodeMode) -> None:
    cm2 = CodeMode(authorizer=lambda r: None)

    @cm2.capability("a.b.c", summary="Deep.")
    def deep() -> int:
        return 1

    with cm2:
        assert str(run_error(cm2, "def main():\n    return a.b()")) == (
            'invalid program: <codemode>:2:12: "a.b" is a namespace, not a capability'
        )


@pytest.mark.parametrize(
    "source",
    [
        # the namespace name is rebound: the preflight cannot know what it is
        "def main():\n    records = {'lookup': 1}\n    return records",
        # **kwargs: the keywords are only known at run time
        "def main():\n    kw = {'key': 'a'}\n    return records.lookup(**kw)",
        # a dead branch at module level is left to the runtime
        "if False:\n    records.lookup(key='a')\ndef main():\n    return 1",
        # an import inside main may never run
        "def main():\n    if False:\n        import statistics\n    return 1",
    ],
)
def test_silent_where_unsure(cm: CodeMode, source: str) -> None:
    cm.execute(source, subject="a")


def test_multibyte_text_keeps_character_columns(cm: CodeMode) -> None:
    error = run_error(cm, 'def main():\n    x = "ééé"; return records.lookup(keu=x)')
    assert error.detail == '<codemode>:2:23: unknown argument "keu"; did you mean "key"?'


def bounded_host(calls: list[str]) -> CodeMode:
    """A capability whose arguments declare a length, a range and a pattern."""
    cm = CodeMode(authorizer=lambda request: calls.append(request.capability_name))

    @cm.capability("customers.search", summary="Find customers.")
    def search(
        *,
        text: Annotated[str, Field(min_length=1, max_length=100)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        region: Annotated[str, Field(pattern=r"^[a-z]{2}-[0-9]$")] = "eu-1",
        step: Annotated[int, Field(multiple_of=5)] = 5,
    ) -> list[str]:
        return []

    return cm


BOUNDED_MISTAKES = [
    ('    a = customers.search(text="")\n', 'argument "text" must have 1 to 100 characters'),
    (
        '    c = customers.search(text="acme", limit=0)\n',
        'argument "limit" must be from 1 to 50',
    ),
    (
        '    d = customers.search(text="acme", region="EU1")\n',
        "argument \"region\" must match the pattern '^[a-z]{2}-[0-9]$'",
    ),
    (
        '    e = customers.search(text="acme", step=7)\n',
        'argument "step" must be a multiple of 5',
    ),
]


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]], ids=str)
def test_every_broken_bound_is_reported_in_any_order(order: list[int]) -> None:
    """A literal that fits a parameter's bounds once no longer hides one that does not."""
    calls: list[str] = []
    mistakes = [BOUNDED_MISTAKES[i] for i in order]
    source = "def main():\n" + "".join(line for line, _ in mistakes) + "    return 1\n"
    with bounded_host(calls) as cm:
        error = run_error(cm, source)
    assert str(error) == "invalid capability arguments: " + "\n".join(
        f"<codemode>:{line}:9: {message}" for line, (_, message) in enumerate(mistakes, 2)
    )
    assert error.code.value == "invalid_arguments"
    assert calls == []


def test_literals_within_their_bounds_pass() -> None:
    calls: list[str] = []
    source = (
        "def main():\n"
        '    customers.search(text="a", limit=50, region="eu-2", step=10)\n'
        '    return customers.search(text="b" * 100, limit=1, region="xx-9")\n'
    )
    with bounded_host(calls) as cm:
        assert cm.execute(source, subject="a").value == []
    assert calls == ["customers.search", "customers.search"]


def listed_host(calls: list[str]) -> CodeMode:
    cm = CodeMode(authorizer=lambda request: calls.append(request.capability_name))

    @cm.capability("instances.tag", summary="Tag an instance.")
    def tag(
        *,
        tags: list[Annotated[str, Field(min_length=1, max_length=40)]],
        codes: Annotated[str, Field(pattern=re.compile(r"^(a+)+$"))] | None = None,
    ) -> int:
        return len(tags)

    return cm


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ('tags=["", "x" * 41]', 'argument "tags[0]" must have 1 to 40 characters'),
        ('tags=[name, "x" * 41, ""]', 'argument "tags[2]" must have 1 to 40 characters'),
        ('tags=["ok", 3, *more]', 'argument "tags[1]" must be a string'),
    ],
)
def test_a_literal_item_beside_items_known_only_at_run_time_is_checked(
    argument: str, message: str
) -> None:
    calls: list[str] = []
    source = f'def main():\n    name, more = "a", []\n    return instances.tag({argument})\n'
    with listed_host(calls) as cm:
        error = run_error(cm, source)
    assert str(error) == f"invalid capability arguments: <codemode>:3:12: {message}"
    assert calls == []


def test_items_after_a_spread_are_left_to_the_runtime() -> None:
    calls: list[str] = []
    source = 'def main():\n    more = ["a"]\n    return instances.tag(tags=[*more, "b"])\n'
    with listed_host(calls) as cm:
        assert cm.execute(source, subject="a").value == 2


def test_a_compiled_pattern_is_matched_by_its_text_in_linear_time() -> None:
    """Python's engine would backtrack for 2^40 steps on this literal."""
    calls: list[str] = []
    source = f'def main():\n    return instances.tag(tags=["a"], codes="{"a" * 40}!")\n'
    with listed_host(calls) as cm:
        assert "matching the pattern '^(a+)+$'" in str(
            describe_payload(cm.describe("instances.tag"))
        )
        error = run_error(cm, source)
    assert str(error) == (
        "invalid capability arguments: <codemode>:2:12: "
        "argument \"codes\" must match the pattern '^(a+)+$'"
    )


def test_check_lists_each_mistake_with_its_place_and_runs_nothing() -> None:
    calls: list[str] = []
    source = (
        "def main():\n"
        '    a = customers.search(text="")\n'
        "    b = customers.serch(text='x')\n"
        '    return customers.search(text="acme", limit=0)\n'
    )
    with bounded_host(calls) as cm:
        found = cm.check(source)
        assert started_engine(cm) is None  # no sandbox was started for it
    assert [str(error) for error in found] == [
        'invalid capability arguments: <codemode>:2:9: argument "text" must have 1 to 100 characters',
        'invalid program: <codemode>:3:9: unknown capability "customers.serch"; '
        'did you mean "customers.search"?',
        'invalid capability arguments: <codemode>:4:12: argument "limit" must be from 1 to 50',
    ]
    assert [(e.where.line, e.where.column, e.where.func) for e in found if e.where] == [
        (2, 9, "main"),
        (3, 9, "main"),
        (4, 12, "main"),
    ]
    assert calls == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('def main():\n    return customers.search(text="a")\n', []),
        (
            "def main(:\n    return 1\n",
            ["invalid program: <codemode>:1:10: SyntaxError: invalid syntax"],
        ),
        ("x = 1\n", [f"invalid program: {NO_MAIN}"]),
        (
            "# " + "x" * 70_000,
            ["resource limit exceeded: source size (limit 64 KiB, reached 68.36 KiB)"],
        ),
    ],
    ids=["clean", "syntax", "no-main", "too-big"],
)
def test_check_of_a_clean_or_unreadable_program(source: str, expected: list[str]) -> None:
    with bounded_host([]) as cm:
        assert [str(error) for error in cm.check(source)] == expected


def test_check_sees_what_the_subject_sees() -> None:
    class OnlyAdmins(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            return subject == "admin"

    with CodeMode(authorizer=OnlyAdmins(), hide_forbidden=True) as cm:

        @cm.capability("customers.search", summary="Find customers.")
        def search(*, text: str) -> list[str]:
            return []

        source = "def main():\n    return customers.serch(text='a')\n"
        assert [str(e) for e in cm.check(source, subject="admin")] == [
            'invalid program: <codemode>:2:12: unknown capability "customers.serch"; '
            'did you mean "customers.search"?'
        ]
        assert cm.check(source, subject="guest") == []  # not a namespace it knows


DEEP = "invalid program: {}the program is too deeply nested: use variables or helper functions"
ELIFS = "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, 110))


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("def main():\n    return " + "-" * 198 + "1\n", "<codemode>:2:210: "),
        ("def main():\n    return 'a'" + ".upper()" * 198 + "\n", "<codemode>:2:12: "),
        ("def main():\n    return " + " and ".join(["1"] * 250) + "\n", "<codemode>:2:1194: "),
        (
            "def main():\n    x = 3\n    if x == 0:\n        return 0\n" + ELIFS,
            "<codemode>:201:10: ",
        ),
        ("def main():\n    return " + "(" * 250 + "1" + ")" * 250 + "\n", "<codemode>:2:212: "),
        ("def main():\n    return " + "+".join(["1"] * 3000) + "\n", ""),
    ],
    ids=["prefix-operators", "method-chain", "and-chain", "elif-chain", "parentheses", "sum"],
)
def test_check_refuses_what_execute_refuses_as_too_deeply_nested(
    cm: CodeMode, source: str, where: str
) -> None:
    """The interpreter's bound on nesting is checked before it runs, so `check` and
    `execute` refuse the same programs in the same words (deeper than Python's own
    parser reads, with no place)."""
    assert [str(error) for error in cm.check(source)] == [DEEP.format(where)]
    assert str(run_error(cm, source)) == DEEP.format(where)


def test_nesting_up_to_the_interpreters_bound_runs(cm: CodeMode) -> None:
    source = "def main():\n    return " + "-" * 197 + "1\n"
    assert cm.check(source) == []
    assert cm.execute(source, subject="a").value == -1


def test_a_deep_base_class_expression_is_a_clean_error() -> None:
    def source(terms: int) -> str:
        return (
            "class A(" + "+".join(["1"] * terms) + "):\n    pass\n" + "def main():\n    return 1\n"
        )

    with CodeMode(authorizer=AllowAll()) as cm:
        text = str(run_error(cm, source(150)))
        deeper = str(run_error(cm, source(400)))
    assert text.startswith("invalid program: <codemode>:1:1: class inheritance is not supported")
    assert "(class A(1 + 1 + " in text and " + ...)): use a plain class" in text
    assert deeper == (
        "invalid program: <codemode>:1:9: "
        "the program is too deeply nested: use variables or helper functions"
    )


def shadows(name: str) -> str:
    return (
        f'"{name}" is a capability namespace, which replaces any global of that name before '
        "main() runs, so neither this program nor a session could keep it: use another name"
    )


MAIN = "def main():\n    return 1\n"


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("records = []\ndef main():\n    return records\n", "1:1"),
        ("records = 0\nrecords += 1\n" + MAIN, "1:1"),
        ("records: list[int] = []\n" + MAIN, "1:1"),
        ("for records in range(3):\n    pass\n" + MAIN, "1:5"),
        ("with x as records:\n    pass\n" + MAIN, "1:11"),
        ("def records():\n    return 1\n" + MAIN, "1:1"),
        ("class records:\n    pass\n" + MAIN, "1:1"),
        ("import json as records\n" + MAIN, "1:8"),
        ("from json import loads as records\n" + MAIN, "1:18"),
        ("if (records := 3):\n    pass\n" + MAIN, "1:5"),
        ("xs = [(records := i) for i in range(3)]\n" + MAIN, "1:8"),
        ("try:\n    pass\nexcept ValueError as records:\n    pass\n" + MAIN, "3:1"),
        ("match 1:\n    case records:\n        pass\n" + MAIN, "2:10"),
        (
            "def main():\n    global records\n    records = records.lookup(key='a')\n"
            "    return records\n",
            "3:5",
        ),
        ("def main():\n    global records\n    for records in [1]:\n        pass\n", "3:9"),
        (
            "def main():\n    def inner():\n        global records\n        records = 1\n"
            "    inner()\n    return 1\n",
            "4:9",
        ),
    ],
    ids=[
        "assign",
        "augmented",
        "annotated",
        "for",
        "with",
        "def",
        "class",
        "import-as",
        "from-import-as",
        "walrus",
        "walrus-in-comprehension",
        "except-as",
        "match",
        "global-assigned",
        "global-for",
        "global-in-nested-function",
    ],
)
def test_a_global_named_as_a_namespace_is_refused_where_it_is_bound(
    cm: CodeMode, source: str, where: str
) -> None:
    """The namespaces replace the program's globals of their names before main() runs."""
    error = run_error(cm, source)
    assert error.code.value == "invalid_program"
    assert error.detail == f"<codemode>:{where}: {shadows('records')}"
    assert [str(e) for e in cm.check(source)] == [
        f"invalid program: <codemode>:{where}: {shadows('records')}"
    ]


def test_a_def_named_as_a_namespace_is_placed_on_its_first_line(cm: CodeMode) -> None:
    (error,) = cm.check("@staticmethod\ndef records():\n    return 1\n" + MAIN)
    assert error.where is not None
    assert (error.where.line, error.where.column, error.where.end_line) == (2, 1, 2)
    assert error.where.end_column == len("def records():") + 1


@pytest.mark.parametrize(
    "source",
    [
        # read after `global`, never assigned: it is the namespace
        "def main():\n    global records\n    return records.lookup(key='a')\n",
        # a local variable: its hint comes at run time, if it fails
        "def main():\n    records = 5\n    return records\n",
        "def helper(records):\n    return records\ndef main():\n    return helper(5)\n",
        # a comprehension's target and a class attribute are not globals
        "xs = [records for records in range(3)]\ndef main():\n    return xs\n",
        "class C:\n    records = 1\ndef main():\n    return C.records\n",
        # an annotation alone binds nothing
        "records: int\ndef main():\n    return 1\n",
    ],
    ids=[
        "global-read",
        "local",
        "parameter",
        "comprehension-target",
        "class-attribute",
        "bare-annotation",
    ],
)
def test_a_name_named_as_a_namespace_but_not_a_global_runs(cm: CodeMode, source: str) -> None:
    assert cm.check(source) == []
    cm.execute(source, subject="alice")


def test_the_import_of_a_namespace_is_refused_once() -> None:
    with bounded_host([]) as cm:
        assert [str(e) for e in cm.check("import customers\n" + MAIN)] == [
            "invalid program: <codemode>:1:1: customers is a capability namespace, ready to "
            "use: remove the import"
        ]


def test_each_global_named_as_a_namespace_is_reported_with_the_other_problems() -> None:
    source = (
        "customers = []\n"
        "def helper():\n"
        "    yield 1\n"
        "def main():\n"
        "    global customers\n"
        "    customers = customers + [1]\n"  # the same name: its first binding says it
        "    return customers\n"
    )
    with bounded_host([]) as cm:
        assert [str(e) for e in cm.check(source)] == [
            f"invalid program: <codemode>:1:1: {shadows('customers')}",
            "invalid program: <codemode>:3:5: yield is not supported: build a list and "
            "return or loop over it",
        ]


def test_a_hidden_namespace_is_never_named_and_its_name_stays_free() -> None:
    class SecretForAdmins(AllowAll):
        def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
            return subject == "admin" or not capability_name.startswith("vault.")

    with CodeMode(authorizer=SecretForAdmins(), hide_forbidden=True) as cm:

        @cm.capability("customers.search", summary="Find customers.")
        def search(*, text: str) -> list[str]:
            return []

        @cm.capability("vault.read", summary="Read the vault.")
        def read() -> str:
            return "s"

        source = "vault = 1\ncustomers = 2\ndef main():\n    return vault\n"
        guest = [str(e) for e in cm.check(source, subject="guest")]
        assert guest == [f"invalid program: <codemode>:2:1: {shadows('customers')}"]
        assert "vault" not in str(run_error(cm, source, subject="guest"))
        assert [str(e) for e in cm.check(source, subject="admin")] == [
            f"invalid program: <codemode>:1:1: {shadows('vault')}",
            f"invalid program: <codemode>:2:1: {shadows('customers')}",
        ]
        kept = "vault = 1\ndef main():\n    return vault\n"
        assert cm.execute(kept, subject="guest").value == 1
