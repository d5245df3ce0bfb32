"""Scenario 13: what a model pays for results whose shape it cannot read in describe.

Eight scripted tasks over the npm memory and filesystem servers, each solved by a scripted
model in up to 4 executes: its first program reads the result keys describe shows (a fixed
table of plausible guesses where describe shows no shape), and after a failure it takes the
key the error's did-you-mean or key list names, or, when the error names none, runs one more
program to look at the keys and takes the closest. Measured per mode: executes needed, the
upstream calls that failing executes made (writes among them are repeated when the program
runs again), and the bytes of the compact describes the model read before its first execute.
Beside them, what learning adds to a call's path: `observe` and `merge` of a 1,000-row
result, against the JSON parse the result already costs.

Modes: the servers as shipped (every tool declares an `outputSchema`); the same servers
behind `benchmarks.undeclared`, a relay that declares none, as most MCP servers do; and the
relay again after three runs of the tasks taught code mode the results' shapes, measured
only when this codemode learns shapes (`CodeMode(shapes=...)`).
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._stats import measure_interleaved
from benchmarks.gateway import BIN
from codemode import CodeMode, CodeModeError
from codemode.authz import AllowAll
from codemode.capabilities import merge, observe, subject_digest
from codemode.payloads import describe_payload, model_text
from codemode.types import JSONObject, JSONValue

ROOT = Path(__file__).parents[1]
SUBJECT = "bench"
MAX_EXECUTES = 4
LEARNING_RUNS = 3
"""Runs of the tasks that teach code mode the shapes before the "after learning" mode."""
LEARNS = "shapes" in inspect.signature(CodeMode).parameters
"""Whether this codemode learns result shapes (the third mode runs only then)."""
DIGEST = subject_digest(SUBJECT)
SEED = (
    "def main():\n"
    "    memory.create_entities(entities=[\n"
    "        {'name': 'alice', 'entityType': 'person', 'observations': ['likes tea']},\n"
    "        {'name': 'bob', 'entityType': 'person', 'observations': []},\n"
    "        {'name': 'carol', 'entityType': 'person', 'observations': []},\n"
    "        {'name': 'acme', 'entityType': 'company', 'observations': []},\n"
    "    ])\n"
    "    memory.create_relations(relations=[\n"
    "        {'from': 'alice', 'to': 'bob', 'relationType': 'knows'},\n"
    "        {'from': 'alice', 'to': 'carol', 'relationType': 'knows'},\n"
    "        {'from': 'alice', 'to': 'acme', 'relationType': 'works_at'},\n"
    "    ])\n"
)


@dataclass(frozen=True, slots=True)
class Key:
    """A result key a task reads: the real one, the one a model guesses without a shape,
    and a program whose value is the object holding it (to look when an error names none)."""

    truth: str
    guess: str
    holder: str


@dataclass(frozen=True, slots=True)
class Task:
    """One task: the tools it uses, its program with the slots a model fills from what
    describe shows, and what its answer must be."""

    name: str
    tools: tuple[str, ...]
    body: str
    """main()'s body; each `{slot}` is filled from `keys`, `texts`, `parsed` or `wrapped`."""
    check: Callable[[JSONValue], bool]
    keys: dict[str, Key] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    """Slot -> the tool whose result is text: `r["content"]` where describe shows that
    field (a declared `{content: str}`), `r` itself where the value is the text."""
    parsed: dict[str, str] = field(default_factory=dict)
    """Slot -> the tool whose result is JSON text: `json.loads(r["content"])` where describe
    shows the field, the value itself (code mode parses JSON text) where not."""
    wrapped: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Slot -> (tool, key) where a declared result wraps a list in `key` that the tool's
    text holds bare: `r["key"]` unless describe shows the result as observed to be a list."""


_ADD = (
    "memory.add_observations(observations=[{'entityName': 'bob', 'contents': ['met at the fair']}])"
)
TASKS = (
    Task(
        "memory: count entities of a type",
        ("memory.read_graph",),
        "    graph = memory.read_graph()\n"
        "    return sum(1 for e in graph['entities'] if e['{entity_type}'] == 'person')\n",
        lambda value: value == 3,
        keys={"entity_type": Key("entityType", "type", "memory.read_graph()['entities'][0]")},
    ),
    Task(
        "memory: names related to X",
        ("memory.read_graph",),
        "    graph = memory.read_graph()\n"
        "    return sorted(r['{to}'] for r in graph['relations']\n"
        "                  if r['{source}'] == 'alice' and r['{relation}'] == 'knows')\n",
        lambda value: value == ["bob", "carol"],
        keys={
            "to": Key("to", "to", "memory.read_graph()['relations'][0]"),
            "source": Key("from", "from", "memory.read_graph()['relations'][0]"),
            "relation": Key("relationType", "type", "memory.read_graph()['relations'][0]"),
        },
    ),
    Task(
        "memory: observations of X",
        ("memory.open_nodes",),
        "    found = memory.open_nodes(names=['alice'])\n"
        "    return found['entities'][0]['{observations}']\n",
        lambda value: isinstance(value, list) and "likes tea" in value,
        keys={
            "observations": Key(
                "observations", "observations", "memory.open_nodes(names=['alice'])['entities'][0]"
            )
        },
    ),
    Task(
        "memory: add an observation",
        ("memory.add_observations",),
        "    done = " + _ADD.replace("{", "{{").replace("}", "}}") + "\n"
        "    return done{results}[0]['{added}']\n",
        lambda value: isinstance(value, list),
        keys={
            "added": Key(
                "addedObservations",
                "added",
                _ADD.replace("{", "{{").replace("}", "}}") + "{results}[0]",
            )
        },
        wrapped={"results": ("memory.add_observations", "results")},
    ),
    Task(
        "fs: list tree names",
        ("fs.directory_tree",),
        "    tree = fs.directory_tree(path=FOLDER)\n"
        "    return sorted(e['{name}'] for e in {tree})\n",
        lambda value: isinstance(value, list) and {"data", "notes.txt", "todo.md"} <= set(value),
        keys={"name": Key("name", "name", "fs.directory_tree(path=FOLDER)[0]")},
        parsed={"tree": "fs.directory_tree"},
    ),
    Task(
        "fs: sizes of files",
        ("fs.list_directory", "fs.get_file_info"),
        "    sizes = {{}}\n"
        "    for line in fs.list_directory(path=FOLDER){listing}.splitlines():\n"
        "        if line.startswith('[FILE] '):\n"
        "            info = fs.get_file_info(path=FOLDER + '/' + line[7:]){info}\n"
        "            size = [s for s in info.splitlines() if s.startswith('size:')][0]\n"
        "            sizes[line[7:]] = int(size.split(': ')[1])\n"
        "    return sizes\n",
        lambda value: isinstance(value, dict) and value.get("notes.txt") == 11,
        texts={"listing": "fs.list_directory", "info": "fs.get_file_info"},
    ),
    Task(
        "fs: search then read",
        ("fs.search_files", "fs.read_text_file"),
        "    found = fs.search_files(path=FOLDER, pattern='notes*'){found}.splitlines()\n"
        "    return fs.read_text_file(path=found[0]){text}\n",
        lambda value: value == "alpha\nbeta\n",
        texts={"found": "fs.search_files", "text": "fs.read_text_file"},
    ),
    Task(
        "fs: write then read back",
        ("fs.write_file", "fs.read_text_file"),
        "    fs.write_file(path=FOLDER + '/out.txt', content='done')\n"
        "    return fs.read_text_file(path=FOLDER + '/out.txt'){text}\n",
        lambda value: value == "done",
        texts={"text": "fs.read_text_file"},
    ),
)


def shows(described: str, name: str) -> bool:
    """Whether describe shows `name` as a field of a result (`{name: ...`, `, name?: ...`)."""
    return re.search(rf"[{{ ]{re.escape(name)}\??: ", described) is not None


def closest(wrong: str, candidates: list[str]) -> str | None:
    """The key a model takes from a list of keys: the one containing what it guessed
    (`type` -> `entityType`), else the most similar."""
    containing = [c for c in candidates if wrong.lower() in c.lower()]
    if containing:
        return containing[0]
    found = difflib.get_close_matches(wrong, candidates, n=1, cutoff=0.0)
    return found[0] if found else None


@dataclass(slots=True)
class Outcome:
    """What one task cost the scripted model."""

    executes: int = 0
    failing_calls: int = 0
    """Upstream calls completed by executes that then failed."""
    repeated_writes: int = 0
    """Of those, calls that may have changed something (run again by the next program)."""
    looks: int = 0
    """Executes (counted in `executes`) that only looked at a result's keys."""
    context_bytes: int = 0
    solved: bool = False


