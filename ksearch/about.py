"""Where this ksearch comes from: its version and the directory a subprocess needs on PYTHONPATH.

Standard library only, so every room may import it without pulling in another.

Three layouts run the same code:
- a regular install: site-packages/ksearch/{gpu,server,tools,worldmodel}/...;
- an editable install: site-packages holds a finder that maps ksearch.gpu to <repo>/gpu, etc.;
- a plain source checkout on PYTHONPATH, nothing installed: the rooms are the repository's top-level
  gpu/, server/, tools/ and worldmodel/, which <repo>/ksearch/ links to (symbolic links, so that type
  checkers and editors see ksearch.gpu too); where a checkout has no links (git without symlink
  support), ksearch/__init__.py finds the rooms beside the package instead.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

ROOMS = ("worldmodel", "gpu", "tools", "server")

_PACKAGE_DIR = Path(__file__).resolve().parent

# The directory that holds the `ksearch` package: put it on PYTHONPATH (or use it as the cwd of a
# `python -m ksearch....` process) and `import ksearch` finds this very copy.
IMPORT_ROOT: Path = _PACKAGE_DIR.parent


def _source_root() -> Path | None:
    """The repository root when ksearch runs from a source checkout (editable or not), else None.

    In a checkout the rooms sit next to the package, beside the pyproject.toml that names this project;
    installed, the package's parent is site-packages.
    """
    root = _PACKAGE_DIR.parent
    if not all((root / room / "__init__.py").is_file() for room in ROOMS):
        return None
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == "ksearch" else None


SOURCE_ROOT: Path | None = _source_root()
# a checkout whose ksearch/ lacks the links to its rooms: ksearch/__init__.py searches the root instead
ROOMS_BESIDE: bool = SOURCE_ROOT is not None and not all((_PACKAGE_DIR / room).is_dir() for room in ROOMS)


def _version() -> str:
    # A checkout reports its own pyproject.toml: the interpreter may also hold an installed ksearch
    # (another checkout's editable install, an older wheel) whose metadata does not describe this code.
    if SOURCE_ROOT is not None:
        return str(tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["project"]["version"])
    try:
        return importlib.metadata.version("ksearch")
    except importlib.metadata.PackageNotFoundError:  # copied into place without pip
        return "0+unknown"


__version__: str = _version()
