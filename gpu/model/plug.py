"""`ksearch model FILE --plug-back DIR`'s work in its own process: the model with the winning kernels in place of its
operators, written out as a Python file a user imports, checked against the original and timed (imports torch).

Steps: the kernels in DIR are matched to the tasks of the manifest by file name (`TASK.py`, or `NNN-TASK_ksearch_*.py`
as `ksearch suite export` names them); each kernel is checked at every site of its task, with that site's own weights,
on the inputs the model passed there, by its task's rule (KernelBench's per-dtype tolerance: what its search judged
it by), and refused with the reason where it fails; the accepted ones are written into the plugged file, which is then
imported and applied to a copy of the model; the plugged model's outputs on fresh inputs are compared with the
original's by the model-level rule (ten times the per-operator tolerance, as several kernels' errors add up through
the layers), and only a plugged model that passes is kept. Then the timings: each plugged operator against the
original at its first site, the whole model eager against plugged (and, on a GPU, against torch.compile of the whole
model), each a median with its 95% CI over repeated calls (CUDA events on a GPU; the host clock on a CPU, where
Triton kernels run in the interpreter: a CPU figure, never a GPU one).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.model import runtime
from ksearch.gpu.model.capture import Capture, Site
from ksearch.gpu.model.load import ModelError, is_file_ref, load_model, run_forward, split_ref
from ksearch.gpu.model.profile import INIT_SEED, captured, load_task_module, max_abs_over
from ksearch.gpu.model.report import MANIFEST, ModelCheck, PlugReport, PlugTask, Ratio, Request, Timing
from ksearch.gpu.model.runtime import flatten, share_weights
from ksearch.gpu.timing.stats import summarize

MODEL_SCALE = 10.0  # the model-level tolerance: this many times the per-operator one
_Z95 = 1.959963984540054
_MIN_REL_SE = 0.0025  # as gpu/timing/compare.py: no timing claims certainty below this


# ---------------------------------------------------------------------------------------------- kernels


def find_kernels(folder: Path, tasks: list[str]) -> tuple[dict[str, Path], dict[str, str], list[str]]:
    """(task -> its kernel file, task -> why none, kernel files matching no task)."""
    files = sorted(p for p in folder.glob("*.py") if p.is_file())
    found: dict[str, Path] = {}
    why: dict[str, str] = {}
    used: set[Path] = set()
    for t in tasks:
        pattern = re.compile(rf"^(\d+-)?{re.escape(t)}(_ksearch_.*)?\.py$")
        hits = [p for p in files if pattern.match(p.name)]
        if len(hits) == 1:
            found[t] = hits[0]
            used.add(hits[0])
        elif hits:
            why[t] = f"several kernels for it in {folder}: {', '.join(p.name for p in hits)}; keep one"
            used.update(hits)
        else:
            why[t] = (
                f"no kernel for it in {folder} (looked for {t}.py, or NNN-{t}_ksearch_*.py as `ksearch suite export` writes)"
            )
    return found, why, [p.name for p in files if p not in used]


def _sites_of(task: dict[str, Any], cap: Capture) -> list[list[Site]]:
    """Per plan site: the captured sites (entry, follower) it names, in the forward just captured."""
    by_key = {s.key: s for s in cap.sites}
    out = []
    for ps in task["sites"]:
        occ = []
        for role in ("entry", "follower"):
            p = ps.get(role)
            if p is None:
                continue
            if p["kind"] == "module":
                hit = next(
                    (
                        s
                        for s in cap.sites
                        if s.kind == "module" and s.path == p["module"] and s.specs == p["specs"]
                    ),
                    None,
                )
            else:
                hit = by_key.get(p["key"])
                hit = hit if hit is not None and hit.specs == p["specs"] else None
            if hit is None:
                raise ValueError(
                    f"the model no longer calls it at {ps.get('where') or p['key']} with the task's shapes (changed "
                    "since its tasks were written? run `ksearch model` again)"
                )
            occ.append(hit)
        out.append(occ)
    return out


def _io(kind: str, occ: list[Site]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The task's inputs and outputs at one occurrence, as the task's forward takes and returns them."""
    entry = occ[0]
    assert entry.inputs is not None and entry.outputs is not None
    if kind in ("module", "function"):
        return list(entry.inputs), list(entry.outputs)
    follower = occ[1]
    assert follower.inputs is not None and follower.outputs is not None
    if kind == "linear_act":
        return list(entry.inputs), list(follower.outputs)
    return list(entry.inputs) + list(follower.inputs[1:]), list(follower.outputs) + list(entry.outputs)


