"""The value main() returned, crossing out of the sandbox: read back only through the
containers JSON has, never through a program's own objects."""

from __future__ import annotations

from codemode import CodeMode
from codemode.authz import AllowAll

P = "def main():\n"


def test_a_string_inside_an_object_is_never_read_back_through_the_object() -> None:
    """The check after main() reads suspect strings back only through lists and dicts: an
    object's own `__getitem__` (which loops here) never runs after the program."""
    source = (
        "from dataclasses import dataclass\n@dataclass\nclass D:\n    a: str\n"
        "    def __getitem__(self, key):\n        while True:\n            pass\n"
        + P
        + "    return [D('ns.one'), 'ns.one']\n"
    )
    with CodeMode(authorizer=AllowAll()) as cm:

        @cm.capability("ns.one", summary="One.")
        def one() -> int:
            return 1

        assert cm.execute(source, subject="a").value == [{"a": "ns.one"}, "ns.one"]
