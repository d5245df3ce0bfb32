"""Dates, times, decimals and UUIDs cross as pydantic crosses them: ISO text (or the
program's own objects) in, typed values for the handler, the program's own objects out."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll, AuthorizationRequest, RequireApproval
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer
from codemode.continuations import Paused
from codemode.errors import InvalidArgumentsError, PermissionDeniedError, PolicyFailureError
from codemode.payloads import describe_payload
from codemode.runtime import ExecutionResult
from codemode.testing import RecordingAuthorizer

BILL = "123e4567-e89b-42d3-a456-426614174000"


class Bill(TypedDict):
    id: uuid.UUID
    due: datetime.date
    sent: datetime.datetime
    cutoff: datetime.time
    amount: decimal.Decimal


def register(cm: CodeMode, seen: list[object]) -> None:
    @cm.capability("bills.plan", summary="Plan a bill.")
    def plan(
        id: uuid.UUID,
        due: datetime.date,
        sent: datetime.datetime,
        cutoff: datetime.time,
        amount: decimal.Decimal,
    ) -> Bill:
        seen.append((id, due, sent, cutoff, amount))
        return {"id": id, "due": due, "sent": sent, "cutoff": cutoff, "amount": amount}


@pytest.fixture
def seen() -> list[object]:
    return []


@pytest.fixture
def recorder() -> RecordingAuthorizer:
    return RecordingAuthorizer()


@pytest.fixture
def cm(seen: list[object], recorder: RecordingAuthorizer) -> Iterator[CodeMode]:
    cm = CodeMode(authorizer=recorder)
    register(cm, seen)
    yield cm
    cm.close()


PLAN = (
    "import datetime\n"
    "import decimal\n"
    "def main():\n"
    "    bill = bills.plan(id={id}, due={due}, sent={sent}, cutoff={cutoff}, amount={amount})\n"
    "    later = bill['due'] + datetime.timedelta(days=30)\n"
    "    kinds = [type(bill[k]).__name__ for k in ('id', 'due', 'sent', 'cutoff', 'amount')]\n"
    "    return {{'kinds': kinds, 'bill': bill, 'later': later, 'double': bill['amount'] * 2}}\n"
)


def test_iso_text_binds_to_the_declared_types_and_results_are_the_programs_own(
    cm: CodeMode, seen: list[object], recorder: RecordingAuthorizer
) -> None:
    source = PLAN.format(
        id=repr(BILL),
        due='"2026-01-31"',
        sent='"2026-01-31T09:30:00+01:00"',
        cutoff='"17:00"',
        amount='"12.50"',
    )
    result = cm.execute(source, subject="a")

    zone = datetime.timezone(datetime.timedelta(hours=1))
    assert [tuple(map(repr, call)) for call in seen] == [  # type: ignore[call-overload]
        (
            repr(uuid.UUID(BILL)),
            repr(datetime.date(2026, 1, 31)),
            repr(datetime.datetime(2026, 1, 31, 9, 30, tzinfo=zone)).replace(
                "datetime.timezone(datetime.timedelta(seconds=3600))", "TzInfo(3600)"
            ),
            repr(datetime.time(17, 0)),
            repr(decimal.Decimal("12.50")),
        )
    ]
    assert recorder.requests[0].arguments == {
        "id": BILL,
        "due": "2026-01-31",
        "sent": "2026-01-31T09:30:00+01:00",
        "cutoff": "17:00:00",
        "amount": "12.50",
    }
    assert result.value == {
        "kinds": ["str", "date", "datetime", "time", "Decimal"],
        "bill": {
            "id": BILL,
            "due": "2026-01-31",
            "sent": "2026-01-31T09:30:00+01:00",
            "cutoff": "17:00:00",
            "amount": "12.50",
        },
        "later": "2026-03-02",
        "double": "25.00",
    }


def test_the_programs_own_dates_and_decimals_pass_as_arguments(
    cm: CodeMode, seen: list[object]
) -> None:
    source = PLAN.format(
        id=repr(BILL),
        due="datetime.date(2026, 1, 31)",
        sent="datetime.datetime(2026, 1, 31, 9, 30, tzinfo=datetime.timezone.utc)",
        cutoff="datetime.time(17, 0)",
        amount="decimal.Decimal('12.50')",
    )
    result = cm.execute(source, subject="a")
    assert result.value["bill"]["sent"] == "2026-01-31T09:30:00+00:00"  # type: ignore[index,call-overload]
    assert len(seen) == 1


def test_a_number_passes_as_a_decimal(cm: CodeMode) -> None:
    source = PLAN.format(
        id=repr(BILL),
        due='"2026-01-31"',
        sent='"2026-01-31T09:30:00Z"',
        cutoff='"17:00"',
        amount=12,
    )
    assert cm.execute(source, subject="a").value["double"] == "24"  # type: ignore[index,call-overload]


def test_an_invalid_date_literal_is_refused_before_the_program_runs(
    cm: CodeMode, seen: list[object]
) -> None:
    source = PLAN.format(
        id='"bill-7"', due='"31/01/2026"', sent='"2026-01-31"', cutoff='"5pm"', amount='"a lot"'
    )
    with pytest.raises(InvalidArgumentsError) as caught:
        cm.execute(source, subject="a")
    assert str(caught.value) == (
        'invalid capability arguments: <codemode>:4:12: argument "id" must be a UUID '
        '("123e4567-e89b-42d3-a456-426614174000")\n'
        '<codemode>:4:12: argument "due" must be a date ("2026-01-31" or a datetime.date)\n'
        '<codemode>:4:12: argument "sent" must be a datetime '
        '("2026-01-31T09:30:00+00:00" or a datetime.datetime)\n'
        '<codemode>:4:12: argument "cutoff" must be a time ("09:30:00" or a datetime.time)\n'
        '<codemode>:4:12: argument "amount" must be a decimal '
        '(a number, "12.50" or a decimal.Decimal)'
    )
    assert seen == []


def test_an_invalid_date_at_run_time_names_the_argument(cm: CodeMode) -> None:
    source = (
        "def main():\n"
        "    day = '2026-02-' + str(30)\n"
        f"    return bills.plan(id={BILL!r}, due=day, sent='2026-01-31T09:30:00Z', "
        "cutoff='17:00', amount=1)\n"
    )
    with pytest.raises(InvalidArgumentsError) as caught:
        cm.execute(source, subject="a")
    assert str(caught.value) == (
        'invalid capability arguments: argument "due" must be a date '
        '("2026-01-31" or a datetime.date)'
    )


def test_main_may_return_its_own_dates_and_decimals() -> None:
    with CodeMode(authorizer=AllowAll()) as cm:
        source = (
            "import datetime\nimport decimal\n"
            "def main():\n"
            "    return [datetime.date(2026, 1, 31), datetime.time(9, 30),\n"
            "            datetime.datetime(2026, 1, 31, 9, 30), decimal.Decimal('0.10')]\n"
        )
        assert cm.execute(source, subject="a").value == [
            "2026-01-31",
            "09:30:00",
            "2026-01-31T09:30:00",
            "0.10",
        ]


def test_describe_shows_each_format_and_what_crosses(cm: CodeMode) -> None:
    payload = describe_payload(cm.describe("bills.plan"))
    assert payload["signature"] == (
        "bills.plan(*, id: UUID, due: date, sent: datetime, cutoff: time, amount: Decimal) -> Bill"
    )
    parameters = payload["parameters"]
    assert isinstance(parameters, list)
    assert [p["format"] for p in parameters] == [  # type: ignore[call-overload,index]
        'uuid: "123e4567-e89b-42d3-a456-426614174000"',
        'date: "2026-01-31" or a datetime.date',
        'date-time: "2026-01-31T09:30:00+00:00" or a datetime.datetime',
        'time: "09:30:00" or a datetime.time',
        'decimal: a number, "12.50" or a decimal.Decimal',
    ]
    assert payload["result"] == {
        "type": "Bill",
        "read_as": "keys",
        "format": (
            "uuid: a str; date: a datetime.date; date-time: a datetime.datetime; "
            "time: a datetime.time; decimal: a decimal.Decimal"
        ),
    }
    schema = cm.describe("bills.plan").input_schema["properties"]
    assert {k: v.get("format") for k, v in schema.items()} == {  # type: ignore[union-attr]
        "id": "uuid",
        "due": "date",
        "sent": "date-time",
        "cutoff": "time",
        "amount": None,
    }


POLICY = """
permit (principal, action == Action::"bills.plan", resource)
when {
  context.due < datetime("2027-01-01") &&
  context.sent < datetime("2026-06-01T00:00:00Z") &&
  context.amount.lessThanOrEqual(decimal("100.0")) &&
  context.id == "123e4567-e89b-42d3-a456-426614174000"
};
"""


@pytest.mark.parametrize(
    ("due", "sent", "amount", "allowed"),
    [
        ("2026-12-31", "2026-05-31T23:59:59.999999+00:00", "100.00", True),
        ("2027-01-01", "2026-01-31T09:30:00Z", "12.5", False),
        ("2026-01-31", "2026-06-01T01:30:00+02:00", "12.5", True),  # 23:30 UTC before
        ("2026-01-31", "2026-06-01T00:00:00", "12.5", False),  # no offset: read as UTC
        ("2026-01-31", "2026-01-31T09:30:00Z", "100.0001", False),
        ("0999-01-31", "0999-01-31T09:30:00Z", "1", True),  # a year before 1000, four digits
    ],
)
def test_a_cedar_policy_compares_dates_and_decimals(
    seen: list[object], due: str, sent: str, amount: str, allowed: bool
) -> None:
    with CodeMode(authorizer=CedarAuthorizer(POLICY)) as cm:
        register(cm, seen)
        source = (
            f"def main():\n    return bills.plan(id={BILL!r}, due={due!r}, sent={sent!r}, "
            f"cutoff='17:00', amount={amount!r})['due']\n"
        )
        if allowed:
            assert cm.execute(source, subject="a").value == due
        else:
            with pytest.raises(PermissionDeniedError):
                cm.execute(source, subject="a")


def test_a_decimal_cedar_cannot_hold_fails_closed(seen: list[object]) -> None:
    with CodeMode(authorizer=CedarAuthorizer(POLICY)) as cm:
        register(cm, seen)
        source = (
            f"def main():\n    return bills.plan(id={BILL!r}, due='2026-01-31', "
            "sent='2026-01-31T09:30:00Z', cutoff='17:00', amount='1.00001')\n"
        )
        with pytest.raises(PolicyFailureError):
            cm.execute(source, subject="a")
    assert seen == []


def test_a_date_the_program_holds_survives_a_pause_for_approval(seen: list[object]) -> None:
    """The paused state keeps the program's own date; the approver reads its text."""

    def ask(request: AuthorizationRequest) -> RequireApproval:
        return RequireApproval("pay it?")

    with CodeMode(authorizer=ask) as cm:
        register(cm, seen)
        source = (
            "import datetime\n"
            "def main():\n"
            "    day = datetime.date(2026, 1, 31)\n"
            f"    bill = bills.plan(id={BILL!r}, due=day, sent='2026-01-31T09:30:00Z',\n"
            "                      cutoff='17:00', amount='1.5')\n"
            "    return [bill['due'] == day, day + datetime.timedelta(days=1)]\n"
        )
        first = asyncio.run(cm.start_async(source, subject="a"))
        assert isinstance(first, Paused)
        (request,) = first.requests
        assert request.arguments["due"] == "2026-01-31"
        done = asyncio.run(cm.resume_async(first.state, subject="a", answers={request.key: True}))
    assert isinstance(done, ExecutionResult)
    assert done.value == [True, "2026-02-01"]


