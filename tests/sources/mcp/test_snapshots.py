"""Upstream tools that change stay under policy: one catalog snapshot for discovery,
policy and dispatch (a real MCP server whose tool list the test rewrites)."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from codemode import CodeMode, CodeModeError, Limits
from codemode.authz import AllowAll, AuthorizationRequest
from codemode.authz.cedar import CedarAuthorizer
from codemode.authz.rego import RegoAuthorizer
from codemode.capabilities import Capability
from codemode.errors import NotFoundError, RegistrationError
from codemode.events import CallAttempted, Event
from tests.conftest import eventually
from tests.sources.mcp.conftest import PYTHON

SERVER = str(Path(__file__).with_name("changing_server.py"))
EVERYTHING = '@id("everything")\npermit (principal, action, resource);\n'
NO_DESTRUCTIVE = (
    '@id("no-destructive-tools")\nforbid (principal, action, resource)\n'
    "when { resource has destructiveHint && resource.destructiveHint };\n"
)
REGO = "package codemode.authz\n\nimport rego.v1\n\ndefault allow := false\n\n"


def tool(name: str, *, hints: dict[str, bool] | None = None, **properties: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": {"type": "object", "properties": properties},
    }
    if hints is not None:
        found["annotations"] = hints
    return found


READ_ONLY = {"readOnlyHint": True}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True}
PATH = {"type": "string"}


class Upstream:
    """The file the changing server reads its tools from."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.version = 0

    def write(self, *tools: dict[str, Any], list_delay: float = 0, **faults: bool) -> int:
        """Serve these tools from now on; `faults`: `fail_list`, `endless_pages`."""
        self.version += 1
        text = json.dumps(
            {"version": self.version, "tools": tools, "list_delay": list_delay, **faults}
        )
        partial = self.path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(self.path)  # the server never reads half a file
        return self.version

    def add_to(self, cm: CodeMode, name: str = "up", **options: Any) -> tuple[str, ...]:
        options.setdefault("env", {"CATALOG_FILE": str(self.path)})
        return cm.add_mcp_server(name, command=PYTHON, args=[SERVER], **options)


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path / "catalog.json")


def run(cm: CodeMode, body: str, subject: str = "alice") -> Any:
    return cm.execute("def main():\n" + body, subject=subject).value


def failure(cm: CodeMode, body: str, subject: str = "alice") -> CodeModeError:
    with pytest.raises(CodeModeError) as info:
        cm.execute("def main():\n" + body, subject=subject)
    return info.value


def changed(cm: CodeMode, until: Callable[[], bool], namespace: str = "up") -> None:
    """Have the upstream announce its change, and wait for the catalog to show it."""
    before = cm.catalog.current.version
    run(cm, f"    return {namespace}.notify()", subject="admin")
    wait_for(lambda: cm.catalog.current.version > before and until())


def found(cm: CodeMode, query: str, subject: str) -> list[str]:
    return [hit.name for hit in cm.search(query, subject=subject).results]


def denied(error: CodeModeError, line: int = 2) -> bool:
    return (
        str(error) == "permission denied" and error.where is not None and error.where.line == line
    )


def hints(cm: CodeMode, name: str) -> dict[str, bool]:
    return dict(cm.catalog.current.by_name[name].annotations)


def host_capability(cm: CodeMode) -> None:
    @cm.capability("host.ping", summary="Ping a path.")
    def ping(path: str) -> str:
        return path


# -- 1. Cedar decides on the hints of the snapshot -----------------------------------------


