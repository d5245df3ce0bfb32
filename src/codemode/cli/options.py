"""The options the commands share, and their checks: a malformed or unsafe value is a usage
error (exit code 2) before anything is loaded or served.
"""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from codemode.loading import REGO_DECISION
from codemode.serving import ServeConfig

PORT = click.IntRange(0, 65535)
"""A TCP port (0 lets the system choose one)."""


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


HTTP_ONLY = (
    "path",
    "on_disconnect",
    "host",
    "port",
    "token_file",
    "insecure",
    "allowed_host",
    "web",
    "root_path",
    "reload",
)
"""Options that mean nothing over stdio: passing one with it is a usage error."""


def http_only(context: click.Context, transport: str) -> None:
    """A usage error for an option of `HTTP_ONLY` given, by flag or environment, to stdio."""
    if transport != "stdio":
        return
    given = [
        f"--{name.replace('_', '-')}"
        for name in HTTP_ONLY
        if name in context.params
        and context.get_parameter_source(name)
        in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    ]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise click.UsageError(f"{', '.join(given)} {verb} only to --transport http")


def refuse_open(config: ServeConfig, insecure: bool) -> None:
    """A usage error for serving HTTP beyond loopback without tokens, unless --insecure."""
    from codemode.http import is_loopback

    tokens = config.tokens or config.token_file
    if config.transport == "stdio" or is_loopback(config.host) or tokens or insecure:
        return
    raise click.UsageError(
        f"refusing to serve {config.host} without --token-file (use --insecure to allow it)"
    )


TRANSPORT = click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True
)
MCP_PATH = click.option(
    "--path", default="/mcp", show_default=True, help="Where MCP is served (HTTP only)."
)
ROOT_PATH = click.option(
    "--root-path",
    default="",
    help="The path a reverse proxy serves this under, e.g. /codemode (HTTP only).",
)
ON_DISCONNECT = click.option(
    "--on-disconnect",
    type=click.Choice(["cancel", "finish"]),
    default="cancel",
    show_default=True,
    help="What a dropped connection does to its running call: cancel it, or let it run to "
    "its end, its answer lost (HTTP only). A notifications/cancelled, or stopping the "
    "server, ends it either way.",
)
ALLOWED_HOST = click.option(
    "--allowed-host",
    multiple=True,
    callback=_check_allowed_hosts,
    help="A further Host name clients use, e.g. a proxy's public name (repeatable).",
)


SHAPES = click.option(
    "--shapes",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    envvar="CODEMODE_SHAPES",
    show_envvar=True,
    help="The JSON file where the result shapes learned from capabilities that declare "
    "none (an MCP tool without outputSchema, a REST operation without a response schema) "
    "are kept: read at the start, so describe and the preflight know them before any "
    "call, and written as more is learned (default: this process only).",
)


PROGRAMS = click.option(
    "--programs",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False),
    envvar="CODEMODE_PROGRAMS",
    show_envvar=True,
    help="A folder of .py files, each a program the host keeps for every subject as "
    "programs.<file name> (its docstring the summary): searched, described, authorized "
    "and audited like any capability, and followed as files change.",
)


SAVED = click.option(
    "--saved",
    metavar="DIR",
    type=click.Path(file_okay=False),
    envvar="CODEMODE_SAVED",
    show_envvar=True,
    help="The folder where the programs subjects save (execute's save_as) are kept, so "
    "that a restarted server still has them; sealed with CODEMODE_REQUEST_STATE_KEY when "
    "it is set (default: the --store when given, else this process only).",
)


