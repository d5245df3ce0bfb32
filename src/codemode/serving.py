"""Serving a CodeMode: one configuration, and the stdio, HTTP and reloading servers for it.

`ServeConfig` is the one value serving reads. `run` and `http_app`, serving from
Python, fill it from their arguments; the command line fills it from its options and the
files they name; `serve --reload` hands it, pickled, to each server process it starts.
This module sits above the core and both adapters (`codemode.mcp`, `codemode.web`), and
the core never imports it: only the command line sits above it.
"""

from __future__ import annotations

import base64
import logging
import os
import pickle
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from codemode.app import CodeMode
from codemode.authz import Authorizer
from codemode.http import OnDisconnect, check_on_disconnect
from codemode.options import checked_direct_tools

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

Transport = Literal["stdio", "http"]
Policy = Callable[[CodeMode], Authorizer]
"""Builds the authorizer for the app about to be served (raising when it cannot)."""


log = logging.getLogger("codemode")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """What serving a CodeMode needs besides the app itself.

    Every field must pickle: `serve_reloading` hands the whole value to each server
    process it starts, so a callable field is a module-level function or an instance of a
    module-level class, never a lambda.
    """

    transport: Transport = "stdio"
    """stdio (one client, on stdin and stdout) or streamable HTTP."""
    subject: str = "local"
    """Who calls run as over stdio, and over HTTP without `tokens`."""
    host: str = "127.0.0.1"
    """The address HTTP listens on; Host and Origin headers must name it, a loopback name
    or one of `allowed_hosts`."""
    port: int = 8000
    """The TCP port HTTP listens on (0 lets the system choose)."""
    tokens: Mapping[str, str] | None = field(default=None, repr=False)
    """Bearer token -> subject; with them a request without a valid token gets 401. Kept
    out of the repr: they are secrets."""
    token_file: str | None = None
    """Instead of `tokens`, a file of them (`subject:token` lines, or a JSON object), read
    each time an app is served: `serve_reloading` hands on the path, never the secrets,
    and a changed file counts from the next reload."""
    allowed_hosts: Iterable[str] = ()
    """Further Host names clients use, e.g. a proxy's public name (kept as a tuple)."""
    path: str = "/mcp"
    """Where MCP is served."""
    root_path: str = ""
    """The path a reverse proxy serves this under, e.g. /codemode."""
    web: bool = False
    """Serve the playground at `/`."""
    on_disconnect: OnDisconnect = "cancel"
    """What a dropped connection does to its running call: cancel it, or let it finish."""
    policy: Policy | None = None
    """Builds the app's authorizer from the app itself (None keeps the app's own), so a
    reloaded app's policy is checked against the capabilities it has now."""
    hide_forbidden: bool = False
    """Show each subject only what it could be allowed to call (False keeps the app's
    own setting)."""
    audit_log: str | None = None
    """Append every audit event to this file as a JSON line (None keeps the app's sink)."""
    store: str | None = None
    """A Redis URL of the store replicas share (`codemode.continuations.RedisStore`): the
    replay guard keeps its claims there, and what is kept there is sealed with the app's
    request-state key, which every replica must hold (None keeps the app's own)."""
    replay_guard: str | None = None
    """The name `store` had while the replay guard was its only user: alone, it is the
    store (and, as it always did, serves without the key too); with a `store`, it must
    be the same URL."""
    sessions: bool = True
    """False turns the app's sessions off (True keeps the app's own setting)."""
    tasks: bool = True
    """False serves no tasks: a client that declares the tasks extension gets execute in
    one request, within the execution time, as every other client does."""
    shapes: str | None = None
    """The file the app keeps the result shapes it learns in (`CodeMode(shapes=...)`):
    read at the start, so a restarted server knows what it learned (None keeps the
    app's own)."""
    tools: Iterable[str] = ()
    """Name patterns (`records.*`) of capabilities also listed as plain MCP tools beside
    the three (`CodeMode(direct_tools=...)`; none keeps the app's own)."""
    programs: str | None = None
    """A folder of `.py` files, each a program the host keeps for every subject as
    `programs.<file name>` (its docstring the summary), followed as files change (None:
    the app's own programs alone)."""
    saved: str | None = None
    """The folder the programs subjects save are kept in (`CodeMode.configure(programs=
    ...)`), so that a restarted server still has them (None keeps the app's own: the
    `store`, shared by replicas when there is one, else this process's)."""
    app: Callable[[], CodeMode] | None = None
    """Builds the app again, as each server process of `serve_reloading` does, so that a
    changed file is read; only `serve_reloading` needs it."""

    def __post_init__(self) -> None:
        """ValueError for a value serving would refuse later, named now."""
        from codemode.http import StaticTokens, host_names
        from codemode.mcp import check_path

        if self.transport not in ("stdio", "http"):
            raise ValueError(f"unknown transport {self.transport!r}")
        check_on_disconnect(self.on_disconnect)
        port = self.port
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"the port must be an integer from 0 to 65535, not {port!r}")
        check_path(self.path)
        hosts = self.allowed_hosts
        hosts = hosts if isinstance(hosts, str) else tuple(hosts)
        if not all(isinstance(h, str) for h in hosts):
            raise ValueError("allowed hosts must be host names (strings)")
        host_names(hosts)  # a string or a malformed name is refused now, not at a request
        object.__setattr__(self, "allowed_hosts", hosts)
        object.__setattr__(self, "tools", checked_direct_tools(self.tools))
        if self.tokens is not None and self.token_file is not None:
            raise ValueError("give tokens or token_file, not both")
        if self.tokens is not None:
            StaticTokens(self.tokens)  # none at all, or an empty one, is refused
            object.__setattr__(self, "tokens", dict(self.tokens))
        if self.replay_guard is not None:
            from codemode.approvals import RedisReplayGuard

            RedisReplayGuard.check_url(self.replay_guard)
        if self.store is not None:
            from codemode.continuations import RedisStore

            RedisStore.check_url(self.store)
            if self.replay_guard not in (None, self.store):
                raise ValueError(
                    "the store and the replay guard name different Redis servers: give the "
                    "store alone (the replay guard keeps its claims there)"
                )

    @property
    def shared_store(self) -> str | None:
        """The URL of the store replicas share: `store`, else `replay_guard`."""
        return self.store or self.replay_guard

    def bearer_tokens(self) -> dict[str, str] | None:
        """The tokens to check: `tokens`, or what `token_file` holds now."""
        if self.token_file is None:
            return None if self.tokens is None else dict(self.tokens)
        from codemode.http import load_token_file

        return load_token_file(self.token_file)