def described(cm: CodeMode, names: tuple[str, ...]) -> str:
    """The compact describe of `names`, as the model reads it."""
    found: list[JSONValue] = [describe_payload(cm.describe(n), schemas=False) for n in names]
    payload: JSONObject = {"capabilities": found, "not_found": []}
    return model_text(payload)


def first_program(task: Task, text: str, per_tool: dict[str, str]) -> dict[str, str]:
    """The slots of the first program, from what the describes show."""
    chosen: dict[str, str] = {}
    for slot, key in task.keys.items():
        chosen[slot] = key.truth if shows(text, key.truth) else key.guess
    for slot, tool in task.texts.items():
        chosen[slot] = "['content']" if shows(per_tool[tool], "content") else ""
    for slot, tool in task.parsed.items():
        parsed = shows(per_tool[tool], "content")
        chosen[slot] = f"json.loads({slot}['content'])" if parsed else slot
    for slot, (tool, wrapper) in task.wrapped.items():
        bare = '"shape": "list[' in per_tool[tool]  # observed to be a list: no key to read
        chosen[slot] = "" if bare else f"['{wrapper}']"
    return chosen


def attempt(cm: CodeMode, task: Task, folder: Path) -> Outcome:
    """One scripted model solving `task` in at most MAX_EXECUTES executes."""
    text = described(cm, task.tools)
    outcome = Outcome(context_bytes=len(text.encode()))
    chosen = first_program(task, text, {name: described(cm, (name,)) for name in task.tools})
    prelude = f"import json\nFOLDER = {str(folder)!r}\n\ndef main():\n"
    while outcome.executes < MAX_EXECUTES:
        outcome.executes += 1
        try:
            value = cm.execute(prelude + task.body.format(**chosen), subject=SUBJECT).value
        except CodeModeError as error:
            outcome.failing_calls += len(error.calls)
            outcome.repeated_writes += sum(call.changes for call in error.calls)
            if not _fix(cm, task, chosen, str(error), prelude, outcome):
                return outcome
            continue
        outcome.solved = task.check(value)
        return outcome
    return outcome


