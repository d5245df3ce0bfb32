"""What a program that calls saved programs is fed with, against texts written to subvert it:
the save is the trailer's call alone, a saved text stays inside its method, the names the
composed code binds are nobody else's, a wide closure costs its programs once, and no
generated name reaches the model."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from codemode import CodeMode, syntax
from codemode.authz import AuthorizationRequest, Denied
from codemode.capabilities import (
    CONTROL,
    NOT_FINITE,
    RESERVED,
    RESPELLED,
    SHARED_NAMES,
    View,
    program_capability,
)
from codemode.composition import BROKEN, TOO_MANY, closures, composed, reaches
from codemode.errors import (
    CodeModeError,
    InvalidArgumentsError,
    InvalidProgramError,
    InvalidRequestError,
    RegistrationError,
)
from codemode.preflight import load_message

WEEKLY = '''"""The weekly report."""
def main(*, week: int = 48) -> int:
    return records.lookup(id=week)
'''

SAVE_ARGUMENTS = "name='evil', summary='s', parameters=[], source='x', replaces=False"


class Seen:
    """An authorizer that notes each request it is asked (and refuses bob `programs.ff`)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, request: AuthorizationRequest) -> None:
        self.asked.append((request.subject, request.capability_name, dict(request.arguments)))
        if request.subject == "bob" and request.capability_name == "programs.ff":
            raise Denied("bob may not")


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def cm(seen: Seen) -> Iterator[CodeMode]:
    with CodeMode(authorizer=seen) as cm:

        @cm.capability("records.lookup", summary="Look up one record.")
        def lookup(*, id: int) -> int:
            return id * 10

        cm.add_program("weekly", WEEKLY, summary="The weekly report.")
        yield cm


def failure(cm: CodeMode, source: str, subject: str = "alice", **options: Any) -> CodeModeError:
    with pytest.raises(CodeModeError) as raised:
        cm.execute(source, subject=subject, **options)
    return raised.value


# -- 1. programs.save is the trailer's call alone ---------------------------------------


@pytest.mark.parametrize(
    "reach",
    [
        "p = programs\n    return p.save",
        "return getattr(programs, 'save')",
        "ns = [programs][0]\n    return ns.save",
    ],
    ids=["alias", "getattr", "list"],
)
def test_model_text_reaching_the_save_gets_the_error_of_a_name_that_names_nothing(
    cm: CodeMode, seen: Seen, reach: str
) -> None:
    source = f"def main():\n    {reach}({SAVE_ARGUMENTS})\n"
    unsaved = failure(cm, source)  # no save_as: programs.save is no capability there
    seen.asked.clear()
    saving = failure(cm, source, save_as={"name": "mine", "summary": "m"})
    said, expected = saving.to_payload(), unsaved.to_payload()
    assert (said["code"], said["message"]) == (expected["code"], expected["message"])
    assert saving.where is not None and unsaved.where is not None
    assert (saving.where.line, saving.where.column) == (unsaved.where.line, unsaved.where.column)
    assert "AttributeError: module 'programs' has no attribute 'save'" in str(saving.detail)
    assert seen.asked == []  # neither bound nor authorized: no person reads a forged document


def test_the_trailers_own_save_still_runs_after_a_forged_one_was_refused(
    cm: CodeMode, seen: Seen
) -> None:
    source = (
        "def main():\n    p = programs\n    try:\n"
        f"        p.save({SAVE_ARGUMENTS})\n    except AttributeError:\n        pass\n"
        "    return 1\n"
    )
    result = cm.execute(source, subject="alice", save_as={"name": "mine", "summary": "m"})
    assert result.value == 1
    saves = [arguments for _, name, arguments in seen.asked if name == "programs.save"]
    assert [(a["name"], a["source"]) for a in saves] == [("mine", source)]
    assert cm.visible("alice").get("programs.mine") is not None


# -- 2. a saved text stays inside the method it is indented into ------------------------

HIJACK = (
    "def main(*, x: int = 1) -> int:\n    return 5\n"
    "\x0cdef main():\n\x0c        return records.lookup(id=777)\n"
)


