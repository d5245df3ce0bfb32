"""The names a program binds in its global scope, as Python's compiler decides them."""

from __future__ import annotations

import ast

from codemode.scopes import global_bindings

SOURCE = """\
import json, os.path
import json as j
from json import loads, dumps as d
a = b = 1
c += 1
e: int
(f, [g, *h]) = 1, [2, 3]
for i in []:
    pass
with x as k:
    pass
if (m := 1):
    pass
n = [o for o in [] if (p := o)]
try:
    pass
except E as q:
    pass
match v:
    case {"k": r, **s} | [*t]:
        pass
@deco(u := 1)
def f1(w=(w2 := 1)):
    local = 1
    global g1
    g1 = [local2 for local2 in []]
    def inner():
        global g2
        g2 += 1
    return lambda: (lam := 1)
class C:
    attr = 1
    global g3
    g3 = 1
    def method(self):
        global g4
        for g4, other in []:
            pass
"""

GLOBALS = [
    "j", "loads", "d", "a", "b", "c", "f", "g", "h", "i", "k", "m", "n", "p", "q", "r",
    "s", "t", "u", "f1", "w2", "g1", "g2", "C", "g3", "g4",
]  # fmt: skip


def place(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def test_every_form_of_global_binding_and_no_local_one() -> None:
    """A bare annotation (`e: int`) binds nothing: the namespace would not replace a value."""
    found = [name for name, _ in global_bindings(ast.parse(SOURCE))]
    assert sorted(found) == sorted(GLOBALS)


def test_each_binding_comes_with_the_node_that_binds() -> None:
    tree = ast.parse("x = 1\ndef main():\n    global y\n    y = 2\n")
    found = {name: place(node) for name, node in global_bindings(tree)}
    assert found == {"x": (1, 0), "main": (2, 0), "y": (4, 4)}


def test_the_module_level_alone_leaves_the_functions_unread() -> None:
    tree = ast.parse(SOURCE)
    found = [name for name, _ in global_bindings(tree, functions=False)]
    assert sorted(found) == sorted(set(GLOBALS) - {"g1", "g2", "g3", "g4"})