def _fix(
    cm: CodeMode, task: Task, chosen: dict[str, str], message: str, prelude: str, outcome: Outcome
) -> bool:
    """Change the key the error names, as a model would; False when it names none we wrote."""
    if "TypeError: list indices must be integers" in message and any(
        chosen[slot] for slot in task.wrapped
    ):
        for slot in task.wrapped:  # the result is the list itself: read no key of it
            chosen[slot] = ""
        return True
    missing = re.search(r"KeyError: '([^']+)'", message)
    slots = [s for s in task.keys if missing and chosen[s] == missing.group(1)]
    if missing is None or not slots:
        return False
    wrong, slot = missing.group(1), slots[0]
    if hint := re.search(r'did you mean "([^"]+)"', message):
        chosen[slot] = hint.group(1)
        return True
    if listed := re.search(r" has: ([^\n(]+)", message):
        found = closest(wrong, [k.strip() for k in listed.group(1).split(",")])
    else:  # nothing named: look at the keys, one more execute
        if outcome.executes >= MAX_EXECUTES:
            return False
        outcome.executes += 1
        outcome.looks += 1
        look = prelude + f"    return sorted({task.keys[slot].holder.format(**chosen)})\n"
        try:
            keys = cm.execute(look, subject=SUBJECT).value
        except CodeModeError:
            return False
        found = closest(wrong, [str(k) for k in keys]) if isinstance(keys, list) else None
    if found is None:
        return False
    chosen[slot] = found
    return True


@contextmanager
def servers(folder: Path, *, relayed: bool, learning: bool) -> Iterator[CodeMode]:
    """A CodeMode over the npm memory and filesystem servers, or over the relay of each,
    seeded with the same graph and files."""
    files = folder / "files"
    (files / "data").mkdir(parents=True)
    (files / "notes.txt").write_text("alpha\nbeta\n")
    (files / "todo.md").write_text("- ship it\n")
    env = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}
    options: dict[str, Any] = {"shapes": False} if LEARNS and not learning else {}
    with CodeMode(authorizer=AllowAll(), **options) as cm:
        if relayed:
            relay = [sys.executable, "-m", "benchmarks.undeclared"]
            cm.add_mcp_server(
                "memory", command=relay[0], args=[*relay[1:], "memory"], env=env, cwd=ROOT
            )
            cm.add_mcp_server(
                "fs", command=relay[0], args=[*relay[1:], "filesystem", str(files)], cwd=ROOT
            )
        else:
            cm.add_mcp_server("memory", command=str(BIN / "mcp-server-memory"), env=env)
            cm.add_mcp_server("fs", command=str(BIN / "mcp-server-filesystem"), args=[str(files)])
        cm.execute(SEED, subject=SUBJECT)
        yield cm


