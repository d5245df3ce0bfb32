"""`codemode programs list | show | delete | share`: a server's saved programs, for its operator.

The operator's view of what a server's subjects saved (`execute(save_as=...)`) and what
was shared with every subject: the shelf the server keeps them on (its `--saved` folder,
else its `--store`), opened with the server's key (`CODEMODE_REQUEST_STATE_KEY`), so that
what one reads or writes is exactly what the server finds. A program's text is shown
here to the operator (and kept in the audit of the save that authorized it): the model
sees a program's name, signature and summary, never its source, and never another
subject's program at all. Sharing copies a subject's
program to the host's shelf, where every subject finds it; it runs as each caller, so
sharing it lends nobody the rights of the subject that saved it.

Exit codes as `codemode shapes` has them: 0 done (an empty list too, said on stderr),
1 no such program (or another writer held the owner's programs), 2 a usage error or a
shelf that cannot be read. Beside `cli.commands`, the only module that prints.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import click

from codemode.cli.terminal import for_terminal
from codemode.continuations import (
    KEY_VARIABLE,
    PROGRAM_NAME,
    ProgramRecord,
    ProgramShelf,
    RedisStore,
    Sealer,
    folder_shelf,
    given_key,
    store_shelf,
)
from codemode.events import Event, JsonLinesSink, ProgramDeleted, ProgramShared, announce

T = TypeVar("T")

NAMESPACE = "programs"
NOWHERE = "name where the server keeps saved programs: --saved DIR or --store REDIS_URL"
NONE_KEPT = "no saved programs"
MISSING = "no saved program programs.{name}"
DELETED = "deleted programs.{name}"
SHARED = "shared programs.{name} with every subject"
SHARED_AGAIN = "shared programs.{name} with every subject, replacing the host's"
NO_FOLDER = "there is no folder {folder} yet: a server makes it when it keeps a program"
NO_KEY = f"the programs in a shared store are sealed: export the server's {KEY_VARIABLE} first"
UNOPENED = (
    "{count} of the saved programs on the shelf cannot be opened with this key "
    f"({KEY_VARIABLE}); a server ignores them"
)


def open_shelf(*, saved: str | None, store: str | None) -> ProgramShelf:
    """The shelf a server serving with `--saved saved` or `--store store` keeps its
    programs on (the folder when both are named, as the server does), under the key in
    `CODEMODE_REQUEST_STATE_KEY`; ValueError, one line, when it cannot be opened."""
    key = given_key(None)
    if saved is not None:
        return folder_shelf(saved, None if key is None else Sealer(key))
    if store is None:
        raise ValueError(NOWHERE)
    RedisStore.check_url(store, "--store")
    if key is None:
        raise ValueError(NO_KEY)
    return store_shelf(RedisStore.from_url(store), Sealer(key))


def bare(name: str) -> str:
    """A program's bare name, from `weekly_report` or `programs.weekly_report`;
    ValueError when it is not one."""
    bare = name.removeprefix(NAMESPACE + ".")
    if PROGRAM_NAME.fullmatch(bare) is None:
        raise ValueError(
            "a saved program's name is a lowercase identifier (letters, digits, _) of at "
            "most 64 characters"
        )
    return bare


async def kept(shelf: ProgramShelf, owner: str | None) -> list[ProgramRecord]:
    """`owner`'s programs (None: the host's), by name."""
    records = [await shelf.get(owner, name) for name in await shelf.names(owner)]
    return [record for record in records if record is not None]


def line(record: ProgramRecord) -> str:
    """A program as `list` shows it: its capability name and its summary's first line."""
    first = record.summary.strip().splitlines()[0] if record.summary.strip() else ""
    return f"{NAMESPACE}.{record.name}: {first}" if first else f"{NAMESPACE}.{record.name}"


async def share(shelf: ProgramShelf, name: str, owner: str) -> ProgramRecord | None:
    """Copy `owner`'s program `name` to the host's, where every subject finds it; the
    copy as kept (`replaced`: it took the place of a host program of that name), or None
    when `owner` keeps no such program."""
    record = await shelf.get(owner, name)
    if record is None:
        return None
    replaced = await shelf.get(None, name) is not None
    copy = dataclasses.replace(record, owner=None, saved_at=time.time(), replaced=replaced)
    await shelf.put(copy)
    return copy


@click.group()
@click.option(
    "--saved",
    metavar="DIR",
    type=click.Path(file_okay=False),
    envvar="CODEMODE_SAVED",
    show_envvar=True,
    help="The folder the server keeps saved programs in (its --saved).",
)
@click.option(
    "--store",
    metavar="REDIS_URL",
    envvar="CODEMODE_STORE",
    show_envvar=True,
    help="The Redis server the server keeps them in (its --store, without --saved).",
)
@click.pass_context
def programs(context: click.Context, saved: str | None, store: str | None) -> None:
    """Read and change the programs a server keeps (its --saved folder, else its --store),
    with the server's CODEMODE_REQUEST_STATE_KEY: the host's, shared with every subject,
    or with --owner one subject's own."""
    context.obj = _Named(saved, store)  # opened by the command: its --help needs none


