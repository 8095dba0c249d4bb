"""A candidate's kernels without a GPU: record its launches in a dry run, compile its Triton kernels for a target.

Runs inside a sandbox worker started with TRITON_INTERPRET=0 and no visible GPU (see
`LocalSandbox._dryrun_worker`): `@triton.jit` then gives real `JITFunction`s, whose launch is replaced
here by a recorder. The candidate's `ModelNew` is called on CPU tensors of one workload; every launch
is captured with the arguments Triton would specialise on (pointer dtypes, 16-byte alignment, integer
values, constexprs, num_warps/num_stages) and no kernel runs. Each distinct specialisation is then
compiled with `triton.compile(ASTSource, target=GPUTarget("cuda", 90, 32))` down to a cubin: ptxas's
own report gives registers, spills and stack, and its warnings (with their codes: C7511 "wgmma ... serialized");
Triton's metadata gives shared memory. Launches of `ksearch.gpu.nvrtc` kernels are recorded too (block size, dynamic
shared memory) for their occupancy. A task whose inputs are made on CUDA (a GPU MODE reference's `device='cuda'`) is
dry-run with those placements read as the CPU's (gpu/tasks/rt/placement.py).

Everything that goes wrong becomes a diagnostic on a line of the candidate's file, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ksearch.gpu.worker import faults

MAX_BUILDS = 12  # distinct specialisations compiled per call: a loop of launches is one build, not many


@dataclass
class Launch:
    """One distinct Triton specialisation the dry run launched."""

    jf: Any  # the JITFunction
    signature: dict[str, str]
    constexprs: dict[Any, Any]
    attrs: dict[Any, Any]
    options: Any  # the backend's parsed options (num_warps, num_stages, ...)
    grid: tuple[int, ...] | None
    config: str


@dataclass
class CudaLaunch:
    name: str
    threads: int
    block: tuple[int, int, int]
    dynamic_shared: int


@dataclass
class Recorder:
    backend: Any
    launches: list[Launch] = field(default_factory=list)
    cuda: list[CudaLaunch] = field(default_factory=list)
    skipped: int = 0  # specialisations beyond MAX_BUILDS
    problems: list[str] = field(default_factory=list)
    _keys: set[str] = field(default_factory=set)


def _constexpr_text(jf: Any, constexprs: dict[Any, Any]) -> str:
    parts = []
    for path, v in sorted(constexprs.items(), key=lambda kv: kv[0]):
        idx = path[0] if isinstance(path, tuple) and path else path
        name = jf.arg_names[idx] if isinstance(idx, int) and idx < len(jf.arg_names) else str(path)
        if hasattr(v, "__name__") and not isinstance(v, (int, float, bool, str)):
            v = v.__name__
        parts.append(f"{name}={v}")
    return ", ".join(parts)


def _record_triton(rec: Recorder, jf: Any, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any]) -> None:
    from triton import knobs
    from triton.runtime.jit import create_function_from_signature

    # the same option defaults JITFunction.run adds before it binds (so the build matches a real launch)
    kwargs["debug"] = kwargs.get("debug", jf.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    kwargs["fpsan_homomorphic_casts"] = knobs.compilation.fpsan_homomorphic_casts
    binder = create_function_from_signature(jf.signature, jf.params, rec.backend)
    bound, specialization, opts = binder(*args, **kwargs)
    options, signature, constexprs, attrs = jf._pack_args(rec.backend, kwargs, bound, specialization, opts)
    key = repr(
        (
            id(jf),
            sorted(signature.items()),
            sorted(constexprs.items(), key=repr),
            sorted(attrs.items(), key=repr),
        )
    ) + repr(sorted(options.__dict__.items(), key=lambda kv: kv[0]))
    if key in rec._keys:
        return
    rec._keys.add(key)
    if len(rec.launches) >= MAX_BUILDS:
        rec.skipped += 1
        return
    g: tuple[int, ...] | None = None
    with contextlib.suppress(Exception):  # a grid lambda of the candidate's may fail on odd values
        gv = grid(bound) if callable(grid) else grid
        g = tuple(int(x) for x in (gv if isinstance(gv, (tuple, list)) else (gv,)))
    cfg = _constexpr_text(jf, constexprs)
    rec.launches.append(Launch(jf, signature, constexprs, attrs, options, g, cfg))


class _RecordedNvrtcKernel:
    """Stands in for `ksearch.gpu.nvrtc.Kernel` in the dry run: a launch is recorded, nothing runs."""

    def __init__(self, rec: Recorder, name: str) -> None:
        self._rec = rec
        self.name = name

    def launch(self, grid: Any, block: Any, args: Any = (), shared_mem: int = 0, stream: Any = None) -> None:
        from ksearch.gpu.nvrtc import _dim3

        b = _dim3(block)
        _dim3(grid)  # the same argument checks as a real launch
        entry = CudaLaunch(self.name, b[0] * b[1] * b[2], b, int(shared_mem))
        if entry not in self._rec.cuda:
            self._rec.cuda.append(entry)

    __call__ = launch


@contextlib.contextmanager
def recording(rec: Recorder) -> Iterator[Recorder]:
    """Replace Triton's launch paths and ksearch.gpu.nvrtc's compile with recorders while the block runs."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    from ksearch.gpu import nvrtc

    orig_run, orig_tune, orig_nvrtc = JITFunction.run, Autotuner.run, nvrtc.compile

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        try:
            _record_triton(rec, self, args, grid, kwargs)
        except Exception as e:  # a launch Triton itself would refuse: say so, keep going
            msg = f"launch of {getattr(self.fn, '__name__', self)} could not be specialised: {type(e).__name__}: {e}"
            if msg not in rec.problems:
                rec.problems.append(msg)
        return None

    def tune(self: Any, *args: Any, **kwargs: Any) -> None:
        # no benchmarking without a GPU: every (pruned) config is recorded as its own build
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            configs = self.prune_configs(kwargs)
        except Exception:  # the candidate's pruning hook failed on CPU values: keep every config
            configs = self.configs
        for c in configs:
            self.fn.run(*args, **kwargs, **c.all_kwargs())
        return None

    def nvrtc_compile(source: str, name: str, options: Any = (), **kw: Any) -> _RecordedNvrtcKernel:
        return _RecordedNvrtcKernel(rec, name)

    JITFunction.run = run
    Autotuner.run = tune
    nvrtc.compile = nvrtc_compile  # type: ignore[assignment]
    try:
        yield rec
    finally:
        JITFunction.run = orig_run
        Autotuner.run = orig_tune
        nvrtc.compile = orig_nvrtc


