"""The demo host: an inventory of sandboxes, instances and owners, as a real host writes it.

It uses only codemode's public API. Its capabilities cover the usual shapes: list and
search with filters and pagination, get-by-id, updates that write, a dataclass result,
nested TypedDicts, a pydantic model from an async handler, and a model-safe "not found".
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypedDict

import pydantic
from pydantic import Field

from codemode import AgentError, CodeMode, Limits
from codemode.authz import AllowAll, Authorizer
from codemode.demo.store import Store, default_path

State = Literal["running", "stopped"]
SandboxName = Annotated[
    str, Field(description="Sandbox name, as sandboxes.list gives it", examples=["dev"])
]
InstanceName = Annotated[
    str, Field(description="Instance name within its sandbox", examples=["api"])
]
OwnerId = Annotated[
    str, Field(description="Owner id (not a name), like u-edsger", examples=["u-edsger"])
]
PageSize = Annotated[int, Field(ge=1, le=100, description="Items per page")]
Tag = Annotated[str, Field(min_length=1, max_length=40)]


def _no_sandbox(db: sqlite3.Connection, sandbox: str) -> AgentError | None:
    """The error for a sandbox that does not exist, naming those that do."""
    names = [r[0] for r in db.execute("SELECT name FROM sandboxes ORDER BY name")]
    if sandbox in names:
        return None
    return AgentError(f'no sandbox "{sandbox}"; sandboxes: {", ".join(names)}')


def _no_owner(db: sqlite3.Connection, owner: str) -> AgentError | None:
    """The error for an owner id that does not exist, with the id that was likely meant."""
    rows = db.execute("SELECT id, name FROM owners ORDER BY id").fetchall()
    if owner in (r["id"] for r in rows):
        return None
    text = owner.lower().removeprefix("u-")
    likely = [r for r in rows if text and (text in r["id"] or text in r["name"].lower())]
    if likely:
        return AgentError(
            f'no owner id "{owner}"; did you mean "{likely[0]["id"]}" ({likely[0]["name"]})?'
        )
    return AgentError(
        f'no owner id "{owner}"; owner ids look like u-edsger: owners.list gives them'
    )


def _no_instance(db: sqlite3.Connection, sandbox: str, name: str) -> AgentError:
    """The error for an instance that does not exist in a sandbox that does."""
    names = [
        r[0]
        for r in db.execute(
            "SELECT name FROM instances WHERE sandbox = ? ORDER BY name", (sandbox,)
        )
    ]
    close = [n for n in names if n.lower() == name.lower()]
    if close:
        return AgentError(
            f'no instance "{name}" in sandbox "{sandbox}"; did you mean "{close[0]}"?'
        )
    return AgentError(
        f'no instance "{name}" in sandbox "{sandbox}"; its instances: {", ".join(names)}'
    )


def _like(text: str) -> str:
    """A SQL LIKE pattern matching `text` anywhere, its own % and _ taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class InstanceSummary(TypedDict):
    sandbox: str
    name: str
    state: State
    owner: str


class InstancePage(TypedDict):
    items: list[InstanceSummary]
    total: int
    next_offset: int | None


class SandboxSummary(TypedDict):
    name: str
    region: str
    owner: str
    instances: int


@dataclass
class Nic:
    name: str
    address: str
    network: str


@dataclass
class Instance:
    sandbox: str
    name: str
    state: State
    cpus: int
    memory_mb: int
    owner: str
    nics: list[Nic]
    tags: list[str]


class Owner(pydantic.BaseModel):
    id: str
    name: str
    email: str
    team: str


READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
"""What the demo's reading capabilities say of their effects: none, within the database."""


