"""Parsing is serialized: on CPython 3.11 a parse can fail with `SystemError: AST
constructor recursion depth mismatch` when another thread parses meanwhile (a finalizer
run mid-parse releases the GIL; python/cpython#106905). Seen in this suite once, as an
`internal failure` among 40 concurrent executions."""

from __future__ import annotations

import ast
import threading

from codemode import syntax


def test_a_parse_waits_while_another_thread_parses() -> None:
    parsed = threading.Event()

    def parse_it() -> None:
        syntax.parse("x = 1")
        parsed.set()

    thread = threading.Thread(target=parse_it)
    with syntax.LOCK:  # another thread is in the middle of a parse
        thread.start()
        assert not parsed.wait(0.2)
    assert parsed.wait(5)
    thread.join()


def test_the_same_thread_may_parse_again_mid_parse() -> None:
    """A finalizer that runs during a parse, on the parsing thread, may parse too."""
    with syntax.LOCK:
        assert isinstance(syntax.parse("x = 1"), ast.Module)


def test_a_tree_compile_is_serialized_too() -> None:
    compiled = threading.Event()
    tree = syntax.parse("await f()")
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT

    def compile_it() -> None:
        syntax.compile_tree(tree, "<test>", flags=flags)
        compiled.set()

    thread = threading.Thread(target=compile_it)
    with syntax.LOCK:
        thread.start()
        assert not compiled.wait(0.2)
    assert compiled.wait(5)
    thread.join()
