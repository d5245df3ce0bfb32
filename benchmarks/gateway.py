"""Scenario 8: real MCP servers used directly, and through `codemode proxy`.

Context: the bytes (and ~tokens, at 4 bytes each) of every upstream tool schema a model
holds when it uses the servers directly, against codemode's three tools plus one search
and one describe. Latency: one upstream call made directly with the SDK client, against
the same call made by a program through `codemode proxy` (both over stdio, taken in
turns); and 20 sequential direct calls against one program that gathers 20, with the same
20 gathered on the direct session as the floor: what the upstream itself (one Node.js
process, the SDK client) allows however the calls are made.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from benchmarks._stats import measure_interleaved_async

ROOT = Path(__file__).parents[1]
NPM = Path(os.environ.get("CODEMODE_NPM_TOOLS", Path.home() / ".cache" / "codemode" / "npm"))
BIN = NPM / "node_modules" / ".bin"
ONE_CALL = "def main():\n    return len(memory.read_graph()['entities'])\n"
TWENTY_CALLS = (
    "import asyncio\n"
    "async def main():\n"
    "    graphs = await asyncio.gather(*[memory.read_graph() for _ in range(20)])\n"
    "    return len(graphs)\n"
)


def _wire(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


async def _open(
    stack: AsyncExitStack, command: str, args: list[str], env: dict[str, str]
) -> ClientSession:
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(ROOT))
    quiet = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 - closed by the stack
    read, write = await stack.enter_async_context(stdio_client(params, errlog=quiet))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def _run() -> dict[str, Any]:
    for binary in ("mcp-server-filesystem", "mcp-server-memory"):
        if not (BIN / binary).exists():
            raise RuntimeError(f"{BIN / binary} is missing: run .ci/run, which installs it")
    folder = Path(tempfile.mkdtemp(prefix="codemode-bench-"))
    (folder / "files").mkdir()
    env = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}
    upstreams = {
        "fs": (str(BIN / "mcp-server-filesystem"), [str(folder / "files")], {}),
        "memory": (str(BIN / "mcp-server-memory"), [], env),
    }
    config = folder / "servers.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    n: {"command": c, "args": a, "env": e} for n, (c, a, e) in upstreams.items()
                }
            }
        )
    )
    async with AsyncExitStack() as stack:
        direct = {n: await _open(stack, c, a, e) for n, (c, a, e) in upstreams.items()}
        proxy = await _open(
            stack,
            sys.executable,
            ["-m", "codemode", "--log-level", "warning", "proxy", str(config)],
            {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
        )
        listed = {
            n: [
                t.model_dump(by_alias=True, exclude_none=True, mode="json")
                for t in (await s.list_tools()).tools
            ]
            for n, s in direct.items()
        }
        direct_bytes = {n: _wire({"tools": tools}) for n, tools in listed.items()}
        ours = [
            t.model_dump(by_alias=True, exclude_none=True, mode="json")
            for t in (await proxy.list_tools()).tools
        ]
        found = await proxy.call_tool("search_api", {"query": "read graph entities"})
        described = await proxy.call_tool("describe_api", {"name": "memory.read_graph"})
        codemode_bytes = (
            _wire({"tools": ours})
            + _wire(found.structured_content)
            + _wire(described.structured_content)
        )

        memory = direct["memory"]

        async def direct_one() -> object:
            return await memory.call_tool("read_graph", {})

        async def proxied_one() -> object:
            return await proxy.call_tool("execute", {"source": ONE_CALL})

        async def direct_twenty() -> object:
            for _ in range(20):
                await memory.call_tool("read_graph", {})
            return None

        async def direct_gathered() -> object:
            async with anyio.create_task_group() as group:
                for _ in range(20):
                    group.start_soon(memory.call_tool, "read_graph", {})
            return None

        async def proxied_twenty() -> object:
            return await proxy.call_tool("execute", {"source": TWENTY_CALLS})

        one = await measure_interleaved_async({"direct": direct_one, "proxied": proxied_one})
        twenty = await measure_interleaved_async(
            {"direct": direct_twenty, "proxied": proxied_twenty}
        )
        # A pass of its own, so the pair above is measured as it always was.
        floor = await measure_interleaved_async(
            {"direct": direct_twenty, "gathered": direct_gathered}
        )
    all_direct = sum(direct_bytes.values())
    return {
        "context": {
            "direct_bytes": direct_bytes,
            "direct_total_bytes": all_direct,
            "codemode_bytes": codemode_bytes,
            "ratio": all_direct / codemode_bytes,
        },
        "one_call": {name: stats.to_dict() for name, stats in one.items()},
        "twenty_calls": {name: stats.to_dict() for name, stats in twenty.items()},
        "twenty_calls_direct_gathered": floor["gathered"].to_dict(),
        "summary": [
            "context for the filesystem and memory servers: direct "
            + " + ".join(f"{n} {b} bytes" for n, b in direct_bytes.items())
            + f" = {all_direct} bytes (~{all_direct // 4} tokens) vs codemode {codemode_bytes} "
            f"bytes (~{codemode_bytes // 4} tokens: tools/list + 1 search + 1 describe): "
            f"{all_direct / codemode_bytes:.1f}x less",
            f"one memory.read_graph call: direct {one['direct'].ms()}; through codemode proxy "
            f"{one['proxied'].ms()} ({one['proxied'].p50 / one['direct'].p50:.2f}x)",
            f"20 calls: 20 sequential direct calls {twenty['direct'].ms()}; one program "
            f"through codemode proxy gathering 20 {twenty['proxied'].ms()} "
            f"(direct / program = {twenty['direct'].p50 / twenty['proxied'].p50:.2f})",
            f"the floor, what the upstream allows: 20 direct calls gathered "
            f"{floor['gathered'].ms()}, 20 sequential {floor['direct'].ms()} (measured in turns)",
        ],
    }


def run() -> dict[str, Any]:
    result: dict[str, Any] = anyio.run(_run)
    return result
