"""A hostile MCP server that writes JSON-RPC over stdio by hand, so it can send what the
SDK's own server would refuse to: a tool list nested thousands of levels deep, an answer
that is no `CallToolResult`, silence to a ping.

Environment: `RAW_EVENTS` names a file it appends `pid <pid>`, `call <tool>` and `ping`
lines to; while the file `RAW_HOLD` names exists it waits before it reads its stdin (an
upstream slow to start); `RAW_GATE` names a file whose appearance lets `slow` answer;
`RAW_NO_PING=1` leaves pings unanswered; `RAW_DEEP=<levels>` lists a tool `deep` whose
input schema is nested that deep. Tools: `ok`, `pid`, `slow`, `garbled`, `deep_answer`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

_WAIT_SECONDS = 60.0
"""The longest it waits on a file, so a test that dies never leaves it behind."""
_write = threading.Lock()


def note(text: str) -> None:
    path = os.environ.get("RAW_EVENTS")
    if path:
        with open(path, "a") as events:
            events.write(text + "\n")


def wait_while(condition: Any) -> None:
    for _ in range(int(_WAIT_SECONDS * 100)):  # polls, counted: a guard, not a bound
        if not condition():
            return
        time.sleep(0.01)


def send(line: str) -> None:
    with _write:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def nested(levels: int) -> str:
    """A JSON schema `levels` arrays deep, built as text (json.dumps would recurse)."""
    return '{"type": "array", "items": ' * levels + '{"type": "string"}' + "}" * levels


def tool(name: str, schema: str = '{"type": "object"}') -> str:
    return f'{{"name": "{name}", "description": "{name}.", "inputSchema": {schema}}}'


def tools_list(request_id: Any) -> None:
    tools = [tool("ok"), tool("pid"), tool("slow"), tool("garbled"), tool("deep_answer")]
    depth = int(os.environ.get("RAW_DEEP", "0"))
    if depth:
        schema = f'{{"type": "object", "properties": {{"x": {nested(depth)}}}}}'
        tools.insert(1, tool("deep", schema))
    send(
        f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": {{"tools": [{", ".join(tools)}]}}}}'
    )


def slow(request_id: Any) -> None:
    gate = os.environ.get("RAW_GATE")
    note("call slow")
    if gate:
        wait_while(lambda: not Path(gate).exists())
    answer(request_id, text("slept"))


def call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    if name == "slow":
        threading.Thread(target=slow, args=(request_id,), daemon=True).start()
        return
    note(f"call {name}")
    if name == "ok":
        answer(request_id, text("ok"))
    elif name == "pid":
        answer(request_id, text(str(os.getpid())))
    elif name == "garbled":  # an answer, but no CallToolResult: the SDK cannot read it
        answer(request_id, {"content": "not a list"})
    elif name == "deep_answer":
        send(
            f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "result": '
            f'{{"content": [], "structuredContent": {{"x": {nested(5000)}}}}}}}'
        )
    else:
        error = {"code": -32602, "message": f"unknown tool {name}"}
        send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}))


def main() -> None:
    note(f"pid {os.getpid()}")
    hold = os.environ.get("RAW_HOLD")
    if hold:
        wait_while(lambda: Path(hold).exists())
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:  # a notification
            continue
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        elif method == "ping":
            note("ping")
            if os.environ.get("RAW_NO_PING") != "1":
                answer(request_id, {})
        elif method == "tools/list":
            tools_list(request_id)
        elif method == "tools/call":
            call(request_id, message.get("params") or {})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}))


if __name__ == "__main__":
    main()
