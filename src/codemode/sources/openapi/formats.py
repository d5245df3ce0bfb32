"""The `format`s binding checks in a REST API's arguments, before a request is sent.

An API validates its own input, yet an argument it would refuse as malformed should fail
where the program can be told precisely what is wrong (`argument "email" must be an
email address`), and a value should not reach the wire in a shape its document rules
out. The checks are jsonschema's own (`date-time` and `time` by RFC 3339, `uri` and
`uri-reference` by RFC 3986, through the packages jsonschema names for them), plus
OpenAPI's `int32`, `int64` and `byte`; a value holding a line break matches none of them.
Any other format (`hostname`, `password`, `binary`, ...) is left to the API.
"""

from __future__ import annotations

import base64
import binascii
import functools

import jsonschema

from codemode.sources.schema import FORMATS as WORDS

_JSONSCHEMA: tuple[str, ...] = (
    "date",
    "date-time",
    "time",
    "email",
    "idn-email",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
)
_DRAFT = jsonschema.Draft202012Validator.FORMAT_CHECKER
_ABSENT = sorted(set(_JSONSCHEMA) - set(_DRAFT.checkers))
if _ABSENT:  # a missing package: refuse to start rather than check less than documented
    raise ImportError(f"jsonschema cannot check the formats {', '.join(_ABSENT)}")


def _draft(name: str, value: object) -> bool:
    if not isinstance(value, str):
        return True
    return "\n" not in value and bool(_DRAFT.conforms(value, name))


def _bits(bits: int, value: object) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return True
    bound: int = 1 << (bits - 1)
    return -bound <= value < bound


def _byte(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


CHECKER = jsonschema.FormatChecker(formats=())
"""Checks exactly the formats `WORDS` names (any other is an annotation)."""
for _name in _JSONSCHEMA:
    CHECKER.checks(_name)(functools.partial(_draft, _name))
CHECKER.checks("int32")(functools.partial(_bits, 32))
CHECKER.checks("int64")(functools.partial(_bits, 64))
CHECKER.checks("byte")(_byte)
if set(CHECKER.checkers) != set(WORDS):  # every checked format has its words
    raise ImportError("the formats checked and their words differ")


__all__ = ["CHECKER"]