def test_cedar_decides_on_a_refreshed_tools_new_hints(upstream: Upstream) -> None:
    """`wipe` relisted as destructive is forbidden at once, and hidden from who may not."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH))
    cedar = CedarAuthorizer(EVERYTHING + NO_DESTRUCTIVE)
    with CodeMode(authorizer=cedar, hide_forbidden=True) as cm:
        upstream.add_to(cm)
        assert run(cm, '    return up.wipe(path="/srv")["tool"]') == "wipe"
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH))
        changed(cm, lambda: hints(cm, "up.wipe")["destructiveHint"])
        error = failure(cm, '    return up.wipe(path="/srv")')
        assert (
            str(error)
            == 'invalid program: <codemode>:2:12: unknown capability "up.wipe"; up has: notify'
        )
        assert found(cm, "wipe", "alice") == []
        assert cedar.entities == cedar.host_entities, "each snapshot has its own copy"


def test_cedar_without_hiding_denies_the_relisted_destructive_tool(upstream: Upstream) -> None:
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH))
    with CodeMode(authorizer=CedarAuthorizer(EVERYTHING + NO_DESTRUCTIVE)) as cm:
        upstream.add_to(cm)
        run(cm, '    return up.wipe(path="/srv")')
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH))
        changed(cm, lambda: hints(cm, "up.wipe")["destructiveHint"])
        assert denied(failure(cm, '    return up.wipe(path="/srv")'))


def test_a_refresh_the_policy_refuses_withholds_what_changed(upstream: Upstream) -> None:
    """A policy naming `up.wipe` refuses a listing without it: the old snapshot stays for
    everything else, and the changed tools are withheld until a listing is accepted."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH), tool("read", hints=READ_ONLY))
    policy = (
        EVERYTHING + '@id("no-wipe")\nforbid (principal, action == Action::"up.wipe", resource);\n'
    )
    with CodeMode(authorizer=CedarAuthorizer(policy)) as cm:
        upstream.add_to(cm)
        run(cm, "    return up.read()")
        before = cm.catalog.current
        upstream.write(
            tool("read", hints=DESTRUCTIVE), tool("stat", hints=READ_ONLY)
        )  # wipe is gone, read changed, stat is new
        changed(cm, lambda: "up.read" not in cm.catalog.enabled)
        now = cm.catalog.current
        assert sorted(now.enabled) == ["up.notify"]
        assert now.by_name["up.read"] is before.by_name["up.read"], "nothing half-recorded"
        assert now.policy is before.policy
        error = failure(cm, "    return up.read()")
        assert (
            str(error)
            == 'invalid program: <codemode>:2:12: unknown capability "up.read"; up has: notify'
        )
        upstream.write(tool("wipe", hints=READ_ONLY, path=PATH), tool("read", hints=READ_ONLY))
        changed(cm, lambda: "up.read" in cm.catalog.enabled)
        assert sorted(cm.catalog.enabled) == ["up.notify", "up.read", "up.wipe"]
        assert run(cm, "    return up.read()")["tool"] == "read"


# -- 2. A server added after the first use goes through the policy ---------------------


@pytest.mark.parametrize("kind", ["cedar", "rego"])
def test_a_server_added_after_the_first_use_is_checked_by_the_policy(
    upstream: Upstream, kind: str
) -> None:
    """A tool with no hints (so presumed destructive) stays hidden from who may not call
    it, and Cedar knows its action for who may."""
    upstream.write(tool("erase", path=PATH))
    authorizer: Any
    if kind == "cedar":
        authorizer = CedarAuthorizer(
            '@id("admins")\npermit (principal == User::"admin", action, resource);\n'
            '@id("readers")\npermit (principal, action, resource)\n'
            "when { resource has readOnlyHint && resource.readOnlyHint };\n"
        )
    else:
        authorizer = RegoAuthorizer(
            modules={
                "p.rego": REGO
                + 'allow if input.subject.id == "admin"\n'
                + "allow if input.context.readOnlyHint\n"
                + 'visible if input.subject.id == "admin"\n'
                + "visible if input.context.readOnlyHint\n"
            },
            visible="data.codemode.authz.visible",
        )
    with CodeMode(authorizer=authorizer, hide_forbidden=True) as cm:
        host_capability(cm)
        assert found(cm, "", "alice") == []  # the first use
        upstream.add_to(cm)
        assert found(cm, "erase", "alice") == []
        with pytest.raises(NotFoundError):
            cm.describe("up.erase", subject="alice")
        assert "up.notify" in cm.visible("alice")
        assert cm.describe("up.erase", subject="admin").name == "up.erase"
        assert run(cm, '    return up.erase(path="/x")["tool"]', subject="admin") == "erase"


def test_a_policy_that_refuses_an_added_server_is_a_registration_error(
    upstream: Upstream,
) -> None:
    """A policy that reads `context.path` unguarded fits `host.ping`, whose path is
    required, and not the upstream's tools: the server is not added, and its name stays
    free."""
    upstream.write(tool("erase", path=PATH))
    policy = (
        EVERYTHING
        + '@id("x")\nforbid (principal, action, resource)\nwhen { context.path == "/" };\n'
    )
    with CodeMode(authorizer=CedarAuthorizer(policy)) as cm:
        host_capability(cm)
        cm.search("")
        with pytest.raises(RegistrationError, match="the policy refuses them"):
            upstream.add_to(cm)
        assert cm.catalog.names() == ["host.ping"]
        with pytest.raises(RegistrationError, match="the policy refuses them"):
            upstream.add_to(cm)