def _build(make: Callable[[], torch.nn.Module], device: torch.device) -> torch.nn.Module:
    torch.manual_seed(INIT_SEED)
    with torch.device("cpu"):
        m = make()
    return m.to(device).eval()


# ---------------------------------------------------------------------------------------------- timing


def time_call(
    fn: Callable[[], Any], cuda: bool, budget_s: float, device: torch.device, *, whole: bool = False
) -> Timing:
    """One callable's timing. On a GPU by ksearch's protocol (CUDA events, the L2 flushed before each call); an
    operator's launch is covered by a spin kernel, as every candidate's is, a whole model's is not: its time is what
    a caller waits for, the host's launches and the plugged model's own Python included."""
    if cuda:
        from ksearch.gpu.timing.measure import Preamble, time_gpu

        r = time_gpu(
            lambda _inputs: fn(),
            [[]],
            warmup=3,
            min_reps=20,
            max_reps=2000,
            budget_s=budget_s,
            target_rel_ci=0.01,
            preamble=Preamble(device, cover_us=0.0 if whole else 300.0),
        )
        s = r.summary
        return Timing(
            median_us=s.median,
            ci_low_us=s.ci_low,
            ci_high_us=s.ci_high,
            n=s.n,
            clock="cuda-events",
            flags=list(r.flags),
        )
    fn()  # warm-up (the interpreter's first call compiles nothing, but allocations and caches settle)
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < 5 or (time.perf_counter() - start < budget_s and len(samples) < 200):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    s = summarize(samples)
    return Timing(median_us=s.median, ci_low_us=s.ci_low, ci_high_us=s.ci_high, n=s.n, clock="cpu-wall")


def _log_se(t: Timing) -> float:
    lo, hi = max(t.ci_low_us, 1e-12), max(t.ci_high_us, t.ci_low_us, 1e-12)
    return max((math.log(hi) - math.log(lo)) / (2 * _Z95), _MIN_REL_SE)


def ratio(base: Timing, new: Timing, cuda: bool) -> Ratio:
    """base / new with a 95% CI (log-normal from both CIs, as gpu/timing/compare.py combines them)."""
    r = base.median_us / new.median_us if new.median_us > 0 else math.inf
    se = math.sqrt(_log_se(base) ** 2 + _log_se(new) ** 2)
    lo, hi = r * math.exp(-_Z95 * se), r * math.exp(_Z95 * se)
    if not cuda:
        verdict = "CPU timing: never called a speedup"
    elif lo > 1.0 and r >= 1.02:
        verdict = "faster beyond noise"
    elif hi < 1.0:
        verdict = "slower beyond noise"
    else:
        verdict = "not beyond noise"
    return Ratio(ratio=r, ci_low=lo, ci_high=hi, verdict=verdict)


# ---------------------------------------------------------------------------------------------- the file


def runtime_source() -> str:
    """runtime.py's code without its own docstring and future import (the plugged file has its own)."""
    text = Path(runtime.__file__).read_text()
    return text.split("from __future__ import annotations", 1)[1].lstrip("\n")


