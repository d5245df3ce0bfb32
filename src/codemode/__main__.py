"""`python -m codemode` is the `codemode` command."""

from codemode.cli import main

main()
