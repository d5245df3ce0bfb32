"""The `mcpServers` file: read as sources (add_mcp_server and add_openapi calls), every
problem one error with its key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode.sources import Source
from codemode.sources.config import ConfigError, ServerEntry, load_config


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_client_config_reads_as_servers_with_variables_from_the_environment(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "server", "${HOME_DIR}/files"]},
                "tracker": {
                    "type": "http",
                    "url": "https://tracker.example/mcp",
                    "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"},
                    "include": ["issues_*"],
                    "expose_errors": True,
                    "timeout": 5,
                },
                "old": {"command": "x", "disabled": True},
            }
        },
    )
    environ = {"HOME_DIR": "/home/ada", "TRACKER_TOKEN": "t0k"}
    assert load_config(path, environ) == [
        ServerEntry("fs", {"command": "npx", "args": ["-y", "server", "/home/ada/files"]}),
        ServerEntry(
            "tracker",
            {
                "url": "https://tracker.example/mcp",
                "headers": {"Authorization": "Bearer t0k"},
                "include": ["issues_*"],
                "expose_errors": True,
                "timeout": 5,
            },
        ),
    ]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("{", "not JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
        ([], 'the file must hold an object with "mcpServers"'),
        ({"servers": {}}, 'servers: unknown key (the file holds "mcpServers" and "openApi")'),
        ({"mcpServers": {}}, 'mcpServers: must name a server (or "openApi" a REST API)'),
        ({"mcpServers": []}, "mcpServers: must be an object of servers by name"),
        (
            {"openApi": {"pets": {}}},
            'openApi.pets: needs "spec", the path or URL of its OpenAPI document',
        ),
        (
            {"openApi": {"pets": {"spec": "a.json", "base_url": "x"}}},
            'openApi.pets.base_url: unknown key; did you mean "baseUrl"?',
        ),
        (
            {"openApi": {"pets": {"spec": "a.json", "auth": {"basic": ["ada"]}}}},
            "openApi.pets.auth: must be an object of strings or [user, password] pairs",
        ),
        (
            {"openApi": {"pets": {"spec": "a.json"}}, "mcpServers": {"pets": {"command": "x"}}},
            'openApi.pets: "mcpServers.pets" and "pets" both become pets',
        ),
        (
            {"mcpServers": {"fs": {"comand": "x"}}},
            'mcpServers.fs.comand: unknown key; did you mean "command"?',
        ),
        (
            {"mcpServers": {"fs": {"command": "x", "zzz": 1}}},
            "mcpServers.fs.zzz: unknown key; a server takes type, command, args, env, cwd, "
            "url, headers, include, exclude, expose_errors, timeout, connect, disabled",
        ),
        ({"mcpServers": {"fs": {"command": 1}}}, "mcpServers.fs.command: must be a string"),
        (
            {"mcpServers": {"fs": {"command": "x", "args": "a b"}}},
            "mcpServers.fs.args: must be a list of strings",
        ),
        (
            {"mcpServers": {"fs": {"command": "x", "env": {"A": 1}}}},
            "mcpServers.fs.env: must be an object of strings",
        ),
        (
            {"mcpServers": {"fs": {"command": "x", "timeout": 0}}},
            "mcpServers.fs.timeout: must be a positive number",
        ),
        (
            {"mcpServers": {"fs": {}}},
            'mcpServers.fs: give either "command" (stdio) or "url" (streamable HTTP)',
        ),
        (
            {"mcpServers": {"fs": {"type": "sse", "url": "http://x"}}},
            'mcpServers.fs.type: "sse" is not supported; use "stdio" or "http"',
        ),
        (
            {"mcpServers": {"fs": {"type": "stdio", "url": "http://x"}}},
            'mcpServers.fs: type "stdio" needs "command"',
        ),
        (
            {"mcpServers": {"time": {"command": "x"}}},
            'mcpServers.time: "time" is a name programs use for a builtin or module; name the '
            'server otherwise, e.g. "time_server"',
        ),
        (
            {"mcpServers": {"fs": {"command": "x", "disabled": True}}},
            "mcpServers: every server is disabled",
        ),
        (
            {"mcpServers": {"fs": {"url": "http://x", "headers": {"A": "${NOT_SET}"}}}},
            "mcpServers.fs.headers.A: environment variable NOT_SET is not set",
        ),
        (
            {"mcpServers": {"fs": {"command": "x", "connect": "later"}}},
            'mcpServers.fs.connect: must be "start" or "first_use"',
        ),
    ],
)
def test_each_problem_is_one_error_naming_the_file_and_key(
    tmp_path: Path, data: Any, problem: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert str(info.value) == f"{path}: {problem}"


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file or directory"):
        load_config(tmp_path / "none.json")


def test_defaults_dashed_names_and_a_relative_cwd(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"mcpServers": {"my-fs": {"command": "x", "args": ["${ROOT:-/srv}"], "cwd": "work"}}},
    )
    assert (
        load_config(path, {"ROOT": ""})
        == load_config(path, {})
        == [
            ServerEntry(
                "my-fs", {"command": "x", "args": ["/srv"], "cwd": str(tmp_path.resolve() / "work")}
            )
        ]
    )


def test_each_entry_becomes_the_source_its_section_names(tmp_path: Path) -> None:
    """A server an `McpServer`, a REST API an `OpenApi`: what `codemode proxy` adds, made
    without starting or reading anything (that is each source's `open`)."""
    spec = tmp_path / "pets.json"
    spec.write_text(json.dumps({"openapi": "3.1.0", "info": {}, "paths": {}}))
    path = write(
        tmp_path,
        {
            "mcpServers": {"my-fs": {"command": "npx", "args": ["server"], "timeout": 5}},
            "openApi": {"pets": {"spec": "pets.json", "baseUrl": "https://pets.example"}},
        },
    )
    sources = [entry.source() for entry in load_config(path, {})]
    assert [(type(s).__name__, s.name) for s in sources] == [
        ("McpServer", "my_fs"),
        ("OpenApi", "pets"),
    ]
    assert [isinstance(s, Source) for s in sources] == [True, True]


def test_an_entry_knows_the_namespace_its_source_takes(tmp_path: Path) -> None:
    """What `codemode shapes` lists under, known without making the source."""
    path = write(
        tmp_path,
        {
            "mcpServers": {"my-fs": {"command": "x"}, "off": {"command": "x", "disabled": True}},
            "openApi": {"2pets": {"spec": "missing.yaml"}},
        },
    )
    entries = load_config(path, {})
    assert [e.namespace for e in entries] == ["my_fs", "api_2pets"]
    assert [e.namespace for e in entries] == [e.source().name for e in entries]
