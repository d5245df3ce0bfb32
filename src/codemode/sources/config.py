"""The `mcpServers` file MCP clients already use, read as sources: each server an
`McpServer` (what `add_mcp_server` adds), and each REST API of its `openApi` object an
`OpenApi` (what `add_openapi` adds).

```json
{"mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
    "tracker": {"url": "https://tracker.example/mcp",
                "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}}}}
```

Besides the clients' keys (`command`, `args`, `env`, `cwd`, `url`, `headers`, `type`,
`disabled`), a server may carry `add_mcp_server`'s own options: `include`, `exclude`,
`expose_errors`, `timeout`, `connect`. `${VAR}` (or `${VAR:-default}`) in any string is
taken from the environment; a relative `cwd` is taken from the file's folder. Every
problem is one `ConfigError` naming the file and the key's path.

```json
{"openApi": {
    "pets": {"spec": "pets.yaml", "baseUrl": "https://pets.example/v1",
             "auth": {"bearer": "${PETS_TOKEN}"}, "exclude": ["DELETE /*"]}}}
```

A REST API takes `spec` (a path, relative to the file's folder, or a URL), `baseUrl`,
`headers`, `auth` (a security scheme's name -> its secret, or `[user, password]` for
HTTP basic), `include`, `exclude`, `timeout` and `trustHints`; `mcpServers` may then be
left out.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from codemode.errors import RegistrationError
from codemode.sources.mcp import McpServer, expose_mode
from codemode.sources.openapi import OpenApi
from codemode.sources.protocol import Source
from codemode.sources.remote import namespace


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class ServerEntry:
    """One server of the file: its name, and the keyword arguments of `add_mcp_server`
    (an MCP server) or of `add_openapi` (a REST API), by `kind`."""

    name: str
    options: dict[str, Any]
    kind: Literal["mcp", "openapi"] = "mcp"
    """An MCP server (`add_mcp_server`) or a REST API (`add_openapi`)."""

    def source(self) -> Source:
        """The entry as the source `CodeMode.add_source` adds (RegistrationError for
        options the source refuses)."""
        if self.kind == "openapi":
            return OpenApi(self.name, **self.options)
        return McpServer(self.name, **self.options)

    @property
    def namespace(self) -> str:
        """The namespace its capabilities are named under (`my-fs` -> `my_fs`): the name
        its source takes, known without making it."""
        return namespace(self.name, OpenApi.kind if self.kind == "openapi" else McpServer.kind)


_STRING = "a string"
_STRINGS = "a list of strings"
_OBJECT = "an object of strings"
_BOOLEAN = "true or false"
_EXPOSE = '"tool", "none" or "all" (or true for "all", false for "none")'
_KEYS: dict[str, str] = {
    "type": _STRING,
    "command": _STRING,
    "args": _STRINGS,
    "env": _OBJECT,
    "cwd": _STRING,
    "url": _STRING,
    "headers": _OBJECT,
    "include": _STRINGS,
    "exclude": _STRINGS,
    "expose_errors": _EXPOSE,
    "timeout": "a positive number",
    "connect": _STRING,
    "disabled": _BOOLEAN,
}
"""Each key a server entry may have, and what its value must be."""
_AUTH = "an object of strings or [user, password] pairs"
_API_KEYS: dict[str, str] = {
    "spec": _STRING,
    "baseUrl": _STRING,
    "headers": _OBJECT,
    "auth": _AUTH,
    "include": _STRINGS,
    "exclude": _STRINGS,
    "timeout": "a positive number",
    "trustHints": _BOOLEAN,
    "disabled": _BOOLEAN,
}
"""Each key a REST API entry may have, and what its value must be."""
_API_OPTIONS = {"baseUrl": "base_url", "trustHints": "trust_hints"}
"""The file's camel-case keys, as `add_openapi`'s keyword arguments."""
_TYPES = {"stdio": "command", "http": "url", "streamable-http": "url", "streamableHttp": "url"}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None
) -> list[ServerEntry]:
    """The enabled servers of a config file, in file order: `${VAR}` in its strings
    read from `environ` (the process's environment unless given). Raises `ConfigError`
    naming the file and the key for anything it cannot use (see the module docstring)."""
    environ = os.environ if environ is None else environ
    where = os.fspath(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {problem}")

    if not isinstance(data, dict):
        raise ConfigError(f'{where}: the file must hold an object with "mcpServers"')
    for key in data:
        if key not in _SECTIONS:
            raise fail(key, 'unknown key (the file holds "mcpServers" and "openApi")')
    servers = data.get("mcpServers", {})
    apis = data.get("openApi", {})
    for section, value in (("mcpServers", servers), ("openApi", apis)):
        if not isinstance(value, dict):
            raise fail(section, f"must be an object of {_SECTIONS[section]} by name")
    if not servers and not apis:
        raise fail("mcpServers", 'must name a server (or "openApi" a REST API)')
    entries: list[ServerEntry] = []
    namespaces: dict[str, tuple[str, str]] = {}
    for section, group in (("mcpServers", servers), ("openApi", apis)):
        keys = _KEYS if section == "mcpServers" else _API_KEYS
        takes = "a server takes " if section == "mcpServers" else "a REST API takes "
        for name, spec in group.items():
            at = f"{section}.{name}"
            try:
                converted = namespace(name, "MCP server")
            except RegistrationError as exc:
                raise fail(at, str(exc).split(": ", 1)[-1]) from None
            if converted in namespaces:
                other, other_section = namespaces[converted]
                first = other if other_section == section else f"{other_section}.{other}"
                raise fail(at, f'"{first}" and "{name}" both become {converted}')
            namespaces[converted] = (name, section)
            if not isinstance(spec, dict):
                raise fail(at, "must be an object")
            for key, value in spec.items():
                if key not in keys:
                    close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
                    hint = f'did you mean "{close[0]}"?' if close else takes + ", ".join(keys)
                    raise fail(f"{at}.{key}", f"unknown key; {hint}")
                if not _fits(keys[key], value):
                    raise fail(f"{at}.{key}", f"must be {keys[key]}")
            if spec.get("disabled"):
                continue
            read = _server_entry if section == "mcpServers" else _api_entry
            entries.append(read(name, spec, at, where, environ, fail))
    if not entries:
        if apis:
            raise ConfigError(f"{where}: every server and REST API is disabled")
        raise fail("mcpServers", "every server is disabled")
    return entries


_SECTIONS = {"mcpServers": "servers", "openApi": "REST APIs"}


def _server_entry(
    name: str, spec: dict[str, Any], at: str, where: str, environ: Mapping[str, str], fail: Any
) -> ServerEntry:
    kind = spec.get("type")
    if kind is not None and kind not in _TYPES:
        raise fail(f"{at}.type", f'"{kind}" is not supported; use "stdio" or "http"')
    if ("command" in spec) == ("url" in spec):
        raise fail(at, 'give either "command" (stdio) or "url" (streamable HTTP)')
    if kind is not None and _TYPES[kind] not in spec:
        raise fail(at, f'type "{kind}" needs "{_TYPES[kind]}"')
    if spec.get("connect", "start") not in ("start", "first_use"):
        raise fail(f"{at}.connect", 'must be "start" or "first_use"')
    options = {
        key: _expand(value, f"{at}.{key}", environ, fail)
        for key, value in spec.items()
        if key not in ("type", "disabled")
    }
    if "cwd" in options:  # relative to the file, whoever starts the proxy from where
        options["cwd"] = str(Path(where).resolve().parent / options["cwd"])
    return ServerEntry(name, options)


def _api_entry(
    name: str, spec: dict[str, Any], at: str, where: str, environ: Mapping[str, str], fail: Any
) -> ServerEntry:
    if "spec" not in spec:
        raise fail(at, 'needs "spec", the path or URL of its OpenAPI document')
    options = {
        _API_OPTIONS.get(key, key): _expand(value, f"{at}.{key}", environ, fail)
        for key, value in spec.items()
        if key != "disabled"
    }
    if not re.match(r"(?i)https?://", options["spec"]):  # relative to the file, as cwd is
        options["spec"] = str(Path(where).resolve().parent / options["spec"])
    if "auth" in options:  # a JSON pair is a list; add_openapi takes a tuple
        options["auth"] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in options["auth"].items()
        }
    return ServerEntry(name, options, "openapi")


def _fits(kind: str, value: object) -> bool:
    if kind == _STRING:
        return isinstance(value, str)
    if kind == _BOOLEAN:
        return isinstance(value, bool)
    if kind == _EXPOSE:
        try:
            expose_mode(value)  # the one rule add_mcp_server applies
        except ValueError:
            return False
        return True
    if kind == "a positive number":
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if kind == _STRINGS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == _AUTH:
        return isinstance(value, dict) and all(
            isinstance(v, str)
            or (isinstance(v, list) and len(v) == 2 and all(isinstance(p, str) for p in v))
            for v in value.values()
        )
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _expand(value: Any, key: str, environ: Mapping[str, str], fail: Any) -> Any:
    """`${VAR}` in every string of a value, from the environment."""
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if default is not None:  # as a shell reads it: unset or empty takes the default
                return environ.get(name) or default
            if name in environ:
                return environ[name]
            raise fail(key, f"environment variable {name} is not set")

        return _VARIABLE.sub(variable, value)
    if isinstance(value, list):
        return [_expand(v, f"{key}[{i}]", environ, fail) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _expand(v, f"{key}.{k}", environ, fail) for k, v in value.items()}
    return value


__all__ = ["ConfigError", "ServerEntry", "load_config"]