class ServingError(Exception):
    """Serving could not start; `str()` is the one line to show."""


# -- serving from Python ------------------------------------------------------------------


def http_app(
    cm: CodeMode,
    *,
    tokens: Mapping[str, str] | None = None,
    subject: str = "local",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
    web: bool = False,
    path: str = "/mcp",
    on_disconnect: OnDisconnect = "cancel",
    tasks: bool = True,
) -> Starlette:
    """An ASGI app serving `cm` over MCP at `path`, to run with uvicorn or mount in
    Starlette/FastAPI.

    Every route goes through one security layer (`codemode.http`): with `tokens` (bearer
    token -> subject) unauthenticated requests get 401; `host` is the address it will
    be served on, and Host and Origin headers must name it, a loopback name or one of
    `allowed_hosts` (e.g. a proxy's public name); with `web` the playground is served
    at `/`. A call whose client drops the connection is cancelled, or with
    `on_disconnect="finish"` runs to its end (its answer is lost); an explicit
    `notifications/cancelled` from the same subject cancels it either way. With
    `tasks=False`, execute is never an MCP task.
    """
    config = ServeConfig(
        tokens=tokens,
        subject=subject,
        host=host,
        allowed_hosts=allowed_hosts,
        web=web,
        path=path,
        on_disconnect=on_disconnect,
        tasks=tasks,
    )
    return asgi_app(cm, config)