def create(
    path: Path | None = None, *, authorizer: Authorizer | None = None, limits: Limits | None = None
) -> CodeMode:
    """The demo host over a SQLite file (created and seeded on first use)."""
    store = Store(path or default_path())
    cm = CodeMode(authorizer=authorizer or AllowAll(), limits=limits, name="codemode-demo")

    def instance(sandbox: str, name: str) -> Instance:
        with store.connect() as db:
            row = db.execute(
                "SELECT * FROM instances WHERE sandbox = ? AND name = ?", (sandbox, name)
            ).fetchone()
            if row is None:
                raise _no_sandbox(db, sandbox) or _no_instance(db, sandbox, name)
            nics = db.execute(
                "SELECT name, address, network FROM nics WHERE sandbox = ? AND instance = ? "
                "ORDER BY name",
                (sandbox, name),
            ).fetchall()
            tags = db.execute(
                "SELECT tag FROM tags WHERE sandbox = ? AND instance = ? ORDER BY tag",
                (sandbox, name),
            ).fetchall()
        return Instance(
            sandbox=row["sandbox"],
            name=row["name"],
            state=row["state"],
            cpus=row["cpus"],
            memory_mb=row["memory_mb"],
            owner=row["owner_id"],
            nics=[Nic(n["name"], n["address"], n["network"]) for n in nics],
            tags=[t["tag"] for t in tags],
        )

    @cm.capability(
        "sandboxes.list",
        annotations=READ_ONLY,
        summary="List sandboxes with their region, owner and instance count.",
        search_terms=["environments", "projects"],
        example='sandboxes.list(owner="u-ada")',
    )
    def list_sandboxes(*, owner: OwnerId | None = None) -> list[SandboxSummary]:
        """List sandboxes.

        Args:
            owner: Only the sandboxes of this owner id, like u-ada.
        """
        with store.connect() as db:
            unknown = owner is not None and _no_owner(db, owner)
            if unknown:
                raise unknown
            rows = db.execute(
                "SELECT s.name, s.region, s.owner_id, COUNT(i.name) AS n FROM sandboxes s "
                "LEFT JOIN instances i ON i.sandbox = s.name "
                "WHERE (? IS NULL OR s.owner_id = ?) GROUP BY s.name ORDER BY s.name",
                (owner, owner),
            ).fetchall()
        return [
            {"name": r["name"], "region": r["region"], "owner": r["owner_id"], "instances": r["n"]}
            for r in rows
        ]

    @cm.capability(
        "instances.list",
        annotations=READ_ONLY,
        summary="List instances, filtered by sandbox, state, tag or owner, a page at a time.",
        description=(
            "Pages hold at most `limit` items; pass `next_offset` as `offset` for the next page."
        ),
        search_terms=["servers", "machines", "vms"],
        example='instances.list(sandbox="dev", state="running", limit=50)',
    )
    def list_instances(
        *,
        sandbox: SandboxName | None = None,
        state: State | None = None,
        tag: str | None = None,
        owner: OwnerId | None = None,
        limit: PageSize = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> InstancePage:
        """List instances.

        Args:
            sandbox: Only instances of this sandbox.
            state: Only instances in this state.
            tag: Only instances with this tag.
            owner: Only instances of this owner id, like u-edsger.
            limit: Items per page.
            offset: Where the page starts: the next_offset of the previous page.
        """
        where = (
            "(? IS NULL OR i.sandbox = ?) AND (? IS NULL OR i.state = ?) "
            "AND (? IS NULL OR i.owner_id = ?) AND (? IS NULL OR EXISTS (SELECT 1 FROM tags t "
            "WHERE t.sandbox = i.sandbox AND t.instance = i.name AND t.tag = ?))"
        )
        args = (sandbox, sandbox, state, state, owner, owner, tag, tag)
        with store.connect() as db:
            unknown = (sandbox is not None and _no_sandbox(db, sandbox)) or (
                owner is not None and _no_owner(db, owner)
            )
            if unknown:
                raise unknown
            total = db.execute(f"SELECT COUNT(*) FROM instances i WHERE {where}", args).fetchone()[
                0
            ]
            rows = db.execute(
                f"SELECT * FROM instances i WHERE {where} "
                "ORDER BY i.sandbox, i.name LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
        items: list[InstanceSummary] = [
            {
                "sandbox": r["sandbox"],
                "name": r["name"],
                "state": r["state"],
                "owner": r["owner_id"],
            }
            for r in rows
        ]
        following = offset + len(items)
        return {
            "items": items,
            "total": total,
            "next_offset": following if following < total else None,
        }

    @cm.capability(
        "instances.get",
        annotations=READ_ONLY,
        summary="Get one instance with its nics (name, address, network) and tags.",
        search_terms=["server details", "ip address"],
        example='instances.get(sandbox="dev", name="api")',
    )
    def get_instance(*, sandbox: SandboxName, name: InstanceName) -> Instance:
        return instance(sandbox, name)

    @cm.capability(
        "instances.search",
        annotations=READ_ONLY,
        summary="Find instances whose name, tag or nic address contains the text.",
        example='instances.search(text="192.168.1")',
    )
    def search_instances(
        *,
        text: Annotated[str, Field(min_length=1, description="Text to look for, as written")],
        limit: Annotated[int, Field(ge=1, le=100, description="Most results to return")] = 20,
    ) -> list[InstanceSummary]:
        pattern = _like(text)
        with store.connect() as db:
            rows = db.execute(
                "SELECT DISTINCT i.* FROM instances i "
                "LEFT JOIN tags t ON t.sandbox = i.sandbox AND t.instance = i.name "
                "LEFT JOIN nics n ON n.sandbox = i.sandbox AND n.instance = i.name "
                "WHERE i.name LIKE ? ESCAPE '\\' OR t.tag LIKE ? ESCAPE '\\' "
                "OR n.address LIKE ? ESCAPE '\\' ORDER BY i.sandbox, i.name LIMIT ?",
                (pattern, pattern, pattern, limit),
            ).fetchall()
        return [
            {
                "sandbox": r["sandbox"],
                "name": r["name"],
                "state": r["state"],
                "owner": r["owner_id"],
            }
            for r in rows
        ]

    @cm.capability(
        "instances.set_state",
        annotations={"idempotentHint": True, "destructiveHint": False, "openWorldHint": False},
        summary="Start or stop an instance; returns the updated instance.",
        search_terms=["start", "stop", "restart", "power off a server"],
        example='instances.set_state(sandbox="dev", name="api", state="stopped")',
    )
    def set_state(*, sandbox: SandboxName, name: InstanceName, state: State) -> Instance:
        """Start or stop an instance.

        Args:
            state: running to start it, stopped to stop it.
        """
        instance(sandbox, name)
        with store.connect() as db:
            db.execute(
                "UPDATE instances SET state = ? WHERE sandbox = ? AND name = ?",
                (state, sandbox, name),
            )
        return instance(sandbox, name)

    @cm.capability(
        "instances.tag",
        annotations={"idempotentHint": True, "destructiveHint": False, "openWorldHint": False},
        summary="Add tags to an instance; returns all its tags.",
        search_terms=["label"],
        example='instances.tag(sandbox="dev", name="api", tags=["web", "team-a"])',
    )
    def tag_instance(
        *,
        sandbox: SandboxName,
        name: InstanceName,
        tags: Annotated[list[Tag], Field(min_length=1, description="Tags to add")],
    ) -> list[str]:
        instance(sandbox, name)
        with store.connect() as db:
            db.executemany(
                "INSERT OR IGNORE INTO tags VALUES (?, ?, ?)", [(sandbox, name, t) for t in tags]
            )
        return instance(sandbox, name).tags

    @cm.capability(
        "owners.get",
        annotations=READ_ONLY,
        summary="Get one owner (a person) by id, with email and team.",
        search_terms=["user", "person", "contact"],
        example='owners.get(id="u-edsger")',
    )
    async def get_owner(*, id: OwnerId) -> Owner:
        def read() -> Owner:
            with store.connect() as db:
                row = db.execute("SELECT * FROM owners WHERE id = ?", (id,)).fetchone()
                if row is None:
                    raise _no_owner(db, id) or AgentError(f'no owner id "{id}"')
            return Owner(id=row["id"], name=row["name"], email=row["email"], team=row["team"])

        return await asyncio.to_thread(read)

    @cm.capability(
        "owners.list",
        annotations=READ_ONLY,
        summary="List owners, optionally of one team.",
        example='owners.list(team="platform")',
    )
    def list_owners(
        *, team: Annotated[str, Field(examples=["platform", "research"])] | None = None
    ) -> list[Owner]:
        """List owners.

        Args:
            team: Only the owners of this team.
        """
        with store.connect() as db:
            teams = [r[0] for r in db.execute("SELECT DISTINCT team FROM owners ORDER BY team")]
            if team is not None and team not in teams:
                raise AgentError(f'no team "{team}"; teams: {", ".join(teams)}')
            rows = db.execute(
                "SELECT * FROM owners WHERE ? IS NULL OR team = ? ORDER BY id", (team, team)
            ).fetchall()
        return [Owner(id=r["id"], name=r["name"], email=r["email"], team=r["team"]) for r in rows]

    return cm


__all__ = [
    "Instance",
    "InstancePage",
    "InstanceSummary",
    "Nic",
    "Owner",
    "SandboxSummary",
    "create",
]