# -- 3 and 6. The canonical document is what goes on the wire --------------------------


def test_a_schema_default_is_authorized_audited_and_sent(upstream: Upstream) -> None:
    upstream.write(
        tool("delete", path=PATH, recursive={"type": "boolean", "default": True}),
    )
    events: list[Event] = []
    rego = RegoAuthorizer(
        modules={
            "p.rego": REGO
            + 'allow if input.capability.id == "up.notify"\n'
            + "allow if not input.arguments.recursive\n"
        }
    )
    with CodeMode(authorizer=rego, on_event=events.append) as cm:
        upstream.add_to(cm)
        assert denied(failure(cm, '    return up.delete(path="/srv")'))
        sent = run(cm, '    return up.delete(path="/srv", recursive=False)')
        assert sent["arguments"] == {"path": "/srv", "recursive": False}
    attempted = [e.arguments for e in events if isinstance(e, CallAttempted)]
    assert attempted == [
        {"path": "/srv", "recursive": True},
        {"path": "/srv", "recursive": False},
    ]


def test_none_for_an_optional_parameter_is_left_out_everywhere(upstream: Upstream) -> None:
    upstream.write(tool("tag", path=PATH, note={"type": "string"}))
    seen: list[AuthorizationRequest] = []
    with CodeMode(authorizer=seen.append) as cm:
        upstream.add_to(cm)
        sent = run(cm, '    return up.tag(path="/a", note=None)')
    assert sent["arguments"] == {"path": "/a"}
    assert seen[-1].arguments == {"path": "/a"}


def test_rego_and_cedar_read_the_upstreams_own_argument_names(upstream: Upstream) -> None:
    upstream.write(tool("move", **{"from": PATH, "my-path": PATH}))  # type: ignore[arg-type]
    rego = RegoAuthorizer(
        modules={
            "p.rego": REGO
            + 'allow if input.arguments.from == "/a"\n'
            + 'allow if input.capability.id == "up.notify"\n'
        }
    )
    with CodeMode(authorizer=rego) as cm:
        upstream.add_to(cm)
        signature = cm.describe("up.move").signature
        assert signature.startswith("up.move(*, from_: str | None = None, my_path")
        sent = run(cm, '    return up.move(from_="/a", my_path="/b")')
        assert sent["arguments"] == {"from": "/a", "my-path": "/b"}
        assert denied(failure(cm, '    return up.move(from_="/b")'))
    cedar = CedarAuthorizer(
        EVERYTHING + '@id("x")\nforbid (principal, action, resource)\n'
        'when { context has "my-path" && context["my-path"] == "/etc" };\n'
    )
    with CodeMode(authorizer=cedar) as cm:
        upstream.add_to(cm)
        run(cm, '    return up.move(my_path="/b")')
        assert denied(failure(cm, '    return up.move(my_path="/etc")'))


def test_contradictory_hints_are_read_the_safe_way(upstream: Upstream) -> None:
    upstream.write(tool("odd", hints={"readOnlyHint": True, "destructiveHint": True}))
    with CodeMode(authorizer=AllowAll()) as cm:
        upstream.add_to(cm)
        assert hints(cm, "up.odd") == {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": True,
        }


# -- 7. What a running execution sees ----------------------------------------------------