def run(
    cm: CodeMode,
    transport: Transport = "stdio",
    *,
    subject: str = "local",
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Iterable[str] = (),
    web: bool = False,
    on_disconnect: OnDisconnect = "cancel",
) -> None:
    """Serve `cm` over MCP until stopped: stdio as `subject`, or streamable HTTP (see
    `http_app`), in a process that stays the caller's: over stdio no signal handler of
    its own, and `cm` left open; over HTTP, uvicorn's, and a stop closes `cm` as
    `serve` does."""
    config = ServeConfig(
        transport=transport,
        subject=subject,
        host=host,
        port=port,
        tokens=tokens,
        allowed_hosts=allowed_hosts,
        web=web,
        on_disconnect=on_disconnect,
    )
    _configure(cm, config)
    if config.transport == "stdio":
        _stdio(cm, config)
        return
    from codemode.http import server_config

    app = _asgi(cm, config)
    settings = server_config(app, host=config.host, port=config.port, root_path=config.root_path)
    stopped_by: list[int] = []
    _stopping(cm, stopped_by)(settings).run()
    if signal.SIGINT in stopped_by:
        raise KeyboardInterrupt  # as `serve` does: a Ctrl-C ends as one


def asgi_app(cm: CodeMode, config: ServeConfig) -> Starlette:
    """The ASGI app serving `cm` as `config` says (MCP at its path, the playground with
    `web`), behind the one security layer of `codemode.http`."""
    _configure(cm, config)
    return _asgi(cm, config)


# -- a process that is the server's (the command line) ----------------------------------


def serve(cm: CodeMode, config: ServeConfig, *, announce: Callable[[], None] | None = None) -> None:
    """Serve `cm` until stopped, in a process that is the server's; `announce` tells
    where to connect once a client can (over HTTP the socket already listens, so a client
    that connects at once waits rather than being refused).

    A stop by signal closes `cm` aside, so running executions end `canceled` and are
    answered before shutdown; over stdio the first Ctrl-C ends the process at once.
    Raises `ServingError` when serving cannot start, `KeyboardInterrupt` once a Ctrl-C
    has stopped the HTTP server.
    """
    _configure(cm, config)
    if config.transport == "stdio":
        _serve_stdio(cm, config, announce)
        return
    from codemode.http import server_config

    app = _asgi(cm, config)
    settings = server_config(app, host=config.host, port=config.port, root_path=config.root_path)
    listening = listen(config.host, config.port)
    if announce is not None:
        announce()
    stopped_by: list[int] = []
    with listening:
        _stopping(cm, stopped_by)(settings).run(sockets=[listening])
    if signal.SIGINT in stopped_by:
        # uvicorn raises the signal again as it returns, but under asyncio.run that only
        # cancels a task that may have ended already: a Ctrl-C always ends as one here
        raise KeyboardInterrupt


