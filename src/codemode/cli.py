"""`codemode serve | proxy | demo | run | check | search | describe`: the only module that prints
or picks exit codes.

Exit codes: 0 success, 1 the program failed (or the server could not start), 2 usage
error. Every option can also come from the environment: `CODEMODE_<COMMAND>_<OPTION>`,
e.g. `CODEMODE_SERVE_PORT=9000`.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click
from click.core import ParameterSource

import codemode
from codemode.app import CodeMode
from codemode.authz import VisibilityPolicy
from codemode.errors import CodeModeError, Where


def load_app(spec: str) -> CodeMode:
    """`module:attribute` or `path/to/file.py:attribute` -> a CodeMode (the attribute may
    be a factory returning one). A file's folder is searched for its imports, as uvicorn's
    `--app-dir` does. A `.json` file is an `mcpServers` file, served as `proxy` does."""
    if spec.endswith(".json"):
        return load_proxy(spec)
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(
            "expected module:attribute or path/to/file.py:attribute, e.g. myhost:cm",
            param_hint="APP",
        )
    folder = app_folder(spec)
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name)
        if not path.exists():
            raise click.BadParameter(f"{module_name}: no such file", param_hint="APP")
        if path.suffix != ".py" or not path.is_file():
            raise click.BadParameter(f"{module_name} is not a Python file", param_hint="APP")
        module_name = path.stem
    if folder not in sys.path:
        sys.path.insert(0, folder)
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


def app_folder(spec: str) -> str:
    """The folder an app is imported from: its file's, or the working directory."""
    module_name = spec.rpartition(":")[0]
    if module_name.endswith(".py") or os.sep in module_name:
        return str(Path(module_name).resolve().parent)
    return os.getcwd()


def load_cedar(cm: CodeMode, policy_file: str, entities_file: str | None) -> Any:
    """A CedarAuthorizer validated against the capabilities of `cm`, or a usage error."""
    try:
        from codemode.authz.cedar import CedarAuthorizer, CedarPolicyError
    except ImportError:
        raise click.UsageError(
            "--policy-file needs the cedar extra: pip install 'codemode[cedar]'"
        ) from None
    if entities_file is not None:
        try:
            json.loads(Path(entities_file).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise click.UsageError(f"{entities_file}: {exc}") from None
    try:
        authorizer = CedarAuthorizer.from_files(policy_file, entities_file)
        authorizer.validate(cm.catalog.enabled.values())
    except (CedarPolicyError, ValueError) as exc:
        raise click.UsageError(f"{policy_file}: {exc}") from None
    return authorizer


REGO_DECISION = "data.codemode.authz.allow"


def load_rego(files: list[str], data_file: str | None, decision: str, visible: str | None) -> Any:
    """A RegoAuthorizer over the files, or a usage error naming the file and line."""
    try:
        from codemode.authz.rego import RegoAuthorizer, RegoPolicyError
    except ImportError:
        raise click.UsageError(
            "--rego needs the rego extra: pip install 'codemode[rego]'"
        ) from None
    try:
        return RegoAuthorizer.from_files(
            *files, data_file=data_file, decision=decision, visible=visible
        )
    except RegoPolicyError as exc:
        raise click.UsageError(str(exc)) from None


_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""What a terminal obeys rather than shows: control characters but newline and tab (an
escape sequence can set the title or write the clipboard), line and paragraph
separators, and the bidirectional marks and overrides that make text read other than it
is."""


def _for_terminal(text: str) -> str:
    """Program-derived text as a terminal may show it: each control character replaced
    by U+FFFD, one for one, so a caret under a source line still points where it did."""
    return _CONTROL.sub("\ufffd", text)


def _json_for_terminal(value: Any) -> str:
    """A value as indented JSON, each control character left in it as a \\u escape
    (JSON keeps C1 controls and overrides as they are), so the value reads back the same."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


PORT = click.IntRange(0, 65535)
"""A TCP port (0 lets the system choose one)."""


def _say_if_blind(cm: CodeMode, subject: str) -> None:
    """Tell the operator, never the model, when `subject` sees no capability at all: the
    answers below then look like typos (`NameError`, `capability not found`)."""
    if cm.visible(subject):
        return
    if cm.visible():
        reason = "the policy lets it see none (hide_forbidden); choose one with --subject"
    else:
        reason = "the app registers none"
    click.echo(f'codemode: subject "{subject}" sees no capabilities: {reason}', err=True)


def _program_text(file: Any) -> str:
    """A program file's text, or a usage error naming the file when it is not UTF-8."""
    try:
        text: str = file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(f"{file.name}: not UTF-8 text", param_hint="FILE") from None
    return text


def render_error(error: CodeModeError) -> str:
    """The error for a person: the location and line with a caret, then the message."""
    lines = []
    where: Where | None = error.where
    if where is not None:
        lines.append(f'  File "{where.file}", line {where.line}, in {where.func or "<module>"}')
        lines.append(where.excerpt())
    lines.append(f"{error} [{error.code.value}]")
    return _for_terminal("\n".join(lines))


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


@click.group(context_settings={"auto_envvar_prefix": "CODEMODE"})
@click.version_option(codemode.__version__, prog_name="codemode")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="What the host log on stderr shows: info has one line per tool call.",
)
@click.option("-v", "--verbose", is_flag=True, help="Same as --log-level debug.")
def main(log_level: str, verbose: bool) -> None:
    """codemode: let an AI agent drive your API by writing one small program."""
    _log_to_stderr(logging.DEBUG if verbose else getattr(logging, log_level.upper()))