def test_a_form_feed_outside_a_string_is_refused_when_a_program_is_added_or_saved(
    cm: CodeMode, seen: Seen
) -> None:
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("ff", HIJACK, summary="ff")
    assert str(raised.value) == f"program ff: {CONTROL.format(line=3)}"
    assert CONTROL.format(line=3) == (
        "a saved program cannot hold a form feed or vertical tab outside a string (line 3): "
        "remove it"
    )
    tabbed = "def main(*, x: int = 1) -> int:\n    y = 1\x0b\n    return y\n"
    refused = failure(cm, tabbed, save_as={"name": "vt", "summary": "v"})
    assert isinstance(refused, InvalidRequestError)
    assert refused.detail == CONTROL.format(line=2)
    assert seen.asked == []  # refused before anything ran
    inside = 'def main(*, x: int = 1) -> str:\n    return "a\\x0cb" + "\x0c"\n'
    assert cm.add_program("inside", inside, summary="A form feed in a string.")


def test_a_global_or_nonlocal_declaration_is_refused_when_a_program_is_added_or_saved(
    cm: CodeMode, seen: Seen
) -> None:
    """Fed inside its caller, a saved text's `global` would name the caller's globals (its
    own variables), not the text's top-level names: refused before it is
    kept, so what runs is what was read alone."""
    shared = (
        "count = 0\n\ndef bump():\n    global count\n    count += 1\n\n"
        "def main(*, x: int = 1) -> int:\n    bump()\n    return x\n"
    )
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("bumps", shared, summary="Bumps.")
    assert str(raised.value) == f"program bumps: {SHARED_NAMES.format(line=4)}"
    assert SHARED_NAMES.format(line=4) == (
        "a saved program cannot declare global or nonlocal names (line 4): "
        "pass values to its functions and return them"
    )
    nested = (
        "def main(*, x: int = 1) -> int:\n    n = x\n\n    def add():\n"
        "        nonlocal n\n        n += 1\n\n    add()\n    return n\n"
    )
    refused = failure(cm, nested, save_as={"name": "adds", "summary": "Adds."})
    assert isinstance(refused, InvalidRequestError)
    assert refused.detail == SHARED_NAMES.format(line=5)
    assert seen.asked == []  # refused before anything ran


def test_programs_spelled_in_letters_python_folds_is_refused_not_a_crash(
    cm: CodeMode, seen: Seen
) -> None:
    """Python reads `programs` written with a fullwidth s as `programs`, but the composing code finds
    the name by its ASCII bytes: such a text is refused as a saved program and as a text
    to save, never fed (it failed as an internal error)."""
    folded = "program\uff53"
    guarded = f"def main(*, x: int = 1) -> int:\n    if x > 5:\n        return {folded}.weekly()\n    return x\n"
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("guarded", guarded, summary="Guarded.")
    assert str(raised.value) == f"program guarded: {RESPELLED.format(line=3)}"
    assert RESPELLED.format(line=3) == (
        '"programs" is written with letters Python reads as others (line 3): '
        "write it in plain ASCII"
    )
    caller = f"def main():\n    return {folded}.weekly()\n"
    refused = failure(cm, caller, save_as={"name": "g", "summary": "G."})
    assert isinstance(refused, InvalidRequestError)
    assert refused.detail == RESPELLED.format(line=2)
    assert seen.asked == []


def test_a_default_of_inf_or_nan_is_refused_since_the_save_could_not_write_it(
    cm: CodeMode, seen: Seen
) -> None:
    """The save's argument document is written as literals: `inf` would be a name the
    caller's program could bind (a forged document), so such a default is refused."""
    infinite = 'inf = "FORGED"\ndef main(*, x: float = 1e999) -> float:\n    return 1.0\n'
    refused = failure(cm, infinite, save_as={"name": "f", "summary": "F."})
    assert isinstance(refused, InvalidRequestError)
    assert refused.detail == NOT_FINITE.format(name="x")
    assert (
        NOT_FINITE.format(name="x") == 'main() parameter "x": its default must not hold inf or nan'
    )
    assert seen.asked == []
    listed = "def main(*, xs: list[float] = [1.0, 1e999]) -> float:\n    return 1.0\n"
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("listed", listed, summary="Listed.")
    assert str(raised.value) == f"program listed: {NOT_FINITE.format(name='xs')}"


