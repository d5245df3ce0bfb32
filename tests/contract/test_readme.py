"""The README's host example and its program run as shown."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from codemode import CodeMode, CodeModeError

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_the_readme_host_runs_the_readme_program() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    host_source, program = blocks[0], blocks[1]
    assert host_source.startswith("# myhost.py")
    assert len(host_source.strip().splitlines()) <= 18
    module = types.ModuleType("myhost")
    exec(compile(host_source, "myhost.py", "exec"), module.__dict__)
    cm = module.cm
    assert isinstance(cm, CodeMode)
    with cm:
        assert cm.execute(program, subject="reader").value == 3
        missing = 'def main():\n    return records.lookup(key="z")'
        with pytest.raises(CodeModeError) as info:
            cm.execute(missing, subject="reader")
        assert str(info.value) == 'capability failed: no record "z"'