class _InertFormatter(logging.Formatter):
    """Log lines as a terminal may show them: a handler's error or an upstream's stderr
    may repeat what a program passed it."""

    def format(self, record: logging.LogRecord) -> str:
        return _for_terminal(super().format(record))


def _log_to_stderr(level: int) -> None:
    """The host log on stderr: codemode's own lines at `level`, libraries' at warning."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_InertFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=logging.DEBUG if level == logging.DEBUG else logging.WARNING, handlers=[handler]
    )
    logging.getLogger("codemode").setLevel(level)


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


def _http_only(context: click.Context, transport: str) -> None:
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
    banner: list[str],
    web: bool = False,
    root_path: str = "",
    path: str = "/mcp",
    on_disconnect: Literal["cancel", "finish"] = "cancel",
) -> None:
    """Serve until stopped, after a banner that says where to connect."""
    if transport == "stdio":
        _serve_stdio(cm, subject)
        return
    import uvicorn

    from codemode.http.server import server_config

    _refuse_open(host, bool(tokens), insecure)
    app = cm.http_app(
        tokens=tokens,
        subject=subject,
        host=host,
        allowed_hosts=allowed_hosts,
        web=web,
        path=path,
        on_disconnect=on_disconnect,
    )
    listening = _listen(host, port)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            _close_aside(cm)  # running executions end `canceled` now, answered before shutdown
            super().handle_exit(sig, frame)

    server = Server(server_config(app, host=host, port=port, root_path=root_path))
    click.echo("\n".join(banner))
    with listening:
        try:
            server.run(sockets=[listening])
        except KeyboardInterrupt:  # Ctrl-C: a stop asked for, not a failure to report
            click.echo("codemode: stopped", err=True)
            sys.exit(130)


_CLOSE_SECONDS = 2.0
"""How long a stop by signal waits for the CodeMode to close before the process exits."""


def _close_aside(cm: CodeMode) -> threading.Thread:
    """Close `cm` on a thread of its own, started now. A signal handler runs between two
    statements of the thread it interrupts, which may hold a lock that `close()` takes:
    closed from the handler itself, the process would wait on itself for ever."""
    closer = threading.Thread(target=cm.close, name="codemode-close", daemon=True)
    closer.start()
    return closer


def _refuse_open(host: str, tokens: bool, insecure: bool) -> None:
    """A usage error for serving beyond loopback without tokens, unless --insecure."""
    from codemode.http import is_loopback

    if not is_loopback(host) and not tokens and not insecure:
        raise click.UsageError(
            f"refusing to serve {host} without --token-file (use --insecure to allow it)"
        )


def _serve_stdio(cm: CodeMode, subject: str) -> None:
    """Serve over stdio; the first Ctrl-C ends the process at once (the stdin reader
    would otherwise hold it until the next line arrives)."""

    def interrupted(signum: int, frame: object) -> None:
        try:
            _close_aside(cm).join(_CLOSE_SECONDS)
        finally:  # even when no thread could be started to close it
            os._exit(128 + signum)

    try:
        os.read(0, 0)  # fails on a closed or write-only stdin, blocks on none
    except OSError:
        raise click.ClickException(
            "stdin cannot be read: over stdio, requests arrive on it"
        ) from None
    signal.signal(signal.SIGINT, interrupted)
    click.echo(f"codemode: serving {cm.name} over stdio; Ctrl-C stops it", err=True)
    try:
        cm.run("stdio", subject=subject)
    finally:
        cm.close()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, or one line of error and exit code 1 (before any banner).
    It listens at once, so a client that connects as soon as the banner is out waits
    for the server instead of being refused. Made as a TCP socket by name, since asyncio
    sets TCP_NODELAY only on connections such a socket accepts: without it every
    response's last small segment waits for the client's delayed ACK (about 40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
        listening.listen(2048)  # connections wait in the backlog until the server is up
    except OSError as exc:
        listening.close()
        click.echo(f"Error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    return listening


def _url_host(host: str) -> str:
    """A host as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def _where_to_connect(
    name: str, url: str, stdio_args: list[str], *, playground: str | None, tokens: int | None
) -> list[str]:
    """Where a client connects, and the configuration to paste into one."""
    http: dict[str, Any] = {"type": "http", "url": url}
    if tokens:
        http["headers"] = {"Authorization": "Bearer <your token>"}
    stdio = {"command": "uv", "args": ["--directory", os.getcwd(), "run", "codemode", *stdio_args]}
    lines = [f"MCP endpoint (streamable HTTP): {url}"]
    if playground:
        lines.append(f"Playground: {playground}")
    if tokens is not None:
        lines.append(f"Bearer tokens: {tokens} loaded" if tokens else "No bearer tokens")
    lines += [
        "Client configuration, HTTP:",
        json.dumps({"mcpServers": {name: http}}, indent=2),
        "Client configuration, stdio:",
        json.dumps({"mcpServers": {name: stdio}}, indent=2),
        "Press Ctrl-C to stop.",
    ]
    return lines


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


