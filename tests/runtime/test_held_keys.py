"""A KeyError on a dict whose type declares no keys names the keys the value has: the
program already holds that dict, so they are its own data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from tests.conftest import run_error
from tests.gateway.conftest import FIXTURE, PYTHON


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("files.info", summary="A file's facts.", annotations={"readOnlyHint": True})
    def info(*, path: str) -> dict[str, Any]:
        return {"kind": "file", "size": len(path), "meta": {"owner": "ada"}}

    cm.add_mcp_server("up", command=PYTHON, args=[FIXTURE], include=["json_text"])
    with cm:
        yield cm


def failure(cm: CodeMode, body: str) -> str:
    return str(run_error(cm, "def main():\n" + body))


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            "    r = files.info(path='a')\n    return r['bytes']\n",
            "invalid program: <codemode>:3:12: KeyError: 'bytes'; the result has: kind, size, meta",
        ),
        (
            "    return files.info(path='a')['meta']['name']\n",
            "invalid program: <codemode>:2:12: KeyError: 'name'; the result has: owner",
        ),
        (
            "    r = files.info(path='a')\n    return r['sise']\n",
            "invalid program: <codemode>:3:12: KeyError: 'sise'; did you mean \"size\"? "
            "the result has: kind, size, meta",
        ),
        (  # an upstream tool without an output schema, whose text is JSON
            "    page = up.json_text()\n    return page['text']\n",
            "invalid program: <codemode>:3:12: KeyError: 'text'; did you mean \"next\"? "
            "the result has: items, next",
        ),
    ],
)
def test_the_keys_of_the_value_are_named(host: CodeMode, body: str, says: str) -> None:
    assert failure(host, body) == says


def test_a_dict_the_program_built_itself_gets_no_list(host: CodeMode) -> None:
    """Only a capability's result, as the call gave it: a dict of the program's own making
    or one it changed since is not described from the call's value."""
    assert failure(host, "    r = {'a': 1}\n    return r['b']\n") == (
        "invalid program: <codemode>:3:12: KeyError: 'b'"
    )
    changed = "    r = files.info(path='a')\n    r['bytes'] = 1\n    r.pop('kind')\n    return r['kind']\n"
    assert failure(host, changed) == "invalid program: <codemode>:5:12: KeyError: 'kind'"


def test_an_expected_failure_is_one_line_of_the_host_log(caplog: pytest.LogCaptureFixture) -> None:
    """Its message may quote an upstream, whose line breaks must not forge log lines."""
    import logging

    from codemode.errors import ExpectedError

    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("svc.call", summary="Fails as an unreachable service does.")
    def call() -> int:
        raise ExpectedError("refused\n2026-12-01 INFO codemode: forged line")

    with cm, caplog.at_level(logging.WARNING, logger="codemode"):
        assert failure(cm, "    return svc.call()\n").startswith("capability failed")
    [record] = [r for r in caplog.records if "svc.call failed" in r.getMessage()]
    assert record.getMessage().endswith("refused\\n2026-12-01 INFO codemode: forged line")