def test_composed_code_whose_saved_text_leaves_its_method_is_refused() -> None:
    clean = program_capability("ff", "def main(*, x: int = 1) -> int:\n    return 5\n", summary="f")
    forged = dataclasses.replace(clean, source=HIJACK)  # a record kept before the refusal
    view = View([forged])
    caller = "def main():\n    if False:\n        programs.ff()\n    return 'mine'\n"
    lines = caller.split("\n")
    sites = reaches(syntax.parse(caller), view)
    closures(sites, lines, view, None, 4, 16)
    with pytest.raises(InvalidProgramError) as raised:
        composed(sites, lines, view, None)
    assert raised.value.detail == "<codemode>:3:9: " + BROKEN.format(name="programs.ff")
    assert BROKEN.format(name="programs.ff") == (
        "programs.ff does not keep its shape inside the program that calls it: save it again"
    )
    assert raised.value.where is not None and raised.value.where.line == 3


# -- 3. the names the composed code binds are its own ------------------------------------


def test_a_saved_text_naming_a_generated_name_is_refused(cm: CodeMode) -> None:
    rebinding = '"""R."""\n_cm_kw = {"week": 999}\n' + WEEKLY.split('"""\n', 1)[1]
    with pytest.raises(RegistrationError) as raised:
        cm.add_program("report", rebinding, summary="R.")
    assert str(raised.value) == "program report: " + RESERVED.format(name="_cm_kw")
    assert RESERVED.format(name="_cm_kw") == (
        '"_cm_kw" is a name codemode keeps for calling saved programs '
        "(names starting with _cm_, and _p with six digits): rename it"
    )
    refused = failure(cm, rebinding, save_as={"name": "mine", "summary": "m"})
    assert isinstance(refused, InvalidRequestError)
    assert refused.detail == RESERVED.format(name="_cm_kw")


@pytest.mark.parametrize(
    ("source", "name", "column"),
    [
        ("def main():\n    _p000001 = 1\n    return programs.weekly()\n", "_p000001", 5),
        ("def main(_cm_self=0):\n    return programs.weekly()\n", "_cm_self", 10),
    ],
)
def test_a_caller_naming_a_generated_name_is_refused_before_it_runs(
    cm: CodeMode, seen: Seen, source: str, name: str, column: int
) -> None:
    refused = failure(cm, source)
    assert isinstance(refused, InvalidProgramError)
    line = 2 if name.startswith("_p") else 1
    assert refused.detail == f"<codemode>:{line}:{column}: " + RESERVED.format(name=name)
    assert seen.asked == []


def test_the_bound_arguments_are_held_where_the_saved_text_cannot_name_them() -> None:
    capability = program_capability("weekly", WEEKLY, summary="W.")
    view = View([capability])
    caller = "def main():\n    return programs.weekly(week=3)\n"
    lines = caller.split("\n")
    sites = reaches(syntax.parse(caller), view)
    closures(sites, lines, view, None, 4, 16)
    tree = syntax.parse(composed(sites, lines, view, None).code)
    methods = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    runs = methods["_cm_weekly"]
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in runs.body)
    names = {n.id for n in ast.walk(runs) if isinstance(n, ast.Name)}
    assert "_cm_kw" not in names  # the saved text's scope never holds them
    assert "_cm_kw" in {n.id for n in ast.walk(methods["weekly"]) if isinstance(n, ast.Name)}


# -- 4. a wide closure costs its programs once ------------------------------------------


