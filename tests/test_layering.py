"""The rooms' imports point one way (docs/architecture.md): server -> tools -> {gpu, worldmodel}.

Every module's imports are read from its source (ast, function-level and TYPE_CHECKING imports too):

- ksearch.worldmodel imports no other room;
- ksearch.gpu imports only the world model's records and errors (models, errors);
- ksearch.tools imports the world model and the sandbox;
- the faces (ksearch.server) import the tools, and of the world model only its records, errors and their
  rendering: operations go through ksearch.tools.

`ksearch.about` (version, install layout; standard library only) is open to every room. A face
reaching past the tools would have to be listed in EXCEPTIONS with the reason (none is today); an entry no
longer needed fails the test too, so the list only shrinks.
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
