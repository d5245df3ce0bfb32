"""The `codemode` command line: `main` is the click group the `codemode` script runs.

`commands` defines the commands and, with `programs` (`codemode programs`, the operator's
view of saved programs), is the only module that prints or picks exit codes; `options`
holds the options they share and their checks; `terminal` renders what they show;
`shapes` reads a shapes file for `codemode shapes`.
"""

from codemode.cli.commands import main

__all__ = ["main"]
