"""A host whose calls take their time, for the playground's live progress: one that fails
and one the policy denies, each with a canary no note may carry."""

from __future__ import annotations

import asyncio

from codemode import CodeMode
from codemode.authz import AuthorizationRequest, Denied

CANARY = "CANARY-web-progress-4c1d"
"""In the failing handler's error and the policy's reason: a note never carries it."""

STEP_SECONDS = 0.3
"""How long `slow.step` takes: longer than the 0.25 s between two notes."""


def deny_the_vault(request: AuthorizationRequest) -> None:
    if request.capability_name == "slow.vault":
        raise Denied(f"rule vault-closed matched: {CANARY}")


def build() -> CodeMode:
    cm = CodeMode(authorizer=deny_the_vault, name="slow")

    @cm.capability("slow.step", summary="Take one step, slowly.")
    async def step(*, i: int) -> int:
        await asyncio.sleep(STEP_SECONDS)
        return i

    @cm.capability("slow.fail", summary="Fail, naming a secret.")
    def fail() -> int:
        raise RuntimeError(f"database password rejected: {CANARY}")

    @cm.capability("slow.vault", summary="Denied by the policy.")
    def vault() -> int:
        raise AssertionError("a denied call never reaches its handler")

    return cm
