"""The command line: results and errors for people, and exit codes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from codemode.cli import main


def run(tmp_path: Path, program: str, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "program.py"
    path.write_text(program)
    result = CliRunner().invoke(main, ["run", "tests.conftest:build_host", str(path), *extra])
    return result.exit_code, result.stdout, result.stderr


def test_run_prints_the_result_as_json(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, 'def main():\n    print("hi")\n    return records.lookup(key="a")')
    assert code == 0
    assert out == 'hi\n{\n  "key": "a",\n  "count": 0\n}\n'


def test_run_shows_the_failing_line_with_a_caret(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, "def main():\n    x = 1\n    return [1][5]")
    assert code == 1
    assert err == (
        '  File "<codemode>", line 3, in main\n'
        "    return [1][5]\n"
        "           ^^^^^^\n"
        "invalid program: <codemode>:3:12: IndexError: list index out of range [invalid_program]\n"
    )


def test_run_errors_without_a_position_show_the_message(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, "def main():\n    return records.fail()", "--subject", "bob")
    assert code == 1
    assert err.endswith("capability failed [capability_failed]\n")
    assert "CANARY" not in err


def test_bad_app_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    path.write_text("def main():\n    return 1")
    result = CliRunner().invoke(main, ["run", "nomodule", str(path)])
    assert result.exit_code == 2
    assert "expected module:attribute" in result.stderr


def test_serving_a_public_address_without_tokens_is_refused() -> None:
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--transport", "http", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 2
    assert "refusing to serve 0.0.0.0 without --token-file" in result.stderr


def test_check_reports_every_problem_without_running(tmp_path: Path) -> None:
    path = tmp_path / "program.py"
    path.write_text('def main():\n    records.lokup(key="a")\n    return records.lookup(keu=1)')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert result.exit_code == 1
    assert result.stderr.endswith(
        'invalid program: <codemode>:2:5: unknown capability "records.lokup"; did you mean "records.lookup"?\n'
        '<codemode>:3:12: unknown argument "keu"; did you mean "key"? [invalid_program]\n'
    )
    path.write_text('def main():\n    return records.lookup(key="a")')
    result = CliRunner().invoke(main, ["check", "tests.conftest:build_host", str(path)])
    assert (result.exit_code, result.stdout) == (0, "ok: no problems found\n")


def test_serve_refuses_policies_that_do_not_validate(tmp_path: Path) -> None:
    policy = tmp_path / "p.cedar"
    policy.write_text(
        '@id("typo")\npermit (principal, action == Action::"records.lookp", resource);\n'
    )
    result = CliRunner().invoke(
        main, ["serve", "tests.conftest:build_host", "--policy-file", str(policy)]
    )
    assert result.exit_code == 2
    assert 'policy "typo" (line 1): ' in result.stderr
