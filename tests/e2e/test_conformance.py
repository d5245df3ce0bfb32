"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, installed by
scripts/install-test-tools) against `codemode serve --transport http`, in both protocol eras.

Every server scenario of the suite is either applicable, and then must pass, or listed
below as not applicable with the reason. Within an applicable scenario, a check that does
not succeed must be listed too, with its reason.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import conformance
from tests.e2e.conftest import ROOT, free_port, start_codemode

FIXTURE_TOOLS = "needs the suite's fixture tools; a codemode server lists only its three"
NO_RESOURCES = "codemode serves tools only: no resources, prompts or completions"
STATELESS = "a stateless server has no sessions, so no stream to resume"

APPLICABLE = {
    "server-initialize",
    "server-session-lifecycle",
    "server-stateless",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "caching",
    "input-required-result-unsupported-methods",
    "input-required-result-validate-input",
}

NOT_APPLICABLE = {
    "logging-set-level": "the server sends clients no log messages (host text stays in its log)",
    "tools-call-with-logging": "the server sends clients no log messages",
    "completion-complete": NO_RESOURCES,
    "resources-list": NO_RESOURCES,
    "resources-read-text": NO_RESOURCES,
    "resources-read-binary": NO_RESOURCES,
    "resources-templates-read": NO_RESOURCES,
    "resources-subscribe": NO_RESOURCES,
    "resources-unsubscribe": NO_RESOURCES,
    "sep-2164-resource-not-found": NO_RESOURCES,
    "prompts-list": NO_RESOURCES,
    "prompts-get-simple": NO_RESOURCES,
    "prompts-get-with-args": NO_RESOURCES,
    "prompts-get-embedded-resource": NO_RESOURCES,
    "prompts-get-with-image": NO_RESOURCES,
    "tools-call-simple-text": FIXTURE_TOOLS,
    "tools-call-image": FIXTURE_TOOLS,
    "tools-call-audio": FIXTURE_TOOLS,
    "tools-call-embedded-resource": FIXTURE_TOOLS,
    "tools-call-mixed-content": FIXTURE_TOOLS,
    "tools-call-error": FIXTURE_TOOLS,
    "tools-call-with-progress": FIXTURE_TOOLS,
    "tools-call-sampling": FIXTURE_TOOLS + "; and a stateless server sends no requests",
    "tools-call-elicitation": FIXTURE_TOOLS + "; and a stateless server sends no requests",
    "elicitation-sep1034-defaults": FIXTURE_TOOLS + "; and a stateless server sends no requests",
    "elicitation-sep1330-enums": FIXTURE_TOOLS + "; and a stateless server sends no requests",
    "json-schema-2020-12": FIXTURE_TOOLS,
    "http-custom-header-server-validation": FIXTURE_TOOLS + " (with x-mcp-header parameters)",
    **{
        f"input-required-result-{name}": FIXTURE_TOOLS + " (that ask the client for input)"
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
        )
    },
    **{
        f"sep-2640-skills-{name}": "the skills extension is not offered"
        for name in ("directory", "enumeration", "manifest")
    },
    **{
        f"tasks-{name}": "the tasks extension is not offered"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
}

UNMET = {
    ("server-stateless", "sep-2575-server-rejects-undeclared-capability"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-missing-capability-http-400"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-http-server-no-independent-requests-on-stream"): FIXTURE_TOOLS,
    ("server-stateless", "sep-2575-server-no-log-without-loglevel"): FIXTURE_TOOLS,
    ("server-sse-polling", "server-sse-polling-session"): STATELESS,
    ("server-sse-multiple-streams", "server-sse-multiple-streams-session"): STATELESS,
    ("caching", "sep-2549-prompts-list-caching-hints"): NO_RESOURCES,
    ("caching", "sep-2549-resources-list-caching-hints"): NO_RESOURCES,
    ("caching", "sep-2549-resources-templates-list-caching-hints"): NO_RESOURCES,
}
"""Checks of applicable scenarios that do not succeed, and why."""

MET = {"SUCCESS", "INFO", "SKIPPED"}
_RESULT_DIR = re.compile(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[dict[str, str]]]]:
    """Each scenario's checks, from one run of the whole suite."""
    command = conformance()
    port = free_port()
    process = start_codemode("serve", "tests.conftest:build_host", "--transport", "http", port=port)
    output = tmp_path_factory.mktemp("conformance")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        subprocess.run(
            [*command, "server", "--url", url, "--suite", "all", "-o", str(output)],
            cwd=ROOT,
            capture_output=True,
            timeout=300,
            check=False,  # the scenarios that do not apply fail; each is judged below
        )
    finally:
        process.terminate()
        process.wait(10)
    found: dict[str, list[dict[str, str]]] = {}
    for folder in output.iterdir():
        match = _RESULT_DIR.fullmatch(folder.name)
        assert match, folder.name
        found[match.group(1)] = json.loads((folder / "checks.json").read_text())
    yield found


def test_every_scenario_of_the_suite_is_judged() -> None:
    listing = subprocess.run(
        [*conformance(), "list", "--server"], capture_output=True, text=True, check=True
    ).stdout
    scenarios = set(re.findall(r"^  - ([\w-]+) \[", listing, re.MULTILINE))
    assert scenarios == APPLICABLE | set(NOT_APPLICABLE)
    assert not APPLICABLE & set(NOT_APPLICABLE)


@pytest.mark.parametrize("scenario", sorted(APPLICABLE))
def test_an_applicable_scenario_passes(
    results: dict[str, list[dict[str, str]]], scenario: str
) -> None:
    checks = results[scenario]
    assert checks
    unmet = {
        c["id"]: c.get("errorMessage", c.get("status")) for c in checks if c["status"] not in MET
    }
    expected = {check for (where, check) in UNMET if where == scenario}
    assert set(unmet) == expected, unmet


def test_the_unmet_checks_belong_to_applicable_scenarios() -> None:
    assert {scenario for scenario, _ in UNMET} <= APPLICABLE


def test_the_suite_pinned_is_the_one_ci_installs() -> None:
    assert (
        "@modelcontextprotocol/conformance@0.2.0-alpha.12"
        in Path(ROOT, "scripts/install-test-tools").read_text()
    )
    assert (
        Path(conformance()[1])
        .parents[1]
        .joinpath("package.json")
        .read_text()
        .count('"version": "0.2.0-alpha.12"')
        == 1
    )