def test_a_tool_that_changes_while_the_program_runs_is_not_called(upstream: Upstream) -> None:
    """The program was shown the read-only `wipe`; after the upstream said it changed, the
    call fails at its line instead of running under hints that no longer describe it."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH), tool("read", hints=READ_ONLY))
    seen: list[AuthorizationRequest] = []
    with CodeMode(authorizer=seen.append) as cm:
        upstream.add_to(cm)
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH), tool("read", hints=READ_ONLY))
        body = (
            "    up.notify()\n"
            "    kept = up.read()['tool']\n"
            "    try:\n"
            '        up.wipe(path="/srv")\n'
            "    except RuntimeError as error:\n"
            "        return kept, str(error)\n"
        )
        assert run(cm, body) == [
            "read",
            "capability failed: up.wipe changed on its server while the program ran; "
            "describe it again, then run the program again",
        ]
        assert [r.capability_name for r in seen] == ["up.notify", "up.read", "up.wipe"]
        assert hints(cm, "up.wipe")["destructiveHint"] is True
        assert run(cm, '    return up.wipe(path="/srv")["version"]') == 2


def test_a_new_session_lists_the_tools_again(upstream: Upstream) -> None:
    """A server started again may serve other tools without a notice: the first call on
    its new session waits for a new listing, so a changed tool is not run under the hints
    it had before, and the policy sees the new ones."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH))
    with CodeMode(authorizer=CedarAuthorizer(EVERYTHING + NO_DESTRUCTIVE)) as cm:
        upstream.add_to(cm, connect="first_use")  # listed, then its process ends
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH))
        error = failure(cm, '    return up.wipe(path="/srv")')
        assert str(error) == (
            "capability failed: up.wipe changed on its server while the program ran; "
            "describe it again, then run the program again"
        )
        assert hints(cm, "up.wipe")["destructiveHint"] is True
        assert denied(failure(cm, '    return up.wipe(path="/srv")'))


def test_a_listing_that_cannot_be_read_withholds_every_tool_until_one_can(
    upstream: Upstream,
) -> None:
    """The upstream said its tools changed and then could not list them: any of them may
    have changed, so none is used (not `wipe` under its old read-only hints) until a
    listing is read again, which is tried again without a further notice."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH))
    with CodeMode(authorizer=CedarAuthorizer(EVERYTHING + NO_DESTRUCTIVE)) as cm:
        upstream.add_to(cm)
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH), fail_list=True)
        changed(cm, lambda: "up.wipe" not in cm.catalog.enabled)
        assert sorted(cm.catalog.enabled) == []
        error = failure(cm, '    return up.wipe(path="/srv")')
        assert str(error) == (
            "invalid program: <codemode>:2:12: NameError: name 'up' is not defined; "
            "no capabilities are available to you"
        )
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH))
        wait_for(lambda: "up.wipe" in cm.catalog.enabled)
        assert hints(cm, "up.wipe")["destructiveHint"] is True
        assert denied(failure(cm, '    return up.wipe(path="/srv")'))


def test_tools_of_a_later_listing_that_become_one_name_are_skipped(upstream: Upstream) -> None:
    """Only the clashing tools are left out: the rest of the listing is read (`wipe` has
    its new hints at once)."""
    upstream.write(tool("wipe", hints=READ_ONLY, path=PATH))
    with CodeMode(authorizer=CedarAuthorizer(EVERYTHING + NO_DESTRUCTIVE)) as cm:
        upstream.add_to(cm)
        upstream.write(tool("wipe", hints=DESTRUCTIVE, path=PATH), tool("a-b"), tool("a_b"))
        changed(cm, lambda: hints(cm, "up.wipe")["destructiveHint"])
        assert sorted(cm.catalog.enabled) == ["up.notify", "up.wipe"]
        assert denied(failure(cm, '    return up.wipe(path="/srv")'))


def test_cedar_reads_a_filled_default_without_has(upstream: Upstream) -> None:
    """A parameter whose default is filled in is always in the context, so Cedar's schema
    declares it required and a policy may read it as it is."""
    upstream.write(tool("delete", path=PATH, recursive={"type": "boolean", "default": True}))
    policy = (
        EVERYTHING
        + '@id("no-recursive-delete")\nforbid (principal, action == Action::"up.delete", resource)\n'
        + "when { context.recursive };\n"
    )
    with CodeMode(authorizer=CedarAuthorizer(policy)) as cm:
        upstream.add_to(cm)
        assert denied(failure(cm, '    return up.delete(path="/srv")'))
        assert run(cm, '    return up.delete(path="/srv", recursive=False)')["tool"] == "delete"


def test_refreshes_of_one_upstream_never_overlap_and_the_newest_wins(
    upstream: Upstream, tmp_path: Path
) -> None:
    """A slow listing of v2 and a fast one of v3: the catalog ends on v3 (with refreshes
    side by side, the slow v2 would land last and stay)."""
    events = tmp_path / "listings.txt"
    upstream.write(tool("a"))
    with CodeMode(authorizer=AllowAll()) as cm:
        upstream.add_to(cm, env={"CATALOG_FILE": str(upstream.path), "LIST_EVENTS": str(events)})
        upstream.write(tool("b"), list_delay=1.0)
        run(cm, "    return up.notify()")
        wait_for(lambda: "start 2" in lines(events))
        upstream.write(tool("c"))
        changed(cm, lambda: "up.c" in cm.catalog.enabled)
        wait_for(lambda: "end 2" in lines(events))  # the slow one is over, whichever order
        assert sorted(cm.catalog.enabled) == ["up.c", "up.notify"]
        assert lines(events).index("end 2") < lines(events).index("start 3"), "one at a time"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for(condition: Callable[[], bool]) -> None:
    assert eventually(condition), "never happened"


class SlowPolicy:
    """Allows all; its check of a catalog with `up.b` waits until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: AuthorizationRequest) -> None:
        return None

    def prepare(self, capabilities: Sequence[Capability]) -> SlowPolicy:
        if any(c.name == "up.b" for c in capabilities):
            self.entered.set()
            assert self.release.wait(20)
        return self


