"""The commands, `codemode serve | proxy | demo | run | check | search | describe | shapes`
(and `programs`, from `cli.programs`): with it, the only modules that print or pick exit codes.

Streams: a command's answer goes to stdout (a result; the errors a program has, in the
form the model reads them, for `run`, `check` and `describe` alike; search and describe
JSON; a server's banner); what is said to the operator goes to stderr (the host log,
usage errors, a subject that sees nothing; the stdio banner, since stdout carries the
protocol there).

Exit codes: 0 success, 1 the program failed, `check` found problems, `describe` no
capability or `shapes --name` no shape (or the server could not start, or the `--shapes`
file of `run`, `check`, `describe`, `serve` or `proxy` cannot be read: the app is refused
as one whose policy does not fit it is; a missing file is none, they start from nothing),
2 usage error or a shapes file the `shapes` command cannot read (it only reads, so a
missing file is one too), 130 stopped by Ctrl-C. Every option can also come from the
environment: `CODEMODE_<COMMAND>_<OPTION>`, e.g. `CODEMODE_SERVE_PORT=9000`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import codemode
from codemode import serving
from codemode.app import CodeMode
from codemode.authz import PolicyError
from codemode.cli.options import (
    ALLOWED_HOST,
    POLICY_OPTIONS,
    PORT,
    PROGRAMS,
    ROOT_PATH,
    SAVED,
    SETUP,
    SHAPES,
    checked_tokens,
    http_only,
    refuse_open,
    serve_options,
)
from codemode.cli.programs import programs
from codemode.cli.terminal import (
    CLEAR_LINE,
    for_terminal,
    json_for_terminal,
    log_to_stderr,
    progress_line,
    terminal_columns,
    url_host,
    where_to_connect,
)
from codemode.errors import CodeModeError, RegistrationError
from codemode.loading import (
    REGO_DECISION,
    LoadError,
    PolicyFiles,
    app_folder,
    load_app,
    load_proxy,
    proxy_namespaces,
)
from codemode.runtime import ProgressNote, RunWatch, watching
from codemode.serving import ServeConfig, Transport


def _load_app(
    spec: str, shapes: str | None = None, programs: str | None = None, saved: str | None = None
) -> CodeMode:
    """The app `spec` names, keeping its learned shapes in the file `shapes` when given,
    with the host's programs of the folder `programs` and subjects' of `saved`, as
    `serve` takes them."""
    with _loading():
        cm = load_app(spec)
        try:
            if shapes is not None:
                cm.configure(shapes=shapes)
            serving.keep_programs(cm, programs, saved)
        except BaseException:  # an unreadable file or folder: the app is not used
            cm.close()
            raise
        return cm


def _with_programs(command: Any) -> Any:
    """`--programs DIR` and `--saved DIR`, as `serve` has them."""
    return PROGRAMS(SAVED(command))


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    """A LoadError as a usage error; a server of an `mcpServers` file that cannot start,
    or a policy that does not fit the app, as one line of error and exit code 1; Ctrl-C
    as exit code 130."""
    try:
        yield
    except LoadError as exc:
        if exc.param is not None:
            raise click.BadParameter(str(exc), param_hint=exc.param) from None
        raise click.UsageError(str(exc)) from None
    except (RegistrationError, PolicyError) as exc:  # a policy that does not fit the app too
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C: a stop asked for, not a failure to report
        click.echo("codemode: stopped", err=True)
        sys.exit(130)


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


def _interruptible(
    execute: Callable[..., Any], *args: Any, progress: bool = False, **kwargs: Any
) -> Any:
    """`execute(...)` on a daemon thread of its own, so that Ctrl-C stops the command at
    once: the caller's thread may run a program's first steps in the interpreter, which
    takes no signal until the step ends (`cm.close()` then ends the program). With
    `progress`, the caller's thread shows the run's notes meanwhile."""
    answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
    notes: queue.SimpleQueue[ProgressNote | None] = queue.SimpleQueue()
    watch = RunWatch(sink=notes.put) if progress else None  # the sink only enqueues

    def work() -> None:
        try:
            with watching(watch) if watch is not None else contextlib.nullcontext():
                answer.set_result(execute(*args, **kwargs))
        except BaseException as exc:  # the caller's to raise
            answer.set_exception(exc)
        finally:
            notes.put(None)  # after the run's last note

    threading.Thread(target=work, name="codemode-run", daemon=True).start()
    if watch is not None:
        _show_progress(notes)
    return answer.result()


def _show_progress(notes: queue.SimpleQueue[ProgressNote | None]) -> None:
    """Each note on one stderr line, rewritten in place, until the run ends; the line is
    then cleared, so the result (or a Ctrl-C's message) starts on a clean line."""
    shown = False
    try:
        while (note := notes.get()) is not None:
            click.echo(progress_line(note.message, terminal_columns()), err=True, nl=False)
            shown = True
    finally:
        if shown:
            click.echo(CLEAR_LINE, err=True, nl=False)


def _program_text(file: Any) -> str:
    """A program file's text, or a usage error naming the file when it is not UTF-8."""
    try:
        text: str = file.read().decode("utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(f"{file.name}: not UTF-8 text", param_hint="FILE") from None
    return text


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
    log_to_stderr(logging.DEBUG if verbose else getattr(logging, log_level.upper()))


def _serve(cm: CodeMode, config: ServeConfig, banner: list[str]) -> None:
    """Serve until stopped, after a banner that says where to connect; a failure to start
    is one line of error and exit code 1, a stop by Ctrl-C exit code 130 (`_loading`)."""
    stdio = config.transport == "stdio"
    if stdio:  # on stderr: stdout carries the protocol
        banner = [f"codemode: serving {cm.name} over stdio; Ctrl-C stops it"]
    try:
        with _loading():  # the policy files, loaded for the app
            serving.serve(cm, config, announce=functools.partial(_say, banner, err=stdio))
    except serving.ServingError as exc:
        raise click.ClickException(str(exc)) from None


def _say(lines: list[str], *, err: bool = False) -> None:
    """Print a banner, once serving can take its first client."""
    click.echo("\n".join(lines), err=err)


@main.command()
@click.argument("app")
@serve_options
@click.option(
    "--reload", is_flag=True, help="Restart when a Python file changes (development, HTTP only)."
)
@click.pass_context
def serve(context: click.Context, /, app: str, reload: bool, **options: Any) -> None:
    """Serve APP (module:attribute or file.py:attribute naming a CodeMode) over MCP.

    A client that sends a progressToken gets progress notes while a program runs; one
    that declares MCP's tasks extension (2026-07-28) gets execute as a task, run within
    Limits.max_task_seconds and polled with tasks/get (--no-tasks turns this off).
    """
    _start(
        context, ["serve", app], lambda: _load_app(app), options, reload_app=app if reload else None
    )


@main.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@serve_options
@click.pass_context
def proxy(context: click.Context, /, config: str, **options: Any) -> None:
    """Serve one code-mode server over every MCP server and REST API in CONFIG.

    CONFIG is the `mcpServers` file MCP clients use: each server has `command`, `args`,
    `env` and `cwd` (stdio) or `url` and `headers` (streamable HTTP), and may add
    `include`, `exclude`, `expose_errors`, `timeout` and `connect`. Its `openApi` object
    names REST APIs: each has `spec` (a path or URL of an OpenAPI document) and may add
    `baseUrl`, `headers`, `auth`, `include`, `exclude`, `timeout`, `trustHints` and
    `disabled`. `${VAR}` and `${VAR:-default}` are taken from the environment. Names become
    namespaces (`my-fs` -> `my_fs`). See docs/guides/mcp-gateway.md and
    docs/guides/openapi.md.
    """
    config = str(Path(config).resolve())  # the printed client configuration works anywhere
    _start(
        context, ["proxy", config], functools.partial(_load_proxy, config), options, reload_app=None
    )


def _load_proxy(config: str) -> CodeMode:
    with _loading():
        return load_proxy(config)


def _start(
    context: click.Context,
    command: list[str],
    load: Callable[[], CodeMode],
    options: dict[str, Any],
    *,
    reload_app: str | None,
) -> None:
    """Build the serving configuration from the options of `serve`, and serve the app
    `load` builds with it."""
    transport, subject, host, port = (options[k] for k in ("transport", "subject", "host", "port"))
    http_only(context, transport)
    setup: dict[str, Any] = {key: options[key] for key in SETUP}
    tokens = checked_tokens(options["token_file"])  # checked now; each served app reads the file
    try:
        config = ServeConfig(
            transport=transport,
            subject=subject,
            host=host,
            port=port,
            token_file=options["token_file"],
            allowed_hosts=options["allowed_host"],
            path=options["path"],
            root_path=options["root_path"],
            web=options["web"],
            on_disconnect=options["on_disconnect"],
            policy=_policy(options),
            hide_forbidden=options["hide_forbidden"],
            audit_log=options["audit_log"],
            store=options["store"],
            replay_guard=options["replay_guard"],
            sessions=not options["no_sessions"],
            tasks=not options["no_tasks"],
            shapes=options["shapes"],
            tools=options["tools"],
            programs=options["programs"],
            saved=options["saved"],
            app=None if reload_app is None else _Reloaded(reload_app, _log_level()),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    refuse_open(config, options["insecure"])
    cm = load()
    from codemode.mcp import security as sealing

    try:
        sealing(cm)  # a key that cannot seal is refused now, not at the first pause
        serving.check_store_key(cm, config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    stdio_args = [*command, "--transport", "stdio", "--subject", subject]
    for key in SETUP:  # the same server over stdio: its policy, audit log and subject
        option, value = "--" + key.replace("_", "-"), setup[key]
        if key == "token_file" or value in (None, False, (), REGO_DECISION):
            continue
        for one in value if isinstance(value, tuple) else [value]:
            stdio_args += [option] if value is True else [option, one]
    base = f"http://{url_host(host)}:{port}"
    banner = [
        f"codemode: serving {cm.name}",
        *where_to_connect(
            cm.name,
            base + options["path"],
            stdio_args,
            playground=f"{base}/" if options["web"] else None,
            tokens=len(tokens) if tokens else 0,
        ),
    ]
    if reload_app is None:
        _serve(cm, config, banner)
        return
    folder = app_folder(reload_app)
    banner.append(f"Reloading when a Python file under {folder} changes.")
    try:
        with _loading():
            serving.serve_reloading(
                cm, config, watch=folder, announce=functools.partial(_say, banner)
            )
    except serving.ServingError as exc:
        raise click.ClickException(str(exc)) from None


def _log_level() -> int:
    """The level of codemode's own host log lines, as `--log-level` set it."""
    return logging.getLogger("codemode").level


def _policy(options: dict[str, Any]) -> PolicyFiles:
    with _loading():
        return PolicyFiles(**{key: options[key] for key in POLICY_OPTIONS})


@dataclass(frozen=True, slots=True)
class _Reloaded:
    """How each server process `serve --reload` starts builds the app: from its spec
    again, with the host log as this command line set it up."""

    spec: str
    log_level: int

    def __call__(self) -> CodeMode:
        log_to_stderr(self.log_level)
        try:
            return load_app(self.spec)
        except (LoadError, RegistrationError) as exc:  # this server waits for the next edit
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("rb"))
@click.option("--subject", default="local", show_default=True)
@SHAPES
@_with_programs
def run(
    app: str, file: Any, subject: str, shapes: str | None, programs: str | None, saved: str | None
) -> None:
    """Run the program in FILE against APP and print its result, or the error as the
    model reads it (on a terminal, its progress meanwhile on stderr)."""
    cm = _load_app(app, shapes, programs, saved)
    try:
        with _loading():
            _say_if_blind(cm, subject)
            source, shown = _program_text(file), sys.stderr.isatty()
            result = _interruptible(cm.execute, source, subject=subject, progress=shown)
    except CodeModeError as error:  # on stdout, as the model reads it; the host log on stderr
        click.echo(for_terminal(error.report()))
        sys.exit(1)
    finally:
        cm.close()
    if result.printed:
        click.echo(for_terminal(result.printed), nl=False)
    click.echo(json_for_terminal(result.value))


@main.command()
@click.argument("app")
@click.argument("file", type=click.File("rb"))
@click.option("--subject", default="local", show_default=True)
@SHAPES
@_with_programs
def check(
    app: str, file: Any, subject: str, shapes: str | None, programs: str | None, saved: str | None
) -> None:
    """Check the program in FILE against APP without running it (the static preflight),
    and print each problem as `run` prints an error; with --shapes, a result key the
    learned shapes lack too, as execute refuses it."""
    with _load_app(app, shapes, programs, saved) as cm, _loading():
        _say_if_blind(cm, subject)
        errors = cm.check(_program_text(file), subject=subject)
    for error in errors:
        click.echo(for_terminal(error.report()))
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
    transport: Transport,
    host: str,
    port: int,
    data: Path | None,
    web: bool,
    allowed_host: tuple[str, ...],
    root_path: str,
) -> None:
    """Serve the demo inventory host (SQLite, created on first run)."""
    from codemode.demo import create, default_path

    http_only(context, transport)
    config = ServeConfig(
        transport=transport,
        host=host,
        port=port,
        allowed_hosts=allowed_host,
        web=web,
        root_path=root_path,
    )
    refuse_open(config, insecure=False)
    path = data or default_path()
    cm = create(path)
    stdio_args = ["demo", "--transport", "stdio", *(["--data", str(path)] if data else [])]
    banner = [
        f"codemode demo: an inventory of sandboxes, instances and owners in {path}",
        *where_to_connect(
            cm.name,
            f"http://{url_host(host)}:{port}/mcp",
            stdio_args,
            playground=f"http://{url_host(host)}:{port}/" if web else None,
            tokens=None,
        ),
    ]
    _serve(cm, config, banner)


@main.command()
@click.argument("app")
@click.argument("query", default="")
@click.option("--subject", default="local", show_default=True)
@click.option("--offset", default=0, type=click.IntRange(min=0), help="Where the page starts.")
@_with_programs
def search(
    app: str, query: str, subject: str, offset: int, programs: str | None, saved: str | None
) -> None:
    """Show what search_api answers for QUERY (every capability when it is empty)."""
    from codemode.payloads import search_payload

    cm = _load_app(app, None, programs, saved)
    try:
        with _loading():
            _say_if_blind(cm, subject)
        found = cm.search(query, offset=offset, subject=subject)
        click.echo(json.dumps(search_payload(found), indent=2))
    finally:
        cm.close()


@main.command()
@click.argument("app")
@click.argument("name")
@click.option("--subject", default="local", show_default=True)
@click.option("--schemas", is_flag=True, help="Add the JSON Schemas, as describe_api's schemas.")
@SHAPES
@_with_programs
def describe(
    app: str,
    name: str,
    subject: str,
    schemas: bool,
    shapes: str | None,
    programs: str | None,
    saved: str | None,
) -> None:
    """Show what describe_api answers for the capability NAME (with --shapes, the result
    shape learned for it too)."""
    from codemode.payloads import describe_payload

    cm = _load_app(app, shapes, programs, saved)
    try:
        with _loading():
            _say_if_blind(cm, subject)
        info = cm.describe(name, subject=subject)
        click.echo(json.dumps(describe_payload(info, schemas=schemas), indent=2))
    except CodeModeError as error:
        click.echo(for_terminal(error.report()))
        sys.exit(1)
    finally:
        cm.close()


@main.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--shapes",
    "file",
    metavar="FILE",
    required=True,
    envvar="CODEMODE_SHAPES",
    show_envvar=True,
    help="The shapes file a server kept (its --shapes).",
)
@click.option(
    "--name", help="Print this capability's schema alone, ready to paste as its outputSchema."
)
def shapes(config: str, file: str, name: str | None) -> None:
    """Print the result shapes a server learned (its --shapes file) for the capabilities
    of CONFIG's servers and REST APIs (starting none of them), as JSON Schema by
    capability, with the number
    of results each was learned from. A shape whose result is not an object, which MCP's
    outputSchema must be, is named on stderr."""
    from codemode.cli.shapes import learned_under, listing, missing

    with _loading():
        under = proxy_namespaces(config)
    try:
        found = learned_under(file, under)
    except ValueError as exc:  # one line, not a usage text: the file is the problem
        click.echo(for_terminal(f"Error: {exc}"), err=True)
        sys.exit(2)
    if name is not None:
        named = [printed for printed in found if printed.name == name]
        if not named:
            click.echo(for_terminal(f"codemode: {missing(name, file, found)}"), err=True)
            sys.exit(1)
        found = named
    if not found:  # an empty file, or one another config's servers filled
        click.echo(f"codemode: no shape in {file} is of a capability of {config}", err=True)
    for printed in found:
        if not printed.is_object:
            click.echo(for_terminal(f"codemode: {printed.warning()}"), err=True)
    shown = found[0].schema if name is not None else listing(found)
    click.echo(json.dumps(shown, indent=2))


main.add_command(programs)

__all__ = ["main"]
