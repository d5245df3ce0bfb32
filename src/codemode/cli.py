"""`codemode serve | run | demo`: the only module that prints or picks exit codes.

Exit codes: 0 success, 1 the program failed, 2 usage error.
"""

from __future__ import annotations

import ast
import importlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from codemode.app import CodeMode
from codemode.errors import PROGRAM_FILE, CodeModeError, InvalidProgramError, Where


def load_app(spec: str) -> CodeMode:
    """`module:attribute` -> a CodeMode (the attribute may be a factory returning one)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter("expected module:attribute, e.g. myhost:cm", param_hint="APP")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"cannot load {spec}: {exc}", param_hint="APP") from None
    if not isinstance(target, CodeMode) and callable(target):
        target = target()
    if not isinstance(target, CodeMode):
        raise click.BadParameter(f"{spec} is not a CodeMode", param_hint="APP")
    return target


def load_cedar(cm: CodeMode, policy_file: str, entities_file: str | None) -> Any:
    """A CedarAuthorizer validated against the capabilities of `cm`, or a usage error."""
    try:
        from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError
    except ImportError:
        raise click.UsageError(
            "--policy-file needs the cedar extra: pip install 'codemode[cedar]'"
        ) from None
    try:
        authorizer = CedarAuthorizer.from_files(policy_file, entities_file)
        authorizer.validate(cm.catalog.enabled.values())
    except (CedarPolicyError, ValueError) as exc:
        raise click.UsageError(f"{policy_file}: {exc}") from None
    return authorizer


def render_error(error: CodeModeError) -> str:
    """The error for a person: the location and line with a caret, then the message."""
    lines = []
    where: Where | None = error.where
    if where is not None:
        lines.append(f'  File "{where.file}", line {where.line}, in {where.func or "<module>"}')
        lines.append(where.excerpt())
    lines.append(f"{error} [{error.code.value}]")
    return "\n".join(lines)


def _check_allowed_hosts(
    context: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """Refuse a malformed `--allowed-host` while parsing, as a usage error."""
    from codemode.http import host_names

    try:
        host_names(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return values


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log host-side details to stderr.")
def main(verbose: bool) -> None:
    """codemode: let an AI agent drive your API by writing one small program."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _serve(
    cm: CodeMode,
    *,
    transport: str,
    subject: str,
    host: str,
    port: int,
    tokens: dict[str, str] | None,
    insecure: bool,
    allowed_hosts: tuple[str, ...],
    banner: str | None = None,
    web: bool = False,
) -> None:
    if transport == "stdio":
        cm.run("stdio", subject=subject)
        return
    import uvicorn

    from codemode.http import is_loopback
    from codemode.http.server import server_config

    if not is_loopback(host) and not tokens and not insecure:
        raise click.UsageError(
            f"refusing to serve {host} without --token-file (use --insecure to allow it)"
        )
    app = cm.http_app(
        tokens=tokens, subject=subject, host=host, allowed_hosts=allowed_hosts, web=web
    )
    server = uvicorn.Server(server_config(app, host=host, port=port))
    if banner:
        click.echo(banner)
    server.run()


TRANSPORT = click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
ALLOWED_HOST = click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    callback=_check_allowed_hosts,
    help="A further Host name clients use, e.g. a proxy's public name (repeatable).",
)