class Counted(View):
    """A view that counts how often each saved program is read from it."""

    def __init__(self, capabilities: list[Any]) -> None:
        super().__init__(capabilities)
        self.reads: dict[str, int] = {}

    def __getitem__(self, name: str) -> Any:
        self.reads[name] = self.reads.get(name, 0) + 1
        return super().__getitem__(name)


def wide(width: int) -> list[Any]:
    """`top` calls a0..aN, each of which calls b0..bN, each of which calls c0..cN."""

    def saved(name: str, callees: list[str]) -> Any:
        calls = "".join(f"        programs.{c}()\n" for c in callees) or "        pass\n"
        source = f"def main() -> int:\n    if False:\n{calls}    return 1\n"
        return program_capability(name, source, summary=name)

    rows = [[f"{row}{i}" for i in range(width)] for row in "abc"]
    found = [saved(n, []) for n in rows[2]]
    found += [saved(n, rows[2]) for n in rows[1]] + [saved(n, rows[1]) for n in rows[0]]
    return [*found, saved("top", rows[0])]


def test_a_closure_reads_each_program_once_and_stops_past_its_bound() -> None:
    view = Counted(wide(4))
    caller = "def main():\n    if False:\n" + "        programs.b0()\n" * 3 + "    return 1\n"
    lines = caller.split("\n")
    sites = reaches(syntax.parse(caller), view)
    view.reads.clear()
    closures(sites, lines, view, None, 4, 16)
    assert [s.closure for s in sites] == [["b0", "c0", "c1", "c2", "c3"]] * 3
    # each read once to walk it (and once by its caller, to see it is a saved program):
    # shared callees and later sites read what was walked
    assert view.reads == {"programs.b0": 1, **{f"programs.c{i}": 2 for i in range(4)}}
    view = Counted(wide(6))  # top reaches 19 programs
    caller = "def main():\n    if False:\n        programs.top()\n    return 1\n"
    lines = caller.split("\n")
    sites = reaches(syntax.parse(caller), view)
    view.reads.clear()
    with pytest.raises(InvalidProgramError) as raised:
        closures(sites, lines, view, None, 4, 16)
    assert raised.value.detail == TOO_MANY.format(limit=16)
    assert view.reads["programs.top"] == 1
    assert "programs.a5" not in view.reads  # stopped once past 16, before the rest were read


def test_more_sites_than_the_bound_are_refused_before_any_is_walked() -> None:
    view = Counted(wide(2))
    caller = "def main():\n    if False:\n" + "        programs.top()\n" * 17 + "    return 1\n"
    lines = caller.split("\n")
    sites = reaches(syntax.parse(caller), view)
    view.reads.clear()
    with pytest.raises(InvalidProgramError) as raised:
        closures(sites, lines, view, None, 4, 16)
    assert raised.value.detail == TOO_MANY.format(limit=16)
    assert view.reads == {}


# -- 5. no generated name reaches the model ----------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "def f(g=programs.weekly):\n    return g\ndef main():\n    return 1\n",
        "class A:\n    g = programs.weekly\ndef main():\n    return 1\n",
        "g = programs.weekly\ndef main():\n    return 1\n",
    ],
    ids=["default", "class_body", "module"],
)
def test_a_saved_program_named_while_the_module_loads_is_told_as_a_namespace_is(
    cm: CodeMode, source: str
) -> None:
    refused = failure(cm, source)
    assert isinstance(refused, InvalidProgramError)
    assert str(refused.detail).endswith(": " + load_message("programs.*"))
    assert "_p0" not in str(refused.to_payload())


@pytest.mark.parametrize("keyword", ["_cm", "_cm_self", "_cm_kw"])
def test_a_generated_keyword_is_an_unknown_argument(cm: CodeMode, keyword: str) -> None:
    for source in [
        f"def main():\n    return programs.weekly({keyword}=1)\n",
        f"def main():\n    f = programs.weekly\n    return f({keyword}=1)\n",
    ]:
        refused = failure(cm, source)
        assert isinstance(refused, InvalidArgumentsError)
        assert f'unknown argument "{keyword}"; programs.weekly takes week' in str(refused.detail)
