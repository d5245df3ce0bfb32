"""Rego policies as a codemode authorizer, evaluated in process (requires the `rego`
extra: regopy, the Python bindings of rego-cpp).

Each capability call is one evaluation of the decision rule over this input document,
the contract of the Go codemode library's OPA adapter:

```json
{"subject": {"id": "alice"},
 "capability": {"id": "records.entry.lookup", "name": "records.lookup"},
 "arguments": {"key": "a"},
 "context": {"readOnlyHint": true, "destructiveHint": false}}
```

`arguments` is the canonical JSON the call bound to (absent optional arguments left out);
`context` carries the capability's annotations (an upstream MCP tool's hints) and is left
out when it has none; `resource` is the entity the call acts on, for a capability with a
`resource` resolver (`{"type": "Report", "id": "42", "owner": {"type": "User", "id":
"alice"}}`), and is left out otherwise. An approval message may name the arguments,
`"Pay {amount_cents} cents"` (`codemode.authz.templates`). `true` allows; `false` denies
(`permission denied`); `{"approval": "<message for the person>"}` asks a person first
(`RequireApproval`); an
undefined decision, any other value and any evaluation error are a policy failure
(`authorization policy failure`). Fail closed, always: nothing of the policy, its values
or its errors reaches the model; the host log has them.

The modules are compiled once, in name order, into one bundle per authorizer, and each
thread evaluates it with an interpreter of its own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import difflib
import json
import logging
import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import regopy

from codemode.authz import AuthorizationRequest, Denied, Entity, PolicyError, RequireApproval
from codemode.authz.templates import fill
from codemode.capabilities import Capability
from codemode.errors import ExpectedError
from codemode.types import JSONObject

log = logging.getLogger("codemode.authz")

DECISION = "data.codemode.authz.allow"
_REFERENCE = re.compile(r"data(\.[A-Za-z_][A-Za-z0-9_]*)+")
_CONVERTS_WRONG = re.compile(r"\\|\d{19}|\d[.eE]")
"""What rego-cpp's conversion of a Python dict misreads: a string with an escape (a quote,
backslash or control character), an integer past 64 bits, and a float (kept to six
decimals). A match is rarely a float: a false one only costs speed."""
_ERROR = re.compile(
    r"\(error \d+:(?P<file>[^|]*)\|(?P<offset>\d+)\|\d+\s+\(errormsg \d+:(?P<msg>[^)]*)\)"
)


class RegoPolicyError(PolicyError):
    """Modules that do not compile, or a decision that is not a rule reference; the message
    names the file, line and the parser's words."""


class RegoEvaluationError(ExpectedError):
    """The decision was undefined, not a boolean, or failed to evaluate: a policy failure."""


