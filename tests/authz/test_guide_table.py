"""The authorization guide's table is what the running example does, row by row."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from codemode import CodeModeError
from codemode.authz.cedar import CedarAuthorizer
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
    ("`local`, a subject with no entity, reads", "local", READ),
    ("josé, a reader named in non-ASCII letters, reads", "josé", READ),
]


def table(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> str:
    """Run each scenario on the demo host under the guide's policies; render the rows."""
    events: list[Event] = []
    authorizer = CedarAuthorizer.from_files(POLICY / "policies.cedar", POLICY / "entities.json")
    rows = [
        "| situation | the model sees | the audit event | the host log (info, the default level) |",
        "|---|---|---|---|",
    ]
    with create(tmp_path / "demo.sqlite3", authorizer=authorizer) as cm:
        authorizer.validate(cm.catalog.enabled.values())
        cm.on_event = events.append
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
            line = next(
                r.getMessage() for r in caplog.records if r.getMessage().startswith("cedar")
            )
            match = re.match(r"cedar (\w+): .* policies=(.*) errors=", line)
            assert match is not None
            logged = f"`cedar {match[1]}`, policies: {match[2]}"
            rows.append(f"| {situation} | {seen} | {audit} | {logged} |")
    return "\n".join(rows)


def test_the_guide_shows_what_the_example_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = table(tmp_path, caplog)
    guide = (DOCS / "authorization.md").read_text()
    assert expected in guide, f"the guide's table should read:\n{expected}"