# ----------------------------------------------------------------------------------------- compile


def _jit_functions(module: Any) -> list[Any]:
    """Every JITFunction the candidate's module defines (through autotune/heuristics wrappers too)."""
    from triton.runtime.jit import JITFunction

    out = []
    for v in list(vars(module).values()):
        for _ in range(5):
            if isinstance(v, JITFunction):
                out.append(v)
                break
            v = getattr(v, "fn", None)
            if v is None:
                break
    return out


def _compile_error_diags(exc: BaseException, module: Any, path: str, source: str) -> list[dict[str, Any]]:
    """Diagnostics for a Triton CompilationError chain: the innermost cause at its line, call sites as notes."""
    from triton.compiler.errors import CompilationError

    chain: list[Any] = []
    e: BaseException | None = exc
    while isinstance(e, CompilationError):
        chain.append(e)
        e = e.__cause__
    if not chain:
        return []
    by_src = {jf.src: jf for jf in _jit_functions(module) if getattr(jf, "file_name", None) == path}

    def line_of(err: Any) -> int | None:
        jf = by_src.get(err.src)
        lineno = getattr(err.node, "lineno", None)
        if jf is not None and lineno is not None:
            return int(jf.def_file_line_number) + int(lineno) - 1
        return faults._triton_line(str(err), source)

    inner = chain[-1]
    msg = inner.error_message
    if not msg:
        msg = f"{type(e).__name__}: {e}" if e is not None else str(inner).strip().splitlines()[-1]
    diags = [
        {"severity": "error", "message": f"Triton compile error: {str(msg)[:1500]}", "line": line_of(inner)}
    ]
    for outer in reversed(chain[:-1]):
        ln = line_of(outer)
        if ln is not None and ln != diags[-1]["line"]:
            diags.append({"severity": "note", "message": "called from here", "line": ln})
    return diags


