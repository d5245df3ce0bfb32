"""`codemode shapes` and `--shapes`: the shapes a server learned, read by the operator
without starting anything, and handed to the app by every command that builds one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as mt
import pytest
import uvicorn
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from starlette.applications import Starlette
from starlette.testclient import TestClient

from codemode import CodeMode, serving
from codemode.authz import AllowAll
from codemode.capabilities import Capability, ShapeBook
from codemode.cli import main
from codemode.continuations.shapes import read_shapes, write_shapes
from codemode.sources import forwarded
from codemode.sources.mcp.tools import tool_capability
from codemode.types import JSONObject, JSONValue

INPUT = {"type": "object", "properties": {"path": {"type": "string"}}}
CANARY = "CANARY-shapes-7731"


async def refuse(*_: object) -> Any:
    raise AssertionError("not called")


def undeclared(namespace: str, name: str) -> Capability:
    """An MCP tool without an `outputSchema`, built as the MCP source builds it."""
    tool = mt.Tool(name=name, input_schema=INPUT)
    return tool_capability(namespace, tool, refuse, expose_errors="none", timeout=None)


STATS: list[JSONValue] = [
    {"kind": "file", "size": 1, "owner": CANARY},
    {"kind": "file", "size": 2, "owner": CANARY},
    {"kind": "dir", "size": 0},
]
"""What `fs.stat` answered: `owner` was missing from one result."""


@pytest.fixture
def learned(tmp_path: Path) -> Path:
    """A shapes file written by a real book from real observations, as a server writes it."""
    book = ShapeBook()
    stat, read = undeclared("fs", "stat"), undeclared("fs", "read")
    for value, subject in zip(STATS, ["alice", "bob", "alice"], strict=True):
        book.observe(stat, value, subject)
    book.observe(read, f"{CANARY} text", "alice")
    book.observe(undeclared("pets", "list_pets"), [{"name": CANARY, "id": 1}], "bob")
    book.observe(undeclared("other", "list"), {"hidden": CANARY}, "alice")  # not in CONFIG
    path = tmp_path / "shapes.json"
    write_shapes(path, book.snapshot())
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """An `mcpServers` file whose server writes a marker file if it is ever started,
    whose REST API's spec does not exist, and whose secrets are not in the environment."""
    marker = tmp_path / "started"
    start = f"open({str(marker)!r}, 'w').close()"
    servers = {
        "mcpServers": {
            "fs": {"command": sys.executable, "args": ["-c", start], "env": {"T": "${NO_TOKEN}"}}
        },
        "openApi": {"pets": {"spec": "missing.yaml", "auth": {"bearer": "${NO_PETS_TOKEN}"}}},
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(servers))
    return path


def shapes(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["shapes", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


STAT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "kind": {"type": "string"},
        "size": {"type": "integer"},
        "owner": {"type": "string"},
    },
    "required": ["kind", "size"],
}
NOT_AN_OBJECT = "codemode: {}: its result is not an object; MCP's outputSchema must be one\n"


def test_shapes_prints_what_was_learned_under_the_configs_namespaces(
    config: Path, learned: Path
) -> None:
    """Every name (the operator's view), no value, no count inside the schemas, nothing of
    a namespace the config does not name; and no server started, no secret needed."""
    code, out, err = shapes(str(config), "--shapes", str(learned))
    assert (code, err) == (
        0,
        NOT_AN_OBJECT.format("fs.read") + NOT_AN_OBJECT.format("pets.list_pets"),
    )
    assert json.loads(out) == {
        "fs.read": {"observed_results": 1, "schema": {"type": "string"}},
        "fs.stat": {"observed_results": 3, "schema": STAT_SCHEMA},
        "pets.list_pets": {
            "observed_results": 1,
            "schema": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "id": {"type": "integer"}},
                    "required": ["name", "id"],
                },
            },
        },
    }
    assert out == json.dumps(json.loads(out), indent=2) + "\n"  # sorted, as printed
    assert CANARY not in out + err and "hidden" not in out
    assert not (config.parent / "started").exists()


def test_a_name_prints_its_schema_alone_ready_as_an_output_schema(
    config: Path, learned: Path
) -> None:
    code, out, err = shapes(str(config), "--shapes", str(learned), "--name", "fs.stat")
    assert (code, out, err) == (0, json.dumps(STAT_SCHEMA, indent=2) + "\n", "")
    schema = json.loads(out)
    Draft202012Validator.check_schema(schema)
    assert all(Draft202012Validator(schema).is_valid(value) for value in STATS)
    tool = mt.Tool(name="stat", input_schema=INPUT, output_schema=schema)
    assert tool.output_schema == STAT_SCHEMA


