"""The sealed state: what a paused program carries to where it goes on.

The state holds the interpreter's dump and everything else the execution needs to go on
as if it had never stopped: the calls it made and their records, its budgets used, its
printed output, the time it has left, and the calls a person is asked about. It names
the versions of codemode and pydantic-monty that wrote it and a digest of the
capabilities the program could call, so a replica of another version, or one whose
catalog differs, refuses it rather than resume a program into a world it did not see.
What it is as sent (its dump compressed) is bounded by `Limits.max_paused_bytes`, what it
holds before compression by `INFLATION` times that, checked before anything is made of
it; and it is valid for as long as the pausing replica wrote into it (`state_seconds`).

It is plain JSON and trusts its reader: it must be sealed (encrypted and authenticated)
before it leaves the process, and only a sealed state a server minted may be loaded.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import json
import math
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from typing import Any

from codemode import capabilities as t
from codemode.capabilities import Capability
from codemode.errors import (
    ERROR_CLASSES,
    CallRecord,
    CodeModeError,
    ErrorCode,
    Facts,
    ResourceLimitError,
    ResumeRefusedError,
    Where,
)
from codemode.limits import LimitKind, Limits, exceeded, size
from codemode.types import JSONObject
from codemode.values import object_fields

FORMAT = 6

VERSIONS = {"codemode": version("codemode"), "pydantic-monty": version("pydantic-monty")}
"""What wrote a state: a replica of another version refuses it."""

OTHER_VERSION = "the program was paused by another version of codemode; run it again"
UNREADABLE = "the paused program cannot be read"

STATE_GRACE_SECONDS = 60.0
"""How much longer than the approval wait a sealed state is accepted (at most as long as
the wait itself): a retry that comes past the wait still resumes, so the program learns
that its approval timed out."""


def state_seconds(limits: Limits) -> float:
    """How long a state paused under `limits` is valid: the pausing replica seals its
    expiry into it, and every replica refuses it from then on."""
    wait = limits.max_approval_wait_seconds
    return wait + min(STATE_GRACE_SECONDS, wait)


INFLATION = 8
"""How many times `Limits.max_paused_bytes` a paused program may hold before its dump is
compressed (8 MiB by default): what resuming it inflates, at most. A program's data
compresses about 7 to 10 times (10,000 small rows: a 1.8 MiB dump, about 0.26 MiB as sent), so
the bound on what is sent is reached first, and this one only stops data that compresses
far better than data does (long runs of one text), whose every resume would cost the
server many times what was sent."""

COMPRESSION = 1
"""zlib's level for the dump: 6 times faster than its default for a tenth more bytes (a
pause waits for it)."""


def over_bound(held: int, limits: Limits, where: Where | None) -> ResourceLimitError | None:
    """The error for a paused program whose state as sent is `held` bytes, past
    `Limits.max_paused_bytes`; None within it. The caller lets go of what it measured
    before it raises the error."""
    if held <= limits.max_paused_bytes:
        return None
    return exceeded(LimitKind.PAUSED_SIZE, limits, amount=size(held), where=where)


def over_inflation(held: int, limits: Limits, where: Where | None) -> ResourceLimitError | None:
    """The error for a paused program that holds `held` bytes before compression (its
    interpreter's dump and its printed output), past `INFLATION` times
    `Limits.max_paused_bytes`; None within it.

    The runtime asks the moment the worker hands the dump over, before anything is
    compressed, encoded or kept, so a program that holds much costs no more than its
    dump, and only for an instant. What it then sends is bounded by `over_bound`."""
    if held <= INFLATION * limits.max_paused_bytes:
        return None
    return exceeded(LimitKind.PAUSED_SIZE, limits, amount=size(held), where=where)


@dataclass(frozen=True, slots=True)
class Ask:
    """A call waiting for a person's answer."""

    key: str
    call_id: int
    capability: str
    capability_id: str
    written: Any
    """The call's positional and keyword arguments as the program passed them
    (`freeze`d), bound again on resume exactly as they were the first time."""
    arguments: JSONObject
    """The canonical arguments the person was shown (the binding of `written`)."""
    span: tuple[int, int]
    message: str
    asked_at: float
    """Seconds since the epoch, on the clock of the replica that paused it (`wall`)."""
    wait_seconds: float
    """That replica's approval wait: an answer after `asked_at` and this is too late
    (`approval timed out`) on any replica, whatever its own wait."""

    @property
    def deadline(self) -> float:
        """When the person had to answer by, on the calendar `asked_at` is on."""
        return self.asked_at + self.wait_seconds


@dataclass(frozen=True, slots=True)
class Injected:
    """An error raised inside the program before it paused (so it is known again if the
    program lets it out later)."""

    where: Where
    exc_type: str
    message: str
    code: str
    detail: str | None
    facts: JSONObject | None = None
    """What the failure said of itself as data (`Facts.to_dict`), for `error_data(e)`
    after the resume; None for one that said nothing of itself."""

    def error(self) -> CodeModeError:
        """The error as it was raised, to be known again."""
        error = ERROR_CLASSES[ErrorCode(self.code)](self.detail)
        if self.facts is not None:
            kind, status, fields = (self.facts.get(key) for key in ("kind", "status", "fields"))
            error.facts = Facts(
                kind if isinstance(kind, str) else None,
                status if isinstance(status, int) else None,
                fields if isinstance(fields, dict) else None,
            )
        return error


@dataclass(frozen=True, slots=True)
class PausedState:
    """Everything a paused execution needs to go on."""

    id: str
    execution_id: str
    subject: str
    source: str
    snapshot: bytes
    """The run's dump (`Run.dump`): from format 5, the interpreter's after the name it
    gives the program's feed in a session, so a call an earlier program's function makes
    is placed nowhere in this one after the resume too."""
    catalog: str
    asks: tuple[Ask, ...]
    calls: tuple[str, ...]
    records: tuple[CallRecord, ...]
    injected: tuple[Injected, ...]
    printed: str
    seconds_left: float
    elapsed: float
    """Seconds the execution ran before (waiting for a person not counted)."""
    sandbox_seconds: float
    capability_seconds: float
    result_bytes: int
    approvals: int
    """Calls asked about so far, these included."""
    versions: dict[str, str]
    expires_at: float
    """Seconds since the epoch, on the clock of the replica that paused it: no replica
    resumes the state from then on, whatever its own approval wait, and a replay guard
    remembers it resumed until then (and `guards.CLOCK_SKEW_SECONDS` more)."""
    guard: str = ""
    """The scope of the replay guard that must vouch it resumes once (`ReplayGuard.scope`),
    stamped when the program pauses: it heads the state, a line of its own."""
    session: str = ""
    """The handle of the session the program runs in ("" in none): its resume writes
    what the program leaves there."""
    carried: str = ""
    """What the guest code fed with the program needs again where it goes on
    (`Appendix.carried`: a save's plan, exactly as its policy was asked about), from
    format 6; sealed with the rest, so only a state this server minted carries one."""

    def encode(self) -> bytes:
        data: dict[str, Any] = asdict(self)
        del data["guard"]
        data["format"] = FORMAT
        # Compressed: a program's data is mostly text. Whatever length it leaks is of the
        # program's own values, which its caller has anyway.
        data["snapshot"] = base64.b64encode(zlib.compress(self.snapshot, COMPRESSION)).decode(
            "ascii"
        )
        body = json.dumps(data, separators=(",", ":")).encode()
        return self.guard.encode("ascii") + b"\n" + body

    @property
    def size(self) -> int:
        """What the state holds, before compression (what `over_inflation` bounds, so
        that resuming one never inflates past `INFLATION` times the bound)."""
        return len(self.snapshot) + len(self.printed.encode("utf-8", "surrogatepass"))

    @classmethod
    def decode(cls, encoded: bytes, max_bytes: int, inflated: int | None = None) -> PausedState:
        """The state, or ResumeRefusedError for one of another version, unreadable,
        sent in more than twice `max_bytes` (the replay guard's scope heads it), or whose
        dump inflates past `inflated` (`max_bytes` unless given)."""
        if inflated is None:
            inflated = max_bytes
        try:
            if len(encoded) > 2 * max_bytes:
                raise ResumeRefusedError(UNREADABLE)
            guard, _, body = encoded.partition(b"\n")
            data = json.loads(body)
            data["guard"] = guard.decode("ascii")
            if data.pop("format") != FORMAT or data["versions"] != VERSIONS:
                raise ResumeRefusedError(OTHER_VERSION)
            inflate = zlib.decompressobj()
            compressed = base64.b64decode(data["snapshot"], validate=True)
            data["snapshot"] = inflate.decompress(compressed, inflated + 1)
            if len(data["snapshot"]) > inflated or not inflate.eof:
                raise ResumeRefusedError(UNREADABLE)
            data["asks"] = tuple(Ask(**{**ask, "span": tuple(ask["span"])}) for ask in data["asks"])
            data["calls"] = tuple(data["calls"])
            data["records"] = tuple(CallRecord(**record) for record in data["records"])
            data["injected"] = tuple(
                Injected(**{**item, "where": Where(**item["where"])}) for item in data["injected"]
            )
            return cls(**data)
        except ResumeRefusedError:
            raise
        except Exception:
            raise ResumeRefusedError(UNREADABLE) from None


def freeze(value: Any) -> Any:
    """A program's value as JSON that `thaw` gives back exactly: every container and
    every float that JSON cannot spell is tagged (a record, or a dataclass the program
    built, becomes the dict of its fields, as a call binds it). TypeError for anything
    else."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, list):
        return [freeze(item) for item in value]
    fields = object_fields(value)
    if fields is not None:
        value = fields
    if isinstance(value, dict):
        return {"dict": [[freeze(k), freeze(v)] for k, v in value.items()]}
    for kind in (tuple, set, frozenset):
        if isinstance(value, kind):
            return {kind.__name__: [freeze(item) for item in value]}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime.date | datetime.time):  # a datetime is a date
        return {type(value).__name__: value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"Decimal": str(value)}
    raise TypeError(f"a {type(value).__name__} cannot be paused")


_THAW: dict[str, Callable[[Any], Any]] = {
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
}
_TEXTS: dict[str, Callable[[str], Any]] = {
    "datetime": datetime.datetime.fromisoformat,
    "date": datetime.date.fromisoformat,
    "time": datetime.time.fromisoformat,
    "Decimal": decimal.Decimal,
}
"""The program's own values that `freeze` writes as their exact text (ISO 8601 keeps a
datetime's offset and microseconds; a Decimal's text, its digits)."""


def thaw(value: Any) -> Any:
    """The value `freeze` was given."""
    if isinstance(value, list):
        return [thaw(item) for item in value]
    if not isinstance(value, dict):
        return value
    ((tag, inner),) = value.items()
    if tag == "float":
        return float(inner)
    if tag == "dict":
        return {thaw(k): thaw(v) for k, v in inner}
    if tag == "bytes":
        return base64.b64decode(inner, validate=True)
    if tag in _TEXTS:
        return _TEXTS[tag](inner)
    return _THAW[tag](thaw(item) for item in inner)


def stamped(state: bytes, scope: str) -> bytes:
    """`state` headed by the replay guard's `scope` (a state is written with none)."""
    assert state.startswith(b"\n")
    return scope.encode("ascii") + state


