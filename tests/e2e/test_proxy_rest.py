"""`codemode proxy` over a REST API and an MCP server at once: one program reads the pet
store's REST API and writes through the filesystem MCP server, driven by the official SDK
client in both protocol eras; the API's token reaches no reply."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import test_proxy
from tests.e2e.conftest import ROOT
from tests.e2e.test_proxy import proxy_over_http, session
from tests.sources.mcp.conftest import filesystem_server
from tests.sources.openapi.pets import PetStore, pet_store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOKEN = "SECRET-pets-token-4c1d"
PROGRAM = """
def main():
    pet = pets.show_pet_by_id(petId="1")
    fs.write_file(path=FILES + "/pet.txt", content=pet["name"])
    try:
        pets.show_pet_by_id(petId="404")
    except Exception as error:
        return fs.read_text_file(path=FILES + "/pet.txt")["content"], str(error)
"""


@pytest.fixture(scope="module")
def store() -> Iterator[PetStore]:
    with pet_store() as running:
        yield running


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rest").resolve()


@pytest.fixture(scope="module")
def config(files: Path, store: PetStore) -> Path:
    path = files.parent / "apis.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {"fs": {"command": filesystem_server(), "args": [str(files)]}},
                "openApi": {
                    "pets": {
                        "spec": store.spec_url,
                        "auth": {"bearer": "${PETS_TOKEN}"},
                        "include": ["pets"],
                    }
                },
            }
        )
    )
    return path


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PETS_TOKEN": TOKEN}


@pytest.fixture(scope="module")
def proxy_url(config: Path) -> Iterator[str]:
    with proxy_over_http(config, ENV) as url:
        yield url


@pytest.mark.parametrize("connection", ["stdio-2025", "http-2026"])
async def test_one_program_over_a_rest_api_and_an_mcp_server(
    connection: str,
    config: Path,
    proxy_url: str,
    files: Path,
    store: PetStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transport, era = connection.split("-")
    monkeypatch.setattr(test_proxy, "ENV", ENV)  # what the stdio proxy is started with
    async with session(transport, era, config, proxy_url) as client:
        described = await client.call_tool("describe_api", {"name": "pets.show_pet_by_id"})
        assert described.structured_content["signature"] == (
            "pets.show_pet_by_id(*, petId: str) -> Pet"
        )
        assert described.structured_content["errors"] == [  # within the declared reply
            "capability_failed, status 404, fields {code?: int, message?: str}"
        ]
        ran = await client.call_tool(
            "execute", {"source": PROGRAM.replace("FILES", repr(str(files)))}
        )
        assert not ran.is_error, ran.content
        assert ran.structured_content["result"] == [
            "Rex",
            'capability failed: HTTP 404 Not Found: {"code":404,"message":"no such pet"}',
        ]
        replies = json.dumps([described.model_dump(), ran.model_dump()], default=str)
    assert TOKEN not in replies
    assert store.seen[-1].headers["authorization"] == f"Bearer {TOKEN}"