def _serve_options(command: Any) -> Any:
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
        click.option("--web", is_flag=True, help="Serve the playground at / (HTTP only)."),
        MCP_PATH,
        ROOT_PATH,
        ON_DISCONNECT,
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.argument("app")
@_serve_options
@click.option(
    "--reload", is_flag=True, help="Restart when a Python file changes (development, HTTP only)."
)
@click.pass_context
def serve(context: click.Context, /, app: str, reload: bool, **options: Any) -> None:
    """Serve APP (module:attribute or file.py:attribute naming a CodeMode) over MCP."""
    _start(
        context, ["serve", app], lambda: load_app(app), options, reload_app=app if reload else None
    )


@main.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@_serve_options
@click.pass_context
def proxy(context: click.Context, /, config: str, **options: Any) -> None:
    """Serve one code-mode server over every MCP server in CONFIG.

    CONFIG is the `mcpServers` file MCP clients use: each server has `command`, `args`,
    `env` and `cwd` (stdio) or `url` and `headers` (streamable HTTP), and may add
    `include`, `exclude`, `expose_errors`, `timeout` and `connect`. `${VAR}` and
    `${VAR:-default}` are taken from the environment. Server names become namespaces
    (`my-fs` -> `my_fs`). See docs/guides/mcp-gateway.md.
    """
    config = str(Path(config).resolve())  # the printed client configuration works anywhere
    _start(context, ["proxy", config], lambda: load_proxy(config), options, reload_app=None)


def load_proxy(config: str) -> CodeMode:
    """A CodeMode over every server of a config file, each connected now; usage errors
    for the file, and one line of error and exit code 1 for a server that cannot start."""
    from codemode.authz import AllowAll
    from codemode.errors import RegistrationError
    from codemode.gateway.config import ConfigError, load_config

    try:
        entries = load_config(config)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    cm = CodeMode(authorizer=AllowAll(), name="codemode-proxy")
    for entry in entries:
        try:
            cm.add_mcp_server(entry.name, **entry.options)
        except RegistrationError as exc:
            cm.close()
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
    return cm