def _stopping(cm: CodeMode, stopped_by: list[int]) -> type[uvicorn.Server]:
    """A uvicorn server that, when a signal stops it, closes `cm` aside at once: running
    executions end `canceled` and are answered while uvicorn waits for requests in flight,
    rather than running on until its graceful timeout cancels them unanswered. Each
    signal that stops it is added to `stopped_by`."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            close_aside(cm)
            stopped_by.append(sig)
            super().handle_exit(sig, frame)

    return Server


CLOSE_SECONDS = 2.0
"""How long a stop by signal waits for the CodeMode to close before the process exits."""


def close_aside(cm: CodeMode) -> threading.Thread:
    """Close `cm` on a thread of its own, started now. A signal handler runs between two
    statements of the thread it interrupts, which may hold a lock that `close()` takes:
    closed from the handler itself, the process would wait on itself for ever."""
    closer = threading.Thread(target=cm.close, name="codemode-close", daemon=True)
    closer.start()
    return closer


def _serve_stdio(cm: CodeMode, config: ServeConfig, announce: Callable[[], None] | None) -> None:
    """Serve over stdio; the first Ctrl-C ends the process at once (the stdin reader
    would otherwise hold it until the next line arrives)."""

    def interrupted(signum: int, frame: object) -> None:
        try:
            close_aside(cm).join(CLOSE_SECONDS)
        finally:  # even when no thread could be started to close it
            os._exit(128 + signum)

    try:
        os.read(0, 0)  # fails on a closed or write-only stdin, blocks on none
    except OSError:
        raise ServingError("stdin cannot be read: over stdio, requests arrive on it") from None
    signal.signal(signal.SIGINT, interrupted)
    if cm.direct_tools:  # refused before the banner, as over HTTP
        from codemode.mcp import direct_tools

        direct_tools(cm)
    if announce is not None:
        announce()
    try:
        _stdio(cm, config)
    finally:
        cm.close()


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, or `ServingError`. It listens at once, so connections wait
    in the backlog until the server is up. Made as a TCP socket by name, since asyncio
    sets TCP_NODELAY only on connections such a socket accepts: without it every
    response's last small segment waits for the client's delayed ACK (about 40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((host, port))
        listening.listen(2048)
    except OSError as exc:
        listening.close()
        raise ServingError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return listening


# -- the reloader -----------------------------------------------------------------------

CONFIG_ENV = "CODEMODE_SERVE_CONFIG"
"""How `serve_reloading` hands its `ServeConfig` (pickled, then base64) to the server
processes uvicorn's reloader starts: they inherit the environment, and read it once."""


def serve_reloading(
    cm: CodeMode,
    config: ServeConfig,
    *,
    watch: str,
    announce: Callable[[], None] | None = None,
) -> None:
    """Serve over HTTP with uvicorn's reloader, for development: each time a Python file
    under `watch` changes, a new server process builds the app with `config.app` and
    serves it with this same `config`.

    `cm` is the app as this process loaded it: the policy and audit log are applied to it
    first, so their errors are raised here rather than in a server process; then it is
    closed. A busy port is a `ServingError`, before `announce`.
    """
    import uvicorn

    from codemode.http import server_options

    if config.app is None:
        raise ValueError("serve_reloading needs config.app, to build the app in each process")
    _configure(cm, config)
    cm.close()
    listen(config.host, config.port).close()
    os.environ[CONFIG_ENV] = base64.b64encode(pickle.dumps(config)).decode("ascii")
    if announce is not None:
        announce()
    uvicorn.run(
        f"{__name__}:reloaded_app",
        factory=True,
        reload=True,
        reload_dirs=[watch],
        reload_excludes=[".venv", ".git", "node_modules"],
        **server_options(host=config.host, port=config.port, root_path=config.root_path),
    )


def reloaded_app() -> Starlette:
    """The ASGI app a server process of `serve_reloading` runs: the app built again,
    served with the configuration handed on. The variable is removed once read, so the
    tokens in it never reach a process the host starts."""
    config = pickle.loads(base64.b64decode(os.environ.pop(CONFIG_ENV)))
    if not isinstance(config, ServeConfig) or config.app is None:
        raise TypeError(f"{CONFIG_ENV} holds no ServeConfig with an app")
    return asgi_app(config.app(), config)


# -- shared steps -----------------------------------------------------------------------


def check_store_key(cm: CodeMode, config: ServeConfig) -> None:
    """ValueError when `config` names a `store` and `cm` has no key to seal what it keeps
    there: every replica must hold the same one, and a key made at start would leave
    nothing it sealed readable by another replica, or by this one after a restart. (A
    `replay_guard` alone serves without one, as it always has, with the warning the MCP
    server gives.)"""
    from codemode.continuations import KEY_VARIABLE, given_key

    if config.store is not None and given_key(cm.request_state_key) is None:
        raise ValueError(
            f"a store shared by replicas needs {KEY_VARIABLE}, the same secret of at least "
            '32 bytes on every replica; make one with: python -c "import secrets; '
            'print(secrets.token_hex(32))"'
        )