PLUGGED_GLUE = '''

# ------------------------------------------------------------------------------ this model's plan and kernels

_HERE = Path(__file__).resolve().parent


def kernels() -> dict[str, Callable[[], torch.nn.Module]]:
    """Task -> a function building its kernel's ModelNew (as ksearch's evaluator does: a fixed seed first)."""
    out: dict[str, Callable[[], torch.nn.Module]] = {}
    for task, (file, init) in KERNELS.items():
        mod = load_kernel(str(_HERE / file), f"_plugged_kernel_{task}")

        def make(mod: types.ModuleType = mod, init: list = init) -> torch.nn.Module:
            torch.manual_seed(42)
            with torch.device("cpu"):
                return mod.ModelNew(*init)

        out[task] = make
    return out


def plug_model(model: torch.nn.Module, device: torch.device | str | None = None) -> Plugged:
    """Put the kernels in place on `model` (in place; the answer's unplug() undoes it, counts() tells the calls each
    kernel answered and those that ran the original)."""
    return plug(model, PLAN, kernels(), device)


def load(device: str | None = None) -> torch.nn.Module:
    """The model as `ksearch model` built it (seeded, eval mode, on `device`: default the GPU where there is one),
    with the kernels in place."""
    ref, attr = MODEL["ref"], MODEL["class"]
    if MODEL["file"]:
        spec = importlib.util.spec_from_file_location("_plugged_model_source", MODEL["file"])
        assert spec is not None and spec.loader is not None
        source = importlib.util.module_from_spec(spec)
        sys.modules["_plugged_model_source"] = source
        sys.path.insert(0, str(Path(MODEL["file"]).parent))
        spec.loader.exec_module(source)
    else:
        source = importlib.import_module(ref)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(MODEL["seed"])
    init = MODEL["init"]
    if init is None:
        init = list(source.get_init_inputs()) if hasattr(source, "get_init_inputs") else []
    torch.manual_seed(MODEL["seed"])
    with torch.device("cpu"):
        model = getattr(source, attr)(*init)
    model = model.eval().to(dev)
    if MODEL["dtype"]:
        model = model.to(getattr(torch, MODEL["dtype"]))
    plug_model(model, dev)
    return model
'''


