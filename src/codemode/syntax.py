"""Python's parser and compiler, one call at a time.

On CPython 3.11, building the `ast` objects of a parse (and converting them back to
compile a tree) counts its recursion depth in state every thread shares; a thread switch
in the middle (a finalizer run by the garbage collector releases the GIL) makes two
concurrent parses fail with `SystemError: AST constructor recursion depth mismatch`
(python/cpython#106905). Executions prepare programs on threads of their own, so every
parse and tree compile of the package goes through this lock. Parsing holds the GIL
anyway: the lock costs no parallelism.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

LOCK = threading.RLock()
"""Re-entrant: a finalizer that runs during a parse may parse too."""


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """`ast.parse`, serialized."""
    with LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def compile_tree(tree: ast.Module, filename: str, flags: int = 0) -> None:
    """Compile a parsed tree, serialized, for the SyntaxError the compiler raises."""
    with LOCK:
        compile(tree, filename, "exec", flags=flags, dont_inherit=True)


__all__ = ["LOCK", "compile_tree", "parse"]