def _ptxas(ck: Any, capability: int) -> str:
    """Run Triton's bundled ptxas -v on a build's PTX: for a build Triton took from its cache (no log)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    ptx = ck.asm.get("ptx")
    if not ptx:
        return ""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [
            get_ptxas(capability).path,
            "-v",
            "--regAllocOptLevel=2",  # what Triton passes (a ptxas 13 workaround), so the counts match
            f"--gpu-name={sm_arch_from_capability(capability)}",
            src,
            "-o",
            os.path.join(d, "k.cubin"),
        ]
        if not getattr(ck.metadata, "enable_fp_fusion", True):
            cmd.insert(2, "--fmad=false")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        return p.stdout + p.stderr


def compile_launch(launch: Launch, target: Any, capability: int) -> tuple[Any, str, bool]:
    """(CompiledKernel, ptxas report, whether Triton's cache had it)."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource

    src = ASTSource(launch.jf, launch.signature, launch.constexprs, launch.attrs)
    buf = io.StringIO()
    with knobs.nvidia.scope(), contextlib.redirect_stdout(buf):
        knobs.nvidia.dump_ptxas_log = True  # ptxas -v's report is printed (its log file is deleted)
        ck = triton.compile(src, target=target, options=launch.options.__dict__)
    log = buf.getvalue()
    cached = "Used" not in log
    if cached:
        log = _ptxas(ck, capability)
    return ck, log, cached


# ----------------------------------------------------------------------------------------- the op


class DryRunTimeout(BaseException):
    """The candidate's host code ran past the dry run's time limit (a BaseException, so that a candidate's
    `except Exception` cannot swallow it)."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt Python code (the candidate's host side) after `seconds`; the parent's call timeout remains the
    backstop for code that never returns to the interpreter."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise DryRunTimeout(f"the dry run did not finish within {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _where(exc: BaseException, path: str) -> int | None:
    frames = [fr for fr in traceback.extract_tb(exc.__traceback__) if fr.filename == path]
    return frames[-1].lineno if frames else None


def _def_line(jf: Any, path: str) -> int | None:
    return int(jf.def_file_line_number) if getattr(jf, "file_name", None) == path else None


def run(
    state: Any,
    task: dict[str, Any],
    candidate: dict[str, Any],
    workload: str,
    arch: str,
    budget_s: float = 120.0,
) -> dict[str, Any]:
    """The worker op: load the candidate, dry-run it on `workload`, compile its Triton launches for `arch`.

    The dry run (the candidate's host code) gets a quarter of `budget_s`; builds that would start after the
    budget is spent are skipped with a note, so a result comes back before the parent's timeout."""
    import torch
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    from ksearch.gpu.build.compiler import parse_nvcc_output
    from ksearch.gpu.tasks.rt.common import module_name
    from ksearch.gpu.tasks.rt.placement import cuda_read_as_cpu
    from ksearch.gpu.tasks.rt.runtime import load_candidate_module

    t0 = time.perf_counter()
    # a task that puts its inputs on CUDA (a GPU MODE reference's `device='cuda'`) is dry-run with those placements
    # read as the CPU's (gpu/tasks/rt/placement.py): launches need shapes, dtypes and alignment, not a GPU, and
    # nothing the candidate computes here is judged
    needs_gpu = (task.get("extras") or {}).get("needs_gpu")
    if needs_gpu:
        task = {**task, "extras": {k: v for k, v in task["extras"].items() if k != "needs_gpu"}}
    capability = int(re.sub(r"\D", "", arch) or 90)
    target = GPUTarget("cuda", capability, 32)
    rec = Recorder(make_backend(target))
    diags: list[dict[str, Any]] = []
    source = candidate["source"]
    state._set_task(task)
    wl = state.task.workload(workload)
    name = module_name(f"ksearch_dry_{candidate['id']}")
    path = str(Path.cwd() / f"{name}.py")  # where load_candidate_module writes it: tracebacks name this file
    module = None
    host_limit = max(5.0, budget_s / 4)
    placed = cuda_read_as_cpu() if needs_gpu else contextlib.nullcontext()
    with knobs.runtime.scope(), recording(rec):
        knobs.runtime.interpret = False  # real JITFunctions, whatever the environment says
        try:
            with _time_limit(host_limit), placed:
                module = load_candidate_module(source, name)
                fn = state.rt.build_candidate(module, wl, state.device)
                with torch.no_grad():
                    # inputs made with CUDA read as the CPU are not kept for anything else
                    fn(state.rt.make_inputs(wl, 0, state.device, once=bool(needs_gpu)))
        except DryRunTimeout as e:
            diags.append(
                {
                    "severity": "warning",
                    "message": f"{e} (workload {wl.name!r}): the candidate's host code was interrupted here "
                    "(a loop that never ends?); kernels it launched before that were compiled",
                    "line": _where(e, path),
                }
            )
        except Exception as e:
            fault = faults.describe(e, source, {path})
            if fault.kind == "compile" and module is None:
                diags += [{**d, "severity": d.get("severity", "error")} for d in fault.diagnostics]
                if not fault.diagnostics:
                    diags.append(
                        {"severity": "error", "message": fault.message[:2000], "line": _where(e, path)}
                    )
            else:
                diags.append(
                    {
                        "severity": "warning",
                        "message": f"the dry run on the CPU (workload {wl.name!r}) stopped: "
                        f"{fault.message.splitlines()[0][:600]}; kernels it launched before that were compiled",
                        "line": _where(e, path),
                    }
                )
    dry_s = time.perf_counter() - t0
    for p in rec.problems:
        diags.append({"severity": "error", "message": p, "line": None})
    kernels: list[dict[str, Any]] = []
    logs: list[str] = []
    late = 0
    for launch in rec.launches:
        kname = launch.jf.fn.__name__
        if time.perf_counter() - t0 > budget_s:
            late += 1
            continue
        t1 = time.perf_counter()
        try:
            ck, log, cached = compile_launch(launch, target, capability)
        except Exception as e:
            found = _compile_error_diags(e, module, path, source) if module is not None else []
            if not found:
                text = str(e).strip()
                found = [
                    {
                        "severity": "error",
                        "message": f"Triton could not compile it for {arch}: {type(e).__name__}: "
                        f"{text.splitlines()[-1][:1500] if text else ''}",
                        "line": faults._triton_line(text, source) or _def_line(launch.jf, path),
                    }
                ]
            for d in found:
                d["message"] = f"{kname} ({launch.config or 'no constexprs'}): {d['message']}"
            diags += found
            continue
        logs.append(log)
        said, parsed = parse_nvcc_output(log, "")
        # what ptxas said of this build (a coded performance warning, a spill warning), once per kernel
        for d in said:
            ptxas_said = {
                "severity": d["severity"],
                "message": d["message"],
                "line": _def_line(launch.jf, path),
                "kernel": kname,
            }
            if ptxas_said not in diags:
                diags.append(ptxas_said)
        info = next((k for k in parsed if k["mangled"] == ck.metadata.name), parsed[0] if parsed else {})
        md = ck.metadata
        kernels.append(
            {
                "name": kname,
                "line": _def_line(launch.jf, path),
                "registers": info.get("registers"),
                "spill_stores_bytes": info.get("spill_stores_bytes"),
                "spill_loads_bytes": info.get("spill_loads_bytes"),
                "shared_bytes": int(md.shared),
                "stack_bytes": info.get("stack_bytes"),
                "num_warps": int(md.num_warps),
                "num_stages": int(md.num_stages),
                "threads_per_block": int(md.num_warps) * 32 * int(getattr(md, "num_ctas", 1) or 1),
                "config": launch.config,
                "grid": list(launch.grid) if launch.grid else None,
                "seconds": round(time.perf_counter() - t1, 3),
                "cached": cached,
            }
        )
    for n, why in (
        (rec.skipped, f"only the first {MAX_BUILDS} were compiled"),
        (late, f"the {budget_s:.0f} s budget was spent"),
    ):
        if n:
            diags.append(
                {
                    "severity": "note",
                    "message": f"{n} more distinct Triton specialisation(s) were launched but not compiled: {why}",
                    "line": None,
                }
            )
    if module is not None:  # the next dry run starts clean; the worker itself lives on
        sys.modules.pop(module.__name__, None)
        module.__dict__.clear()
    return {
        "kernels": kernels,
        "cuda_launches": [
            {"name": c.name, "threads": c.threads, "block": list(c.block), "dynamic_shared": c.dynamic_shared}
            for c in rec.cuda
        ],
        "diagnostics": diags,
        "log": "\n".join(logs)[-20000:],
        "dry_run_seconds": round(dry_s, 3),
        "workload": wl.name,
        "params": dict(wl.params),
        "cuda_as_cpu": bool(needs_gpu),
    }
