"""The authorization guide's table is what the running example does, row by row."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from codemode import CodeModeError
from codemode.authz import Authorizer
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer
from codemode.demo import create
from codemode.events import CallAuthorized, CallDenied, Event

DOCS = Path(__file__).parents[2] / "docs" / "guides"
POLICY = DOCS / "demo-policy"
READ = 'def main():\n    return instances.get(sandbox="dev", name="gui").name'
START_DEV = (
    'def main():\n    return instances.set_state(sandbox="dev", name="db", state="running").state'
)
STOP_PROD = (
    'def main():\n    return instances.set_state(sandbox="prod", name="db", state="stopped").state'
)
SCENARIOS = [
    ("alice, a reader, reads an instance", "alice", READ),
    ("alice starts an instance", "alice", START_DEV),
    ("bob, an admin, starts an instance", "bob", START_DEV),
    ("bob stops a prod instance", "bob", STOP_PROD),
    ("`local`, a subject with no role, reads", "local", READ),
    ("josé, a reader named in non-ASCII letters, reads", "josé", READ),
]


def cedar() -> tuple[Authorizer, Callable[[str], str | None]]:
    """The guide's Cedar policy, and what its log line for a decision says."""

    def logged(line: str) -> str | None:
        match = re.match(r"cedar (\w+): .* policies=(.*) errors=", line)
        return f"`cedar {match[1]}`, policies: {match[2]}" if match else None

    authorizer = CedarAuthorizer.from_files(POLICY / "policies.cedar", POLICY / "entities.json")
    return authorizer, logged


def rego() -> tuple[Authorizer, Callable[[str], str | None]]:
    """The guide's Rego policy, and what its log line for a decision says."""

    def logged(line: str) -> str | None:
        match = re.match(r"rego (\w+): ", line)
        return f"`rego {match[1]}`" if match else None

    authorizer = RegoAuthorizer.from_files(POLICY / "policy.rego", data_file=POLICY / "data.json")
    return authorizer, logged


def table(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    policy: Callable[[], tuple[Authorizer, Callable[[str], str | None]]],
) -> str:
    """Run each scenario on the demo host under one of the guide's policies; render the rows."""
    events: list[Event] = []
    authorizer, logged = policy()
    rows = [
        "| situation | the model sees | the audit event | the host log (info, the default level) |",
        "|---|---|---|---|",
    ]
    with create(tmp_path / "demo.sqlite3", authorizer=authorizer) as cm:
        if isinstance(authorizer, CedarAuthorizer):
            authorizer.validate(cm.catalog.enabled.values())
        cm.configure(on_event=events.append)
        caplog.set_level(logging.INFO, logger="codemode.authz")
        for situation, subject, source in SCENARIOS:
            events.clear()
            caplog.clear()
            try:
                cm.execute(source, subject=subject)
                seen = "the result"
            except CodeModeError as error:
                seen = f"`{error}`"
            decided = next(e for e in events if isinstance(e, CallAuthorized | CallDenied))
            audit = (
                "`call_authorized`"
                if isinstance(decided, CallAuthorized)
                else f"`call_denied`: `{decided.reason}`"
            )
            line = next(filter(None, (logged(r.getMessage()) for r in caplog.records)))
            rows.append(f"| {situation} | {seen} | {audit} | {line} |")
    return "\n".join(rows)


@pytest.mark.parametrize("policy", [cedar, rego])
def test_the_guide_shows_what_the_example_does(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    policy: Callable[[], tuple[Authorizer, Callable[[str], str | None]]],
) -> None:
    expected = table(tmp_path, caplog, policy)
    guide = (DOCS / "authorization.md").read_text()
    assert expected in guide, f"the guide's table should read:\n{expected}"


def test_the_guide_shows_the_rego_policy_file_as_it_is() -> None:
    guide = (DOCS / "authorization.md").read_text()
    shown = guide.split("```rego\n", 1)[1].split("```", 1)[0]
    assert shown == (POLICY / "policy.rego").read_text()
