"""The rooms' imports point one way (docs/architecture.md): server -> tools -> {gpu, worldmodel}.

Every module's imports are read from its source (ast, function-level and TYPE_CHECKING imports too):

- ksearch.worldmodel imports no other room;
- ksearch.gpu imports only the world model's records and errors (models, errors);
- ksearch.tools imports the world model and the sandbox;
- the faces (ksearch.server) import the tools, and of the world model only its records, errors and their
  rendering: operations go through ksearch.tools.

Inside gpu/ and tools/ the same check holds between their own rooms (INNER_ALLOWED, the lines each package's
`__init__` says): the worker never imports the sandbox that starts it, the jail only the task record, timing and
export nothing at all; the tools' loop imports neither prompting nor the bank. docs/architecture.md's map names
every room and no other (test_the_map_names_the_folders).

`ksearch.about` (version, install layout; standard library only) is open to every room. A face
reaching past the tools would have to be listed in EXCEPTIONS with the reason (none is today); an entry no
longer needed fails the test too, so the list only shrinks.

An import is not the only way past the tools: a face holding a Workspace could reach the SQLite store through
its `store` attribute. So no face module reads an attribute named `store` (or `_store`) at all: a face reads
the records through `ws.records` (ksearch.tools.records, no write reachable) and writes only through the tools'
operations. STORE_EXCEPTIONS would list a module that still does, with the reason (none does).
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

# (importing module, imported module) -> why the face does not go through the tools. Empty: every face
# (CLI, MCP server, driver, web page) reaches the world model and the sandbox only through ksearch.tools.
# A new entry needs a reason a reviewer accepts; test_every_exception_is_still_needed keeps it honest.
EXCEPTIONS: dict[tuple[str, str], str] = {}


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
    assert "ksearch.gpu.worker.main" in MODULES and "ksearch.server.cli.main" in MODULES


# gpu's public helpers: what candidates and task files import (and the task record everything reads)
SURFACE = ("task", "dtypes", "inputs", "nvrtc", "cpp_ext", "fib_build", "former_names")
GPU_ALL = ("sandbox", "worker", "jail", "build", "checks", "timing", "export", "tasks", *SURFACE)
# inner room -> the inner rooms of the same outer room it may import (besides itself)
INNER_ALLOWED: dict[str, tuple[str, ...]] = {
    "gpu.sandbox": GPU_ALL,
    "gpu.worker": ("build", "checks", "jail", "tasks", "timing", *SURFACE),
    "gpu.jail": ("task",),
    "gpu.build": ("checks", "jail", "tasks", *SURFACE),
    "gpu.checks": ("task", "dtypes", "inputs"),
    "gpu.timing": (),
    "gpu.export": (),
    "gpu.tasks": ("checks", "jail", *SURFACE),
    "gpu.model": ("tasks", "timing", *SURFACE),
    **{f"gpu.{s}": ("checks", "export", "tasks", *SURFACE) for s in SURFACE},
    "tools.loop": ("door",),
    "tools.prompting": ("loop", "bank", "door"),
    "tools.bank": ("prompting", "door"),
    "tools.files": ("loop", "door"),
    "tools.suites": ("files", "door"),
    "tools.door": ("loop", "prompting", "bank", "files", "suites"),
}


def _inner(module: str) -> str | None:
    """gpu.<room> or tools.<room> for a module of gpu/ or tools/: a subpackage, a public helper of gpu, or
    (tools) the door: the tool modules and their foundations at the top of tools/."""
    parts = module.split(".")
    if parts[1] not in ("gpu", "tools") or len(parts) < 3:
        return None
    if parts[1] == "tools" and not (ROOT / "tools" / parts[2]).is_dir():
        return "tools.door"
    return f"{parts[1]}.{parts[2]}"


def test_the_rooms_inside_gpu_and_tools_point_one_way() -> None:
    bad = []
    for name, path in MODULES.items():
        here = _inner(name)
        if here is None:
            continue
        for imported in _imports(name, path):
            there = _inner(imported)
            if there is None or there == here or there.split(".")[0] != here.split(".")[0]:
                continue
            if there.split(".")[1] not in INNER_ALLOWED[here]:
                bad.append(f"{name} imports {imported}")
    assert not bad, "imports against the inner rooms' direction:\n" + "\n".join(sorted(bad))


def test_the_inner_check_sees_a_wrong_direction() -> None:
    assert (
        _inner("ksearch.gpu.worker.core") == "gpu.worker"
        and _inner("ksearch.tools.benchmark") == "tools.door"
    )
    assert "sandbox" not in INNER_ALLOWED["gpu.worker"] and "prompting" not in INNER_ALLOWED["tools.loop"]


def test_every_inner_room_has_a_rule_and_says_it() -> None:
    found = {r for m in MODULES if (r := _inner(m)) is not None}
    assert found == set(INNER_ALLOWED), found ^ set(INNER_ALLOWED)
    for room in found:
        outer, inner = room.split(".")
        init = ROOT / outer / inner / "__init__.py"
        if init.exists():  # its docstring's first two lines: what it holds, what it may import
            lines = (ast.get_docstring(ast.parse(init.read_text())) or "").splitlines()
            assert len(lines) >= 2 and "import" in lines[1].lower(), (room, lines)
            modules = [
                p for p in (ROOT / outer / inner).glob("*.py") if p.name not in ("__init__.py", "__main__.py")
            ]
            assert len(modules) <= 15, (room, len(modules))


def test_the_map_names_the_folders() -> None:
    """docs/architecture.md's map lists each package folder of gpu/ and tools/ (a line `  name/`), and no other."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("<!-- rooms -->")[1]
    named = {
        word
        for ln in block.split("```")[1].splitlines()
        if ln.startswith("  ")
        and (word := ln.split()[0]).endswith("/")
        and word.startswith(("gpu/", "tools/"))
    }
    folders = {
        f"{p.parent.relative_to(ROOT).as_posix()}/"
        for room in ("gpu", "tools")
        for p in (ROOT / room).rglob("__init__.py")
        if p.parent != ROOT / room and "prompts" not in p.parts
    }
    assert named == folders, (
        f"missing from the map: {sorted(folders - named)}; not folders: {sorted(named - folders)}"
    )


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