def keep_programs(cm: CodeMode, programs: str | None, saved: str | None) -> None:
    """`--programs DIR` (a folder of the host's programs, followed as it changes) and
    `--saved DIR` (where subjects' saved programs are kept) applied to `cm`, as `serve`
    and `run`, `check`, `search` and `describe` take them."""
    if saved is not None:
        cm.configure(programs=saved)
    if programs is not None:
        from codemode.programs import program_folder

        bound = cm.limits.max_source_bytes
        folder = program_folder(cm.saved_programs, cm.catalog, programs, max_source_bytes=bound)
        cm.add_source(folder)


def _configure(cm: CodeMode, config: ServeConfig) -> None:
    """Apply the store, sessions, direct tools, shapes file, saved and host programs'
    folders, policy and audit log of `config` to `cm`; nothing when it has none (a
    CodeMode in use refuses `configure`). ValueError for a shared store without a key
    (`check_store_key`)."""
    if (url := config.shared_store) is not None:
        from codemode.continuations import RedisStore, StoreReplayGuard, given_key

        check_store_key(cm, config)
        store = RedisStore.from_url(url)
        if given_key(cm.request_state_key) is not None:
            # sessions live there too, or another replica would not find them; without a
            # key (the replay guard's old spelling) no replica could open another's
            cm.store = store
        cm.replay_guard = StoreReplayGuard(store)
        problem = RedisStore.unreachable(url)
        if problem is not None:
            log.warning(
                "the store cannot reach Redis now (%s): sessions cannot go on, and programs "
                "paused for an approval cannot resume, until it can",
                problem,
            )
    if not config.sessions:
        cm.sessions = False
    if config.tools:
        cm.direct_tools = tuple(config.tools)
    if config.shapes is not None:
        cm.configure(shapes=config.shapes)
    keep_programs(cm, config.programs, config.saved)  # before the policy, which may name them
    if config.policy is None and not config.hide_forbidden and config.audit_log is None:
        return
    authorizer = None if config.policy is None else config.policy(cm)
    sink = None
    if config.audit_log is not None:
        from codemode.events import JsonLinesSink

        sink = JsonLinesSink(config.audit_log)
    hiding = True if config.hide_forbidden else None
    cm.configure(authorizer=authorizer, hide_forbidden=hiding, on_event=sink)


def _stdio(cm: CodeMode, config: ServeConfig) -> None:
    """Serve MCP over stdin and stdout, as `config.subject`, until the client closes them."""
    from codemode.mcp import serve_stdio

    cm.prepare()
    anyio.run(lambda: serve_stdio(cm, subject=config.subject, tasks=config.tasks))


def _asgi(cm: CodeMode, config: ServeConfig) -> Starlette:
    """The Starlette app of `asgi_app`, for a `cm` already configured."""
    from codemode.mcp import http_app as mcp_app

    cm.prepare()
    routes = None
    public_paths: tuple[str, ...] = ()
    if config.web:
        from codemode.web import PUBLIC_PATHS, web_routes

        routes, public_paths = web_routes(cm), PUBLIC_PATHS
    return mcp_app(
        cm,
        tokens=config.bearer_tokens(),
        subject=config.subject,
        host=config.host,
        allowed_hosts=config.allowed_hosts,
        routes=routes,
        public_paths=public_paths,
        path=config.path,
        on_disconnect=config.on_disconnect,
        tasks=config.tasks,
    )


__all__ = [
    "CLOSE_SECONDS",
    "CONFIG_ENV",
    "OnDisconnect",
    "Policy",
    "ServeConfig",
    "ServingError",
    "Transport",
    "asgi_app",
    "check_store_key",
    "close_aside",
    "http_app",
    "keep_programs",
    "listen",
    "reloaded_app",
    "run",
    "serve",
    "serve_reloading",
]
