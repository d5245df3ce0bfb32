"""Code mode over MCP servers people run: the npm filesystem and memory servers, and the
project's own demo over stdio and over HTTP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.authz.cedar import CedarAuthorizer
from codemode.payloads import describe_payload
from tests.conftest import run_error
from tests.e2e.conftest import ROOT, free_port, start_codemode
from tests.sources.mcp.conftest import filesystem_server, memory_server

pytestmark = pytest.mark.slow

GUIDE = (ROOT / "docs" / "guides" / "mcp-gateway.md").read_text()
NO_DESTRUCTIVE_TOOLS = GUIDE.split('```text\n@id("everything")')[1].split("```")[0]
NO_DESTRUCTIVE_TOOLS = '@id("everything")' + NO_DESTRUCTIVE_TOOLS
"""The guide's policy: every destructive tool of every server is forbidden."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("files").resolve()
    (folder / "notes.txt").write_text("alpha\nbeta\n")
    (folder / "todo.md").write_text("- ship it\n")
    return folder


@pytest.fixture(scope="module")
def fs(files: Path) -> Iterator[CodeMode]:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server("fs", command=filesystem_server(), args=[str(files)])
        yield cm


def run(cm: CodeMode, source: str, subject: str = "alice") -> object:
    return cm.execute(source, subject=subject).value


def test_one_program_lists_reads_writes_and_searches_files(fs: CodeMode, files: Path) -> None:
    source = f"""
def main():
    root = {str(files)!r}
    fs.write_file(path=root + "/report.txt", content="three files")
    listing = fs.list_directory(path=root)["content"]
    found = fs.search_files(path=root, pattern="*.txt")["content"]
    first = fs.read_text_file(path=root + "/notes.txt", head=1)["content"]
    return {{"listing": listing.splitlines(), "found": sorted(found.splitlines()), "first": first}}
"""
    assert run(fs, source) == {
        "listing": ["[FILE] notes.txt", "[FILE] report.txt", "[FILE] todo.md"],
        "found": [str(files / "notes.txt"), str(files / "report.txt")],
        "first": "alpha",
    }
    assert (files / "report.txt").read_text() == "three files"


def test_the_servers_own_error_reaches_the_model_unless_the_host_withholds_it(
    fs: CodeMode, files: Path
) -> None:
    """MCP's `isError` result is the report meant for the model: by default a missing
    file and a path outside the allowed folder read as what they are."""
    gone = str(files / "gone.txt")
    shown = run_error(fs, f"def main():\n    return fs.read_text_file(path={gone!r})")
    assert str(shown) == (
        f"capability failed: the upstream says: ENOENT: no such file or directory, open '{gone}'"
    )
    outside = run_error(fs, "def main():\n    return fs.read_text_file(path='/etc/hostname')")
    assert str(outside).startswith("capability failed: the upstream says: Access denied")
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server(
            "fs",
            command=filesystem_server(),
            args=[str(files)],
            include=["read_text_file"],
            expose_errors="none",
        )
        hidden = run_error(cm, f"def main():\n    return fs.read_text_file(path={gone!r})")
    assert str(hidden) == "capability failed: the upstream reported an error; its text is withheld"


def test_a_cedar_policy_on_destructive_hints_denies_writes_and_allows_reads(files: Path) -> None:
    authorizer = CedarAuthorizer(NO_DESTRUCTIVE_TOOLS)
    with CodeMode(authorizer=authorizer) as cm:
        cm.add_mcp_server("fs", command=filesystem_server(), args=[str(files)])
        authorizer.validate(cm.catalog.enabled.values())
        root = str(files)
        assert run(
            cm, f"def main():\n    return fs.read_text_file(path={root + '/todo.md'!r})"
        ) == {"content": "- ship it\n"}
        with pytest.raises(CodeModeError) as denied:
            cm.execute(
                f"def main():\n    return fs.write_file(path={root + '/x'!r}, content='x')",
                subject="alice",
            )
        assert str(denied.value) == "permission denied"
        assert not (files / "x").exists()
    with CodeMode(authorizer=authorizer, hide_forbidden=True) as cm:
        cm.add_mcp_server("fs", command=filesystem_server(), args=[str(files)])
        authorizer.validate(cm.catalog.enabled.values())
        visible = {hit.name for hit in cm.search("", limit=50, subject="alice").results}
        assert "fs.read_text_file" in visible
        assert not visible & {"fs.write_file", "fs.edit_file", "fs.move_file"}


def test_the_memory_server_gives_structured_results_with_known_keys(tmp_path: Path) -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server(
            "memory", command=memory_server(), env={"MEMORY_FILE_PATH": str(tmp_path / "m.jsonl")}
        )
        assert describe_payload(cm.describe("memory.read_graph"))["shapes"] == [
            "ReadGraphResult: dict {entities: list[ReadGraphResultEntitiesItem], relations: "
            'list[ReadGraphResultRelationsItem]}, read as r["entities"]',
            "ReadGraphResultEntitiesItem: dict {name: str (The name of the entity), entityType: "
            "str (The type of the entity), observations: list[str] (An array of observation "
            'contents associated with the entity)}, read as r["name"]',
            "ReadGraphResultRelationsItem: dict {from: str (The name of the entity where the "
            "relation starts), to: str (The name of the entity where the relation ends), "
            'relationType: str (The type of the relation)}, read as r["from"]',
        ]
        source = """
def main():
    memory.create_entities(entities=[
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
        {"name": "Engine", "entityType": "machine", "observations": []},
    ])
    memory.create_relations(relations=[{"from": "Ada", "to": "Engine", "relationType": "programmed"}])
    graph = memory.read_graph()
    return [(r["from"], r["relationType"], r["to"]) for r in graph["relations"]]
"""
        assert run(cm, source) == [["Ada", "programmed", "Engine"]]
        with pytest.raises(CodeModeError) as typo:
            cm.execute("def main():\n    return memory.read_graph()['entitys']", subject="a")
        assert str(typo.value).endswith("KeyError: 'entitys'; did you mean \"entities\"?")


DEMO_PROGRAM = """
def main():
    found = demo.search_api(query="instances")
    ran = demo.execute(source="def main():\\n    return len(sandboxes.list())")
    return [r["name"] for r in found["results"]][:2], ran["result"]
"""


def test_the_demo_as_an_upstream_over_stdio(tmp_path: Path) -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        cm.add_mcp_server(
            "demo",
            command=sys.executable,
            args=[
                "-m",
                "codemode",
                "demo",
                "--transport",
                "stdio",
                "--data",
                str(tmp_path / "d.db"),
            ],
        )
        assert run(cm, DEMO_PROGRAM) == [["instances.get", "instances.list"], 3]


def test_the_demo_as_an_upstream_over_http(tmp_path: Path) -> None:
    port = free_port()
    server = start_codemode("demo", "--no-web", "--data", str(tmp_path / "d.db"), port=port)
    try:
        with CodeMode(authorizer=AllowAll()) as cm:
            cm.add_mcp_server("demo", url=f"http://127.0.0.1:{port}/mcp")
            assert run(cm, DEMO_PROGRAM) == [["instances.get", "instances.list"], 3]
    finally:
        server.terminate()
        server.wait(10)