def run_tasks(cm: CodeMode, folder: Path) -> dict[str, Outcome]:
    """Every task once, on the servers `servers(folder, ...)` started."""
    return {task.name: attempt(cm, task, folder / "files") for task in TASKS}


def _mode(relayed: bool, learning: bool) -> dict[str, Outcome]:
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp).resolve()
        with servers(folder, relayed=relayed, learning=learning) as cm:
            for _ in range(LEARNING_RUNS if learning else 0):
                run_tasks(cm, folder)
            return run_tasks(cm, folder)


def _totals(outcomes: dict[str, Outcome]) -> dict[str, Any]:
    return {
        "executes": sum(o.executes for o in outcomes.values()),
        "failing_calls": sum(o.failing_calls for o in outcomes.values()),
        "repeated_writes": sum(o.repeated_writes for o in outcomes.values()),
        "context_bytes": sum(o.context_bytes for o in outcomes.values()),
        "solved": sum(o.solved for o in outcomes.values()),
        "looks": sum(o.looks for o in outcomes.values()),
        "tasks": {name: asdict(o) for name, o in outcomes.items()},
    }


MODES = {
    "declared": "the npm servers as shipped (outputSchema on every tool)",
    "undeclared": "behind the relay that declares no outputSchema, nothing learned",
    "learned": f"behind the relay, after {LEARNING_RUNS} runs of the tasks taught code mode the shapes",
}


def hot_path() -> dict[str, Any]:
    """What learning adds to a call with a 1,000-row result: `observe` and one `merge`
    into what earlier results taught, against parsing the same rows' JSON text, which
    every result of a tool without `outputSchema` already costs on its way in."""
    rows = [
        {f"field_{i}": f"value {n}" if i % 2 else n * i for i in range(10)} for n in range(1000)
    ]
    text = json.dumps(rows)
    learned = observe(rows, DIGEST)
    taken = measure_interleaved(
        {
            "observe_merge": lambda: merge(learned, observe(rows, DIGEST)),
            "json_loads": lambda: json.loads(text),
        },
        samples=200,
        warmup=10,
    )
    return {
        **{name: stats.to_dict() for name, stats in taken.items()},
        "ratio": taken["observe_merge"].p50 / taken["json_loads"].p50,
    }


def run() -> dict[str, Any]:
    for binary in ("mcp-server-filesystem", "mcp-server-memory"):
        if not (BIN / binary).exists():
            raise RuntimeError(f"{BIN / binary} is missing: run scripts/install-test-tools")
    results: dict[str, Any] = {
        "declared": _totals(_mode(relayed=False, learning=False)),
        "undeclared": _totals(_mode(relayed=True, learning=False)),
    }
    if LEARNS:
        results["learned"] = _totals(_mode(relayed=True, learning=True))
    learning = hot_path()
    summary = [
        f"{mode} ({MODES[mode]}): {r['solved']}/{len(TASKS)} tasks solved in {r['executes']} "
        f"executes ({r['looks']} only to look at keys); failing executes made {r['failing_calls']} upstream calls "
        f"({r['repeated_writes']} of them writes run again); {r['context_bytes']} bytes of "
        "compact describe before the first executes"
        for mode, r in results.items()
    ]
    summary.append(
        f"observe + merge of a 1,000-row result of 10 fields: "
        f"{learning['observe_merge']['p50_s'] * 1e3:.3f} ms (p50 of 200), "
        f"{learning['ratio']:.2f}x the json.loads of its text in the same run"
    )
    if not LEARNS:
        summary.append(
            "learned: not measured: this codemode does not learn result shapes yet "
            "(no `CodeMode(shapes=...)`)"
        )
    table = [
        "| task | " + " | ".join(f"{mode} executes" for mode in results) + " |",
        "|---|" + "---|" * len(results),
        *(
            f"| {task.name} | "
            + " | ".join(str(r["tasks"][task.name]["executes"]) for r in results.values())
            + " |"
            for task in TASKS
        ),
    ]
    return {**results, "observe": learning, "summary": summary, "table": table}
