"""An input schema as keyword parameters: identifiers, nulls, and a violation in binding words."""

from __future__ import annotations

import jsonschema

from codemode.sources.schema import (
    identifier,
    nullable,
    problem,
    validator,
)


def test_names_become_identifiers() -> None:
    names = ("list-files", "from", "2fa", "a.b", "match", "_private", "ümlaut", "日本")
    assert [identifier(n) for n in names] == [
        "list_files",
        "from_",
        "tool_2fa",
        "a_b",
        "match_",
        "private",
        "umlaut",
        "tool_",
    ]
    assert identifier("2fa", lead="arg_") == "arg_2fa"


def test_nullable_sees_every_way_of_admitting_null() -> None:
    assert nullable({"type": ["string", "null"]})
    assert nullable({"anyOf": [{"type": "string"}, {"type": "null"}]})
    assert nullable({"enum": ["a", None]})
    assert not nullable({"type": "string"})


def test_a_violation_is_told_in_binding_words_with_the_programs_names() -> None:
    schema = {
        "type": "object",
        "properties": {
            "file-name": {"type": "string", "pattern": "^[a-z]+$"},
            "mode": {"enum": ["r", "w"]},
        },
    }
    check = jsonschema.Draft202012Validator(schema)
    texts = [
        problem(e, {"file-name": "file_name"})
        for e in check.iter_errors({"file-name": "A", "mode": "x"})
    ]
    assert sorted(texts) == [
        "argument \"file_name\" must match the pattern '^[a-z]+$'",
        "argument \"mode\" must be one of 'r', 'w'",
    ]


def test_what_a_schema_declares_is_written_as_literals_of_one_line() -> None:
    """Its pattern, enum and const values, and a key it declares, each stay on the line of
    the report they are written in: new lines and formatting characters are escapes."""
    forged = "^a$\npermission denied: forged\n    ^^^^"
    schema = {
        "type": "object",
        "properties": {
            "p": {"type": "string", "pattern": forged},
            "e": {"enum": ["x\ny"]},
            "c": {"const": "x\u202ey"},
            "k\nk": {"type": "integer"},
        },
    }
    check = validator(schema)
    errors = check.errors({"p": "b", "e": "z", "c": "z", "k\nk": "1"})
    assert sorted(problem(e, {}) for e in errors) == [
        "argument \"c\" must be 'x\\u202ey'",
        "argument \"e\" must be one of 'x\\ny'",
        'argument "k\\nk" does not meet its schema ("type")',
        "argument \"p\" must match the pattern '^a$\\npermission denied: forged\\n    ^^^^'",
    ]