def test_a_server_added_while_a_slow_policy_check_runs_is_kept(upstream: Upstream) -> None:
    """Every change of the catalog is made under one writer lock: the add waits for the
    refresh's check, and neither is lost."""
    upstream.write(tool("a"))
    policy = SlowPolicy()
    with CodeMode(authorizer=policy) as cm:
        upstream.add_to(cm)
        cm.search("")
        upstream.write(tool("b"))
        run(cm, "    return up.notify()")
        assert policy.entered.wait(20)
        adding = threading.Thread(target=lambda: upstream.add_to(cm, "two"))
        adding.start()
        policy.release.set()
        adding.join(30)
        wait_for(lambda: "up.b" in cm.catalog.enabled and "two.b" in cm.catalog.enabled)
        assert {"up.b", "two.b", "two.notify"} <= set(cm.catalog.enabled)


def test_refreshes_under_load_keep_every_call_in_one_snapshot(upstream: Upstream) -> None:
    """The upstream relists `probe` again and again, its default `version` and its hints
    changing together (destructive on odd versions), while four subjects run programs.
    Every authorized call saw hints and a document of one snapshot, and the upstream got
    exactly the document that was authorized. The next change waits for a call that ran,
    so that calls run between changes, whatever the machine's speed."""

    def probe(version: int) -> dict[str, Any]:
        return tool(
            "probe",
            hints=DESTRUCTIVE if version % 2 else READ_ONLY,
            version={"type": "integer", "default": version},
        )

    upstream.write(probe(1))
    seen: list[AuthorizationRequest] = []
    results: list[Any] = []
    ran = threading.Condition()
    done = threading.Event()
    program = (
        "import asyncio\n"
        "async def main():\n"
        "    out = []\n"
        "    for _ in range(5):\n"
        "        try:\n"
        "            out.append(await up.probe())\n"
        "        except RuntimeError as error:\n"
        "            out.append(str(error))\n"
        "    return out\n"
    )

    def authorize(request: AuthorizationRequest) -> None:
        with ran:
            seen.append(request)

    def ran_at(version: int) -> bool:
        return any(isinstance(r, dict) and r["arguments"]["version"] == version for r in results)

    with CodeMode(authorizer=authorize, limits=Limits(max_execution_seconds=30)) as cm:
        upstream.add_to(cm)

        def churn() -> None:
            try:
                for _ in range(8):
                    version = upstream.write(probe(upstream.version + 1))
                    cm.execute("def main():\n    return up.notify()", subject="admin")
                    with ran:  # a call ran in the new snapshot before the next change
                        assert ran.wait_for(functools.partial(ran_at, version), 60)
            finally:
                done.set()

        def work(subject: str) -> None:
            while not done.is_set():
                value = cm.execute(program, subject=subject).value
                with ran:
                    results.extend(value)  # type: ignore[arg-type]
                    ran.notify_all()

        churner = threading.Thread(target=churn)
        workers = [threading.Thread(target=work, args=(f"s{n}",)) for n in range(4)]
        for thread in [churner, *workers]:
            thread.start()
        for thread in [churner, *workers]:
            thread.join(120)

    probes = [r for r in seen if r.capability_name == "up.probe"]
    assert len(probes) == len(results)
    for request in probes:
        version = request.arguments["version"]
        assert isinstance(version, int)
        assert request.annotations["destructiveHint"] is bool(version % 2), request
    answers = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, str)]
    assert set(refused) <= {
        "capability failed: up.probe changed on its server while the program ran; "
        "describe it again, then run the program again"
    }
    authorized = {r.arguments["version"] for r in probes}
    assert all(a["arguments"]["version"] in authorized for a in answers)
    assert all(a["arguments"] == {"version": a["arguments"]["version"]} for a in answers)
    assert {a["arguments"]["version"] for a in answers} >= set(range(2, 10)), "in each snapshot"