# face module -> why it still reaches the store through an attribute. Empty: every read goes through
# ksearch.tools.records (`ws.records`) and every write through a tools operation.
STORE_EXCEPTIONS: dict[str, str] = {}
STORE_ATTRS = ("store", "_store")


def _store_lines(source: str, filename: str = "<face>") -> list[int]:
    """The lines where `source` reads an attribute named `store` or `_store`, however it is reached (`ws.store`,
    `self.ws.store`, `state.ws.store`, `store = ws.store`)."""
    tree = ast.parse(source, filename)
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in STORE_ATTRS)


def _store_uses() -> dict[str, list[int]]:
    """Face module -> the lines where it reaches the store through an attribute."""
    out: dict[str, list[int]] = {}
    for name, path in MODULES.items():
        if _room(name) == "server" and (lines := _store_lines(path.read_text(), str(path))):
            out[name] = lines
    return out


def test_faces_do_not_reach_the_store_through_the_workspace() -> None:
    found = {m: lines for m, lines in _store_uses().items() if m not in STORE_EXCEPTIONS}
    shown = [f"{m} lines {', '.join(map(str, lines))}" for m, lines in sorted(found.items())]
    assert not shown, (
        "faces reading the store through an attribute (read with ws.records, write through a tools "
        "operation):\n" + "\n".join(shown)
    )


def test_every_store_exception_is_still_needed() -> None:
    stale = sorted(set(STORE_EXCEPTIONS) - set(_store_uses()))
    assert not stale, "no longer reaching the store, drop from STORE_EXCEPTIONS:\n" + "\n".join(stale)
    assert all(_room(m) == "server" and reason for m, reason in STORE_EXCEPTIONS.items())


def test_the_store_check_sees_every_spelling() -> None:
    source = "\n".join(
        [
            "await ws.store.get_node(1)",  # 1
            "store = self.ws.store",  # 2
            "await state.ws.store.list_edits(1)",  # 3
            "ws.records._store",  # 4
            "await ws.records.get_node(1)",  # 5: the read-only door
            "store = 1; restore = ws.restore; ws.stored",  # 6: a name, not an attribute; other attributes
        ]
    )
    assert _store_lines(source) == [1, 2, 3, 4]
