"""`ksearch model FILE`'s work in its own process: profile the model, rank its operators, write the hot ones as
task files with a manifest (imports torch).

The ranking is by the profiler's CUDA time of each operator's kernels on a GPU, by CPU time without one (and the
report says which). Each written task is checked before it is kept: its `Model`, given the model's own weights, run
on the very inputs the model passed at that site, must compute what the model computed there (within KernelBench's
tolerance; the same ops give the same bits), and its `get_inputs()` must draw tensors of the same shapes and dtypes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import torch

from ksearch.gpu.model.capture import Capture, Item, Site, capture, group, profile_sites
from ksearch.gpu.model.load import Loaded, load_model, run_forward
from ksearch.gpu.model.report import (
    MANIFEST,
    MANIFEST_VERSION,
    TASKS_LIST,
    ItemReport,
    ProfileReport,
    Request,
)
from ksearch.gpu.model.runtime import flatten, share_weights
from ksearch.gpu.model.write import ROLES, Unwritable, Written, write_item
from ksearch.gpu.tasks.kernelbench_rules import kernelbench_tolerance

INIT_SEED = 42  # as the evaluator builds a task's Model (gpu/tasks/rt/common.py)
SHOWN = 40  # ranked rows reported at most


def input_seed(seed: int) -> int:
    """The seed the model's inputs are drawn with for profiling (and for plug-back's per-site checks)."""
    return seed + 1


def _desc(spec: list[Any], layout: str = "c") -> str:
    shape, dtype = spec
    return f"{'x'.join(map(str, shape)) or 'scalar'} {dtype}" + ("" if layout == "c" else " (strided)")


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[:40] or "op"


def part(site: Site, group: str, follower: Site | None = None) -> dict[str, Any]:
    """A site as the runtime's plan holds it (gpu/model/runtime.py)."""
    d: dict[str, Any] = {
        "kind": site.kind,
        "key": site.path if site.kind == "module" else site.key,
        "skeleton": site.skeleton,
        "specs": site.specs,
        "struct": site.struct,
        "group": group,
        "follower": None if follower is None else part(follower, group)["key"],
    }
    if site.kind == "module":
        d["module"] = site.path
    return d


