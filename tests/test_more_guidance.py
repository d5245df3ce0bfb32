"""More exact texts: what a model got wrong in review, each with the text that fixes it."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pydantic
import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll
from codemode.payloads import describe_payload
from codemode.testing import ManualClock
from tests.conftest import CANARY, GUARD, eventually

M = "def main():\n"


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("ns.one", summary="One.")
    def one() -> int:
        return 1

    @cm.capability("ns.pair", summary="Two.")
    def pair(*, first: int, second: int = 0) -> list[int]:
        return [first, second]

    with cm:
        yield cm


def error_text(cm: CodeMode, source: str) -> str:
    with pytest.raises(CodeModeError) as caught:
        cm.execute(source, subject="model")
    return str(caught.value)


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            M + "    d = {'items': 1}\n    return d.items\n",
            "invalid program: <codemode>:3:12: AttributeError: 'dict' object has no attribute "
            '\'items\'; to read its key "items", write d["items"]',
        ),
        (
            M + "    return 'a'.upper\n",
            "invalid program: <codemode>:2:12: AttributeError: 'str' object has no attribute "
            "'upper'; str.upper is a method: call it, x.upper(...)",
        ),
        (
            M + "    return ns.one()\nmain()\n",
            "invalid program: <codemode>:3:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            M + "    return 1\nif __name__ == '__main__':\n    main()\n",
            "invalid program: <codemode>:3:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            "import asyncio\nasync def main():\n    return 1\nasyncio.run(main())\n",
            "invalid program: <codemode>:4:1: remove this call of main(): codemode calls main() "
            "itself and returns its value",
        ),
        (
            M + "    return ns.stop()\n",
            'invalid program: <codemode>:2:12: unknown capability "ns.stop"; ns has: one, pair',
        ),
        (
            M + "    return ns.pair(first=1, sort=2)\n",
            'invalid capability arguments: <codemode>:2:12: unknown argument "sort"; ns.pair '
            "takes first, second",
        ),
        (
            "import ns\n" + M + "    return 1\n",
            "invalid program: <codemode>:1:1: ns is a capability namespace, ready to use: remove "
            "the import",
        ),
        (
            M + "    ns = ns.one()\n    return ns\n",
            "invalid program: <codemode>:2:10: UnboundLocalError: cannot access local variable "
            "'ns' where it is not associated with a value; \"ns\" is a capability namespace: give "
            "the variable another name",
        ),
        (
            "async def main():\n    return ns.pair(first=1)[0]\n",
            "invalid program: <codemode>:2:12: TypeError: 'coroutine' object is not subscriptable; "
            "in async def main() a capability call must be awaited: await it, as in "
            "x = await ns.name(...), or gather several with await asyncio.gather(...)",
        ),
        (
            "import asyncio\n" + M + "    return asyncio.gather(ns.one())\n",
            "invalid program: <codemode>:3:12: TypeError: An asyncio.Future, a coroutine or an "
            "awaitable is required; in def main() capability calls return their results "
            "directly; to run them together, define async def main() and await "
            "asyncio.gather(...)",
        ),
        (
            "async def main():\n    return ns.one()\n",
            "invalid program: <codemode>:2:12: main() returned a value that is not JSON: result "
            "is a capability call that was never awaited (await it), which JSON cannot hold",
        ),
        (
            M + "    return ns.one\n",
            "invalid program: <codemode>:2:12: main() returned a value that is not JSON: result "
            "is the capability ns.one itself, not called, which JSON cannot hold",
        ),
        (
            M + "    return vars({})\n",
            "invalid program: <codemode>:2:12: TypeError: vars() got a dict, which is already "
            "one: use it as it is",
        ),
        (
            M + "    return vars([1])\n",
            "invalid program: <codemode>:2:12: TypeError: vars() got a list: turn each item, "
            "[vars(x) for x in items]",
        ),
        (
            M + "    return open('/etc/hostname').read()\n",
            "invalid program: <codemode>:2:12: PermissionError: Permission denied: "
            "'/etc/hostname'; files are not available in the sandbox: use the capabilities",
        ),
    ],
)
def test_review_mistakes_get_the_text_that_fixes_them(
    host: CodeMode, source: str, text: str
) -> None:
    assert error_text(host, source) == text


def test_awaited_sleeps_run_side_by_side_and_a_stop_ends_them() -> None:
    """Five gathered sleeps are armed together (one after another, one would be armed at
    a time) and all end when the clock passes the one moment they share."""
    gathered = (
        "import asyncio\nasync def main():\n"
        "    await asyncio.gather(*[asyncio.sleep(0.4) for _ in range(5)])\n    return 1\n"
    )
    clock = ManualClock()
    with ThreadPoolExecutor(1) as callers, CodeMode(authorizer=AllowAll(), clock=clock) as cm:
        answer = callers.submit(cm.execute, gathered, subject="model")
        assert eventually(lambda: clock.pending == 6)  # the execution's deadline and five sleeps
        clock.advance(0.4)
        assert answer.result(GUARD).value == 1


def test_sleeps_and_vars_count_as_host_calls_not_capability_calls() -> None:
    cm = CodeMode(authorizer=AllowAll(), limits=Limits(max_capability_calls=1))
    with cm:
        text = error_text(
            cm,
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    a: int\n"
            + M
            + "    for _ in range(5000):\n        vars(P(1))\n",
        )
    assert text == "resource limit exceeded: host calls (limit 4100) at <codemode>:7:9"


class Creds(pydantic.BaseModel):
    token_CANARY: str


class Account(pydantic.BaseModel):
    name: str
    creds: Creds = pydantic.Field(exclude=True)


def test_types_behind_excluded_fields_are_never_named() -> None:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("acct.get", summary="An account.")
    def get() -> Account:
        return Account(name="a", creds=Creds(token_CANARY=CANARY))

    with cm:
        shapes = describe_payload(cm.describe("acct.get"))["shapes"]
        assert shapes == ["Account: object (name: str), read as r.name"]
        own = "    raise AttributeError(\"'Creds' object has no attribute 'x'\")\n"
        text = error_text(cm, M + "    acct.get()\n" + own)
        assert "token" not in text and "CANARY" not in text


def _one() -> int:
    return 1


class HidesAdmin(AllowAll):
    def can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        return not capability_name.startswith("admin.")


@pytest.mark.parametrize(
    ("call", "hint"),
    [
        ("admin.wipe()", "the capability namespaces are records"),
        ("recordz.keys()", 'did you mean "records"?'),
        ("jsn.dumps(1)", 'did you mean "json"?'),
        ("lenn([])", 'did you mean "len"?'),
    ],
)
def test_a_name_used_as_a_namespace_is_never_matched_to_a_builtin(call: str, hint: str) -> None:
    """`admin.wipe()` for a subject who cannot see `admin` once got `did you mean "min"?`:
    a namespace is suggested among namespaces, modules and the program's own names."""
    with CodeMode(authorizer=HidesAdmin(), hide_forbidden=True) as cm:
        for name in ("records.keys", "admin.wipe"):
            cm.capability(name, summary="A capability.")(_one)
        with pytest.raises(CodeModeError) as caught:
            cm.execute(f"{M}    return {call}", subject="alice")
    name = call.split(".")[0].split("(")[0]
    assert str(caught.value) == (
        f"invalid program: <codemode>:2:12: NameError: name '{name}' is not defined; {hint}"
    )