REGO = """package codemode.authz

import rego.v1

default allow := false

allow if {
	input.arguments.due < "2027-01-01"
	time.parse_rfc3339_ns(input.arguments.sent) < time.parse_rfc3339_ns("2026-06-01T00:00:00+00:00")
}
"""


@pytest.mark.parametrize(
    ("due", "sent", "allowed"),
    [
        ("2026-12-31", "2026-05-31T23:59:59Z", True),
        ("2027-01-01", "2026-01-31T09:30:00Z", False),
        ("2026-01-31", "2026-06-01T01:30:00+00:00", False),
    ],
)
def test_a_rego_policy_reads_dates_as_their_text(
    seen: list[object], due: str, sent: str, allowed: bool
) -> None:
    with CodeMode(authorizer=RegoAuthorizer(modules={"policy.rego": REGO})) as cm:
        register(cm, seen)
        source = (
            f"def main():\n    return bills.plan(id={BILL!r}, due={due!r}, sent={sent!r}, "
            "cutoff='17:00', amount=1)['due']\n"
        )
        if allowed:
            assert cm.execute(source, subject="a").value == due
        else:
            with pytest.raises(PermissionDeniedError):
                cm.execute(source, subject="a")


def test_a_date_passed_where_text_is_declared_arrives_as_its_text() -> None:
    got: list[object] = []
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("notes.add", summary="Add a note.")
        def add(*, text: str, extra: Any = None) -> None:
            got.append((text, extra))

        source = (
            "import datetime\n"
            "def main():\n"
            "    notes.add(text=datetime.date(2026, 1, 31),\n"
            "              extra=[datetime.time(9, 30), datetime.datetime(2026, 1, 31, 9, 30)])\n"
        )
        cm.execute(source, subject="a")
    assert got == [("2026-01-31", ["09:30:00", "2026-01-31T09:30:00"])]