@main.command()
@click.argument("app")
@TRANSPORT
@click.option("--subject", default="local", show_default=True, help="Subject of stdio calls.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option(
    "--token-file", type=click.Path(exists=True, dir_okay=False), help="token -> subject map."
)
@click.option("--insecure", is_flag=True, help="Allow a non-loopback address without tokens.")
@ALLOWED_HOST
@click.option("--policy-file", type=click.Path(exists=True, dir_okay=False), help="Cedar policies.")
@click.option(
    "--entities-file", type=click.Path(exists=True, dir_okay=False), help="Cedar entities (JSON)."
)
@click.option("--hide-forbidden", is_flag=True, help="Hide capabilities a subject may never call.")
@click.option(
    "--audit-log", type=click.Path(dir_okay=False), help="Append audit events (JSON lines)."
)
@click.option("--web", is_flag=True, help="Serve the playground at / (HTTP only).")
def serve(
    app: str,
    transport: str,
    subject: str,
    host: str,
    port: int,
    token_file: str | None,
    insecure: bool,
    allowed_hosts: tuple[str, ...],
    policy_file: str | None,
    entities_file: str | None,
    hide_forbidden: bool,
    audit_log: str | None,
    web: bool,
) -> None:
    """Serve APP (module:attribute naming a CodeMode) over MCP."""
    from codemode.http import load_token_file

    try:
        tokens = load_token_file(token_file) if token_file else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.UsageError(str(exc)) from None
    if token_file and not tokens:
        raise click.UsageError(f"{token_file} holds no tokens")
    cm = load_app(app)
    if policy_file:
        cm.authorizer = load_cedar(cm, policy_file, entities_file)
    elif entities_file:
        raise click.UsageError("--entities-file needs --policy-file")
    cm.hide_forbidden = cm.hide_forbidden or hide_forbidden
    if cm.hide_forbidden and not callable(getattr(cm.authorizer, "can_see", None)):
        raise click.UsageError(
            "--hide-forbidden needs an authorizer that can tell what a subject may see: "
            "use it with --policy-file"
        )
    if audit_log:
        from codemode.events import JsonLinesSink

        cm.on_event = JsonLinesSink(audit_log)
    banner = f"codemode: serving {cm.name} at http://{host}:{port}/mcp"
    _serve(
        cm,
        transport=transport,
        subject=subject,
        host=host,
        port=port,
        tokens=tokens,
        insecure=insecure,
        allowed_hosts=allowed_hosts,
        banner=banner,
        web=web,
    )


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--subject", default="local", show_default=True)
def run(app: str, file: Any, subject: str) -> None:
    """Run the program in FILE against APP and print its result."""
    cm = load_app(app)
    try:
        result = cm.execute(file.read(), subject=subject)
    except CodeModeError as error:
        if error.printed:
            click.echo(error.printed, nl=False)
        click.echo(render_error(error), err=True)
        sys.exit(1)
    finally:
        cm.close()
    if result.printed:
        click.echo(result.printed, nl=False)
    click.echo(json.dumps(result.value, indent=2, ensure_ascii=False))


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("r", encoding="utf-8"))
def check(app: str, file: Any) -> None:
    """Check the program in FILE against APP without running it (the static preflight)."""
    from codemode.runtime.program import Programs

    cm = load_app(app)
    source = file.read()
    try:
        Programs(cm.catalog.enabled).prepare(source)
        _parses(source)
    except CodeModeError as error:
        click.echo(render_error(error), err=True)
        sys.exit(1)
    click.echo("ok: no problems found")


def _parses(source: str) -> None:
    """Raise the syntax error Python's parser finds (the run would refuse the program too)."""
    from codemode.runtime.program import split_lines

    try:
        ast.parse(source, filename=PROGRAM_FILE)
    except SyntaxError as error:
        lines = split_lines(source)
        line = min(max(error.lineno or 1, 1), max(len(lines), 1))
        text = lines[line - 1] if lines else ""
        column = min(max(error.offset or 1, 1), len(text) + 1)
        where = Where(PROGRAM_FILE, line, column, line, column + 1, None, text)
        detail = f"{where.render()}: SyntaxError: {error.msg}"
        raise InvalidProgramError(detail, where=where) from None


@main.command()
@click.option(
    "--transport", type=click.Choice(["http", "stdio"]), default="http", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), help="SQLite file to use.")
@click.option("--web/--no-web", default=True, show_default=True, help="Serve the playground at /.")
@ALLOWED_HOST
def demo(
    transport: str,
    host: str,
    port: int,
    data: Path | None,
    web: bool,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve the demo inventory host (SQLite, created on first run)."""
    from codemode.demo import create, default_path

    path = data or default_path()
    cm = create(path)
    url = f"http://{host}:{port}/mcp"
    http_config = {"mcpServers": {"codemode-demo": {"type": "http", "url": url}}}
    stdio_config = {
        "mcpServers": {
            "codemode-demo": {
                "command": "uv",
                "args": ["run", "codemode", "demo", "--transport", "stdio"],
            }
        }
    }
    banner = "\n".join(
        [
            f"codemode demo: an inventory of sandboxes, instances and owners in {path}",
            f"MCP endpoint (streamable HTTP): {url}",
            *([f"Playground: http://{host}:{port}/"] if web else []),
            "Client configuration, HTTP:",
            json.dumps(http_config, indent=2),
            "Client configuration, stdio:",
            json.dumps(stdio_config, indent=2),
            "Press Ctrl-C to stop.",
        ]
    )
    _serve(
        cm,
        transport=transport,
        subject="local",
        host=host,
        port=port,
        tokens=None,
        insecure=False,
        allowed_hosts=allowed_hosts,
        banner=banner,
        web=web,
    )


__all__ = ["main"]
