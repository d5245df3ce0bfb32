"""One REST API's client: a failure that is not the API's answer says its kind only, calls
run side by side in one pool that keeps no cookie, a body is bounded as it inflates, and
the timeout bounds the whole exchange."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from tests.conftest import assert_no_canary
from tests.sources.openapi.conftest import fail, run
from tests.sources.openapi.pets import SPEC, PetStore

pytestmark = pytest.mark.slow


def test_failures_that_are_not_the_apis_answer_say_their_kind_only(
    cm: CodeMode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "codemode"):
        failures = {
            body: fail(cm, body)
            for body in (
                "return pets.boom()",
                "return pets.broken()",
                "return pets.away()",
                "return pets.slow(seconds=5)",
                "return pets.huge()",
                "return pets.bomb()",
                'return pets.bomb(encoding="br")',
            )
        }
    assert [e.detail for e in failures.values()] == [
        "HTTP 500 Internal Server Error",
        "the API's response does not match its declared schema",
        "the API redirected to another origin",
        "the API did not answer within 2 s",
        "the API's response is too large",
        "the API's response is too large",
        "the API's response cannot be read",
    ]
    assert_no_canary(*failures.values())
    assert "answered 500" in caplog.text and "redirected" in caplog.text


def test_an_unreachable_api_is_a_connection_failure(store: PetStore) -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        spec = _document(store)
        cm.add_openapi("pets", spec=spec, base_url="http://127.0.0.1:9/v1", include=["readme"])
        assert str(fail(cm, "return pets.readme()")) == (
            "capability failed: the connection to the API failed"
        )


def test_gathered_calls_run_side_by_side(cm: CodeMode, store: PetStore) -> None:
    store.most_in_flight.clear()
    source = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(*[pets.slow(seconds=0.3) for _ in range(4)])\n"
    )
    assert cm.execute(source, subject="alice").value == [{"waited": 0.3}] * 4
    assert store.most_in_flight[0.3] == 4


def _document(store: PetStore) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(SPEC.replace("common.yaml#/Owner", "#/components/schemas/Pet")))


def test_a_compressed_body_is_bounded_as_it_inflates(cm: CodeMode) -> None:
    import tracemalloc

    fail(cm, "return pets.bomb()")  # warm: the pool's connection is made
    tracemalloc.start()
    try:
        error = fail(cm, "return pets.bomb()")  # ~100 KB of gzip, 100 MB inflated
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.detail == "the API's response is too large"
    assert peak < 32 * 2**20  # the 8 MiB bound and its copies, never the 100 MB


def test_the_pool_keeps_no_cookie_from_one_caller_for_the_next(cm: CodeMode) -> None:
    run(cm, 'return pets.login(user="alice")')  # the API sets session=alice
    assert run(cm, "return pets.whoami()")["cookie"] is None


def test_the_timeout_bounds_the_whole_exchange(cm: CodeMode) -> None:
    assert fail(cm, "return pets.drip()").detail == "the API did not answer within 2 s"