def test_a_name_whose_result_is_not_an_object_is_printed_and_flagged(
    config: Path, learned: Path
) -> None:
    code, out, err = shapes(str(config), "--shapes", str(learned), "--name", "fs.read")
    assert (code, out, err) == (0, '{\n  "type": "string"\n}\n', NOT_AN_OBJECT.format("fs.read"))


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("fs.sta", '"fs.sta" in {file}; did you mean "fs.stat"?'),
        ("other.list", '"other.list" in {file}'),  # in the file, not under CONFIG
    ],
)
def test_a_name_without_a_shape_is_said_with_the_closest(
    config: Path, learned: Path, name: str, said: str
) -> None:
    code, out, err = shapes(str(config), "--shapes", str(learned), "--name", name)
    expected = f"codemode: no shape was learned for {said.format(file=learned)}\n"
    assert (code, out, err) == (1, "", expected)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "there is no such file"),
        ("{", "it is not JSON"),
        ('{"format": "other"}', 'its "format" is not "codemode-shapes/1"'),
    ],
)
def test_a_shapes_file_that_cannot_be_read_is_one_line_and_exit_code_2(
    config: Path, tmp_path: Path, content: str | None, why: str
) -> None:
    path = tmp_path / "kept.json"
    if content is not None:
        path.write_text(content)
    code, out, err = shapes(str(config), "--shapes", str(path))
    assert (code, out) == (2, "")
    assert err == f"Error: the shapes file {path} cannot be read: {why}\n"


def test_the_file_may_come_from_the_environment(config: Path, learned: Path) -> None:
    code, out, _ = shapes(str(config), "--name", "fs.stat", env={"CODEMODE_SHAPES": str(learned)})
    assert (code, json.loads(out)) == (0, STAT_SCHEMA)


def test_nothing_learned_under_the_config_prints_an_empty_object(
    config: Path, tmp_path: Path
) -> None:
    path = tmp_path / "empty.json"
    write_shapes(path, [])
    assert shapes(str(config), "--shapes", str(path)) == (
        0,
        "{}\n",
        f"codemode: no shape in {path} is of a capability of {config}\n",
    )


def test_a_config_that_cannot_be_read_is_a_usage_error(tmp_path: Path, learned: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {}}')
    code, out, err = shapes(str(bad), "--shapes", str(learned))
    assert (code, out) == (2, "")
    assert f"Error: {bad}: mcpServers: must name a server" in err


# -- --shapes on the commands that build an app -------------------------------------------


class Files:
    """A source whose `fs.stat` declares no result shape, as most MCP tools do."""

    name = "fs"

    def __init__(self) -> None:
        self.made: list[Capability] = []

    async def open(self) -> None:
        async def stat(document: JSONObject) -> JSONValue:
            return {"kind": "file", "size": 1}

        self.made = [forwarded("fs.stat", stat, summary="Stat a file.", input_schema=INPUT)]

    def capabilities(self) -> list[Capability]:
        return self.made

    def changes(self) -> None:
        return None

    async def close(self) -> None:
        return None


BUILT: list[CodeMode] = []


def learning_host() -> CodeMode:
    """An app whose one capability's results are learned."""
    cm = CodeMode(authorizer=AllowAll())
    cm.add_source(Files())
    BUILT.append(cm)
    return cm


@pytest.fixture
def kept(tmp_path: Path) -> Path:
    """The shapes file a server of `learning_host` wrote after three results."""
    book = ShapeBook()
    with learning_host() as cm:
        stat = cm.visible()["fs.stat"]
        for subject in ("local", "alice", "local"):  # two subjects: every name is shown
            book.observe(stat, {"kind": "file", "size": 1}, subject)
    path = tmp_path / "shapes.json"
    write_shapes(path, book.snapshot())
    return path


@pytest.mark.parametrize("given", [["--shapes", "{path}"], []])
def test_serve_hands_the_shapes_file_to_its_stdio_twin(
    served: list[uvicorn.Config], tmp_path: Path, given: list[str]
) -> None:
    """The client configuration the banner prints serves the same app: same shapes file,
    whether it came by flag or by CODEMODE_SHAPES."""
    path = str(tmp_path / "shapes.json")
    args = ["serve", "tests.test_cli_shapes:learning_host", "--transport", "http"]
    args += [arg.format(path=path) for arg in given]
    result = CliRunner().invoke(main, args, env={"CODEMODE_SHAPES": path})
    BUILT.pop().close()
    assert result.exit_code == 0, result.stderr
    stdio = json.loads(result.stdout.split("Client configuration, stdio:\n")[1].split("\nPress")[0])
    (server,) = stdio["mcpServers"].values()
    assert server["args"][-2:] == ["--shapes", path]


@pytest.mark.parametrize("command", ["serve", "proxy", "run", "check", "describe", "shapes"])
def test_every_command_that_builds_an_app_takes_the_shapes_file(command: str) -> None:
    said = " ".join(CliRunner().invoke(main, [command, "--help"]).stdout.split())
    assert "--shapes FILE" in said and "env var: CODEMODE_SHAPES" in said


