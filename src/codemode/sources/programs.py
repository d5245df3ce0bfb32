"""A folder of `.py` files as the host's saved programs: `codemode serve ... --programs DIR`.

Each file `<name>.py` is the program `programs.<name>`, its module docstring its summary,
so a host keeps its programs as it keeps any code: in files it can review, diff and
deploy. The folder is read into `ProgramRecord`s (owner None: the host's, shared), which
the saved-programs feature turns into capabilities (`build`), and it is followed like
an upstream's tool list: a file added, changed or removed is a new offer, read off the
loop every `poll_seconds`. A file that cannot be a program is refused with a text that
names it and says why: at open, the folder is refused; later, that file is left out
(logged) and the rest go on.
"""

from __future__ import annotations

import ast
import logging
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from codemode.capabilities import Capability
from codemode.continuations import PROGRAM_NAME as NAME
from codemode.continuations import ProgramRecord
from codemode.errors import RegistrationError
from codemode.limits import Limits, size

log = logging.getLogger("codemode")

POLL_SECONDS = 2.0
"""How often a followed folder is listed again for files added, changed or removed."""
NAMESPACE = "programs"
"""The namespace of saved programs (the feature's, `codemode.programs.NAMESPACE`)."""

Builder = Callable[[ProgramRecord], Capability]
"""What makes a program's capability (the saved-programs feature's); RegistrationError
for a program that cannot be one."""

_Signature = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Read:
    """One file as last read: its stat, its record and its capability (None: it cannot
    be a program, and is left out until it changes)."""

    signature: _Signature
    record: ProgramRecord | None
    capability: Capability | None


def program_record(path: Path, *, max_source_bytes: int, saved_at: float = 0.0) -> ProgramRecord:
    """The host program in the file at `path`; RegistrationError naming the file and why
    it cannot be one (its name, its size, its text, its syntax, no docstring)."""
    name = path.name.removesuffix(".py")
    if not path.name.endswith(".py") or NAME.fullmatch(name) is None:
        raise _refused(
            path,
            "a program's file name is a lowercase identifier (letters, digits, _) of at "
            "most 64 characters, then .py",
        )
    try:
        data = path.read_bytes()
    except OSError as error:
        raise _refused(path, f"it cannot be read ({type(error).__name__})") from None
    if len(data) > max_source_bytes:
        raise _refused(path, f"it is larger than {size(max_source_bytes)} (max_source_bytes)")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused(path, "it is not UTF-8 text") from None
    try:
        tree = ast.parse(source, filename=path.name)
    except SyntaxError as error:
        raise _refused(path, f"line {error.lineno}: {error.msg}") from None
    except (ValueError, RecursionError):  # a NUL byte; nesting too deep
        raise _refused(path, "it is not a Python program") from None
    summary = ast.get_docstring(tree, clean=True)
    if not summary:
        raise _refused(path, "it has no docstring (its first lines say what the program does)")
    return ProgramRecord(name, summary, source, None, saved_at)


def read_programs(
    path: str | os.PathLike[str], *, max_source_bytes: int | None = None
) -> tuple[ProgramRecord, ...]:
    """Every program of the folder at `path`, sorted by name (files whose name starts
    with `_` or `.`, and anything but `.py` files, are not programs); RegistrationError
    for the folder or for the first file that cannot be a program."""
    bound = Limits().max_source_bytes if max_source_bytes is None else max_source_bytes
    return tuple(
        program_record(file, max_source_bytes=bound, saved_at=signature[1] / 1e9)
        for file, signature in sorted(_listed(Path(path)).items())
    )


def _listed(folder: Path) -> dict[Path, _Signature]:
    try:
        entries = list(os.scandir(folder))
    except OSError as error:
        raise RegistrationError(
            f'program folder "{os.fspath(folder)}": it cannot be read ({type(error).__name__})'
        ) from None
    found: dict[Path, _Signature] = {}
    for entry in entries:
        if not entry.name.endswith(".py") or entry.name[:1] in ("_", "."):
            continue
        try:
            if not entry.is_file():
                continue
            stat = entry.stat()
        except OSError:  # removed while listed
            continue
        found[Path(entry.path)] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return found