def write_plugged(
    path: Path,
    model_ref: str,
    manifest: dict[str, Any],
    accepted: dict[str, tuple[Path, list[Any]]],
    notes: list[str],
) -> None:
    """The plugged model's file, its kernels copied into a folder beside it."""
    kdir = path.parent / f"{path.stem}_kernels"
    if kdir.exists():
        shutil.rmtree(kdir)
    kdir.mkdir(parents=True)
    kernels: dict[str, list[Any]] = {}
    for task, (kernel, init) in accepted.items():
        shutil.copyfile(kernel, kdir / f"{task}.py")
        kernels[task] = [f"{kdir.name}/{task}.py", init]
    plan = [t for t in manifest["tasks"] if t["task"] in accepted]
    head, attr = split_ref(model_ref)
    model = {
        "ref": head,
        "file": manifest.get("source") if is_file_ref(head) else None,
        "class": attr or "Model",
        "init": manifest.get("init_values"),
        "dtype": {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(manifest.get("dtype") or ""),
        "seed": manifest.get("seed", 0),
    }
    doc = [
        f'"""{model_ref} with ksearch\'s kernels in place of its operators (written by `ksearch model --plug-back`).',
        "",
        "Use it (its folder on sys.path):",
        "",
        f"    import {path.stem}",
        f"    model = {path.stem}.load()                 # the model as `ksearch model` built it, the kernels in place",
        f"    handle = {path.stem}.plug_model(my_model)  # or put them into a model of yours; handle.unplug() undoes it",
        "",
        "Each kernel shares the model's own weights. A call whose shapes, dtypes or arguments differ from its task's",
        "runs the original operator (handle.counts() says how many calls each kernel answered and how many fell back).",
        "",
        *(
            f"- {t['task']}: {t['label']} ({len(t['sites'])} site(s)), kernel {kernels[t['task']][0]}"
            for t in plan
        ),
        *notes,
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    glue = (
        "\n\n# ------------------------------------------------------------------------------ what ksearch wrote\n\n"
        f"MODEL = json.loads(r'''{json.dumps(model)}''')\n"
        f"KERNELS = json.loads(r'''{json.dumps(kernels)}''')\n"
        f"PLAN = json.loads(r'''{json.dumps(plan)}''')\n"
    )
    text = "\n".join(doc) + runtime_source().replace(
        "import importlib\n", "import importlib\nimport json\nfrom pathlib import Path\n", 1
    )
    path.write_text(text + glue + PLUGGED_GLUE)


def import_plugged(path: Path) -> Any:
    name = f"_ksearch_plugged_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------- the run


def _task_init(task_file: Path) -> tuple[Any, list[Any]]:
    mod = load_task_module(task_file)
    init = list(mod.get_init_inputs())
    json.dumps(init)  # plain data: it is written into the plugged file
    return mod, init


def run_plug(req: Request) -> PlugReport:
    out_dir = Path(req.out_dir)
    mpath = out_dir / MANIFEST
    if not mpath.is_file():
        raise ModelError(
            f"no {MANIFEST} in {out_dir}: run `ksearch model {req.model} --out {out_dir}` first (it writes the task "
            "files and the manifest plug-back reads)"
        )
    manifest = json.loads(mpath.read_text())
    assert req.kernels is not None
    kdir = Path(req.kernels)
    names = [t["task"] for t in manifest["tasks"]]
    found, why, unused = find_kernels(kdir, names)
    loaded = load_model(
        req.model,
        inputs=manifest.get("inputs"),
        init_inputs=manifest.get("init_inputs"),
        device=req.device,
        dtype=manifest.get("dtype"),
        seed=int(manifest.get("seed", 0)),
    )
    cuda = loaded.device.type == "cuda"
    report = PlugReport(
        model=req.model,
        device=torch.cuda.get_device_name(loaded.device) if cuda else "cpu",
        unused_kernels=unused,
    )
    if manifest.get("model") != req.model:
        report.notes.append(f"the tasks were written from {manifest.get('model')}; plugging into {req.model}")
    cap, _ = captured(loaded, int(manifest.get("seed", 0)))
    accepted: dict[str, tuple[Path, list[Any]]] = {}
    checks: dict[str, tuple[torch.nn.Module, torch.nn.Module, list[torch.Tensor]]] = {}
    for t in manifest["tasks"]:
        row = PlugTask(task=t["task"], label=t["label"], status="no_kernel", sites=len(t["sites"]))
        report.tasks.append(row)
        kernel = found.get(t["task"])
        if kernel is None:
            row.reason = why[t["task"]]
            continue
        row.kernel = str(kernel)
        try:
            first = _check_task(t, kernel, out_dir, loaded, cap, row, checks)
        except Exception as e:
            row.status, row.reason = "refused", _reason(e)
            continue
        row.status = "plugged"
        accepted[t["task"]] = (kernel, first)
    plugged_path = Path(req.plugged) if req.plugged else out_dir / "plugged.py"
    rule = (
        f"every output element within {MODEL_SCALE:g}x the per-operator tolerance (KernelBench's: fp32 1e-4, fp16 "
        "and bf16 1e-2, atol = rtol): |plugged - original| <= atol + rtol * |original|"
    )
    if not accepted:
        report.error = "no kernel was plugged: " + "; ".join(f"{r.task}: {r.reason}" for r in report.tasks)
        return report
    notes = [f"Checked by ksearch against the original's outputs on fresh inputs: {rule}."]
    staging = plugged_path.parent / f".{plugged_path.stem}-checking.py"
    staging.parent.mkdir(parents=True, exist_ok=True)
    write_plugged(staging, req.model, manifest, accepted, notes)
    try:
        mod = import_plugged(staging)
        plugged_model = copy.deepcopy(loaded.model)
        handle = mod.plug_model(plugged_model, loaded.device)
        fresh = loaded.make_inputs(int(manifest.get("seed", 0)) + 1000)
        want = run_forward(loaded, fresh)
        with torch.no_grad():
            got = plugged_model(*fresh)
        report.check = model_check(got, want, rule, req)
        counts = handle.counts()
        for row in report.tasks:
            c = counts.get(row.task)
            if c is not None:
                row.hits, row.fallbacks = c["hits"], c["fallbacks"]
    except Exception as e:
        staging.unlink(missing_ok=True)
        shutil.rmtree(staging.parent / f"{staging.stem}_kernels", ignore_errors=True)
        report.error = f"the plugged model did not run: {_reason(e)}"
        return report
    staging.unlink(missing_ok=True)
    shutil.rmtree(staging.parent / f"{staging.stem}_kernels", ignore_errors=True)
    if not report.check.ok:
        report.error = (
            f"the plugged model's outputs differ from the original's beyond the model-level tolerance "
            f"({report.check.over} of {report.check.numel} elements; max abs {report.check.max_abs:.3g}, relative L2 "
            f"{report.check.rel_l2:.3g}): not written"
        )
        return report
    write_plugged(plugged_path, req.model, manifest, accepted, notes)
    report.plugged_file = str(plugged_path.resolve())
    report.ok = all(r.status != "refused" for r in report.tasks)
    if req.timing:
        _time(report, loaded, handle, plugged_model, fresh, checks, cuda, req)
    return report


def _reason(e: BaseException) -> str:
    return str(e) if isinstance(e, ValueError | RuntimeError) and str(e) else f"{type(e).__name__}: {e}"


def _check_task(
    t: dict[str, Any],
    kernel: Path,
    out_dir: Path,
    loaded: Any,
    cap: Capture,
    row: PlugTask,
    checks: dict[str, tuple[torch.nn.Module, torch.nn.Module, list[torch.Tensor]]],
) -> list[Any]:
    """Check one task's kernel at each of its sites (raises with the reason where it fails); its init inputs."""
    task_mod, init = _task_init(out_dir / t["file"])
    try:
        kmod = runtime.load_kernel(str(kernel), f"_ksearch_kernel_{t['task']}")
    except Exception as e:
        raise RuntimeError(f"its kernel file does not import: {type(e).__name__}: {e}") from None
    if not hasattr(kmod, "ModelNew"):
        raise RuntimeError(
            "its kernel file defines no ModelNew (a KernelBench ModelNew file, as `ksearch export --kernelbench` "
            "and `ksearch suite export` write)"
        )
    occs = _sites_of(t, cap)
    worst = 0.0
    for i, (ps, occ) in enumerate(zip(t["sites"], occs, strict=True)):
        k = _build(lambda: kmod.ModelNew(*init), loaded.device)
        share_weights(k, {a: list(b) for a, b in ps["weights"].items()}, loaded.model)
        ins, want = _io(t["kind"], occ)
        with torch.no_grad():
            out = k(*ins)
        _, got = flatten(out)
        try:
            m, over = max_abs_over(got, want)
        except ValueError as e:
            raise RuntimeError(f"at {ps['where']}: {e}") from None
        worst = max(worst, m)
        if over:
            tol = _tol_words(want)
            raise RuntimeError(
                f"wrong at {ps['where']}: {over} output elements differ from the original beyond its task's tolerance "
                f"({tol}); max abs difference {m:.3g}. Not plugged"
            )
        if i == 0:
            ref = _build(lambda: task_mod.Model(*init), loaded.device)
            share_weights(ref, {a: list(b) for a, b in ps["weights"].items()}, loaded.model)
            checks[t["task"]] = (ref, k, ins)
    row.max_abs = worst
    row.atol, row.rtol = _tol(want)
    return init


def _tol(want: list[torch.Tensor]) -> tuple[float, float]:
    from ksearch.gpu.tasks.kernelbench_rules import kernelbench_tolerance

    dt = next((str(w.dtype).removeprefix("torch.") for w in want if w.is_floating_point()), "float32")
    return kernelbench_tolerance().for_dtype(dt)


def _tol_words(want: list[torch.Tensor]) -> str:
    a, r = _tol(want)
    return f"atol {a:.3g}, rtol {r:.3g}: KernelBench's for its dtype"


def model_check(got: Any, want: Any, rule: str, req: Request) -> ModelCheck:
    _, g = flatten(got)
    _, w = flatten(want)
    if len(g) != len(w) or any(tuple(a.shape) != tuple(b.shape) for a, b in zip(g, w, strict=False)):
        raise RuntimeError("the plugged model's outputs have other shapes than the original's")
    tensors = [(a, b) for a, b in zip(g, w, strict=True) if b.is_floating_point()]
    dt = str(tensors[0][1].dtype).removeprefix("torch.") if tensors else "float32"
    from ksearch.gpu.tasks.kernelbench_rules import kernelbench_tolerance

    atol, rtol = kernelbench_tolerance().for_dtype(dt)
    atol = req.atol if req.atol is not None else atol * MODEL_SCALE
    rtol = req.rtol if req.rtol is not None else rtol * MODEL_SCALE
    if req.atol is not None or req.rtol is not None:
        rule = f"every output element within atol {atol:g}, rtol {rtol:g} (given): |plugged - original| <= atol + rtol * |original|"
    worst, over, numel, num, den = 0.0, 0, 0, 0.0, 0.0
    for a, b in zip(g, w, strict=True):
        a64, b64 = a.double(), b.double()
        d = (a64 - b64).abs()
        over += int((~(d <= atol + rtol * b64.abs())).sum())
        numel += b.numel()
        finite = d[torch.isfinite(d)]
        if finite.numel():
            worst = max(worst, float(finite.max()))
        num += float((d[torch.isfinite(d)] ** 2).sum())
        den += float((b64[torch.isfinite(b64)] ** 2).sum())
    return ModelCheck(
        ok=over == 0,
        rule=rule,
        atol=atol,
        rtol=rtol,
        max_abs=worst,
        rel_l2=math.sqrt(num / den) if den > 0 else 0.0,
        over=over,
        numel=numel,
    )


def _caller(m: torch.nn.Module, ins: list[torch.Tensor]) -> Callable[[], Any]:
    return lambda: m(*ins)


def _time(
    report: PlugReport,
    loaded: Any,
    handle: Any,
    plugged_model: torch.nn.Module,
    inputs: list[Any],
    checks: dict[str, tuple[torch.nn.Module, torch.nn.Module, list[torch.Tensor]]],
    cuda: bool,
    req: Request,
) -> None:
    budget = req.budget_s or (5.0 if cuda else 2.0)
    dev = loaded.device
    with torch.no_grad():
        for row in report.tasks:
            c = checks.get(row.task)
            if row.status != "plugged" or c is None:
                continue
            ref, k, ins = c
            row.original = time_call(_caller(ref, ins), cuda, budget, dev)
            row.kernel_timing = time_call(_caller(k, ins), cuda, budget, dev)
            row.speedup = ratio(row.original, row.kernel_timing, cuda)
        report.eager = time_call(lambda: loaded.model(*inputs), cuda, budget, dev, whole=True)
        report.plugged = time_call(lambda: plugged_model(*inputs), cuda, budget, dev, whole=True)
        report.vs_eager = ratio(report.eager, report.plugged, cuda)
        if cuda:
            try:
                compiled = torch.compile(loaded.model)
                compiled(*inputs)
                report.compiled = time_call(lambda: compiled(*inputs), cuda, budget, dev, whole=True)
                report.vs_compile = ratio(report.compiled, report.plugged, cuda)
            except Exception as e:
                report.notes.append(f"torch.compile of the whole model failed: {type(e).__name__}: {e}")
    report.timing_note = (
        f"CUDA-event timings on {report.device}: each a median with its 95% CI over n calls, the L2 flushed before each; "
        "an operator's launch covered (its kernels' time), the whole model's not (the host's launches and the plugged "
        "model's Python included)"
        if cuda
        else "CPU timings (this machine has no GPU; Triton kernels ran in its interpreter): host-clock medians with "
        "their 95% CI over n calls. A CPU figure, not a GPU one: no speedup is claimed from it; torch.compile is timed "
        "on a GPU only"
    )