def _start(
    context: click.Context,
    command: list[str],
    load: Callable[[], CodeMode],
    options: dict[str, Any],
    *,
    reload_app: str | None,
) -> None:
    """Configure the app `load` builds with the options of `serve`, and serve it."""
    transport, subject, host, port = (options[k] for k in ("transport", "subject", "host", "port"))
    _http_only(context, transport)
    setup: dict[str, Any] = {key: options[key] for key in SETUP}
    cm, tokens = _configured(load, **setup)
    stdio_args = [*command, "--transport", "stdio", "--subject", subject]
    for key in SETUP:  # the same server over stdio: its policy, audit log and subject
        option, value = "--" + key.replace("_", "-"), setup[key]
        if key == "token_file" or value in (None, False, (), REGO_DECISION):
            continue
        for one in value if isinstance(value, tuple) else [value]:
            stdio_args += [option] if value is True else [option, one]
    base = f"http://{_url_host(host)}:{port}"
    banner = [
        f"codemode: serving {cm.name}",
        *_where_to_connect(
            cm.name,
            base + options["path"],
            stdio_args,
            playground=f"{base}/" if options["web"] else None,
            tokens=len(tokens) if tokens else 0,
        ),
    ]
    served = {
        "subject": subject,
        "host": host,
        "allowed_hosts": options["allowed_host"],
        "web": options["web"],
        "path": options["path"],
        "on_disconnect": options["on_disconnect"],
    }
    if reload_app is not None:
        cm.close()
        _serve_reloading(
            reload_app,
            {"app": reload_app, **setup, **served},
            host,
            port,
            options["root_path"],
            banner,
            options["insecure"],
        )
        return
    _serve(
        cm,
        transport=transport,
        port=port,
        tokens=tokens,
        insecure=options["insecure"],
        banner=banner,
        root_path=options["root_path"],
        **served,
    )


SETUP = (
    "token_file",
    "policy_file",
    "entities_file",
    "rego",
    "rego_data",
    "rego_decision",
    "rego_visible",
    "hide_forbidden",
    "audit_log",
)
"""The options of `serve` that configure the app rather than the server."""
SERVED = ("subject", "host", "allowed_hosts", "web", "path", "on_disconnect")
"""The options of `serve` that `http_app` takes."""


def _configured(
    load: Callable[[], CodeMode],
    *,
    token_file: str | None,
    policy_file: str | None,
    entities_file: str | None,
    rego: tuple[str, ...] | list[str] = (),
    rego_data: str | None = None,
    rego_decision: str = REGO_DECISION,
    rego_visible: str | None = None,
    hide_forbidden: bool,
    audit_log: str | None,
) -> tuple[CodeMode, dict[str, str] | None]:
    """The app with the options of `serve` applied, and its tokens; usage errors raised."""
    from codemode.http import load_token_file

    try:
        tokens = load_token_file(token_file) if token_file else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.UsageError(str(exc)) from None
    if token_file and not tokens:
        raise click.UsageError(f"{token_file} holds no tokens")
    if policy_file and rego:
        raise click.UsageError("--policy-file (Cedar) and --rego cannot be used together")
    if not rego:
        given = [o for o, v in (("--rego-data", rego_data), ("--rego-visible", rego_visible)) if v]
        given += ["--rego-decision"] if rego_decision != REGO_DECISION else []
        if given:
            raise click.UsageError(f"{', '.join(given)} needs --rego")
    cm = load()
    authorizer = cm.authorizer
    if policy_file:
        authorizer = load_cedar(cm, policy_file, entities_file)
    elif entities_file:
        raise click.UsageError("--entities-file needs --policy-file")
    if rego:
        authorizer = load_rego(list(rego), rego_data, rego_decision, rego_visible)
    hiding = cm.hide_forbidden or hide_forbidden
    if rego_visible and not hiding:
        raise click.UsageError("--rego-visible is used by --hide-forbidden only: give both")
    if hiding and not isinstance(authorizer, VisibilityPolicy):
        raise click.UsageError(
            "--hide-forbidden needs an authorizer that can tell what a subject may see: "
            "use it with --policy-file, or with --rego and --rego-visible"
        )
    sink = None
    if audit_log:
        from codemode.events import JsonLinesSink

        sink = JsonLinesSink(audit_log)
    cm.configure(authorizer=authorizer, hide_forbidden=hiding, on_event=sink)
    return cm, tokens


RELOAD_ENV = "CODEMODE_RELOAD_SETUP"
"""How `serve --reload` hands its options to the server process uvicorn's reloader starts."""


def _serve_reloading(
    app: str,
    setup: dict[str, Any],
    host: str,
    port: int,
    root_path: str,
    banner: list[str],
    insecure: bool,
) -> None:
    """Serve with uvicorn's reloader: the app is built again whenever a Python file under
    its folder changes (for development)."""
    import uvicorn

    from codemode.http.server import server_options

    _refuse_open(host, bool(setup["token_file"]), insecure)
    _listen(host, port).close()  # a busy port is one line of error, before any banner
    folder = app_folder(app)
    handed = {**setup, "allowed_hosts": list(setup["allowed_hosts"])}
    handed["log_level"] = logging.getLogger("codemode").level
    os.environ[RELOAD_ENV] = json.dumps(handed)
    click.echo("\n".join([*banner, f"Reloading when a Python file under {folder} changes."]))
    uvicorn.run(
        "codemode.cli:reloaded_app",
        factory=True,
        reload=True,
        reload_dirs=[folder],
        reload_excludes=[".venv", ".git", "node_modules"],
        **server_options(host=host, port=port, root_path=root_path),
    )


