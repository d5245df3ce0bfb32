"""A small host with canaries planted on every host-side failure path."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import pytest
import uvicorn
from hypothesis import settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import codemode
import codemode.testing
from codemode import AgentError, CallContext, CodeMode, Limits, serving
from codemode.authz import AllowAll, AuthorizationRequest, Denied
from codemode.testing import ManualClock

settings.register_profile(
    "codemode", max_examples=200, derandomize=True, database=None, deadline=None
)
settings.load_profile("codemode")
"""Every property test draws the same 200 examples on every machine, CI and a laptop alike
(derandomized, no example database): a failure found once is found again, and a run takes
the same time everywhere. A test asks for fewer where each example runs a program."""

CANARY = "CANARY-db-password-hunter2"
"""Host text that must never reach a program, an error or any model-facing field."""


class Record(TypedDict):
    key: str
    count: int


class Filter(TypedDict):
    owner: str
    tags: list[str]


@dataclass
class Instance:
    name: str
    nics: list[str]


def policy(request: AuthorizationRequest) -> None:
    """Denies records.secret, fails on records.flaky, allows the rest."""
    if request.capability_name == "records.secret":
        raise Denied(f"rule forbid-secret matched for {request.subject}: {CANARY}")
    if request.capability_name == "records.flaky":
        raise RuntimeError(f"policy store unreachable: {CANARY}")


def build_host(limits: Limits | None = None) -> CodeMode:
    cm = CodeMode(authorizer=policy, limits=limits, disabled={"records.hidden"})

    @cm.capability(
        "records.lookup",
        id="records.entry.lookup",
        summary="Look up one record by key.",
        search_terms=["find record"],
        annotations={"readOnlyHint": True},
    )
    def lookup(*, key: str, limit: int | None = None) -> Record:
        return {"key": key, "count": limit or 0}

    @cm.capability("records.search", summary="Search records.")
    def search_records(
        *,
        filter: Filter,
        order: Literal["asc", "desc"] = "asc",
        labels: dict[str, str] | None = None,
    ) -> list[Record]:
        return [
            {"key": f"{filter['owner']}-{tag}", "count": i} for i, tag in enumerate(filter["tags"])
        ]

    @cm.capability("instance.get", summary="Get one instance.")
    async def get_instance(*, sandbox: str, name: str) -> Instance:
        await asyncio.sleep(0)
        return Instance(name=name, nics=["eth0", "eth1"])

    @cm.capability("records.fail", summary="Always fails.")
    def fail() -> int:
        raise RuntimeError(f"db password rejected {CANARY}")

    @cm.capability("records.missing", summary="Reports a missing record.")
    def missing(*, key: str) -> Record:
        raise AgentError(f'record "{key}" does not exist')

    @cm.capability("records.secret", summary="Denied by policy.")
    def secret() -> str:
        raise AssertionError("a denied call must never reach its handler")

    @cm.capability("records.flaky", summary="Its policy fails.")
    def flaky() -> str:
        raise AssertionError("a call whose policy failed must never reach its handler")

    @cm.capability("records.hidden", summary="Disabled in this deployment.")
    def hidden() -> str:
        return CANARY

    @cm.capability("records.whoami", summary="The caller's context.")
    def whoami(*, ctx: CallContext) -> list[str]:
        return [ctx.subject, ctx.capability, ctx.capability_id]

    @cm.capability("clock.wait", summary="Waits some milliseconds.")
    async def wait(*, ms: int) -> int:
        await asyncio.sleep(ms / 1000)
        return ms

    @cm.capability("records.badresult", summary="Returns the wrong type.")
    def bad_result() -> int:
        return f"not an int {CANARY}"  # type: ignore[return-value]

    @cm.capability("host.crash", summary="Kills the sandbox workers of this process.")
    def crash() -> int:
        for pid in monty_workers():
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        return 1

    return cm


def monty_workers() -> list[int]:
    """Process ids of this process's sandbox workers: its children that run the monty
    worker, never the servers a session-wide fixture started (redis-server, nginx)."""
    me = str(os.getpid())
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[1] == me and b"monty" in command:
            pids.append(int(stat.parent.name))
    return pids


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished while the test runs. OpenTelemetry takes one tracer provider per
    process (setting another is ignored), so the first test to trace installs it and each
    test adds an exporter of its own, stopped when the test ends."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.fixture(scope="session")
def cm() -> Iterator[CodeMode]:
    host = build_host()
    yield host
    host.close()


def run_error(cm: CodeMode, source: str, subject: str = "alice") -> codemode.CodeModeError:
    """Run a program that must fail and return its error."""
    with pytest.raises(codemode.CodeModeError) as info:
        cm.execute(source, subject=subject)
    return info.value


@contextlib.contextmanager
def hanging(
    name: str = "h.hang", limits: Limits | None = None, clock: ManualClock | None = None
) -> Iterator[HangingHost]:
    """A host whose one capability blocks its handler thread until `release` is set;
    leaving the block releases it, so no handler thread outlives the test. `entered` is
    set once the handler runs, `returned` once it returns: a test asserts what was
    answered before the handler returned, never how long anything took."""
    release, entered, returned = threading.Event(), threading.Event(), threading.Event()
    cm = CodeMode(authorizer=AllowAll(), limits=limits, clock=clock)

    def hang() -> int:
        entered.set()
        release.wait(GUARD)
        returned.set()
        return 1

    cm.capability(name, summary="Blocks until released.")(hang)
    try:
        with cm:
            yield HangingHost(cm, release, entered, returned)
    finally:
        release.set()


@dataclass(frozen=True)
class HangingHost:
    cm: CodeMode
    release: threading.Event
    entered: threading.Event
    returned: threading.Event


def close_while_running(cm: CodeMode, source: str, running: threading.Event) -> list[str]:
    """Run `source` on a thread and close `cm` once `running` is set (the program is
    mid-run); what the caller got once close() returned and the caller was answered."""
    outcome: list[str] = []

    def run() -> None:
        try:
            cm.execute(source, subject="a")
        except BaseException as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=run)
    thread.start()
    assert running.wait(GUARD), "the program never started"
    cm.close()
    thread.join(GUARD)
    return outcome


GUARD = 30.0
"""How long a test waits for what must come: a guard against a hang, never a bound the
code is held to (what must come comes at once, or when a test moves its clock)."""


def eventually(found: Callable[[], object], guard: float = GUARD) -> object:
    """What `found` gives once it gives something (delivered off the test's thread, or
    written by another process), or None once `guard` seconds of polls went by: a guard
    against a hang, counted in polls rather than read off a clock."""
    stop = threading.Event()
    for _ in range(int(guard * 100)):
        if value := found():
            return value
        stop.wait(0.01)
    return None


def assert_no_canary(*texts: object) -> None:
    codemode.testing.assert_no_canary(CANARY, *texts)


NPM_TOOLS = Path(os.environ.get("CODEMODE_NPM_TOOLS", Path.home() / ".cache" / "codemode" / "npm"))
"""Where `scripts/install-test-tools` installs the npm packages tests drive (outside the
repository)."""


def system_tool(path: str | Path, install: str) -> Path:
    """A program a test drives for real, or a skip that says how to install it.

    Where `CODEMODE_REQUIRE_SYSTEM_TOOLS=1` (set by `.ci/run` once
    scripts/install-test-tools has installed them all), a missing one fails the test
    instead: CI never skips a suite.
    """
    found = Path(path)
    if found.exists():
        return found
    reason = f"{found} is missing: {install}"
    if os.environ.get("CODEMODE_REQUIRE_SYSTEM_TOOLS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


NPM_INSTALL = "run scripts/install-test-tools, which installs it and Node.js 22 there"
_ARCH = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "x64")


def node_script(*path: str) -> list[str]:
    """The command line that runs the npm package script at `path` under NPM_TOOLS on
    Node.js 22 (both installed by scripts/install-test-tools), or a skip that says how to install them."""
    modules = NPM_TOOLS / "node_modules"
    node = system_tool(modules / f"node-linux-{_ARCH}" / "bin" / "node", NPM_INSTALL)
    return [str(node), str(system_tool(modules.joinpath(*path), NPM_INSTALL))]


def inspector() -> list[str]:
    """The MCP Inspector's command line."""
    launcher = ("@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
    return [*node_script(*launcher), "--cli"]


def conformance() -> list[str]:
    """The MCP conformance suite's command line."""
    return node_script("@modelcontextprotocol", "conformance", "dist", "index.js")


def children(pid: int) -> list[str]:
    """The live child processes of `pid`, as `pid command` lines (zombies left out)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.append(f"{stat.parent.name} {command.strip()[:120]}")
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No test leaves a process behind: when the run ends, the test process has no child
    left (servers, browsers, sandbox workers), or the run fails and names them."""
    eventually(lambda: not children(os.getpid()), guard=10)
    left = children(os.getpid())
    if left:
        print("\nprocesses left behind by the tests:\n  " + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def redis_kept(client: Any, key: bytes) -> bytes | None:
    """What the Redis server behind `client` (a `redis.Redis`) holds under `key`: a value,
    or the members of a group (`Store.admit` keeps one as a sorted set), joined."""
    if client.type(key) == b"zset":
        return b" ".join(client.zrange(key, 0, -1))
    return cast(bytes | None, client.get(key))


def emptied_redis(url: str, database: int) -> str:
    """The URL of `database` (1-15) on the Redis server at `url`, emptied: a test that keeps
    data there starts from nothing, whatever an earlier test left."""
    import redis

    address = f"{url.rsplit('/', 1)[0]}/{database}"
    client = redis.Redis.from_url(address)
    try:
        client.flushdb()
    finally:
        client.close()
    return address


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's redis-server on a free loopback port, keeping nothing on disk."""
    binary = system_tool(
        shutil.which("redis-server") or "/usr/bin/redis-server",
        "apt-get install redis-server (or run scripts/install-test-tools)",
    )
    from tests.e2e.conftest import free_port, wait_for_port  # it imports this module

    port = free_port()
    folder = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        [
            str(binary),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[uvicorn.Config]:
    """The configurations `codemode serve` would run, instead of running them."""
    configs: list[uvicorn.Config] = []
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: configs.append(self.config)
    )
    listen = serving.listen  # a free port instead of the one asked for, which may be taken
    monkeypatch.setattr(serving, "listen", lambda host, port: listen(host, 0))
    return configs
