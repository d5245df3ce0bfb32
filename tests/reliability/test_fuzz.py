"""Property tests: binding accepts exactly what the schema accepts, and random programs
mixing valid code, runtime errors and failing capabilities never show host text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, TypedDict

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode import CodeMode, CodeModeError, ErrorCode, Limits
from codemode.binding import bind
from codemode.capabilities import Capability
from tests.conftest import CANARY, build_host


class Window(TypedDict):
    start: int
    end: int | None


def build_capability() -> Capability:
    cm = CodeMode(authorizer=lambda request: None)

    @cm.capability("fuzz.target", summary="Many argument shapes.")
    def target(
        *,
        name: str,
        count: int = 0,
        ratio: float = 1.0,
        flag: bool = False,
        tags: list[str] | None = None,
        labels: dict[str, int] | None = None,
        mode: Literal["a", "b"] = "a",
        window: Window | None = None,
    ) -> int:
        return 0

    return cm.catalog.enabled["fuzz.target"]


CAPABILITY = build_capability()
VALIDATOR = jsonschema.Draft202012Validator(CAPABILITY.input_schema)
NAMES = ["name", "count", "ratio", "flag", "tags", "labels", "mode", "window", "nmae", "extra"]
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.sampled_from(["a", "b"]),
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["start", "end", "x", "k"]), children, max_size=3),
    ),
    max_leaves=8,
)
arguments = st.dictionaries(st.sampled_from(NAMES), json_value, max_size=5)


@given(arguments)
def test_binding_accepts_exactly_what_the_schema_accepts(kwargs: dict[str, Any]) -> None:
    schema_ok = VALIDATOR.is_valid(kwargs)
    try:
        bound = bind(CAPABILITY, (), kwargs, Limits())
    except CodeModeError as error:
        assert not schema_ok, (kwargs, str(error))
        assert error.code is ErrorCode.INVALID_ARGUMENTS
        detail = error.detail or ""
        path = detail.split('"')[1] if '"' in detail else ""
        root = path.split(".")[0].split("[")[0]
        assert root in NAMES, detail  # every rejection names a real path
        return
    assert schema_ok, kwargs
    assert json.loads(json.dumps(bound.arguments)) == bound.arguments


SNIPPETS = [
    "    x = [i * 2 for i in range(5)]\n",
    "    print('step')\n",
    "    r = records.lookup(key='k')\n",
    "    y = 1 / 0\n",
    "    z = [][3]\n",
    "    w = {}['missing']\n",
    "    records.fail()\n",
    "    records.secret()\n",
    "    records.flaky()\n",
    "    records.missing(key='gone')\n",
    "    records.badresult()\n",
    "    raise ValueError('mine')\n",
    "    try:\n        records.fail()\n    except Exception as e:\n        print(e)\n        notes.append(repr(e))\n",
    "    try:\n        records.secret()\n    except PermissionError as e:\n        notes.append(str(e))\n",
    "    notes.append(len(notes))\n",
]


@pytest.fixture(scope="module")
def host() -> Iterator[CodeMode]:
    with build_host() as cm:
        yield cm


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=6))
def test_random_programs_never_show_host_text(host: CodeMode, body: list[str]) -> None:
    source = "def main():\n    notes = []\n" + "".join(body) + "    return notes\n"
    try:
        result = host.execute(source, subject="alice")
    except CodeModeError as error:
        assert error.code in set(ErrorCode)
        seen = str(error) + repr(error.where) + error.printed + json.dumps(error.to_payload())
        assert CANARY not in seen
        assert "Traceback" not in str(error)
        return
    assert CANARY not in json.dumps(result.value) + result.printed