class RegoAuthorizer:
    """Authorizes capability calls with Rego policies.

    **Parameters:**

    - `decision`: the rule that decides a call, a ground reference such as
      `data.codemode.authz.allow`.
    - `modules`: Rego source by module name.
    - `files`: Rego files, each a module named by its path.
    - `data`: the base document policies read as `data` (for example roles by subject).
    - `visible`: a rule that tells whether a subject may ever call a capability (its input
      has no `arguments`), so `hide_forbidden` can hide the rest; `true` shows, anything
      else hides.
    - `timeout`: seconds one decision may take before it is a policy failure.

    Decisions run on a few threads of their own with large stacks: rego-cpp's regex and
    parser builtins recurse once per character of their input, and a long argument would
    overflow an ordinary thread's stack and end the process. A decision that runs past
    `timeout` (a backtracking regex) is a policy failure; its thread is left to finish.
    """

    can_see: Callable[[str, str, str], bool]
    """Whether a subject may ever call a capability (the `visible` rule): present only
    with a `visible` rule, so `hide_forbidden` is refused rather than hiding nothing."""

    def __init__(
        self,
        decision: str = DECISION,
        *,
        modules: Mapping[str, str] | None = None,
        files: Iterable[str | os.PathLike[str]] | None = None,
        data: Mapping[str, Any] | None = None,
        visible: str | None = None,
        timeout: float = 1.0,
    ) -> None:
        sources = dict(modules or {})
        for file in files or ():
            name = os.fspath(file)
            if not name.strip():
                raise RegoPolicyError("a Rego file name is blank")
            try:
                sources[name] = Path(name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise RegoPolicyError(f"{name}: {getattr(exc, 'strerror', None) or exc}") from None
        if not sources:
            raise RegoPolicyError("no Rego modules: give modules= or files=")
        self.decision = decision
        self.visible = visible
        self.asks_for_approval = any(
            '"approval"' in text or "`approval`" in text for text in sources.values()
        ) or (data is not None and "approval" in json.dumps(dict(data), default=str))
        """Whether a module or the data names the `{"approval": ...}` decision
        (`codemode.authz.may_ask`): a policy that never writes the key, nor reads an
        object holding it from `data`, cannot ask a person."""
        self._decision = _entrypoint("decision", decision)
        self._visible = _entrypoint("visible", visible) if visible is not None else None
        compiler = _interpreter()
        for name in sorted(sources):
            if not name.strip():
                raise RegoPolicyError("a Rego module name is blank")
            try:
                compiler.add_module(name, sources[name])
            except regopy.RegoError as exc:
                raise RegoPolicyError(_parser_message(str(exc), sources)) from None
        if data is not None:
            try:  # as JSON text: rego-cpp reads non-ASCII keys of a dict escaped otherwise
                compiler.add_data_json(json.dumps(dict(data), ensure_ascii=False))
            except (regopy.RegoError, TypeError, ValueError) as exc:
                raise RegoPolicyError(f"the data is not a JSON object: {exc}") from None
        rules = _rules(sources)
        for what, reference in (("decision", decision), ("visible", visible)):
            if reference is not None and reference not in rules:
                close = difflib.get_close_matches(reference, sorted(rules), n=1)
                hint = f'; did you mean "{close[0]}"?' if close else ""
                raise RegoPolicyError(f"the {what} {reference} names no rule of the modules{hint}")
        entrypoints = [self._decision] + ([self._visible] if self._visible else [])
        try:
            self._bundle = compiler.build(None, entrypoints)
        except regopy.RegoError as exc:
            raise RegoPolicyError(_parser_message(str(exc), sources)) from None
        self.modules = tuple(sorted(sources))
        self.timeout = timeout
        self._local = threading.local()
        self._evaluators = _evaluators()
        if self._visible is not None:  # only then a VisibilityPolicy, for hide_forbidden
            self.can_see = self._can_see
        self._hints: dict[str, dict[str, bool]] = {}
        """Each capability's annotations by id (from `validate`), for the visible rule."""
        for entrypoint in entrypoints:  # what rego-cpp compiles but cannot run at all
            try:
                with _stdout_to_stderr():  # a policy's print() writes to fd 1
                    probe = _interpreter()
                    probe.set_input(_PROBE)
                    probe.query_bundle_entrypoint(self._bundle, entrypoint)
            except Exception:
                raise RegoPolicyError(
                    f"data.{entrypoint.replace('/', '.')} cannot be evaluated: it refers to "
                    "something no module defines"
                ) from None

    def __repr__(self) -> str:
        return f"RegoAuthorizer({len(self.modules)} modules, decision={self.decision!r})"

    @classmethod
    def from_files(
        cls,
        *files: str | os.PathLike[str],
        data_file: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> RegoAuthorizer:
        """Load modules from files, and `data` from a JSON file."""
        data = None
        if data_file is not None:
            try:
                data = json.loads(Path(data_file).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RegoPolicyError(f"{os.fspath(data_file)}: {exc}") from None
            if not isinstance(data, dict):
                raise RegoPolicyError(f"{os.fspath(data_file)}: the data must be a JSON object")
        return cls(files=files, data=data, **options)

    def prepare(self, capabilities: Sequence[Capability]) -> RegoAuthorizer:
        """An authorizer of these modules for exactly these capabilities (one catalog
        snapshot), this one left as it is."""
        prepared = copy.copy(self)
        prepared.validate(capabilities)
        return prepared

    def validate(self, capabilities: Iterable[Capability]) -> None:
        """Learn the capabilities' annotations, so the visible rule sees them as
        `input.context` as the decision does; a capability no longer given has none."""
        self._hints = {c.id: dict(c.annotations) for c in capabilities if c.annotations}
        if self._visible is not None:  # bound to this object, not the one copied from
            self.can_see = self._can_see

    # -- decisions ------------------------------------------------------------------------

    def __call__(self, request: AuthorizationRequest) -> bool | RequireApproval:
        document = _document(
            request.subject, request.capability_id, request.capability_name, request.annotations
        )
        document["arguments"] = dict(request.arguments)
        if request.resource is not None:
            document["resource"] = _resource(request.resource)
        decision = self._run(self._decision, document)
        message = _approval(decision)
        word = (
            "allow"
            if decision is True
            else "deny"
            if decision is False
            else "approval"
            if message is not None
            else "failure"
        )
        log.info("rego %s: subject=%s capability=%s", word, request.subject, request.capability_id)
        if decision is True:
            return True
        if message is not None:
            return RequireApproval(fill(message, request.arguments))
        if decision is False:
            raise Denied(f"rego deny by {self.decision}")
        raise RegoEvaluationError(f"{self.decision}: {decision}")

    def _can_see(self, subject: str, capability_id: str, capability_name: str) -> bool:
        """Whether a subject may ever call a capability: the `visible` rule is `true`."""
        assert self._visible is not None
        hints = self._hints.get(capability_id)
        document = _document(subject, capability_id, capability_name, hints)
        return self._run(self._visible, document) is True

    def _run(self, entrypoint: str, document: JSONObject) -> object:
        """Evaluate on an evaluator thread, within the timeout (`timed out` past it)."""
        future = self._evaluators.submit(self._evaluate, entrypoint, document)
        try:
            return future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # still queued: it never runs; running: it is left to finish
            return "timed out"

    def _evaluate(self, entrypoint: str, document: JSONObject) -> object:
        """The rule's value, or why there is none (`undefined`, `evaluation failed`)."""
        interpreter = getattr(self._local, "interpreter", None)
        if interpreter is None:
            interpreter = self._local.interpreter = _interpreter()
        try:
            text = json.dumps(document, ensure_ascii=False)
            if _CONVERTS_WRONG.search(text):  # as JSON text, read exactly as the data is
                interpreter.set_input_term(text)
            else:  # converted from the dict: twice as fast
                interpreter.set_input(document)
            output = interpreter.query_bundle_entrypoint(self._bundle, entrypoint)
        except Exception as exc:  # the bindings raise more than RegoError on some failures
            return f"evaluation failed ({type(exc).__name__}: {exc})"
        if not output.ok():  # rego-cpp gives no details of its own
            return "evaluation failed (a builtin failed, or rules gave conflicting values)"
        text = str(output)
        if text == "undefined":
            return "undefined (no rule matched; `default allow := false` makes that a denial)"
        expressions = json.loads(text).get("expressions") or []
        if len(expressions) != 1:
            return "undefined"
        value: object = expressions[0]
        if isinstance(value, bool) or _approval(value) is not None:
            return value
        return f"not a boolean ({type(value).__name__})"


def _resource(entity: Entity) -> JSONObject:
    """A resolved resource as `input.resource` has it: its type, id and attributes side
    by side, an `Entity` among them as its `{"type", "id"}`."""

    def plain(value: Any) -> Any:
        if isinstance(value, Entity):
            return dict(value.uid)
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return {**plain(dict(entity.attributes)), **entity.uid}


def _approval(decision: object) -> str | None:
    """The message of a decision that asks a person: `{"approval": "<message>"}`."""
    if not isinstance(decision, dict) or set(decision) != {"approval"}:
        return None
    message = decision["approval"]
    return message if isinstance(message, str) and message.strip() else None


_STACK_BYTES = 1 << 30
"""The evaluator threads' stack: rego-cpp's regex matcher recurses once per character, and
an argument may be a megabyte (the memory is only reserved, not used, until needed)."""
_EVALUATORS = 4
_STACK_LOCK = threading.Lock()


class _Evaluators:
    """A few daemon threads with large stacks that run decisions (see RegoAuthorizer)."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]]
        self._work = queue.SimpleQueue()
        previous = threading.stack_size(_STACK_BYTES)  # under _STACK_LOCK
        try:
            for number in range(_EVALUATORS):
                threading.Thread(
                    target=self._serve, name=f"codemode-rego-{number}", daemon=True
                ).start()
        finally:
            threading.stack_size(previous)

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._work.put((function, args, future))
        return future

    def _serve(self) -> None:
        while True:
            function, args, future = self._work.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as exc:
                future.set_exception(exc)


_shared: list[_Evaluators] = []


def _evaluators() -> _Evaluators:
    """The evaluator threads every authorizer of the process shares (started once)."""
    with _STACK_LOCK:
        if not _shared:
            _shared.append(_Evaluators())
        return _shared[0]


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while a policy may print (over stdio, fd 1 is the
    MCP stream)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _document(
    subject: str, capability_id: str, capability_name: str, hints: Mapping[str, bool] | None
) -> JSONObject:
    """The input document, without `arguments` (the visible rule has none)."""
    document: JSONObject = {
        "subject": {"id": subject},
        "capability": {"id": capability_id, "name": capability_name},
    }
    if hints:
        document["context"] = dict(hints)
    return document


def _interpreter() -> regopy.Interpreter:
    """An interpreter that raises builtin errors and prints nothing (rego-cpp writes parse
    errors to stdout otherwise, which over stdio is the MCP stream)."""
    interpreter = regopy.Interpreter()
    interpreter.log_level = regopy.LogLevel.NONE
    interpreter.strict_built_in_errors = True
    return interpreter


def _entrypoint(what: str, reference: object) -> str:
    """`data.codemode.authz.allow` -> `codemode/authz/allow`, or RegoPolicyError."""
    if not isinstance(reference, str) or not _REFERENCE.fullmatch(reference):
        raise RegoPolicyError(
            f"the {what} must be a ground reference to a rule, like {DECISION}, not {reference!r}"
        )
    return reference.removeprefix("data.").replace(".", "/")


def _parser_message(text: str, sources: Mapping[str, str]) -> str:
    """rego-cpp's first error as `file:line:column: message` (the rest follow from it)."""
    found = []
    for match in _ERROR.finditer(text):
        name, offset = match["file"], int(match["offset"])
        source = sources.get(name, "")
        line = source.count("\n", 0, offset) + 1
        column = offset - (source.rfind("\n", 0, offset) + 1) + 1
        found.append(f"{name}:{line}:{column}: {match['msg']}")
    return found[0] if found else f"the modules do not compile: {text.strip()}"


_PACKAGE = re.compile(r"^package\s+([A-Za-z_][\w.]*)", re.M)
_HEAD = re.compile(r"^(?:default\s+)?([A-Za-z_][\w.]*)\s*(?:if\b|:=|=|\{|\[|contains\b)", re.M)
_PROBE = {"subject": {"id": ""}, "capability": {"id": "", "name": ""}, "arguments": {}}


def _rules(sources: Mapping[str, str]) -> set[str]:
    """Every rule the modules define, as a `data.` reference (from each rule's head)."""
    found = set()
    for source in sources.values():
        package = _PACKAGE.search(source)
        if package is None:
            continue
        for head in _HEAD.findall(source):
            if head not in ("package", "import", "default"):
                found.add(f"data.{package.group(1)}.{head}")
    return found


__all__ = ["DECISION", "RegoAuthorizer", "RegoEvaluationError", "RegoPolicyError"]