# -- from an attacker's review ------------------------------------------------------------


def test_a_policy_cannot_read_an_argument_cedar_cannot_type(upstream: Upstream) -> None:
    """`path` relisted as a string or an integer has no Cedar type, so its context would
    leave it out and `context has path` would be false: the listing is refused, and the
    tool is not called under a forbid that can no longer see its argument."""
    upstream.write(tool("remove", path=PATH))
    policy = (
        EVERYTHING
        + '@id("not-etc")\nforbid (principal, action, resource)\n'
        + 'when { context has path && context.path like "/etc/*" };\n'
    )
    with CodeMode(authorizer=CedarAuthorizer(policy)) as cm:
        upstream.add_to(cm)
        assert denied(failure(cm, '    return up.remove(path="/etc/passwd")'))
        upstream.write(tool("remove", path={"type": ["string", "integer"]}))
        changed(cm, lambda: "up.remove" not in cm.catalog.enabled)
        error = failure(cm, '    return up.remove(path="/etc/passwd")')
        assert str(error).startswith(
            'invalid program: <codemode>:2:12: unknown capability "up.remove"'
        )


def test_nested_and_referenced_defaults_are_in_the_document(upstream: Upstream) -> None:
    """As an upstream that validates its arguments with pydantic applies them (FastMCP's
    `opts: Opts` with `recursive: bool = True`): the policy sees what will be done."""
    flag = {"$ref": "#/$defs/Flag"}
    upstream.write(
        {
            **tool("delete", path=PATH),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": PATH,
                    "opts": {
                        "type": "object",
                        "properties": {"recursive": {"type": "boolean", "default": True}},
                    },
                    "force": flag,
                },
                "$defs": {"Flag": {"type": "boolean", "default": False}},
            },
        }
    )
    seen: list[AuthorizationRequest] = []
    with CodeMode(authorizer=seen.append) as cm:
        upstream.add_to(cm)
        sent = run(cm, '    return up.delete(path="/srv", opts={})')
    expected = {"path": "/srv", "opts": {"recursive": True}, "force": False}
    assert sent["arguments"] == expected
    assert seen[-1].arguments == expected


def test_a_listing_that_changes_nothing_makes_no_snapshot(
    upstream: Upstream, tmp_path: Path
) -> None:
    """A storm of notices over the same tools leaves the catalog (and so every subject's
    visibility and prepared programs) as it was."""
    events = tmp_path / "listings.txt"
    upstream.write(tool("a"))
    with CodeMode(authorizer=AllowAll()) as cm:
        upstream.add_to(cm, env={"CATALOG_FILE": str(upstream.path), "LIST_EVENTS": str(events)})
        cm.search("")
        before = cm.catalog.current
        for _ in range(3):
            run(cm, "    return up.notify()")
        wait_for(lambda: lines(events).count("end 1") >= 2)
        assert run(cm, "    return up.a()")["tool"] == "a"  # waits for what is pending
        assert cm.catalog.current is before


def test_a_schema_too_intricate_to_read_is_skipped(upstream: Upstream) -> None:
    """A chain of 500 references (5 levels of JSON) cannot be read without recursing past
    Python's limit: that tool is skipped with a warning, the others are registered."""
    chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(500)}
    chain["d500"] = {"type": "string"}
    deep = {
        **tool("deep"),
        "inputSchema": {
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/d0"}},
            "$defs": chain,
        },
    }
    upstream.write(deep, tool("fine"))
    with CodeMode(authorizer=AllowAll()) as cm:
        assert sorted(upstream.add_to(cm)) == ["up.fine", "up.notify"]
        assert cm.describe("up.fine").name == "up.fine"


def test_a_listing_without_end_is_refused(upstream: Upstream) -> None:
    upstream.write(tool("a"), endless_pages=True)
    with CodeMode(authorizer=AllowAll()) as cm:
        with pytest.raises(RegistrationError, match="its listing goes on past 100 pages"):
            upstream.add_to(cm)
        assert cm.catalog.names() == []
