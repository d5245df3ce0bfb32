"""What a review of the new checks found: each hostile shape, contained."""

from __future__ import annotations

import asyncio
import threading
import time
import tracemalloc

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from codemode.testing import running_engine
from codemode.values import MAX_SUSPECTS, to_json
from tests.conftest import run_error

P = "def main():\n"


def test_walking_a_value_costs_its_size_whatever_its_keys() -> None:
    """Paths are rendered only when shown, and suspects stop at a bound: a value with a
    100 kB key over 2,000 suspect strings would need 200 MB of eager paths."""
    value = {"A" * 100_000: ["ns.one"] * 2_000}
    found: list[tuple[str, str]] = []
    tracemalloc.start()
    try:
        to_json(value, max_depth=10, root="result", suspect=lambda s: True, suspects=found)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found) == MAX_SUSPECTS
    assert peak < 30 * 1024 * 1024


def test_a_string_inside_an_object_is_never_read_back_through_the_object() -> None:
    """The check after main() reads suspect strings back only through lists and dicts: an
    object's own `__getitem__` (which loops here) never runs after the program."""
    source = (
        "from dataclasses import dataclass\n@dataclass\nclass D:\n    a: str\n"
        "    def __getitem__(self, key):\n        while True:\n            pass\n"
        + P
        + "    return [D('ns.one'), 'ns.one']\n"
    )
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("ns.one", summary="One.")
        def one() -> int:
            return 1

        assert cm.execute(source, subject="a").value == [{"a": "ns.one"}, "ns.one"]


def test_a_deep_base_class_expression_is_a_clean_error() -> None:
    def source(terms: int) -> str:
        return "class A(" + "+".join(["1"] * terms) + "):\n    pass\n" + P + "    return 1\n"

    with CodeMode(authorizer=AllowAll()) as cm:
        text = str(run_error(cm, source(150)))
        deeper = str(run_error(cm, source(400)))
    assert text.startswith("invalid program: <codemode>:1:1: class inheritance is not supported")
    assert "(class A(1 + 1 + " in text and " + ...)): use a plain class" in text
    assert deeper == (
        "invalid program: <codemode>:1:9: "
        "the program is too deeply nested: use variables or helper functions"
    )


@pytest.mark.anyio
async def test_callers_that_give_up_while_waiting_for_a_slot_leave_nothing_stuck() -> None:
    limits = Limits(max_concurrent_executions=1, max_execution_seconds=5)
    with CodeMode(authorizer=AllowAll(), limits=limits) as cm:
        busy = threading.Thread(
            target=lambda: cm.execute("import time\n" + P + "    time.sleep(2)\n", subject="a")
        )
        busy.start()
        time.sleep(0.3)
        waiting = [
            asyncio.create_task(cm.execute_async(P + "    return 1\n", subject="b"))
            for _ in range(10)
        ]
        await asyncio.sleep(0.3)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        await asyncio.sleep(0.3)
        engine = running_engine(cm)
        assert engine.pool.abandoned() == 0
        busy.join()
        assert cm.execute(P + "    return 'next'\n", subject="c").value == "next"


def test_a_stopped_sleep_is_not_host_code_left_running() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        for source in (
            "import time\n" + P + "    time.sleep(8)\n",
            "import asyncio\nasync def main():\n    await asyncio.sleep(8)\n",
        ):

            async def cancel_soon(source: str = source) -> None:
                task = asyncio.create_task(cm.execute_async(source, subject="a"))
                await asyncio.sleep(0.5)
                task.cancel()
                with pytest.raises((asyncio.CancelledError, CodeModeError)):
                    await task

            asyncio.run(cancel_soon())
            time.sleep(0.2)
            assert running_engine(cm).pool.abandoned() == 0