@dataclasses.dataclass(frozen=True, slots=True)
class _Named:
    """The shelf the group's options name."""

    saved: str | None
    store: str | None


def _shelf(named: _Named) -> ProgramShelf:
    """The shelf the group's options name, opened; a usage error when it cannot be."""
    saved, store = named.saved, named.store
    try:
        shelf = open_shelf(saved=saved, store=store)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if saved is not None and not os.path.isdir(saved):  # a typo, or a server that kept none
        click.echo(for_terminal(f"codemode: {NO_FOLDER.format(folder=saved)}"), err=True)
    return shelf


OWNER = click.option("--owner", metavar="SUBJECT", help="The subject (default: the host's).")


def _on_shelf(work: Callable[[], Awaitable[T]]) -> T:
    """`work()` run on an event loop; a shelf that cannot be read is one line and exit
    code 2, as an unreadable shapes file is, and a busy one exit code 1."""
    try:
        return anyio.run(work)
    except TimeoutError as exc:  # another writer held the owner's programs
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # Redis or the folder: the operator's to fix
        logging.getLogger("codemode").debug("the shelf failed", exc_info=True)
        where = click.get_current_context().find_object(_Named)
        at = "" if where is None or where.store is None else f" at {bare_url(where.store)}"
        click.echo(f"Error: the saved programs cannot be read{at}: {type(exc).__name__}", err=True)
        sys.exit(2)


def bare_url(url: str) -> str:
    """A Redis URL as an error names it: without its `user:password@`."""
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def _name(name: str) -> str:
    try:
        return bare(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None


@programs.command("list")
@OWNER
@click.pass_obj
def list_programs(named: Any, owner: str | None) -> None:
    """Print each program kept, one line each: its name and its summary's first line."""
    shelf = _shelf(named)
    records = _on_shelf(lambda: kept(shelf, owner))
    unopened = _on_shelf(shelf.unreadable)
    if not records:
        click.echo(f"codemode: {NONE_KEPT}", err=True)
    for record in records:
        click.echo(for_terminal(line(record)))
    if unopened:  # the list stands (exit code 0): the rest is what a server offers
        click.echo(f"codemode: {UNOPENED.format(count=unopened)}", err=True)


@programs.command()
@click.argument("name")
@OWNER
@click.pass_obj
def show(named: Any, name: str, owner: str | None) -> None:
    """Print the text of the program NAME (programs.NAME), for the operator alone."""
    short = _name(name)
    shelf = _shelf(named)
    record = _on_shelf(lambda: shelf.get(owner, short))
    if record is None:
        click.echo(f"codemode: {MISSING.format(name=short)}", err=True)
        sys.exit(1)
    click.echo(for_terminal(record.source), nl=not record.source.endswith("\n"))


@programs.command()
@click.argument("name")
@OWNER
@click.option("--audit-log", type=click.Path(dir_okay=False), help="Append the audit event here.")
@click.pass_obj
def delete(named: Any, name: str, owner: str | None, audit_log: str | None) -> None:
    """Forget the program NAME: from the next execute on, no subject can call it."""
    short = _name(name)
    shelf = _shelf(named)
    if not _on_shelf(lambda: shelf.delete(owner, short)):
        click.echo(f"codemode: {MISSING.format(name=short)}", err=True)
        sys.exit(1)
    event = ProgramDeleted(
        execution_id="", subject=owner or "", time=time.time(), name=f"{NAMESPACE}.{short}"
    )
    _audit(audit_log, event)
    click.echo(DELETED.format(name=short))


@programs.command("share")
@click.argument("name")
@click.option("--owner", metavar="SUBJECT", required=True, help="The subject that saved it.")
@click.option("--audit-log", type=click.Path(dir_okay=False), help="Append the audit event here.")
@click.pass_obj
def share_program(named: Any, name: str, owner: str, audit_log: str | None) -> None:
    """Copy the program NAME that SUBJECT saved to the host's, so that every subject
    can call it (each as itself: sharing lends nobody SUBJECT's rights)."""
    short = _name(name)
    shelf = _shelf(named)
    copy = _on_shelf(lambda: share(shelf, short, owner))
    if copy is None:
        click.echo(f"codemode: {MISSING.format(name=short)}", err=True)
        sys.exit(1)
    event = ProgramShared(
        execution_id="",
        subject=owner,
        time=copy.saved_at,
        name=f"{NAMESPACE}.{short}",
        replaced=copy.replaced,
    )
    _audit(audit_log, event)
    click.echo((SHARED_AGAIN if copy.replaced else SHARED).format(name=short))


def _audit(path: str | None, event: Event) -> None:
    """The event in the host log, and appended to the audit log at `path` when given."""
    announce(event)
    if path is not None:
        sink = JsonLinesSink(path)
        try:
            sink(event)
        finally:
            sink.close()


__all__ = [
    "DELETED",
    "MISSING",
    "NONE_KEPT",
    "NOWHERE",
    "NO_FOLDER",
    "NO_KEY",
    "SHARED",
    "SHARED_AGAIN",
    "UNOPENED",
    "bare",
    "bare_url",
    "kept",
    "line",
    "open_shelf",
    "programs",
    "share",
]
