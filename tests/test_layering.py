"""The rooms' imports point one way (docs/architecture.md): server -> tools -> {gpu, worldmodel}.

Every module's imports are read from its source (ast, function-level and TYPE_CHECKING imports too):

- ksearch.worldmodel imports no other room;
- ksearch.gpu imports only the world model's records and errors (models, errors);
- ksearch.tools imports the world model and the sandbox;
- the faces (ksearch.server) import the tools, and of the world model only its records, errors and their
  rendering: operations go through ksearch.tools.

`ksearch.about` (version, install layout; standard library only) is open to every room. A face that still
reaches past the tools is listed in EXCEPTIONS with the reason; an entry no longer needed fails the test too,
so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("worldmodel", "gpu", "tools", "server")
OPEN_TO_ALL = ("ksearch.about",)
RECORDS = ("ksearch.worldmodel.models", "ksearch.worldmodel.errors")

# room -> module prefixes it may import besides its own room and OPEN_TO_ALL
ALLOWED: dict[str, tuple[str, ...]] = {
    "worldmodel": (),
    "gpu": RECORDS,
    "tools": ("ksearch.worldmodel", "ksearch.gpu"),
    "server": ("ksearch.tools", *RECORDS, "ksearch.worldmodel.render"),
}

_TASKS_CLI = (
    "`ksearch task list/show/check` inspects task definitions (loading, smoke check in a subprocess, "
    "tunables): no tool exposes tasks yet"
)
_EVAL_CLI = "`ksearch eval TASK FILE` measures a file outside any search: a sandbox of its own, no store"
_EXPORT = (
    "`ksearch export` reads a whole search from the store and turns its best into a FlashInfer-Bench Solution"
)
_STORE_CLI = "the CLI opens the database itself to hand a Workspace its store and to read the tree"
_RUNS = (
    "a driver run's claim and heartbeat, and a search's shown status, live in the store (worldmodel/runs.py)"
)
_PAGE = "the web page reads straight from the store; its writes go through the tools"
_SOLUTION = "recognising a FlashInfer-Bench Solution file given to `ksearch submit`, and its refusal"

# (importing module, imported module) -> why the face does not go through the tools (yet)
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("ksearch.server.cli.tasks", "ksearch.gpu.task"): _TASKS_CLI,
    ("ksearch.server.cli.tasks", "ksearch.gpu.tasks"): _TASKS_CLI,
    ("ksearch.server.cli.tasks", "ksearch.gpu.tasks.check"): _TASKS_CLI,
    ("ksearch.server.cli.tasks", "ksearch.gpu.tasks.tunables"): _TASKS_CLI,
    ("ksearch.server.cli.sandbox", "ksearch.gpu.sandbox"): _EVAL_CLI,
    ("ksearch.server.cli.sandbox", "ksearch.gpu.task"): _EVAL_CLI,
    ("ksearch.server.cli.sandbox", "ksearch.gpu.tasks"): _EVAL_CLI,
    ("ksearch.server.cli.sandbox", "ksearch.gpu.tasks.fib_solution"): _EVAL_CLI,
    ("ksearch.server.cli.export", "ksearch.gpu.task"): _EXPORT,
    ("ksearch.server.cli.export", "ksearch.gpu.tasks.fib_solution"): _EXPORT,
    ("ksearch.server.cli.export", "ksearch.worldmodel.store"): _EXPORT,
    ("ksearch.server.cli.steer", "ksearch.gpu.tasks.fib_solution"): _SOLUTION,
    ("ksearch.server.cli.steer", "ksearch.worldmodel.store"): _STORE_CLI,
    ("ksearch.server.cli.loop", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.cli.tree", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.driver.loop", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.driver.run_main", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.web.app", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.web.snapshot", "ksearch.worldmodel.runs"): _RUNS,
    ("ksearch.server.web.snapshot", "ksearch.worldmodel.store"): _PAGE,
    ("ksearch.server.driver.policies.tuner", "ksearch.gpu.tasks.tunables"): (
        "the tuner policy rewrites a candidate's tunables in its source: a text transformation, no sandbox"
    ),
}


def _modules() -> dict[str, Path]:
    """ksearch.<room>.<...> -> file, for every module of the four rooms (built-in task folders are data)."""
    out = {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            if "builtin" in rel.parts or "__pycache__" in rel.parts:
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(("ksearch", *parts))] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The ksearch modules `name` imports (`from ksearch.gpu import nvrtc` is ksearch.gpu.nvrtc)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, or from level - 1 packages up
                base = ".".join(filter(None, [package.rsplit(".", node.level - 1)[0], base]))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in MODULES else base)
    # ksearch's own modules, and the rooms' top-level names (an import that missed the namespace)
    return {m for m in found if m.split(".")[0] in ("ksearch", *ROOMS)}


def _room(module: str) -> str:
    return module.split(".")[1]


def _violations() -> dict[tuple[str, str], None]:
    out: dict[tuple[str, str], None] = {}
    for name, path in MODULES.items():
        room = _room(name)
        for imported in sorted(_imports(name, path)):
            ok = imported.startswith((f"ksearch.{room}", *OPEN_TO_ALL, *ALLOWED[room]))
            if not ok:
                out[(name, imported)] = None
    return out


def test_every_room_is_found() -> None:
    assert {_room(m) for m in MODULES} == set(ROOMS)
    assert "ksearch.gpu.worker" in MODULES and "ksearch.server.cli.main" in MODULES


def test_imports_point_one_way() -> None:
    unexpected = [f"{a} imports {b}" for a, b in _violations() if (a, b) not in EXCEPTIONS]
    assert not unexpected, "imports against the rooms' direction:\n" + "\n".join(unexpected)


def test_every_exception_is_still_needed() -> None:
    found = _violations()
    stale = [f"{a} -> {b}" for a, b in EXCEPTIONS if (a, b) not in found]
    assert not stale, "no longer imported, drop from EXCEPTIONS:\n" + "\n".join(stale)


def test_exceptions_are_faces_only() -> None:
    # the inner rooms have no exceptions at all: only a face may (for now) reach past the tools
    assert all(_room(a) == "server" for a, _ in EXCEPTIONS)
    assert all(reason for reason in EXCEPTIONS.values())