def test_the_serving_configuration_keeps_the_shapes_file() -> None:
    assert serving.ServeConfig().shapes is None
    assert serving.ServeConfig(shapes="shapes.json").shapes == "shapes.json"


def observed(payload: JSONObject) -> Any:
    result = payload["result"]
    assert isinstance(result, dict)
    return result.get("observed")


def test_describe_shows_what_the_shapes_file_learned(kept: Path) -> None:
    args = ["describe", "tests.test_cli_shapes:learning_host", "fs.stat"]
    before = CliRunner().invoke(main, args)
    after = CliRunner().invoke(main, [*args, "--shapes", str(kept)])
    assert (before.exit_code, after.exit_code) == (0, 0)
    assert observed(json.loads(before.stdout)) is None
    assert observed(json.loads(after.stdout))["results"] == 3


def test_check_reports_a_key_the_learned_shape_lacks(kept: Path, tmp_path: Path) -> None:
    """`codemode check --shapes` refuses what execute would, before any call."""
    program = tmp_path / "program.py"
    program.write_text('def main():\n    info = fs.stat(path="a")\n    return info["sise"]\n')
    args = ["check", "tests.test_cli_shapes:learning_host", str(program)]
    unknown = CliRunner().invoke(main, args)
    checked = CliRunner().invoke(main, [*args, "--shapes", str(kept)])
    assert (unknown.exit_code, unknown.stdout) == (0, "ok: no problems found\n")
    assert checked.exit_code == 1
    assert (
        "<codemode>:3:12: KeyError: 'sise'; did you mean \"size\"? the result has: kind, size "
        "(learned from the results of fs.stat, not declared)"
    ) in checked.stdout


def test_a_served_app_describes_what_its_shapes_file_learned(
    served: list[uvicorn.Config], kept: Path
) -> None:
    args = ["serve", "tests.test_cli_shapes:learning_host", "--transport", "http", "--web"]
    result = CliRunner().invoke(main, [*args, "--shapes", str(kept)])
    assert result.exit_code == 0, result.stderr
    (config,) = served
    assert isinstance(config.app, Starlette)
    try:
        with TestClient(config.app, base_url="http://127.0.0.1:8000") as client:
            answer = client.post("/api/describe", json={"name": "fs.stat"})
    finally:
        BUILT.pop().close()
    assert answer.status_code == 200, answer.text
    assert observed(answer.json()["capability"])["results"] == 3


def test_a_proxy_describes_what_its_shapes_file_learned(
    served: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`codemode proxy CONFIG --shapes FILE` over a real upstream whose tool declares no
    result: the shapes its results taught before the restart are described at once."""
    from codemode.cli import commands
    from codemode.loading import load_proxy
    from tests.sources.mcp.conftest import FIXTURE, PYTHON

    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"up": {"command": PYTHON, "args": [FIXTURE]}}}))
    book, path = ShapeBook(), tmp_path / "shapes.json"
    with load_proxy(str(servers)) as cm:  # a first server learned from three real results
        answer = cm.execute("def main():\n    return up.json_text()", subject="local").value
        for subject in ("local", "alice", "local"):
            book.observe(cm.visible()["up.json_text"], answer, subject)
    write_shapes(path, book.snapshot())
    proxies: list[CodeMode] = []

    def recorded(config: str) -> CodeMode:  # the real one, kept to be closed
        proxies.append(load_proxy(config))
        return proxies[-1]

    monkeypatch.setattr(commands, "load_proxy", recorded)
    args = ["proxy", str(servers), "--transport", "http", "--web", "--shapes", str(path)]
    result = CliRunner().invoke(main, args)
    try:
        assert result.exit_code == 0, result.stderr
        (config,) = served
        assert isinstance(config.app, Starlette)
        with TestClient(config.app, base_url="http://127.0.0.1:8000") as client:
            described = client.post("/api/describe", json={"name": "up.json_text"})
    finally:
        for proxy in proxies:
            proxy.close()
    assert described.status_code == 200, described.text
    assert observed(described.json()["capability"])["results"] == 3


def test_run_keeps_what_its_program_taught_in_the_shapes_file(tmp_path: Path) -> None:
    program, path = tmp_path / "program.py", tmp_path / "shapes.json"
    program.write_text('def main():\n    return fs.stat(path="a")\n')
    args = ["run", "tests.test_cli_shapes:learning_host", str(program), "--shapes", str(path)]
    result = CliRunner().invoke(main, args)
    BUILT.pop()  # closed by run, which wrote the file
    assert result.exit_code == 0, result.stdout
    (kept,) = read_shapes(path)
    assert (kept.name, kept.results, kept.node.key_names()) == ("fs.stat", 1, ("kind", "size"))
