"""A realistic demo host over an embedded SQLite database."""

from codemode.demo.host import create
from codemode.demo.store import default_path

__all__ = ["create", "default_path"]
