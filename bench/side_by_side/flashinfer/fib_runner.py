"""FlashInfer-Bench's own runner as a program, for bench/flashinfer_side_by_side.py: a copy of its package, what only
it needs (installed from wheels into a folder on its processes' path alone), FlashInfer's timer under a stand-in
`flashinfer` package, and a folder that hides cupti-python (its CUDA-event timer). Run as a script, it is the
process that calls FlashInfer-Bench: `python fib_runner.py CFG.json OUT.json` (its runner's workers, spawned,
import this small module again, not the bench script)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 90.0

# what stands in for FlashInfer's package: its testing/ files only (the timer), nothing that loads kernels
SHIM_INIT = '''"""FlashInfer, reduced to what FlashInfer-Bench's timer needs: flashinfer.testing (FlashInfer's own files,
copied unchanged from the installed flashinfer-python) and flashinfer.utils.round_up, which it imports.
FlashInfer's kernels and JIT (the rest of its __init__) are left out: the timer uses none of them."""
'''
SHIM_UTILS = '''def round_up(x, y):
    """FlashInfer's flashinfer.utils.round_up: x rounded up to a multiple of y."""
    return (x + y - 1) // y * y
'''
NO_CUPTI = """raise ModuleNotFoundError("cupti-python hidden: FlashInfer-Bench times with CUDA events", name="cupti")\n"""


def stage_fib(fib: Path, dst: Path, wheels: Path) -> dict[str, Any]:
    """A copy of --fib's flashinfer_bench package; the packages only FlashInfer-Bench needs, installed from
    --fib-wheels into a folder of their own (on its processes' path only, so ksearch's environment does not see
    them); the `flashinfer` stand-in; a folder that hides cupti-python. Returns the paths and what was found."""
    info: dict[str, Any] = {}
    shutil.copytree(
        fib / "flashinfer_bench",
        dst / "fib" / "flashinfer_bench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    info["fib_path"] = str(dst / "fib")
    if (fib / ".git").exists():  # a checkout of its own (else git would answer for the repository around it)
        with contextlib.suppress(Exception):
            info["fib_commit"] = subprocess.run(
                ["git", "-C", str(fib), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20
            ).stdout.strip()
    digest = hashlib.sha256()
    for f in sorted((fib / "flashinfer_bench").rglob("*.py")):
        digest.update(f.relative_to(fib).as_posix().encode() + b"\0" + f.read_bytes())
    info["fib_sources_sha256"] = digest.hexdigest()[:16]
    site = dst / "site"
    # FlashInfer-Bench's own wheel (the `ksearch[fib]` extra's) is left out: the copy of --fib is what runs
    found = (
        sorted(w for w in wheels.glob("*.whl") if not w.name.startswith("flashinfer_bench-"))
        if wheels.is_dir()
        else []
    )
    if found:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
             "--target", str(site), *map(str, found)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        info["wheels"] = [w.name for w in found]
        if p.returncode:
            info["wheels_error"] = (p.stdout + p.stderr)[-1500:]
    info["site_path"] = str(site)
    if (site / "flashinfer" / "testing").is_dir():
        src: Path | None = site / "flashinfer"
    else:
        spec = importlib.util.find_spec(
            "flashinfer"
        )  # an installed FlashInfer, found without running its __init__
        src = (
            Path(next(iter(spec.submodule_search_locations)))
            if spec and spec.submodule_search_locations
            else None
        )
    if src is None or not (src / "testing").is_dir():
        info["flashinfer"] = (
            f"missing: put flashinfer-python's wheel in {wheels} (its testing/ holds the timer)"
        )
        return info
    shim = dst / "shim" / "flashinfer"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(SHIM_INIT)
    (shim / "utils.py").write_text(SHIM_UTILS)
    shutil.copytree(src / "testing", shim / "testing", ignore=shutil.ignore_patterns("__pycache__"))
    info["flashinfer"] = f"testing/ from {src}"
    hide = dst / "nocupti" / "cupti"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text(NO_CUPTI)
    info["shim_path"] = str(dst / "shim")
    info["nocupti_path"] = str(dst / "nocupti")
    return info


def fib_env(staged: dict[str, Any], timer: str, cache: Path) -> dict[str, str]:
    paths = [staged["shim_path"]] + ([staged["nocupti_path"]] if timer == "events" else [])
    paths += [staged["site_path"], staged["fib_path"]]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["FIB_CACHE_PATH"] = str(cache / "fib-cache")
    env["TRITON_CACHE_DIR"] = str(cache / "triton-cache")
    return env


PROBE = r"""
import importlib.metadata as md, json, warnings
out = {}
try:
    from cupti import cupti  # FlashInfer's own check, as bench_gpu_time_with_cupti makes it
    v = md.version("cupti-python")
    out["cupti_python"] = v
    out["timer"] = "cupti" if int(v.split(".")[0]) >= 13 else "events"
except Exception as e:
    out["timer"] = "events"
    out["cupti_error"] = f"{type(e).__name__}: {e}"[:300]
for pkg in ("flashinfer-python", "cuda-bindings", "einops", "safetensors", "docstring-parser", "pydantic", "PyYAML"):
    try:
        out[pkg] = md.version(pkg)
    except Exception:
        out[pkg] = None
try:
    import flashinfer.testing
    out["flashinfer_testing"] = flashinfer.testing.__file__
    import flashinfer_bench.bench.timing as t
    out["fib_timing"] = t.__file__
except Exception as e:
    out["import_error"] = f"{type(e).__name__}: {e}"[:500]
print(json.dumps(out))
"""


def probe_fib(staged: dict[str, Any], timer: str, cache: Path) -> dict[str, Any]:
    env = fib_env(staged, timer, cache)
    try:
        p = subprocess.run(
            [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
        return (
            json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"error": p.stderr[-1500:]}
        )
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def fib_worker(cfg_path: Path, out_path: Path) -> None:
    """In its own process, on FlashInfer-Bench's path: its Benchmark on the staged dataset, every trace kept."""
    import logging
    import warnings

    cfg = json.loads(cfg_path.read_text())
    logging.basicConfig(level=logging.WARNING)
    from flashinfer_bench import Benchmark, BenchmarkConfig, TraceSet

    res: dict[str, Any] = {"started": time.strftime("%H:%M:%S")}
    t0 = time.perf_counter()
    ts = TraceSet.from_path(cfg["root"])
    config = BenchmarkConfig.default(definitions=cfg["definitions"])
    res["config"] = {
        k: v for k, v in config.model_dump().items() if k not in ("op_type_config", "definition_config")
    }
    res["resolved"] = {
        d: config.resolve_eval_config(ts.definitions[d]).model_dump() for d in cfg["definitions"]
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench = Benchmark(ts, config)
        try:
            result = bench.run_all(dump_traces=False)
        finally:
            bench.close()
    res["warnings"] = sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})
    res["traces"] = trace_rows(result)
    res["seconds"] = time.perf_counter() - t0
    out_path.write_text(json.dumps(res, indent=1, default=str))


def trace_rows(result: Any) -> list[dict[str, Any]]:
    """What FlashInfer-Bench recorded per (definition, workload, solution): its status and numbers."""
    traces = []
    for name, items in result.traces.items():
        for t in items:
            ev = t.evaluation
            perf = ev.performance if ev is not None else None
            corr = ev.correctness if ev is not None else None
            log = (ev.log or "") if ev is not None else ""
            traces.append(
                {
                    "definition": name,
                    "workload": t.workload.uuid,
                    "axes": t.workload.axes,
                    "solution": t.solution,
                    "status": ev.status.value if ev is not None else None,
                    "latency_ms": perf.latency_ms if perf is not None else None,
                    "reference_latency_ms": perf.reference_latency_ms if perf is not None else None,
                    "speedup_factor": perf.speedup_factor if perf is not None else None,
                    "max_abs_error": corr.max_absolute_error if corr is not None else None,
                    "max_rel_error": corr.max_relative_error if corr is not None else None,
                    "fell_back_to_events": "Falling back to CUDA events" in log,
                    "log_tail": log[-1500:] if ev is None or ev.status.value != "PASSED" else "",
                    "environment": ev.environment.model_dump() if ev is not None else None,
                }
            )
    return traces


def run_fib(
    staged: dict[str, Any], root: Path, definitions: list[str], timer: str, cache: Path, timeout_s: float
) -> dict[str, Any]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fib-run-") as tmp:
        cfg, out = Path(tmp) / "cfg.json", Path(tmp) / "out.json"
        cfg.write_text(json.dumps({"root": str(root), "definitions": definitions}))
        cmd = [sys.executable, str(Path(__file__).resolve()), str(cfg), str(out)]
        try:
            p = subprocess.run(
                cmd, env=fib_env(staged, timer, cache), capture_output=True, text=True, timeout=timeout_s
            )
            tail = (p.stdout + p.stderr)[-3000:] if p.returncode else ""
            rc: int | None = p.returncode
        except subprocess.TimeoutExpired as e:
            rc, tail = None, f"timed out after {timeout_s:.0f} s; " + str(e.stderr or "")[-2000:]
        res = json.loads(out.read_text()) if out.exists() else {}
    res["returncode"] = rc
    res["error"] = tail
    res["wall_s"] = time.perf_counter() - t0
    return res


if __name__ == "__main__":
    fib_worker(Path(sys.argv[1]), Path(sys.argv[2]))