def new_id() -> str:
    """A new state's id, which its claim is kept under."""
    return uuid.uuid4().hex


class CatalogDigest:
    """`catalog_digest` of one view, made the first time a program of it pauses."""

    def __init__(self, capabilities: Iterable[Capability]) -> None:
        self._capabilities = capabilities
        self._digest: str | None = None

    def __call__(self) -> str:
        if self._digest is None:
            self._digest = catalog_digest(self._capabilities)
        return self._digest


def catalog_digest(capabilities: Iterable[Capability]) -> str:
    """A digest of what a program can call: each capability's id and name, its
    parameters and result as `describe` shows them, and its annotations."""
    digest = hashlib.sha256()
    for capability in sorted(capabilities, key=lambda c: c.id):
        parts = [
            capability.id,
            capability.name,
            json.dumps(dict(capability.annotations), sort_keys=True),
            t.notation(capability.result_annotation),
            *(f"{p.key}:{p.notation}:{p.constraints}:{p.filled}" for p in capability.parameters),
        ]
        digest.update("\x1f".join(parts).encode("utf-8", "surrogatepass") + b"\x1e")
    return digest.hexdigest()


__all__ = [
    "COMPRESSION",
    "FORMAT",
    "INFLATION",
    "OTHER_VERSION",
    "STATE_GRACE_SECONDS",
    "UNREADABLE",
    "VERSIONS",
    "Ask",
    "CatalogDigest",
    "Injected",
    "PausedState",
    "catalog_digest",
    "freeze",
    "new_id",
    "over_bound",
    "over_inflation",
    "stamped",
    "state_seconds",
    "thaw",
]