def serve_options(command: Any) -> Any:
    """The options `serve` and `proxy` share."""
    options = [
        TRANSPORT,
        click.option(
            "--subject", default="local", show_default=True, help="Subject of stdio calls."
        ),
        click.option("--host", default="127.0.0.1", show_default=True),
        click.option("--port", default=8000, show_default=True, type=PORT),
        click.option(
            "--token-file",
            type=click.Path(exists=True, dir_okay=False),
            help="Bearer tokens, one `subject:token` per line (# starts a comment).",
        ),
        click.option(
            "--insecure", is_flag=True, help="Allow a non-loopback address without tokens."
        ),
        ALLOWED_HOST,
        click.option(
            "--policy-file", type=click.Path(exists=True, dir_okay=False), help="Cedar policies."
        ),
        click.option(
            "--entities-file",
            type=click.Path(exists=True, dir_okay=False),
            help="Cedar entities (JSON).",
        ),
        click.option(
            "--rego",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False),
            help="A Rego policy module (repeatable); instead of --policy-file.",
        ),
        click.option(
            "--rego-data",
            type=click.Path(exists=True, dir_okay=False),
            help="The base document Rego policies read as data (JSON).",
        ),
        click.option(
            "--rego-decision",
            default=REGO_DECISION,
            show_default=True,
            help="The Rego rule that decides each call.",
        ),
        click.option(
            "--rego-visible",
            help="The Rego rule that tells whether a subject may ever call a capability "
            "(for --hide-forbidden), e.g. data.codemode.authz.visible.",
        ),
        click.option(
            "--hide-forbidden", is_flag=True, help="Hide capabilities a subject may never call."
        ),
        click.option(
            "--audit-log", type=click.Path(dir_okay=False), help="Append audit events (JSON lines)."
        ),
        click.option(
            "--store",
            metavar="REDIS_URL",
            envvar="CODEMODE_STORE",
            show_envvar=True,
            help="The Redis server (redis://host:6379/0) where replicas keep what they share: "
            "the sessions programs run in, the tasks they run (so any replica answers "
            "tasks/get and tasks/cancel), the result shapes they learn, and which programs "
            "paused for an approval resumed, so each resumes once (default: this process "
            "only). Every replica needs "
            "the same CODEMODE_REQUEST_STATE_KEY, which seals what is kept there. Needs the "
            "codemode[redis] extra.",
        ),
        SHAPES,
        PROGRAMS,
        SAVED,
        click.option(
            "--tools",
            metavar="PATTERN",
            multiple=True,
            envvar="CODEMODE_TOOLS",
            show_envvar=True,
            help="Also list the capabilities this name pattern matches (records.lookup, "
            "'programs.*') as plain MCP tools beside search_api, describe_api and execute, "
            "for clients that do not write programs; each call is authorized, bounded and "
            "audited as a program's call (repeatable).",
        ),
        click.option(
            "--no-sessions",
            is_flag=True,
            help="Run every program from nothing: execute takes no session.",
        ),
        click.option(
            "--no-tasks",
            is_flag=True,
            help="Never run execute as an MCP task: a client that declares the tasks "
            "extension gets one request within the execution time, as every other does.",
        ),
        click.option(
            "--replay-guard",
            metavar="REDIS_URL",
            help="The name --store had while the replay guard was its only user: alone it "
            "is --store (and serves without CODEMODE_REQUEST_STATE_KEY, as it did); with "
            "--store it must be the same URL.",
        ),
        click.option("--web", is_flag=True, help="Serve the playground at / (HTTP only)."),
        MCP_PATH,
        ROOT_PATH,
        ON_DISCONNECT,
    ]
    for option in reversed(options):
        command = option(command)
    return command


POLICY_OPTIONS = (
    "policy_file",
    "entities_file",
    "rego",
    "rego_data",
    "rego_decision",
    "rego_visible",
    "hide_forbidden",
)
"""The options of `serve` that name the policy (`PolicyFiles`)."""
SETUP = (
    "token_file",
    *POLICY_OPTIONS,
    "audit_log",
    "shapes",
    "programs",
    "saved",
    "tools",
    "no_sessions",
    "no_tasks",
)
"""The options of `serve` that configure the app rather than the server."""


def checked_tokens(token_file: str | None) -> dict[str, str] | None:
    """The bearer tokens of `--token-file`, or a usage error naming the file and line."""
    from codemode.http import load_token_file

    try:
        tokens = load_token_file(token_file) if token_file else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.UsageError(str(exc)) from None
    if token_file and not tokens:
        raise click.UsageError(f"{token_file} holds no tokens")
    return tokens


__all__ = [
    "ALLOWED_HOST",
    "HTTP_ONLY",
    "MCP_PATH",
    "ON_DISCONNECT",
    "POLICY_OPTIONS",
    "PORT",
    "PROGRAMS",
    "ROOT_PATH",
    "SAVED",
    "SETUP",
    "SHAPES",
    "TRANSPORT",
    "checked_tokens",
    "http_only",
    "refuse_open",
    "serve_options",
]
