"""The demo's embedded SQLite database: created and seeded on first use."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS owners (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, team TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sandboxes (
    name TEXT PRIMARY KEY, region TEXT NOT NULL, owner_id TEXT NOT NULL REFERENCES owners(id)
);
CREATE TABLE IF NOT EXISTS instances (
    sandbox TEXT NOT NULL REFERENCES sandboxes(name), name TEXT NOT NULL,
    state TEXT NOT NULL, cpus INTEGER NOT NULL, memory_mb INTEGER NOT NULL,
    owner_id TEXT NOT NULL REFERENCES owners(id),
    PRIMARY KEY (sandbox, name)
);
CREATE TABLE IF NOT EXISTS nics (
    sandbox TEXT NOT NULL, instance TEXT NOT NULL, name TEXT NOT NULL,
    address TEXT NOT NULL, network TEXT NOT NULL,
    PRIMARY KEY (sandbox, instance, name)
);
CREATE TABLE IF NOT EXISTS tags (
    sandbox TEXT NOT NULL, instance TEXT NOT NULL, tag TEXT NOT NULL,
    PRIMARY KEY (sandbox, instance, tag)
);
"""

OWNERS = [
    ("u-ada", "Ada Lovelace", "ada@example.com", "platform"),
    ("u-alan", "Alan Turing", "alan@example.com", "research"),
    ("u-grace", "Grace Hopper", "grace@example.com", "platform"),
    ("u-edsger", "Edsger Dijkstra", "edsger@example.com", "research"),
]
SANDBOXES = [
    ("dev", "eu-west", "u-ada"),
    ("staging", "eu-west", "u-grace"),
    ("prod", "us-east", "u-alan"),
]
INSTANCE_NAMES = ["gui", "api", "db", "cache", "worker"]


def default_path() -> Path:
    """Where the demo keeps its database: $XDG_DATA_HOME/codemode/demo.sqlite3."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "codemode" / "demo.sqlite3"


class Store:
    """A SQLite file; one short-lived connection per operation, so threads never share one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect() as db:
            db.executescript(SCHEMA)
            if db.execute("SELECT COUNT(*) FROM owners").fetchone()[0] == 0:
                _seed(db)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()


def _seed(db: sqlite3.Connection) -> None:
    db.executemany("INSERT INTO owners VALUES (?, ?, ?, ?)", OWNERS)
    db.executemany("INSERT INTO sandboxes VALUES (?, ?, ?)", SANDBOXES)
    owners = [o[0] for o in OWNERS]
    for s, (sandbox, _region, _owner) in enumerate(SANDBOXES):
        for i, name in enumerate(INSTANCE_NAMES):
            n = s * len(INSTANCE_NAMES) + i
            state = "stopped" if n % 4 == 3 else "running"
            db.execute(
                "INSERT INTO instances VALUES (?, ?, ?, ?, ?, ?)",
                (
                    sandbox,
                    name,
                    state,
                    2 ** (n % 3 + 1),
                    1024 * (n % 4 + 1),
                    owners[n % len(owners)],
                ),
            )
            db.execute(
                "INSERT INTO nics VALUES (?, ?, ?, ?, ?)",
                (sandbox, name, "eth0", f"10.{s}.0.{10 + i}", f"{sandbox}-internal"),
            )
            if name in ("gui", "api"):
                db.execute(
                    "INSERT INTO nics VALUES (?, ?, ?, ?, ?)",
                    (sandbox, name, "eth1", f"192.168.{s}.{10 + i}", "public"),
                )
            for tag in [sandbox, "web"] if name in ("gui", "api") else [sandbox, "backend"]:
                db.execute("INSERT INTO tags VALUES (?, ?, ?)", (sandbox, name, tag))


__all__ = ["Store", "default_path"]
