"""The mending of answers the SDK cannot parse, and the upstream's stderr, against hostile
input: both read what they are given in one pass, and keep nothing without bound."""

from __future__ import annotations

import pytest
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from codemode.sources.mcp import unreadable
from codemode.sources.mcp.upstream import StderrLog


def parse_error(line: str) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        jsonrpc_message_adapter.validate_json(line)
    return info.value


def test_an_unterminated_string_of_escaped_quotes_is_read_in_one_pass() -> None:
    """Two megabytes of `\\"` with no closing quote: a scan that tried a string at every
    quote would take hours; this one refuses it at once."""
    with pytest.raises(ValueError, match="a string that does not end"):
        unreadable.value_end('{"x":["' + '\\"' * 1_000_000, 0)


def test_only_answers_too_deep_for_the_sdk_are_mended() -> None:
    """Broken JSON is the upstream's own to fix: it is left to the SDK (which drops it)."""
    broken = '{"jsonrpc":"2.0","id":7,"result":{"tools":["' + '\\"' * 1000
    assert unreadable.mend(parse_error(broken), "up") is None
    deep = '{"jsonrpc":"2.0","id":7,"result":{"x":' + "[" * 300 + "]" * 300 + "}}"
    mended = unreadable.mend(parse_error(deep), "up")
    assert mended is not None
    assert mended.message.model_dump()["error"]["code"] == -32700


def test_a_stderr_line_without_end_is_cut_and_never_held() -> None:
    log = StderrLog("up")
    log.file.write("x" * 100_000)
    log.file.write("\nnext line\n")
    log.file.flush()
    log.close()
    log.thread.join(10)
    assert log.tail() == "x" * 8192 + " ... | next line"
