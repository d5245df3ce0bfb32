"""Tasks across replicas: two `codemode serve` replicas sharing one real Redis store, as
the deployment guide runs them. The replica that does not run a task answers its
`tasks/get` and passes on its `tasks/cancel`; a replica killed outright leaves its task
`failed` (lost) within its lease and a beat, rather than working forever."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from codemode.continuations import TASK_LOST
from tests.conftest import eventually
from tests.e2e.test_tasks import ENDLESS, serve
from tests.mcp.test_tasks import PROGRESS, Caller

LEASE_SECONDS, BEAT_SECONDS = 5.0, 1.0
"""`Tasks`' defaults, which `codemode serve` runs with."""


@pytest.fixture
def replicas(tmp_path: Path, redis_url: str) -> Iterator[list[tuple[Caller, Any]]]:
    """Two replicas with one store and one sealing key: a client of each (as alice), and
    its process."""
    env = {"CODEMODE_REQUEST_STATE_KEY": secrets.token_hex(32)}
    started = [serve(tmp_path, "--store", redis_url, **env) for _ in range(2)]
    clients = [httpx2.Client(base_url=base, timeout=30) for base, _ in started]
    try:
        yield [
            (Caller(client), process) for client, (_, process) in zip(clients, started, strict=True)
        ]
    finally:
        for client in clients:
            client.close()
        for _, process in started:
            if process.poll() is None:
                process.terminate()
            process.wait(10)


def test_the_other_replica_reads_and_cancels_a_task(replicas: list[tuple[Caller, Any]]) -> None:
    (owner, _), (other, _) = replicas
    task_id = owner.execute(ENDLESS)["taskId"]
    working = other.until(task_id, lambda t: "statusMessage" in t)
    assert working["status"] == "working"
    assert PROGRESS.fullmatch(working["statusMessage"]), working["statusMessage"]
    acknowledged = other.post("tasks/cancel", {"taskId": task_id}, name=task_id)
    assert acknowledged["resultType"] == "complete"
    done = other.ended(task_id)  # the owner's beat found the cancel
    assert (done["status"], done["statusMessage"]) == ("cancelled", "execution canceled")
    assert done["result"]["structuredContent"]["error"]["code"] == "canceled"
    assert owner.get(task_id)["status"] == "cancelled"


def test_a_killed_replicas_task_reads_lost_within_its_lease_and_a_beat(
    replicas: list[tuple[Caller, Any]],
) -> None:
    (owner, process), (other, _) = replicas
    task_id = owner.execute(ENDLESS)["taskId"]
    other.until(task_id, lambda t: "statusMessage" in t)
    process.kill()  # SIGKILL: nothing of it runs to say it stopped
    process.wait(10)

    def lost() -> dict[str, Any] | None:
        task = other.get(task_id)
        return task if task["status"] != "working" else None

    # The guard is the bound here: the lease lapses at most LEASE_SECONDS after the
    # last beat, and a beat is BEAT_SECONDS (with one more for a loaded machine).
    task = eventually(lost, guard=LEASE_SECONDS + 2 * BEAT_SECONDS)
    assert isinstance(task, dict), "the task still reads working"
    assert (task["status"], task["statusMessage"]) == ("failed", TASK_LOST)
    assert task["error"] == {"code": -32603, "message": TASK_LOST}
    assert "result" not in task
