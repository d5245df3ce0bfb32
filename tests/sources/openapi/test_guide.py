"""docs/guides/openapi.md shows what the model sees: these tests keep it in step."""

from __future__ import annotations

import re
from pathlib import Path

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.payloads import describe_payload, model_text
from tests.sources.openapi.test_document import FAILURE_TEXTS

ROOT = Path(__file__).parents[3]
GUIDE = (ROOT / "docs" / "guides" / "openapi.md").read_text()
SPEC = ROOT / "docs" / "guides" / "tickets.yaml"


def test_the_describe_the_guide_shows_is_the_one_the_model_gets() -> None:
    shown = GUIDE.split("`describe_api` shows an operation")[1].split("```json\n")[1]
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_openapi("tickets", spec=SPEC, auth={"bearer": "dev-token"})
        described = model_text(describe_payload(cm.describe("tickets.get_ticket")))
    assert shown.split("\n```")[0] == described


def test_the_guides_patterns_choose_what_it_says() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        assert cm.add_openapi("a", spec=SPEC, exclude=["DELETE /*"]) == (
            "a.list_tickets",
            "a.get_ticket",
            "a.close_ticket",
        )
        assert cm.add_openapi("b", spec=SPEC, include=["tickets"]) == (
            "b.list_tickets",
            "b.get_ticket",
            "b.close_ticket",
        )


def test_the_error_table_lists_every_failure_text() -> None:
    table = GUIDE.split("## Errors")[1].split("## Security")[0]
    shown = set(re.findall(r"`capability failed: ([^`]+)`", table))
    assert set(FAILURE_TEXTS) <= shown, set(FAILURE_TEXTS) - shown
