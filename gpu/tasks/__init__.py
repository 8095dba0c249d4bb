"""Tasks: finding and loading them (built-ins by name, anything else by path), their facts, probes and checks.
May import checks, jail (probes run jailed) and gpu's public helpers. Importing this package needs no torch.


- `load_task("softmax")`: a built-in (gpu/tasks/builtin/softmax/task.py)
- `load_task("problems/19_ReLU.py")`: a KernelBench-style file (the native format)
- `load_task("defs/gemm_n4096.json")`: a FlashInfer-Bench definition (+ its workloads JSONL)
- `load_task("gpumode/vectoradd_py")`: a GPU MODE folder (task.yml + reference.py)
"""

from __future__ import annotations

from pathlib import Path

from ksearch.gpu.task import Task, TaskError
from ksearch.gpu.tasks.flashinfer.loader import load_flashinfer
from ksearch.gpu.tasks.gpumode import load_gpumode
from ksearch.gpu.tasks.native import load_native

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"

_cache: dict[str, tuple[float, Task]] = {}


def builtin_names() -> list[str]:
    return sorted(p.parent.name for p in BUILTIN_DIR.glob("*/task.py"))


def builtin_tasks() -> list[Task]:
    return [load_task(name) for name in builtin_names()]


def _resolve(ref: str) -> tuple[Path, bool]:
    """(path, is_builtin) for a reference, or a TaskError saying what is accepted."""
    if "/" not in ref and "\\" not in ref and not ref.endswith((".py", ".json")):
        builtin = BUILTIN_DIR / ref / "task.py"
        if builtin.is_file():
            return builtin, True
        if not Path(ref).exists():
            raise TaskError(
                f"unknown task {ref!r}: not a built-in ({', '.join(builtin_names())}) and no such path"
            )
    path = Path(ref).expanduser()
    if not path.exists():
        raise TaskError(f"no such task file or folder: {ref}")
    return path.resolve(), False


def _load(path: Path, builtin: bool, workloads: str | None) -> Task:
    if path.is_dir():
        if (path / "task.yml").is_file():
            return load_gpumode(path)
        if (path / "definition.json").is_file():
            return load_flashinfer(path / "definition.json", Path(workloads) if workloads else None)
        if (path / "reference.py").is_file():
            raise TaskError(f"{path}: has reference.py but no task.yml; a GPU MODE task folder needs both")
        if (path / "task.py").is_file():
            return load_native(path / "task.py", builtin=builtin)
        if (path / "definitions").is_dir():
            raise TaskError(_dataset_hint(path))
        raise TaskError(
            f"{path}: a task folder holds task.yml + reference.py (GPU MODE), definition.json + "
            "workloads.jsonl (FlashInfer-Bench) or task.py (native)"
        )
    if path.suffix == ".py":
        return load_native(path, name=path.parent.name if builtin else None, builtin=builtin)
    if path.suffix == ".json":
        return load_flashinfer(path, Path(workloads) if workloads else None)
    if path.name in ("task.yml", "task.yaml"):
        return load_gpumode(path.parent)
    raise TaskError(
        f"{path}: not a task; accepted: a built-in name, a .py task file, a FlashInfer-Bench definition "
        ".json, or a GPU MODE folder"
    )


def _dataset_hint(root: Path) -> str:
    """A FlashInfer-Trace dataset holds many definitions: say how to name one."""
    found = sorted((root / "definitions").rglob("*.json"))
    shown = ", ".join(str(p.relative_to(root)) for p in found[:5]) + (", ..." if len(found) > 5 else "")
    return (
        f"{root}: a FlashInfer-Trace dataset ({len(found)} definition{'' if len(found) == 1 else 's'}); a task is "
        "one definition: give its "
        f"path, {root}/definitions/<op_type>/<name>.json" + (f" (it has: {shown})" if found else "")
    )


def load_task(ref: str | Path, workloads: str | None = None) -> Task:
    """Load a task by built-in name or path. `workloads` names a FlashInfer-Bench JSONL explicitly.

    Built-ins are cached per modification time of their files; each call returns an independent copy.
    """
    path, builtin = _resolve(str(ref))
    if not builtin:
        return _load(path, builtin, workloads)
    stamp = max(p.stat().st_mtime for p in path.parent.glob("*.py"))
    hit = _cache.get(str(path))
    if hit is None or hit[0] != stamp:
        hit = (stamp, _load(path, builtin, workloads))
        _cache[str(path)] = hit
    return hit[1].model_copy(deep=True)


__all__ = ["BUILTIN_DIR", "builtin_names", "builtin_tasks", "load_task"]