def _refused(path: Path, why: str) -> RegistrationError:
    return RegistrationError(f'program folder "{os.fspath(path.parent)}": {path.name}: {why}')


class ProgramFolder:
    """The host's programs in a folder, as a source of the capabilities `programs.<name>`.

    `build` turns each file's `ProgramRecord` into its capability (the saved-programs
    feature gives it); `records()` are the programs as read, for the feature itself.
    `max_source_bytes` bounds one file (`Limits.max_source_bytes` by default).
    """

    kind = "program folder"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        build: Builder,
        max_source_bytes: int | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if isinstance(poll_seconds, bool) or not poll_seconds > 0:
            raise RegistrationError(f'program folder "{os.fspath(path)}": poll_seconds is positive')
        self.name = NAMESPACE
        self.path = Path(path)
        self._build = build
        self._bound = Limits().max_source_bytes if max_source_bytes is None else max_source_bytes
        self._poll_seconds = poll_seconds
        self._read: dict[Path, _Read] = {}

    def __repr__(self) -> str:
        return f"ProgramFolder({os.fspath(self.path)!r})"

    async def open(self) -> None:
        """Read every program; RegistrationError for the folder or for a file that cannot
        be a program (naming it)."""
        self._read = await anyio.to_thread.run_sync(lambda: self._reading({}, strict=True))
        log.info("program folder %s: %d programs", self.path, len(self._read))

    def capabilities(self) -> list[Capability]:
        """The capabilities of the programs read, by file name."""
        return [r.capability for _, r in sorted(self._read.items()) if r.capability is not None]

    def records(self) -> tuple[ProgramRecord, ...]:
        """The programs read (the newest offer), sorted by name."""
        return tuple(r.record for _, r in sorted(self._read.items()) if r.record is not None)

    async def changes(self) -> AsyncGenerator[Sequence[Capability] | None, BaseException | None]:
        """A new offer whenever a file was added, changed or removed; None while the
        folder cannot be listed. A file that cannot be a program is left out (logged)."""
        while True:
            await anyio.sleep(self._poll_seconds)
            before = self._read
            try:
                after = await anyio.to_thread.run_sync(self._reread, before)
            except RegistrationError as error:
                log.warning("%s", error)
                yield None
                continue
            if after.keys() == before.keys() and all(
                after[f].signature == before[f].signature for f in after
            ):
                continue
            self._read = after
            refusal = yield self.capabilities()
            if refusal is not None:
                log.warning("program folder %s: its programs were refused: %s", self.path, refusal)

    async def close(self) -> None:
        """Nothing to close: the folder is read when listed."""

    def _reread(self, before: dict[Path, _Read]) -> dict[Path, _Read]:
        return self._reading(before, strict=False)

    def _reading(self, before: dict[Path, _Read], *, strict: bool) -> dict[Path, _Read]:
        """Each file of the folder: as it was when its stat did not change, else read again."""
        found: dict[Path, _Read] = {}
        for file, signature in sorted(_listed(self.path).items()):
            kept = before.get(file)
            if kept is not None and kept.signature == signature:
                found[file] = kept
                continue
            try:
                record = program_record(
                    file, max_source_bytes=self._bound, saved_at=signature[1] / 1e9
                )
                try:
                    capability = self._build(record)
                except RegistrationError as error:
                    raise _refused(file, str(error)) from None
            except RegistrationError as error:
                if strict:
                    raise
                log.warning("%s; left out", error)
                found[file] = _Read(signature, None, None)
                continue
            found[file] = _Read(signature, record, capability)
        return found


__all__ = [
    "NAMESPACE",
    "POLL_SECONDS",
    "Builder",
    "ProgramFolder",
    "program_record",
    "read_programs",
]
