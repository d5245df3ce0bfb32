"""Every shell command and Python block in the README and docs/ runs as written.

The fenced blocks are read out of the pages (as pydantic's docs tests do). Python blocks
run in a folder that holds what the pages say to create (the README's `myhost.py`, the
guide's `tokens` file) beside the repository's `docs/`; a block that is a program
(`def main():`) runs against the host it is written for. Each `uv run codemode ...`
command runs as the project's own command line: a server until it listens (then it is
stopped), anything else until it exits 0.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import runpy
import shlex
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.demo import create
from tests.e2e.conftest import ROOT, codemode_command, free_port, wait_for_port
from tests.sources.openapi.pets import served

_spec = importlib.util.spec_from_file_location("tickets_api", ROOT / "docs/guides/tickets_api.py")
assert _spec is not None and _spec.loader is not None
tickets_api = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tickets_api)

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SELF = {"uv run pytest"}
"""Commands a test cannot run: the test suite itself."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(language: str) -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(page, line, language, match.group(2)))
    return found


def commands(block: Block) -> list[str]:
    """The command lines of a shell block (continuations joined, comments dropped)."""
    joined = block.text.replace("\\\n", " ")
    lines = [line.split("  #")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


README_HOST = blocks("python")[0].text
GUIDE_TOKENS = (ROOT / "docs" / "guides" / "authorization.md").read_text()
TOKENS = GUIDE_TOKENS.split("A token file holds one `subject:token` per line:\n\n```text\n")[1]
TOKENS = TOKENS.split("```", 1)[0]
GATEWAY = (ROOT / "docs" / "guides" / "mcp-gateway.md").read_text()
SERVERS = GATEWAY.split("`servers.json` beside the `docs` folder:\n\n```json\n")[1].split("```")[0]
SHAPES = GATEWAY.split("`shapes.json` beside the `docs` folder:\n\n```json\n")[1].split("```")[0]
OPENAPI = (ROOT / "docs" / "guides" / "openapi.md").read_text()
APIS = OPENAPI.split("`apis.json`, beside the `docs` folder:\n\n```json\n")[1].split("```")[0]
SERVING = ("serve", "demo", "proxy")
"""Commands that serve until stopped: each is run until it listens."""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project folder as the pages set it up: myhost.py, tokens, servers.json, the
    shapes.json a proxy kept, and the docs beside."""
    (tmp_path / "myhost.py").write_text(README_HOST)
    (tmp_path / "tokens").write_text(TOKENS)
    (tmp_path / "servers.json").write_text(SERVERS)
    (tmp_path / "shapes.json").write_text(SHAPES)
    (tmp_path / "apis.json").write_text(APIS)
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    monkeypatch.chdir(tmp_path)
    # `python` in the pages' commands is the one with the project installed, as under uv.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    # The key the guides have every replica export before it names a shared store.
    monkeypatch.setenv("CODEMODE_REQUEST_STATE_KEY", "docs-" + "0" * 59)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path


@contextlib.contextmanager
def host_for(block: Block) -> Iterator[CodeMode]:
    """The host a program block is written for: the README's, a guide's, or the demo."""
    if block.page.name == "README.md":
        module = types.ModuleType("myhost")
        exec(compile(README_HOST, "myhost.py", "exec"), module.__dict__)
        cm: CodeMode = module.cm
        with cm:
            yield cm
    elif block.page.name == "mcp-gateway.md":  # the guide's notes server, behind a proxy
        with CodeMode(authorizer=AllowAll()) as proxy:
            proxy.add_mcp_server(
                "notes", command="python", args=["docs/guides/notes_server.py", "notes"]
            )
            yield proxy
    elif block.page.name == "approvals.md":  # the guide's host, fresh
        approvals: CodeMode = runpy.run_path(str(ROOT / "docs/guides/approvals_host.py"))["cm"]
        with approvals:
            yield approvals
    elif block.page.name == "openapi.md":  # the guide's tickets API, on loopback
        with (
            served(tickets_api.create_app, "dev-token") as url,
            CodeMode(authorizer=AllowAll()) as rest,
        ):
            rest.add_openapi(
                "tickets",
                spec="docs/guides/tickets.yaml",
                base_url=url,
                auth={"bearer": "dev-token"},
            )
            yield rest
    else:
        with create(Path(os.environ["XDG_DATA_HOME"]) / "demo.sqlite3") as demo:
            yield demo


@pytest.mark.parametrize("block", blocks("python"), ids=str)
def test_python_blocks_run(block: Block, folder: Path) -> None:
    if block.text.startswith("def main():"):
        with host_for(block) as cm:
            cm.execute(block.text, subject="alice")
        return
    with serving_for(block, folder) as text:
        _run_block(block, text)


SERVED = "http://127.0.0.1:8000/mcp"
"""The address a client block connects to: the guide's `codemode serve`, served here on a
free port, with the guide's token file."""


@contextlib.contextmanager
def serving_for(block: Block, folder: Path) -> Iterator[str]:
    """The block's text, and for a client block a real `codemode serve` of the demo with
    the guide's tokens, which the text is pointed at."""
    if SERVED not in block.text:
        yield block.text
        return
    port = free_port()
    args = ["serve", "codemode.demo:create", "--transport", "http", "--token-file", "tokens"]
    with subprocess.Popen(
        codemode_command(*args, "--port", str(port)),
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as process:
        try:
            wait_for_port(port, process, timeout=60)
            yield block.text.replace(SERVED, f"http://127.0.0.1:{port}/mcp")
        finally:
            process.terminate()
            process.wait(10)


def _run_block(block: Block, text: str) -> None:
    module = types.ModuleType("docs_block")  # a module of its own, as a dataclass needs
    sys.modules[module.__name__] = module
    try:
        exec(compile(text, str(block), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
        for value in vars(module).values():
            if isinstance(value, CodeMode):
                value.close()


SHELL = [
    (block, command)
    for block in blocks("sh")
    if not block.text.startswith("#!")  # a script's text, run by the test that names it
    for command in commands(block)
]


@pytest.mark.parametrize(("block", "command"), SHELL, ids=lambda v: str(v)[:60])
def test_shell_commands_run(block: Block, command: str, folder: Path) -> None:
    if command in SELF:
        return
    words = shlex.split(command)
    assert words[:3] == ["uv", "run", "codemode"], command
    args = words[3:]
    port = free_port()
    environment = {
        **os.environ,
        **{f"CODEMODE_{command.upper()}_PORT": str(port) for command in SERVING},
    }
    if "--port" in args:
        port = int(args[args.index("--port") + 1])
    with subprocess.Popen(
        codemode_command(*args),
        cwd=folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as process:
        try:
            if args[0] in SERVING:
                wait_for_port(port, process, timeout=60)
            else:
                out, _ = process.communicate(timeout=60)
                assert process.returncode == 0, out.decode()
        finally:
            if process.poll() is None:
                process.terminate()
            process.communicate(timeout=10)


def test_the_progress_example_sends_its_own_numbers_rising() -> None:
    """The deployment guide's progress example, on a host whose calls take a quarter
    second each (a ManualClock): every note after its first report carries its own
    numbers as `progress`/`total`, none a floor the calls set (`1.001 ... (0/3)`)."""
    from codemode.runtime import ProgressNote, RunWatch, watching
    from codemode.runtime.progress import PROGRESS_INTERVAL
    from codemode.testing import ManualClock

    guide = (ROOT / "docs" / "guides" / "deployment.md").read_text()
    (example,) = [b for b in blocks("python") if b.page.name == "deployment.md"]
    assert example.text in guide
    clock = ManualClock()
    notes: list[ProgressNote] = []
    with CodeMode(authorizer=AllowAll(), clock=clock) as cm:
        names = ["ada", "bob", "cy"]

        @cm.capability("instances.list", summary="List instances.")
        def listed(sandbox: str) -> dict[str, list[dict[str, str]]]:
            clock.advance(PROGRESS_INTERVAL)
            return {"items": [{"name": name} for name in names]}

        @cm.capability("instances.get", summary="Get one instance.")
        def get(sandbox: str, name: str) -> dict[str, list[dict[str, str]]]:
            clock.advance(PROGRESS_INTERVAL)
            return {"nics": [{"address": f"10.0.0.{names.index(name)}"}]}

        with watching(RunWatch(sink=notes.append)):
            cm.execute(
                example.text.replace(".nics[0].address", '["nics"][0]["address"]'), subject="alice"
            )
    assert [(n.progress, n.total, n.message) for n in notes] == [
        (0, None, "listing the instances"),
        (1, 3, "looked at ada"),
        (2, 3, "looked at bob"),
        (3, 3, "looked at cy"),
    ]
