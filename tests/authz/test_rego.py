"""Rego policies in process: the Go adapter's cases, the exact input document, fail-closed
outcomes, construction checks, concurrency, and canaries that never reach the model."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AuthorizationRequest, Denied
from codemode.authz.rego import RegoAuthorizer, RegoEvaluationError, RegoPolicyError
from codemode.payloads import error_payload
from tests.conftest import CANARY
from tests.e2e.conftest import ROOT

HEAD = "package codemode.authz\n\nimport rego.v1\n\n"
UNDEFINED = (
    "failure: data.codemode.authz.allow: undefined (no rule matched; "
    "`default allow := false` makes that a denial)"
)
FAILED = (
    "failure: data.codemode.authz.allow: evaluation failed (a builtin failed, or rules "
    "gave conflicting values)"
)


def authorizer(body: str, **options: Any) -> RegoAuthorizer:
    return RegoAuthorizer(modules={"policy.rego": HEAD + body}, **options)


def request(subject: str = "alice", **arguments: Any) -> AuthorizationRequest:
    return AuthorizationRequest(subject, "records.entry.lookup", "records.lookup", arguments)


def outcome(policy: RegoAuthorizer, call: AuthorizationRequest) -> str:
    try:
        return "allow" if policy(call) is True else "?"
    except Denied:
        return "deny"
    except RegoEvaluationError as exc:
        return f"failure: {exc}"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("allow := true", "allow"),
        ("allow := false", "deny"),
        ('allow if input.subject.id == "nobody"', UNDEFINED),
        ('allow := "yes"', "failure: data.codemode.authz.allow: not a boolean (str)"),
        ("allow := 1", "failure: data.codemode.authz.allow: not a boolean (int)"),
        ('allow if to_number("x") > 1', FAILED),
        ('allow if input.subject.id == "alice"', "allow"),
        ('default allow := false\nallow if input.subject.id == "bob"', "deny"),
    ],
)
def test_each_outcome_of_a_decision(body: str, expected: str) -> None:
    assert outcome(authorizer(body), request()) == expected


def test_an_argument_rule_reads_the_canonical_arguments() -> None:
    policy = authorizer("default allow := false\nallow if input.arguments.limit <= 50")
    assert outcome(policy, request(limit=10)) == "allow"
    assert outcome(policy, request(limit=51)) == "deny"
    assert outcome(policy, request()) == "deny"


def test_the_input_document_is_exactly_the_contract() -> None:
    policy = authorizer(
        'allow if input == {"subject": {"id": "alice"}, '
        '"capability": {"id": "records.entry.lookup", "name": "records.lookup"}, '
        '"arguments": {"key": "a", "tags": ["x"], "nested": {"n": 1.5}}}'
    )
    assert outcome(policy, request(key="a", tags=["x"], nested={"n": 1.5})) == "allow"
    hinted = AuthorizationRequest(
        "alice", "fs.write_file", "fs.write_file", {}, annotations={"destructiveHint": True}
    )
    context = authorizer('allow if input.context == {"destructiveHint": true}')
    assert outcome(context, hinted) == "allow"
    assert outcome(context, request()) == UNDEFINED


def test_strings_that_need_escapes_and_wide_ints_arrive_intact() -> None:
    policy = authorizer(
        'allow if input.arguments.s == "a\\"b\\\\c\\n"\nallow if input.arguments.n > 100'
    )
    assert outcome(policy, request(s='a"b\\c\n')) == "allow"
    assert outcome(policy, request(n=2**70)) == "allow"
    roles = authorizer(
        'allow if "reader" in data.roles[input.subject.id]',
        data={"roles": {"josé": ["reader"], 'q"uote': ["reader"]}},
    )
    assert outcome(roles, request("josé")) == "allow"
    assert outcome(roles, request('q"uote')) == "allow"


def test_many_modules_compile_in_name_order_into_one_bundle() -> None:
    policy = RegoAuthorizer(
        modules={
            "b.rego": HEAD + "allow if input.subject.id in data.codemode.lists.admins",
            "a.rego": 'package codemode.lists\n\nimport rego.v1\n\nadmins := {"ada"}\n',
        }
    )
    assert policy.modules == ("a.rego", "b.rego")
    assert outcome(policy, request("ada")) == "allow"


def test_files_and_data_files_load(tmp_path: Path) -> None:
    (tmp_path / "policy.rego").write_text(HEAD + "allow if data.open")
    (tmp_path / "data.json").write_text('{"open": true}')
    policy = RegoAuthorizer.from_files(tmp_path / "policy.rego", data_file=tmp_path / "data.json")
    assert outcome(policy, request()) == "allow"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "no Rego modules: give modules= or files="),
        ({"files": [""]}, "a Rego file name is blank"),
        ({"modules": {" ": HEAD}}, "a Rego module name is blank"),
        (
            {"modules": {"policy.rego": "package x\n\nallow if {"}},
            "policy.rego:3:10: this is unclosed",
        ),
        (
            {"modules": {"p.rego": HEAD}, "decision": "codemode.authz.allow"},
            "the decision must be a ground reference to a rule, like data.codemode.authz.allow, "
            "not 'codemode.authz.allow'",
        ),
        (
            {"modules": {"p.rego": HEAD}, "decision": "data.codemode[input.x]"},
            "the decision must be a ground reference to a rule, like data.codemode.authz.allow, "
            "not 'data.codemode[input.x]'",
        ),
        (
            {"modules": {"p.rego": HEAD}, "visible": "visible"},
            "the visible must be a ground reference to a rule, like data.codemode.authz.allow, "
            "not 'visible'",
        ),
    ],
)
def test_construction_refuses_what_cannot_decide(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RegoPolicyError) as info:
        RegoAuthorizer(**options)
    assert str(info.value) == message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(RegoPolicyError, match=r"gone\.rego: No such file or directory"):
        RegoAuthorizer(files=[tmp_path / "gone.rego"])


def test_parse_errors_never_reach_stdout(tmp_path: Path) -> None:
    program = (
        "from codemode.authz.rego import RegoAuthorizer, RegoPolicyError\n"
        "try:\n"
        "    RegoAuthorizer(modules={'p.rego': 'package x\\nallow if {'})\n"
        "except RegoPolicyError:\n"
        "    pass\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""


# -- through a host --------------------------------------------------------------------


POLICY = """
default allow := false
allow if {
    input.subject.id == "alice"
    input.capability.name != "records.secret"
}
default visible := false
visible if input.capability.name != "records.secret"
"""


def host(policy: RegoAuthorizer, **options: Any) -> CodeMode:
    cm = CodeMode(authorizer=policy, **options)

    @cm.capability("records.lookup", summary="Look up one record.")
    def lookup(*, key: str, limit: int | None = None) -> dict[str, str]:
        return {"key": key}

    @cm.capability("records.secret", summary="Never allowed.")
    def secret() -> str:
        raise AssertionError("a denied call must never run")

    return cm


def failure(cm: CodeMode, source: str, subject: str = "alice") -> CodeModeError:
    with pytest.raises(CodeModeError) as info:
        cm.execute(source, subject=subject)
    return info.value


def test_a_denial_and_a_failure_reach_the_model_as_fixed_words_only() -> None:
    canary_policy = authorizer(
        f'# {CANARY}\nallow := "{CANARY}" if input.subject.id == "mallory"\n'
        f'allow := false if input.subject.id == "bob"\nreason := "{CANARY}"',
        data={"secret": CANARY},
    )
    with host(canary_policy) as cm:
        denied = failure(cm, "def main():\n    return records.lookup(key='a')", "bob")
        failed = failure(cm, "def main():\n    return records.lookup(key='a')", "mallory")
        undefined = failure(cm, "def main():\n    return records.lookup(key='a')", "zed")
    assert str(denied) == "permission denied"
    assert str(failed) == str(undefined) == "authorization policy failure"
    for error in (denied, failed, undefined):
        assert CANARY not in error.report() + json.dumps(error_payload(error))


def test_hide_forbidden_uses_the_visible_rule() -> None:
    with host(authorizer(POLICY, visible="data.codemode.authz.visible"), hide_forbidden=True) as cm:
        assert [h.name for h in cm.search("", subject="alice").results] == ["records.lookup"]
        missing = failure(cm, "def main():\n    return records.secret()")
        assert str(missing).startswith("invalid program:")


def test_hide_forbidden_without_a_visible_rule_is_refused() -> None:
    with pytest.raises(TypeError, match="hide_forbidden needs an authorizer with can_see"):
        CodeMode(authorizer=authorizer(POLICY), hide_forbidden=True)


def test_concurrent_executions_evaluate_at_once() -> None:
    policy = authorizer("default allow := false\nallow if input.arguments.limit <= 50")
    outcomes: list[tuple[int, str]] = []
    with host(policy) as cm:

        def run(limit: int) -> None:
            source = f"def main():\n    return records.lookup(key='a', limit={limit})"
            try:
                cm.execute(source, subject="alice")
                outcomes.append((limit, "allow"))
            except CodeModeError as error:
                outcomes.append((limit, str(error)))

        threads = [threading.Thread(target=run, args=(limit,)) for limit in range(30, 70)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(outcomes) == [
        (limit, "allow" if limit <= 50 else "permission denied") for limit in range(30, 70)
    ]


# -- the command line --------------------------------------------------------------------


GUIDE_POLICY = ROOT / "docs" / "guides" / "demo-policy"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            [
                "--rego",
                str(GUIDE_POLICY / "policy.rego"),
                "--policy-file",
                str(GUIDE_POLICY / "policies.cedar"),
            ],
            "--policy-file (Cedar) and --rego cannot be used together",
        ),
        (["--rego-data", str(GUIDE_POLICY / "data.json")], "--rego-data needs --rego"),
        (["--rego-decision", "data.x.allow"], "--rego-decision needs --rego"),
        (
            ["--rego", str(GUIDE_POLICY / "policy.rego"), "--hide-forbidden"],
            "--hide-forbidden needs an authorizer that can tell what a subject may see: use it "
            "with --policy-file, or with --rego and --rego-visible",
        ),
        (
            [
                "--rego",
                str(GUIDE_POLICY / "policy.rego"),
                "--rego-visible",
                "data.codemode.authz.visible",
            ],
            "--rego-visible is used by --hide-forbidden only: give both",
        ),
        (
            ["--rego", str(GUIDE_POLICY / "policy.rego"), "--rego-decision", "allow"],
            "the decision must be a ground reference to a rule",
        ),
    ],
)
def test_rego_options_that_cannot_work_are_usage_errors(options: list[str], message: str) -> None:
    from click.testing import CliRunner

    from codemode.cli import main

    result = CliRunner().invoke(main, ["serve", "codemode.demo:create", *options])
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_module_that_does_not_parse_stops_the_server_with_its_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from codemode.cli import main

    broken = tmp_path / "broken.rego"
    broken.write_text("package codemode.authz\n\nallow if {\n")
    result = CliRunner().invoke(main, ["serve", "codemode.demo:create", "--rego", str(broken)])
    assert result.exit_code == 2
    assert f"Error: {broken}:3:10: this is unclosed" in result.stderr


@pytest.mark.anyio
async def test_serve_with_the_guides_rego_policy_over_stdio(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    args = ["-m", "codemode", "serve", "codemode.demo:create", "--subject", "alice"]
    args += [
        "--rego",
        str(GUIDE_POLICY / "policy.rego"),
        "--rego-data",
        str(GUIDE_POLICY / "data.json"),
    ]
    args += ["--rego-visible", "data.codemode.authz.visible", "--hide-forbidden"]
    params = StdioServerParameters(
        command=sys.executable, args=args, cwd=str(ROOT), env={"XDG_DATA_HOME": str(tmp_path)}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        read_one = await session.call_tool(
            "execute",
            {"source": 'def main():\n    return instances.get(sandbox="dev", name="gui").name'},
        )
        assert read_one.structured_content == {
            "result": "gui",
            "usage": read_one.structured_content["usage"],
        }
        hidden = await session.call_tool("describe_api", {"name": "instances.set_state"})
        assert hidden.is_error
        assert hidden.structured_content["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"decision": "data.codemode.authz.alow"},
            "the decision data.codemode.authz.alow names no rule of the modules; did you mean "
            '"data.codemode.authz.allow"?',
        ),
        (
            {"visible": "data.codemode.authz.visibl"},
            "the visible data.codemode.authz.visibl names no rule of the modules; did you mean "
            '"data.codemode.authz.visible"?',
        ),
    ],
)
def test_a_decision_that_names_no_rule_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RegoPolicyError) as info:
        authorizer("default allow := false\ndefault visible := false", **options)
    assert str(info.value) == message


def test_a_decision_that_refers_to_nothing_is_refused() -> None:
    with pytest.raises(RegoPolicyError) as info:
        authorizer("allow if is_admin")
    assert str(info.value) == (
        "data.codemode.authz.allow cannot be evaluated: it refers to something no module defines"
    )


def test_the_visible_rule_sees_the_hints_once_validated() -> None:
    policy = authorizer(
        "default allow := false\ndefault visible := false\n"
        "visible if not input.context.destructiveHint",
        visible="data.codemode.authz.visible",
    )

    shown = SimpleNamespace(id="fs.read", annotations={"destructiveHint": False})
    hidden = SimpleNamespace(id="fs.write", annotations={"destructiveHint": True})
    policy.validate([shown, hidden])  # type: ignore[list-item]
    see = policy.can_see
    assert see is not None
    assert (see("alice", "fs.read", "fs.read"), see("alice", "fs.write", "fs.write")) == (
        True,
        False,
    )


def test_a_policy_failure_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    policy = authorizer('allow if input.subject.id == "nobody"')
    with host(policy) as cm, caplog.at_level(logging.WARNING, "codemode"):
        failure(cm, "def main():\n    return records.lookup(key='a')")
    [record] = [r for r in caplog.records if "the policy failed" in r.getMessage()]
    assert record.exc_info is None
    assert record.getMessage().endswith(
        "the policy failed on records.lookup: data.codemode.authz.allow: undefined (no rule "
        "matched; `default allow := false` makes that a denial)"
    )


REGEX_POLICY = 'allow if regex.match("^/srv/[a-z0-9/]+$", input.arguments.path)'


def test_a_long_argument_to_a_regex_builtin_neither_crashes_nor_errs() -> None:
    # rego-cpp's matcher recurses once per character: 400k characters would overflow an
    # ordinary thread's stack and end the process. Run where a crash cannot take pytest.
    program = (
        "from codemode.authz import AuthorizationRequest\n"
        "from codemode.authz.rego import RegoAuthorizer\n"
        f"policy = RegoAuthorizer(modules={{'p.rego': {HEAD + REGEX_POLICY!r}}})\n"
        "call = AuthorizationRequest('a', 'fs.read', 'fs.read', {'path': '/srv/' + 'a' * 400000})\n"
        "print(policy(call))\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert (finished.returncode, finished.stdout) == (0, "True\n"), finished.stderr


def test_a_decision_past_its_timeout_is_a_policy_failure() -> None:
    # rego-cpp's regex backtracks: this takes about a second, then its thread is free.
    policy = authorizer('allow if regex.match("^([a-z]+)*x$", input.arguments.s)', timeout=0.2)
    assert outcome(policy, request(s="a" * 24)) == "failure: data.codemode.authz.allow: timed out"


def test_floats_keep_their_precision() -> None:
    policy = authorizer(
        "default allow := false\nallow if { input.arguments.amount >= 0; input.arguments.amount <= 50 }"
    )
    assert outcome(policy, request(amount=50.0)) == "allow"
    assert outcome(policy, request(amount=50.0000004)) == "deny"
    assert outcome(policy, request(amount=-4e-7)) == "deny"


def test_a_policy_that_prints_at_start_writes_nothing_to_stdout() -> None:
    printing = HEAD + 'allow if print("hello")'
    program = (
        "from codemode.authz.rego import RegoAuthorizer\n"
        f"RegoAuthorizer(modules={{'p.rego': {printing!r}}})\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == ""


def test_only_a_rego_authorizer_with_a_visible_rule_is_a_visibility_policy() -> None:
    from codemode.authz import VisibilityPolicy

    assert not isinstance(authorizer(POLICY), VisibilityPolicy)
    assert isinstance(authorizer(POLICY, visible="data.codemode.authz.visible"), VisibilityPolicy)
