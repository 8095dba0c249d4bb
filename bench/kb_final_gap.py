"""Why a KernelBench final evaluation read a kernel slower than the search did: the same kernel, the same inputs,
timed by ksearch's kernelbench-protocol loop with and without work between the timed calls -> JSON.

    python bench/kb_final_gap.py --problem .ext/kb/KernelBench/level1/40_LayerNorm.py \
        --kernel bench/results/live-host-h200/export-level1_40_LayerNorm.py.txt \
        --out bench/results/kb-final-gap-h200.json

Variants, each run twice in alternation (to see drift), 100 trials each as KernelBench times them:
- `plain`: the search's loop (nothing between the calls but the L2 clear);
- `check_each`: the final mode's loop, every timed output checked on the host's request after its events (what the
  final evaluation did when it read LayerNorm 40% slower);
- `idle_gap`: no check, the host sleeping as long as one check took: the GPU idles as long;
- `device_check`: each output compared on the device, queued after the events, read once at the end
  (gpu/checks/deferred.py);
- `sampled_check`: the same on SAMPLE elements drawn afresh per call (what a KernelBench final evaluation did before
  `kept_outputs`);
- `kept_outputs`: the outputs of 8 calls chosen in secret kept by reference, checked after the loop, the allocator
  given free blocks before it (gpu/checks/kept_outputs.py: what a KernelBench final evaluation does);
- `kept_touched`: the same, each free block written once on the device before the loop.
The script's own timer per check is reported too, and per variant and round the device allocations (`cudaMalloc`)
made inside the loop; for the kept variants also the mean of the calls right after a kept one and of the others.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.gpu.checks import outputs as checking  # noqa: E402
from ksearch.gpu.checks.deferred import DeferredChecks  # noqa: E402
from ksearch.gpu.checks.kept_outputs import KeptOutputs  # noqa: E402
from ksearch.gpu.task import Tolerance  # noqa: E402
from ksearch.gpu.worker.protocol_kernelbench import l2_clearer, time_like_kernelbench  # noqa: E402

SAMPLE = 1 << 16  # elements per output the sampled check compares


def _module(path: Path, name: str) -> Any:
    # a source loader named outright: a kernel kept as data (`.py.txt`, as under bench/results/) loads too
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", type=Path, required=True)
    ap.add_argument("--kernel", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    dev = torch.device("cuda")
    prob, kern = _module(a.problem, "kb_problem"), _module(a.kernel, "kb_kernel")
    torch.manual_seed(1)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    init = prob.get_init_inputs()
    ref = prob.Model(*init).to(dev).eval()
    new = kern.ModelNew(*init).to(dev).eval()
    new.load_state_dict(ref.state_dict(), strict=False)
    with torch.no_grad():
        exp = ref(*inputs)
        fn = lambda data: new(*data)  # noqa: E731
        tol = Tolerance()
        check_s: list[float] = []

        def check_each(trial: int, got: Any) -> None:
            t0 = time.perf_counter()
            chk = checking.compare_outputs(got, exp, tol)
            check_s.append(time.perf_counter() - t0)
            assert chk.passed, chk.message

        gap = [0.0]

        def idle_gap(trial: int, got: Any) -> None:
            time.sleep(gap[0])

        deferred = DeferredChecks(exp, tol)
        sampled = DeferredChecks(exp, tol, sample=SAMPLE)

        def device_check(trial: int, got: Any) -> None:
            deferred.add(trial, got)

        def sampled_check(trial: int, got: Any) -> None:
            sampled.add(trial, got)

        kept: list[KeptOutputs] = []

        def kept_outputs(trial: int, got: Any) -> None:
            kept[-1].add(trial, got)

        def new_kept() -> None:
            kept.append(KeptOutputs(exp, 100))
            kept[-1].prewarm()

        def new_kept_touched() -> None:
            kept.append(KeptOutputs(exp, 100))
            for e in checking.flatten(exp):
                if isinstance(e, torch.Tensor) and e.is_cuda and e.numel():
                    blocks = [torch.empty_like(e).zero_() for _ in range(len(kept[-1].chosen) + 1)]
                    del blocks
            torch.cuda.synchronize()

        mallocs = [0]

        def count_from_here() -> None:
            mallocs[0] = torch.cuda.memory_stats().get("segment.all.allocated", 0)

        variants = {
            "plain": None,
            "check_each": check_each,
            "idle_gap": idle_gap,
            "device_check": device_check,
            "sampled_check": sampled_check,
            "kept_outputs": kept_outputs,
            "kept_touched": kept_outputs,
        }
        setup = {"kept_outputs": new_kept, "kept_touched": new_kept_touched}

        def before(name: str) -> None:
            if name in setup:
                setup[name]()
            count_from_here()

        rows: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
        for _ in range(a.rounds):
            for name, after in variants.items():
                if name == "idle_gap":
                    gap[0] = statistics.median(check_s) if check_s else 0.02
                res = time_like_kernelbench(
                    fn,
                    lambda k: inputs,
                    clear_l2=l2_clearer(dev),
                    after_each=after,
                    before_loop=lambda name=name: before(name),  # type: ignore[misc]
                    host_check=False,
                )
                extra: dict[str, Any] = {}
                if name in setup:
                    after_kept = {t + 1 for t in kept[-1].chosen}
                    s_after = [v for i, v in enumerate(res.samples_us) if i in after_kept]
                    s_other = [v for i, v in enumerate(res.samples_us) if i not in after_kept]
                    extra = {
                        "after_kept_mean_us": round(statistics.mean(s_after), 1) if s_after else None,
                        "other_mean_us": round(statistics.mean(s_other), 1),
                    }
                rows[name].append(
                    {
                        "mean_us": round(float(res.mean_us or 0.0), 1),
                        "median_us": round(res.summary.median, 1),
                        "wall_s": round(res.wall_s or 0.0, 2),
                        "mallocs_in_loop": torch.cuda.memory_stats().get("segment.all.allocated", 0)
                        - mallocs[0],
                        **({"gap_s": round(gap[0], 4)} if name == "idle_gap" else {}),
                        **extra,
                    }
                )
                print(name, rows[name][-1], flush=True)
        torch.cuda.synchronize()
        for k in kept:
            failed, _ = k.first_failure(lambda got: checking.compare_outputs(got, exp, tol))
            assert failed is None and len(k.kept) == 8, (failed, len(k.kept))
        assert deferred.first_failure() is None, (
            f"device_check found a wrong output: {deferred.first_failure()}"
        )
    out = {
        "what": __doc__.split("\n\n")[0],
        "problem": a.problem.name,
        "kernel": a.kernel.name,
        "device": torch.cuda.get_device_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "check_s_median": round(statistics.median(check_s), 4) if check_s else None,
        "variants": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
