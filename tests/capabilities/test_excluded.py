"""A field pydantic leaves out of a result is not there for the program, in every kind of
type where pydantic honours the exclusion: not described, not hinted, not sent."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import pydantic
import pytest
from typing_extensions import TypedDict

from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.payloads import describe_payload
from tests.conftest import CANARY, assert_no_canary

HIDDEN = Annotated[str, pydantic.Field(exclude=True)]


class Model(pydantic.BaseModel):
    name: str
    internal_api_key: str = pydantic.Field(default=CANARY, exclude=True)


class AnnotatedModel(pydantic.BaseModel):
    name: str
    internal_api_key: HIDDEN = CANARY


@pydantic.dataclasses.dataclass
class PydanticDataclass:
    name: str
    internal_api_key: str = pydantic.Field(default=CANARY, exclude=True)


@pydantic.dataclasses.dataclass
class AnnotatedPydanticDataclass:
    name: str
    internal_api_key: HIDDEN = CANARY


@dataclasses.dataclass
class AnnotatedDataclass:
    name: str
    internal_api_key: HIDDEN = CANARY


@dataclasses.dataclass
class DefaultFieldDataclass:
    name: str
    internal_api_key: str = pydantic.Field(default=CANARY, exclude=True)


@dataclasses.dataclass
class MetadataDataclass:
    name: str
    internal_api_key: str = dataclasses.field(default=CANARY, metadata={"exclude": True})


class Row(TypedDict):
    name: str
    internal_api_key: HIDDEN


RECORDS = [
    Model,
    AnnotatedModel,
    PydanticDataclass,
    AnnotatedPydanticDataclass,
    AnnotatedDataclass,
    DefaultFieldDataclass,
    MetadataDataclass,
]


def host(tp: Any, value: Any) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll())

    def get() -> Any:
        return value

    get.__annotations__["return"] = tp
    cm.capability("users.get", summary="One user.")(get)
    return cm


@pytest.mark.parametrize("tp", RECORDS, ids=lambda tp: tp.__name__)
def test_an_excluded_record_field_is_not_described_hinted_or_sent(tp: Any) -> None:
    with host(tp, tp(name="ann")) as cm:
        shape = describe_payload(cm.describe("users.get"))
        assert cm.describe("users.get").shapes == (
            f"{tp.__name__}: object (name: str), read as r.name",
        )
        assert cm.execute("def main():\n    return vars(users.get())", subject="a").value == {
            "name": "ann"
        }
        with pytest.raises(CodeModeError) as caught:
            cm.execute("def main():\n    return users.get().internal_api_key", subject="a")
    assert str(caught.value) == (
        "invalid program: <codemode>:2:12: AttributeError: "
        f"'{tp.__name__}' object has no attribute 'internal_api_key'; {tp.__name__} has: name"
    )
    assert "internal_api_key" not in json.dumps(shape)
    assert_no_canary(caught.value, shape)


def test_an_excluded_typed_dict_key_is_not_described_or_sent() -> None:
    with host(Row, {"name": "ann", "internal_api_key": CANARY}) as cm:
        shape = describe_payload(cm.describe("users.get"))
        assert cm.describe("users.get").shapes == ('Row: dict {name: str}, read as r["name"]',)
        result = cm.execute("def main():\n    return users.get()", subject="a")
    assert result.value == {"name": "ann"}
    assert "internal_api_key" not in json.dumps(shape)
    assert_no_canary(shape, result.value)