def reloaded_app() -> Any:
    """The ASGI app `serve --reload` runs, built from the options in the environment."""
    setup = json.loads(os.environ[RELOAD_ENV])
    _log_to_stderr(setup.pop("log_level"))
    served = {key: setup.pop(key) for key in SERVED}
    app = setup.pop("app")
    cm, tokens = _configured(lambda: load_app(app), **setup)
    return cm.http_app(tokens=tokens, **served)


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("rb"))
@click.option("--subject", default="local", show_default=True)
def run(app: str, file: Any, subject: str) -> None:
    """Run the program in FILE against APP and print its result."""
    cm = load_app(app)
    try:
        _say_if_blind(cm, subject)
        result = cm.execute(_program_text(file), subject=subject)
    except CodeModeError as error:
        if error.printed:
            click.echo(_for_terminal(error.printed), nl=False)
        click.echo(render_error(error), err=True)
        sys.exit(1)
    finally:
        cm.close()
    if result.printed:
        click.echo(_for_terminal(result.printed), nl=False)
    click.echo(_json_for_terminal(result.value))


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("rb"))
@click.option("--subject", default="local", show_default=True)
def check(app: str, file: Any, subject: str) -> None:
    """Check the program in FILE against APP without running it (the static preflight)."""
    with load_app(app) as cm:
        _say_if_blind(cm, subject)
        errors = cm.check(_program_text(file), subject=subject)
    for error in errors:
        click.echo(render_error(error), err=True)
    if errors:
        sys.exit(1)
    click.echo("ok: no problems found")


@main.command()
@click.option(
    "--transport", type=click.Choice(["http", "stdio"]), default="http", show_default=True
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=PORT)
@click.option("--data", type=click.Path(dir_okay=False, path_type=Path), help="SQLite file to use.")
@click.option("--web/--no-web", default=True, show_default=True, help="Serve the playground at /.")
@ALLOWED_HOST
@ROOT_PATH
@click.pass_context
def demo(
    context: click.Context,
    transport: str,
    host: str,
    port: int,
    data: Path | None,
    web: bool,
    allowed_host: tuple[str, ...],
    root_path: str,
) -> None:
    """Serve the demo inventory host (SQLite, created on first run)."""
    from codemode.demo import create, default_path

    _http_only(context, transport)
    path = data or default_path()
    cm = create(path)
    stdio_args = ["demo", "--transport", "stdio", *(["--data", str(path)] if data else [])]
    banner = [
        f"codemode demo: an inventory of sandboxes, instances and owners in {path}",
        *_where_to_connect(
            cm.name,
            f"http://{_url_host(host)}:{port}/mcp",
            stdio_args,
            playground=f"http://{_url_host(host)}:{port}/" if web else None,
            tokens=None,
        ),
    ]
    _serve(
        cm,
        transport=transport,
        subject="local",
        host=host,
        port=port,
        tokens=None,
        insecure=False,
        allowed_hosts=allowed_host,
        banner=banner,
        web=web,
        root_path=root_path,
    )


@main.command()
@click.argument("app")
@click.argument("query", default="")
@click.option("--subject", default="local", show_default=True)
@click.option("--offset", default=0, type=click.IntRange(min=0), help="Where the page starts.")
def search(app: str, query: str, subject: str, offset: int) -> None:
    """Show what search_api answers for QUERY (every capability when it is empty)."""
    from codemode.payloads import search_payload

    cm = load_app(app)
    try:
        _say_if_blind(cm, subject)
        found = cm.search(query, offset=offset, subject=subject)
        click.echo(json.dumps(search_payload(found), indent=2))
    finally:
        cm.close()


@main.command()
@click.argument("app")
@click.argument("name")
@click.option("--subject", default="local", show_default=True)
def describe(app: str, name: str, subject: str) -> None:
    """Show what describe_api answers for the capability NAME."""
    from codemode.payloads import describe_payload

    cm = load_app(app)
    try:
        _say_if_blind(cm, subject)
        click.echo(json.dumps(describe_payload(cm.describe(name, subject=subject)), indent=2))
    except CodeModeError as error:
        click.echo(render_error(error), err=True)
        sys.exit(1)
    finally:
        cm.close()


__all__ = ["main"]
