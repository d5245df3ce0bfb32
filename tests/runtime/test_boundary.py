"""The boundary holds by construction: declared results only, one classifier, no host text.

Each test plants a canary where host text lives (result attributes, handler exceptions,
authorizer reasons, event sinks) and checks that it appears in no error, no result and no
exception the program can catch, through the real sandbox.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pydantic
import pytest

from codemode import (
    AgentError,
    CapabilityFailedError,
    CodeMode,
    CodeModeError,
    InternalError,
    InvalidArgumentsError,
    InvalidProgramError,
    Limits,
)
from codemode.authz import AllowAll, AuthorizationRequest, Denied
from codemode.events import Event, JsonLinesSink
from tests.conftest import CANARY, run_error

P = "def main():\n"


@dataclasses.dataclass
class User:
    name: str


class LazyUser(User):
    """An ORM-style subclass: reading its extra attribute runs a query that fails."""

    @property
    def profile(self) -> str:
        raise RuntimeError(f"lazy load failed: postgres://app:{CANARY}@db/prod")


class Row(TypedDict):
    name: str


class Account(pydantic.BaseModel):
    name: str
    password_hash: str = pydantic.Field(default=CANARY, exclude=True)


class AccountRow(Account):
    """A subclass with an undeclared field and its own class name."""

    internal_note: str = CANARY


class Broken:
    """A declared field whose read fails."""

    @property
    def name(self) -> str:
        raise RuntimeError(CANARY)


VALIDATED: list[int] = []


def _validate(value: int) -> int:
    """A host validator that records every run and fails with host text."""
    VALIDATED.append(value)
    raise KeyError(CANARY)


Checked = Annotated[int, pydantic.AfterValidator(_validate)]


def _known_tenant(name: str) -> str:
    """A host validator that raises a codemode error type carrying host text."""
    raise InvalidArgumentsError(f"no tenant {name!r}; DSN postgres://app:{CANARY}@db")


Tenant = Annotated[str, pydantic.AfterValidator(_known_tenant)]


def host(limits: Limits | None = None, **options: Any) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll(), limits=limits, **options)

    @cm.capability("users.lazy", summary="A user with a lazy attribute.")
    def lazy() -> User:
        return LazyUser("ann")

    @cm.capability("users.lazy_async", summary="The same, async.")
    async def lazy_async() -> list[User]:
        return [LazyUser("ann"), User("bob")]

    @cm.capability("users.row", summary="A database row with more columns than declared.")
    def row() -> Row:
        return {"name": "ann", "password_hash": CANARY, "blob": "x" * 3_000_000}  # type: ignore[typeddict-unknown-key]

    @cm.capability("users.account", summary="A model subclass.")
    def account() -> Account:
        return AccountRow(name="ann")

    @cm.capability("users.broken", summary="A declared field that fails to read.")
    def broken() -> User:
        return Broken()  # type: ignore[return-value]

    @cm.capability("users.anything", summary="Declared Any: crosses whole.")
    def anything() -> Any:
        return {"name": "ann", "extra": [1, 2]}

    @cm.capability("host.exit", summary="Runs argparse on a program-supplied string.")
    def exit_(*, code: int) -> int:
        raise SystemExit(f"{CANARY} {code}")

    @cm.capability("host.interrupt", summary="Raises KeyboardInterrupt in a handler thread.")
    async def interrupt() -> int:
        raise KeyboardInterrupt(CANARY)

    @cm.capability("host.big", summary="Echoes an int.")
    def big(*, n: int) -> int:
        return n

    @cm.capability("host.many", summary="Returns n ints.")
    def many(*, n: int) -> list[int]:
        return [10**4000] * n

    return cm


@pytest.fixture(scope="module")
def cm() -> Iterator[CodeMode]:
    with host() as app:
        yield app


def assert_clean(error: CodeModeError) -> None:
    """No canary in the text, the structured form, the frames or the printed output."""
    assert CANARY not in str(error)
    assert CANARY not in json.dumps(error.to_payload())
    assert CANARY not in repr([w.to_dict() for w in error.traceback]) + error.printed


class TestResultsCrossByTheirDeclaredType:
    def test_a_lazy_attribute_of_a_subclass_is_never_read(self, cm: CodeMode) -> None:
        source = P + "    u = users.lazy()\n    return [u.name, repr(u), type(u).__name__]"
        assert cm.execute(source, subject="a").value == ["ann", "User(name='ann')", "User"]

    def test_an_undeclared_attribute_is_not_there(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    return users.lazy().profile")
        assert str(error) == (
            "invalid program: <codemode>:2:12: AttributeError: "
            "'User' object has no attribute 'profile'; User has: name"
        )
        assert_clean(error)

    def test_async_handlers_cross_the_same_way(self, cm: CodeMode) -> None:
        source = "async def main():\n    return [u.name for u in await users.lazy_async()]"
        assert cm.execute(source, subject="a").value == ["ann", "bob"]

    def test_undeclared_keys_stay_behind_and_are_not_counted(self, cm: CodeMode) -> None:
        result = cm.execute(P + "    r = users.row()\n    return [r, len(r)]", subject="a")
        assert result.value == [{"name": "ann"}, 1]
        assert result.usage.result_bytes == len('{"name":"ann"}')

    def test_a_model_subclass_shows_the_declared_name_and_fields(self, cm: CodeMode) -> None:
        source = P + "    a = users.account()\n    return [repr(a), a]"
        result = cm.execute(source, subject="a")
        assert result.value == ["Account(name='ann')", {"name": "ann"}]
        assert CANARY not in json.dumps(result.value)

    def test_a_result_that_fails_to_read_is_a_capability_failure(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    return users.broken()")
        assert isinstance(error, CapabilityFailedError)
        assert str(error) == "capability failed"
        assert error.where is not None and error.where.line == 2
        assert_clean(error)

    def test_the_program_can_catch_it_and_sees_only_the_fixed_text(self, cm: CodeMode) -> None:
        source = (
            P
            + "    try:\n        users.broken()\n    except RuntimeError as e:\n        return str(e)"
        )
        assert cm.execute(source, subject="a").value == "capability failed"

    def test_any_crosses_whole(self, cm: CodeMode) -> None:
        value = cm.execute(P + "    return users.anything()", subject="a").value
        assert value == {"name": "ann", "extra": [1, 2]}


class TestHostExitsEndTheCallNotTheServer:
    @pytest.mark.parametrize("name", ["host.exit(code=2)", "host.interrupt()"])
    def test_is_a_capability_failure(self, cm: CodeMode, name: str) -> None:
        error = run_error(cm, P + f"    return {name}")
        assert str(error) == "capability failed"
        assert_clean(error)
        assert cm.execute(P + "    return 1", subject="a").value == 1

    def test_an_authorizer_that_exits_is_a_policy_failure(self) -> None:
        def exits(request: AuthorizationRequest) -> None:
            raise SystemExit(CANARY)

        with CodeMode(authorizer=exits) as app:

            @app.capability("a.b", summary="x")
            def b() -> int:
                return 1

            error = run_error(app, P + "    return a.b()")
            assert str(error) == "authorization policy failure"
            assert_clean(error)


class TestEverythingLeavesAsACodeModeError:
    def test_a_wide_int_return_value_is_an_invalid_program(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    return 10**5000")
        assert str(error) == (
            "invalid program: <codemode>:2:12: main() returned a value that is not JSON: "
            "result is an integer of more than 4300 digits; use str(n)"
        )

    def test_an_annotated_parameter_with_dict_metadata_binds(self) -> None:
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("a.b", summary="x")
            def b(*, n: Annotated[int, {"unit": "ms"}]) -> int:
                return n

            @app.capability("a.c", summary="x")
            def c(*, n: list[Annotated[int, {"unit": "ms"}]]) -> list[Annotated[int, {"u": 1}]]:
                return n

            assert app.execute(P + "    return a.b(n=3)", subject="a").value == 3
            assert app.execute(P + "    return a.c(n=[1, 2])", subject="a").value == [1, 2]
            error = run_error(app, P + "    return a.c(n=['x'])")
            assert str(error) == (
                'invalid capability arguments: <codemode>:2:12: argument "n[0]" must be an integer'
            )

    def test_the_preflight_never_runs_host_validators(self) -> None:
        VALIDATED.clear()
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("a.b", summary="x")
            def b(*, n: Checked) -> int:
                return n

            source = P + "    if False:\n        a.b(n=1)\n    return 2"
            assert app.execute(source, subject="a").value == 2
            assert VALIDATED == []
            error = run_error(app, P + "    return a.b(n=1)")
            assert VALIDATED == [1]
            assert str(error) == "capability failed"
            assert_clean(error)

    def test_the_sinks_exception_never_escapes(self) -> None:
        def sink(event: Event) -> None:
            raise SystemExit(CANARY)

        with host(on_event=sink) as app, pytest.raises(InternalError) as caught:
            app.execute(P + "    return 1", subject="a")
        assert_clean(caught.value)


class TestIntsAreCounted:
    def test_a_wide_int_argument_is_over_the_argument_size(self) -> None:
        with host(Limits(max_argument_bytes=1000)) as app:
            error = run_error(app, P + "    return host.big(n=10**5000)")
        assert (
            str(error)
            == "resource limit exceeded: argument size (limit 1000 bytes) at <codemode>:2:12"
        )

    def test_a_wide_int_within_the_size_is_refused_as_not_json(self) -> None:
        error = run_error(cm_default := host(), P + "    return host.big(n=10**5000)")
        cm_default.close()
        assert str(error) == (
            'invalid capability arguments: argument "n" is an integer of more than 4300 '
            "digits; use str(n)"
        )

    def test_int_results_count_toward_the_result_size(self) -> None:
        with host(Limits(max_result_bytes=10_000)) as app:
            error = run_error(app, P + "    return host.many(n=3)")
        assert (
            str(error)
            == "resource limit exceeded: result size (limit 9.77 KiB, reached 11.73 KiB) at <codemode>:2:12"
        )

    def test_an_audit_of_a_wide_int_is_written(self, tmp_path: Any) -> None:
        sink = JsonLinesSink(tmp_path / "audit.jsonl")
        with host(on_event=sink) as app:
            app.execute(P + "    return host.big(n=10**4000) > 0", subject="a")
        sink.close()
        lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        attempted = next(e for e in lines if e["event"] == "call_attempted")
        assert attempted["arguments"]["n"] == str(10**4000)


class TestErrorTextIsBounded:
    def test_a_50_mb_exception_message_is_cut_with_a_marker(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    raise ValueError('E' * 50_000_000)")
        assert error.detail is not None
        assert len(error.detail.encode()) <= 4096
        assert error.detail.endswith("EEE... (49995965 more bytes)")


class TestPositionsAreWhatAnEditorShows:
    """Line ends are normalized once at intake: \r\n and a lone \r are each one line end."""

    @pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["crlf", "cr"])
    def test_a_runtime_error(self, cm: CodeMode, end: str) -> None:
        error = run_error(cm, f"def main():{end}    x = 1{end}    return [1][5]{end}")
        assert str(error) == (
            "invalid program: <codemode>:3:12: IndexError: list index out of range"
        )
        assert error.where is not None
        assert error.where.excerpt() == "    return [1][5]\n           ^^^^^^"

    @pytest.mark.parametrize("end", ["\r\n", "\r"], ids=["crlf", "cr"])
    def test_a_preflight_error(self, cm: CodeMode, end: str) -> None:
        error = run_error(cm, f"x = 1{end}def main():{end}    return users.lazzy(){end}")
        assert str(error).startswith(
            'invalid program: <codemode>:3:12: unknown capability "users.lazzy"'
        )
        assert error.where is not None and error.where.source == "    return users.lazzy()"

    def test_mixed_line_ends(self, cm: CodeMode) -> None:
        error = run_error(cm, "x = 1\rdef main():\r\n    a = 2\n    return y\r")
        assert str(error) == "invalid program: <codemode>:4:12: NameError: name 'y' is not defined"

    def test_a_string_keeps_its_escaped_line_ends(self, cm: CodeMode) -> None:
        result = cm.execute('def main():\r    return "a\\rb\\r\\nc"\r', subject="a")
        assert result.value == "a\rb\r\nc"

    @pytest.mark.parametrize("separator", ["\u2028", "\x0c", "\x85"])
    def test_characters_that_are_not_line_ends(self, cm: CodeMode, separator: str) -> None:
        source = f"# a{separator}b\ndef main():\n    return y\n"
        error = run_error(cm, source)
        assert error.where is not None and error.where.line == 3

    @pytest.mark.parametrize("separator", ["\u2028", "\x0c"])
    def test_they_stay_inside_strings(self, cm: CodeMode, separator: str) -> None:
        source = f'def main():\r    s = "a{separator}b"\r    return [s, s[9]]\r'
        error = run_error(cm, source)
        assert (
            str(error) == "invalid program: <codemode>:3:16: IndexError: string index out of range"
        )
        result = cm.execute(f'def main():\r    return "a{separator}b"\r', subject="a")
        assert result.value == f"a{separator}b"


class TestInjectedErrorsAreRecognisedByTheirCall:
    def test_a_program_raising_the_same_text_is_its_own_error(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    raise RuntimeError('capability failed')")
        assert isinstance(error, InvalidProgramError)
        assert str(error) == "invalid program: <codemode>:2:11: RuntimeError: capability failed"

    def test_an_uncaught_failure_keeps_its_code_and_call_site(self, cm: CodeMode) -> None:
        error = run_error(cm, P + "    x = 1\n    return users.broken()")
        assert isinstance(error, CapabilityFailedError)
        assert error.where is not None and error.where.line == 3


class TestConstruction:
    def test_agent_error_takes_only_a_string(self) -> None:
        with pytest.raises(TypeError, match="AgentError takes a str message, not dict"):
            AgentError({"secret": CANARY})  # type: ignore[arg-type]

    def test_hide_forbidden_needs_can_see(self) -> None:
        with pytest.raises(TypeError, match="hide_forbidden needs an authorizer with can_see"):
            CodeMode(authorizer=AllowAll(), hide_forbidden=True)


class OpenAccount(pydantic.BaseModel):
    """A model that keeps whatever it was built with."""

    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class Serialized(pydantic.BaseModel):
    """A model whose own serializer adds a field it does not declare."""

    name: str

    @pydantic.model_serializer
    def dump(self) -> dict[str, str]:
        return {"name": self.name, "api_key": CANARY}


class OpenRow(TypedDict):
    name: str


OpenRow.__pydantic_config__ = pydantic.ConfigDict(extra="allow")  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def app() -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=AllowAll())

    @cm.capability("acct.open", summary="s")
    def open_() -> OpenAccount | None:
        return OpenAccount(name="ann", password_hash=CANARY)  # type: ignore[call-arg]

    @cm.capability("acct.listed", summary="s")
    def listed() -> list[OpenAccount | None]:
        return [OpenAccount(name="ann", password_hash=CANARY), None]  # type: ignore[call-arg]

    @cm.capability("acct.serialized", summary="s")
    def serialized() -> Serialized | None:
        return Serialized(name="ann")

    @cm.capability("acct.row", summary="s")
    def row() -> OpenRow:
        return {"name": "ann", "password_hash": CANARY}  # type: ignore[typeddict-unknown-key]

    @cm.capability("acct.wrong", summary="s")
    def wrong() -> list[str]:
        return [CANARY, 3]  # type: ignore[list-item]

    with cm:
        yield cm


class TestOnlyWhatIsDeclaredCrosses:
    """Whatever pydantic serializes, only the declared shape crosses, and is counted."""

    @pytest.mark.parametrize(
        ("call", "value"),
        [
            ("acct.open()", "OpenAccount(name='ann')"),
            ("acct.listed()", "[OpenAccount(name='ann'), None]"),
            ("acct.serialized()", "Serialized(name='ann')"),
            ("acct.row()", "{'name': 'ann'}"),
        ],
    )
    def test_undeclared_data_stays_behind(self, app: CodeMode, call: str, value: str) -> None:
        result = app.execute(P + f"    return repr({call})", subject="a")
        assert result.value == value
        assert result.usage.result_bytes < 40  # the hidden field is not counted

    def test_data_of_the_wrong_kind_is_a_capability_failure(self, app: CodeMode) -> None:
        error = run_error(app, P + "    return acct.wrong()")
        assert str(error) == "capability failed"
        assert_clean(error)


class TestHostCodeErrorsAreNeverTrustedByType:
    def test_a_validator_raising_a_codemode_error_is_a_capability_failure(self) -> None:
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("t.get", summary="s")
            def get(*, name: Tenant) -> str:
                return name

            source = (
                P
                + "    try:\n        return t.get(name='x')\n    except RuntimeError as e:\n        return str(e)"
            )
            assert app.execute(source, subject="a").value == "capability failed"
            error = run_error(app, P + "    return t.get(name='x')")
            assert str(error) == "capability failed"
            assert_clean(error)

    def test_an_exception_whose_str_exits_is_still_audited(self, tmp_path: Any) -> None:
        class Weird(Exception):
            def __str__(self) -> str:
                raise SystemExit(CANARY)

        sink = JsonLinesSink(tmp_path / "audit.jsonl")
        with CodeMode(authorizer=AllowAll(), on_event=sink) as app:

            @app.capability("t.bad", summary="s")
            def bad() -> int:
                raise Weird()

            run_error(app, P + "    return t.bad()")
        sink.close()
        lines = (tmp_path / "audit.jsonl").read_text().splitlines()
        events = [json.loads(line)["event"] for line in lines]
        assert "call_failed" in events


@pytest.mark.parametrize(
    "source",
    [
        "async def main():\n    return await users.broken()",
        "import asyncio\nasync def main():\n    return await asyncio.gather(users.broken())",
    ],
)
def test_an_uncaught_failure_in_async_main_keeps_its_code(cm: CodeMode, source: str) -> None:
    error = run_error(cm, source)
    assert isinstance(error, CapabilityFailedError)
    assert str(error) == "capability failed"


class Public(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class Admin(pydantic.BaseModel):
    name: str
    api_key: str


class Leaky(pydantic.BaseModel):
    replica_dsn_hunter2: int


def _leaky_check(value: dict[str, int]) -> dict[str, int]:
    """A host validator that validates a host model of its own and lets it fail."""
    Leaky.model_validate({"replica_dsn_hunter2": "x"})
    return value


class TestNothingTheHostMadeDecidesWhatCrosses:
    """Host values, host validators and host hooks decide nothing of what crosses or of
    what it is called: each way in that was once open, pinned."""

    def test_a_union_of_records_is_resolved_by_the_value_not_its_data(self) -> None:
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("u.get", summary="A user.")
            def get() -> Public | Admin:
                return Public(name="ann", api_key=CANARY)  # type: ignore[call-arg]

            @app.capability("u.all", summary="Users.")
            def all_() -> list[Public | Admin | None]:
                return [Public(name="ann", api_key=CANARY), None]  # type: ignore[call-arg]

            value = app.execute(P + "    return [repr(u.get()), repr(u.all())]", subject="a").value
            assert value == ["Public(name='ann')", "[Public(name='ann'), None]"]

    def test_a_validators_own_validation_error_never_names_its_fields(self) -> None:
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("t.put", summary="x")
            def put(
                *, labels: Annotated[dict[str, int], pydantic.AfterValidator(_leaky_check)]
            ) -> int:
                return 1

            error = run_error(app, P + "    return t.put(labels={'a': 1})")
            assert str(error) == 'invalid capability arguments: argument "labels" is not valid'

    def test_an_endless_iterable_result_is_refused_before_it_is_read(self) -> None:
        with CodeMode(authorizer=AllowAll()) as app:

            @app.capability("db.rows", summary="Rows as a lazy stream.")
            def rows() -> Any:
                return (i for i in itertools.count())

            @app.capability("db.many", summary="Too many rows.")
            def many() -> list[int]:
                return list(range(2_000_000))

            assert str(run_error(app, P + "    return db.rows()")) == "capability failed"
            assert str(run_error(app, P + "    return db.many()")) == "capability failed"

    @pytest.mark.parametrize(
        "body",
        [
            "    c = x.get()\n    return await c",
            "    c = x.get()\n    return await asyncio.gather(c)",
        ],
    )
    def test_a_failure_awaited_apart_from_its_call_keeps_its_code(self, body: str) -> None:
        def deny(request: AuthorizationRequest) -> None:
            raise Denied(CANARY)

        with CodeMode(authorizer=deny) as app:

            @app.capability("x.get", summary="x")
            def get() -> int:
                return 1

            error = run_error(app, "import asyncio\nasync def main():\n" + body)
            assert str(error) == "permission denied"

    @pytest.mark.anyio
    async def test_search_and_describe_async_raise_only_codemode_errors(self) -> None:
        with CodeMode(authorizer=AllowAll(), disabled=["ops.drop_all"]) as app:

            @app.capability("a.b", summary="find")
            def b() -> int:
                return 1

            with pytest.raises(InternalError):
                await app.search_async("find", subject="a")
            with pytest.raises(InternalError):
                await app.describe_async("a.b", subject="a")

    def test_host_code_raising_a_codemode_error_is_an_internal_failure(self) -> None:
        """A logging filter (or a tracing hook) is host code the driver runs; an error of
        codemode's own type raised there is not trusted for its text."""

        class Hook(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                raise InvalidArgumentsError(f"exporter auth failed {CANARY}")

        hook = Hook()
        logging.getLogger("codemode").addFilter(hook)
        try:
            with CodeMode(authorizer=AllowAll()) as app:

                @app.capability("x.fail", summary="x")
                def fail() -> int:
                    raise RuntimeError("logged with the filter")

                error = run_error(app, P + "    return x.fail()")
            assert str(error) == "internal failure"
            assert_clean(error)
        finally:
            logging.getLogger("codemode").removeFilter(hook)