def plan_sites(item: Item, weights: list[dict[str, list[str]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    group = item.kind if item.kind in ("linear_act", "add_norm") else "single"
    for occ, w in zip(item.occurrences, weights, strict=True):
        entry = part(occ[0], group, occ[1] if len(occ) > 1 else None)
        key = json.dumps([entry["kind"], entry["key"], entry["specs"]])
        if key in seen:  # a module called again with the same tensors: one entry takes every call
            continue
        seen.add(key)
        out.append(
            {
                "entry": entry,
                "follower": part(occ[1], group) if len(occ) > 1 else None,
                "weights": w,
                "where": _where(occ),
            }
        )
    return out


def _where(occ: list[Site]) -> str:
    return " -> ".join((s.path or "(model)") + ("" if s.kind == "module" else f" ({s.label})") for s in occ)


def load_task_module(path: Path) -> Any:
    name = f"_ksearch_task_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def max_abs_over(got: list[torch.Tensor], want: list[torch.Tensor], scale: float = 1.0) -> tuple[float, int]:
    """(largest |got - want|, elements outside KernelBench's tolerance times `scale`) over paired tensors."""
    if len(got) != len(want):
        raise ValueError(f"{len(got)} outputs where {len(want)} were expected")
    tol = kernelbench_tolerance()
    worst, over = 0.0, 0
    for g, w in zip(got, want, strict=True):
        if tuple(g.shape) != tuple(w.shape):
            raise ValueError(f"an output of shape {tuple(g.shape)} where {tuple(w.shape)} was expected")
        if not (g.is_floating_point() or g.is_complex()):
            over += int((g != w).sum())
            continue
        atol, rtol = tol.for_dtype(str(w.dtype).removeprefix("torch."))
        atol, rtol = atol * scale, rtol * scale
        d = (g.double() - w.double()).abs()
        bad = ~(d <= atol + rtol * w.double().abs())
        over += int(bad.sum())
        finite = d[torch.isfinite(d)]
        if finite.numel():
            worst = max(worst, float(finite.max()))
    return worst, over


def faithful(path: Path, written: Written, loaded: Loaded) -> float:
    """The written task's Model with the model's weights, on the inputs the model passed: its largest difference
    from what the model computed (Unwritable when over KernelBench's tolerance, or when get_inputs draws other
    shapes or dtypes)."""
    mod = load_task_module(path)
    torch.manual_seed(INIT_SEED)
    with torch.device("cpu"):
        model = mod.Model(*mod.get_init_inputs())
    model = model.to(loaded.device).eval()
    share_weights(model, written.weights[written.occurrence], loaded.model)
    with torch.no_grad():
        out = model(*written.inputs)
    _, outs = flatten(out)
    worst, over = max_abs_over(outs, written.outputs)
    if over:
        raise Unwritable(
            f"the written task does not compute what the model did there ({over} elements off, max abs {worst:.3g})"
        )
    drawn = mod.get_inputs()
    got = [[list(t.shape), t.dtype] for t in drawn]
    want = [[list(t.shape), t.dtype] for t in written.inputs]
    if got != want:
        raise Unwritable(f"its get_inputs() draws {got}, the model passed {want}")
    return worst


def _clean(out_dir: Path) -> None:
    """Task files an earlier profile wrote here (its manifest lists them) are taken away: no stale task."""
    old = out_dir / MANIFEST
    if not old.is_file():
        return
    try:
        tasks = json.loads(old.read_text()).get("tasks", [])
    except (OSError, ValueError):
        return
    for t in tasks:
        f = out_dir / str(t.get("file", ""))
        if f.is_file() and f.suffix == ".py" and f.parent == out_dir:
            f.unlink()


def run_profile(req: Request) -> ProfileReport:
    loaded = load_model(
        req.model,
        inputs=req.inputs,
        init_inputs=req.init_inputs,
        device=req.device,
        dtype=req.dtype,
        seed=req.seed,
    )
    cuda = loaded.device.type == "cuda"
    inputs = loaded.make_inputs(input_seed(req.seed))
    run_forward(loaded, inputs)
    cap = capture(loaded, inputs, keep="all")
    items = group(cap)
    iters = req.iters or (10 if cuda else 3)
    timed = profile_sites(loaded, inputs, iters)
    for s in cap.sites:
        s.time_us = timed.per_site_us.get(s.key, 0.0)
    total = timed.total_us or sum(s.time_us for s in cap.sites) or 1.0
    items.sort(key=lambda it: -it.time_us)
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters()})
    report = ProfileReport(
        model=req.model,
        device=torch.cuda.get_device_name(loaded.device) if cuda else "cpu",
        timed="cuda" if cuda else "cpu",
        iters=iters,
        total_us=timed.total_us,
        covered=min(1.0, sum(it.time_us for it in items) / total),
        dtype=", ".join(dtypes),
    )
    if not cuda:
        report.notes.append(
            "no GPU here: operators are ranked by their CPU time under torch.profiler (one thread), not by GPU time; "
            "on a GPU the ranking (and what is worth a kernel) can differ"
        )
    if cuda:
        from ksearch.gpu.timing.hardware import measure_ceilings

        report.ceilings = measure_ceilings(loaded.device)
    out_dir = Path(req.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean(out_dir)
    tasks: list[dict[str, Any]] = []
    stems = task_stems(items)
    for rank, item in enumerate(items, 1):
        row = _row(rank, item, total)
        if len(tasks) >= req.top:
            row.not_written = f"beyond --top {req.top}"
        else:
            _write(item, stems[item.signature], row, loaded, out_dir, tasks, report)
        if rank <= SHOWN or row.task:
            report.items.append(row)
    if len(items) > SHOWN:
        report.notes.append(f"{len(items) - SHOWN} operators of smaller share are not listed")
    manifest = {
        "version": MANIFEST_VERSION,
        "model": req.model,
        "inputs": req.inputs,
        "init_inputs": req.init_inputs,
        "device": req.device,
        "dtype": req.dtype,
        "seed": req.seed,
        "source": str(loaded.source_path) if loaded.source_path else None,
        "init_values": _plain(loaded.init_inputs),
        "profiled_on": report.device,
        "tasks": tasks,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1))
    (out_dir / TASKS_LIST).write_text(
        "# the task files `ksearch model` wrote, hottest first: `ksearch suite run` takes this file\n"
        + "".join(f"{t['file']}\n" for t in tasks)
    )
    report.out_dir = str(out_dir.resolve())
    report.manifest = str((out_dir / MANIFEST).resolve())
    report.tasks_list = str((out_dir / TASKS_LIST).resolve())
    report.written = [str((out_dir / t["file"]).resolve()) for t in tasks]
    return report


def _plain(values: list[Any]) -> list[Any] | None:
    """The init inputs as JSON data, or None where they are not (the plugged file then calls get_init_inputs)."""
    try:
        return json.loads(json.dumps(values))
    except (TypeError, ValueError):
        return None


def _row(rank: int, item: Item, total: float) -> ItemReport:
    first = item.first
    entry = first[0]
    ins = [_desc(s, lay) for s, lay in zip(entry.specs, entry.layouts, strict=True)]
    if len(first) > 1:
        f = first[1]
        ins += [_desc(s, lay) for s, lay in zip(f.specs[1:], f.layouts[1:], strict=True)]
    outs = [_desc(s) for s in first[-1].out_specs]
    if item.kind == "add_norm":
        outs += [_desc(s) for s in entry.out_specs]
    dts = sorted({s[1] for s in entry.specs if "float" in s[1]} | {s[1] for s in first[-1].out_specs})
    return ItemReport(
        rank=rank,
        label=item.label,
        kind=item.kind,
        sites=[_where(occ) for occ in item.occurrences],
        calls=item.calls,
        total_us=item.time_us,
        per_call_us=item.time_us / max(item.calls, 1),
        share=item.time_us / total if total else 0.0,
        inputs=ins,
        outputs=outs,
        dtype=", ".join(dts),
    )


def task_stems(items: list[Item]) -> dict[str, str]:
    """Each item's task name: its operator and first input's shape (`linear_gelu_2x16x64`), and a short hash of
    its signature where two items would share one. It depends on the model alone, never on the timings, so a
    profile made again names each task as before (and the kernels searched for it still match)."""
    base: dict[str, str] = {}
    for it in items:
        entry = it.first[0]
        shape = "x".join(map(str, entry.specs[0][0])) if entry.specs and entry.specs[0][0] else "scalar"
        base[it.signature] = f"{slug(it.label)}_{shape}"
    counts: dict[str, int] = {}
    for b in base.values():
        counts[b] = counts.get(b, 0) + 1
    return {
        sig: b if counts[b] == 1 else f"{b}_{hashlib.sha1(sig.encode()).hexdigest()[:6]}"
        for sig, b in base.items()
    }


def _write(
    item: Item,
    stem: str,
    row: ItemReport,
    loaded: Loaded,
    out_dir: Path,
    tasks: list[dict[str, Any]],
    report: ProfileReport,
) -> None:
    clock = "CUDA" if report.timed == "cuda" else "CPU"
    title = f"{item.label} from {loaded.ref}"
    doc = (
        f"Written by `ksearch model` from {loaded.ref}: {item.calls} call(s) per forward "
        f"({', '.join(row.sites[:4])}{', ...' if len(row.sites) > 4 else ''}), {row.share:.1%} of the forward's "
        f"{clock} time on {report.device}. Inputs and weights have the shapes, dtypes and layouts the model's "
        "forward passed; values are drawn at random (plug-back gives a kernel the model's own weights)."
    )
    path = out_dir / f"{stem}.py"
    try:
        written = write_item(item, loaded, title, doc)
        path.write_text(written.source)
        try:
            row.faithful_max_abs = faithful(path, written, loaded)
        except Unwritable:
            raise
        except Exception as e:
            raise Unwritable(f"the written task did not run: {type(e).__name__}: {e}") from None
    except Unwritable as e:
        path.unlink(missing_ok=True)
        row.not_written = str(e)
        return
    row.task = str(path.resolve())
    tasks.append(
        {
            "task": stem,
            "file": path.name,
            "label": item.label,
            "kind": item.kind,
            "roles": list(ROLES[item.kind]),
            "share": row.share,
            "calls": item.calls,
            "sites": plan_sites(item, written.weights),
        }
    )


def captured(loaded: Loaded, seed: int) -> tuple[Capture, list[Any]]:
    """The sites of one forward on the profile's inputs, every site's tensors kept (plug-back's checks)."""
    inputs = loaded.make_inputs(input_seed(seed))
    return capture(loaded, inputs, keep="all"), inputs
