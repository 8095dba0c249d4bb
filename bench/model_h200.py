"""`ksearch model`'s whole-model flow end to end on one model: rank its operators, search the hottest as a suite with
the built-in non-LLM tuner policy, plug the winners back, and record what each step reported.

    python bench/model_h200.py [--model bench/models/llama_layer.py] [--dtype bf16] [--top 5] [--rounds 2] \
        [--deadline 420] [--out FILE]                  # on the H200: bash bench/run_h200.sh model
    python bench/model_h200.py --rounds 1 --deadline 300 --out /tmp/model-cpu.json         # a CPU, no GPU

Each step is the real CLI (`python -m ksearch.server.cli`) in a subprocess under its own timeout, its stdout and
stderr kept (under WORK/logs/, and the last lines of each in the JSON):

1. `ksearch model MODEL --dtype D --top N --out WORK/MODEL-ops --json`: the ranking and the task files;
2. `ksearch suite run WORK/MODEL-ops/tasks.txt --name NAME --policy tuner --rounds R --suite-wall W --starts
   WORK/starts --db WORK/model.db`: the tasks searched at once (the tuner only tunes an existing kernel: a task that
   is a bias-free Linear, alone or with its SiLU, starts from the built-in gemm_bf16 seed's Triton GEMM (its
   tiles declared as TUNABLES) in a module this script writes; any other task has no start, and its search stops at once and says so) (W: what the deadline leaves after the ranking, less what plug-back needs; the
   suite stops at it as Ctrl-C stops it), then `ksearch suite status NAME --json`: per task its search's best
   against eager and torch.compile as the suite reports them;
3. `ksearch model MODEL --dtype D --out WORK/MODEL-ops --plug-back NAME --db ... --json` (timing on, `--budget-s`
   seconds per timed callable): per plugged operator its check and its gain, the whole model eager vs plugged vs
   torch.compile, the model-level check.

Nothing is computed here: every figure in the JSON is one the tool reported (its units in the field names: `_us`
microseconds, ratios >1 faster; each timing a median with its 95% CI and n, and its clock: `cuda-events` on a GPU,
`cpu-wall` without one, where Triton kernels run in its interpreter and no speedup is called). The JSON is
rewritten after every step, so a run cut short keeps what it reached. Without a GPU a `*-h200.json` name is refused
unless --out names it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import provenance  # bench/, the script's own folder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_MODEL = "bench/models/llama_layer.py"
TAIL = 4000

# The tuner policy only tunes an existing kernel: a task without a starting kernel stops at once (the suite says so).
# For each written task that is a bias-free nn.Linear, alone or with the SiLU that consumes its output, the script
# writes a start from the gemm_bf16 seed's Triton GEMM (`--starts`), its tiles declared as TUNABLES, its weight held
# under the task's own name (plug-back gives a kernel the model's weights by name). Other tasks get none and are recorded so.
LINEAR = re.compile(
    r"self\.(\w+) = torch\.nn\.Linear\(in_features=(\w+), out_features=(\w+), bias=False, dtype=None\)"
    r"\.to\(torch\.(\w+)\)"
)
# The start's GEMM is the built-in gemm_bf16 seed's (its kernel, TUNABLES and launch constants, taken verbatim up to
# its ModelNew); only the module around it is written here: the task's Linear, its sizes, the SiLU after it.
SEED = ROOT / "gpu" / "tasks" / "builtin" / "gemm_bf16" / "seed_triton.py"
START_MODULE = """

{consts}


class ModelNew(torch.nn.Module):
    \"\"\"A starting kernel for {stem} (bench/model_h200.py): x @ W^T{act_doc} by the gemm_bf16 seed's Triton GEMM.\"\"\"

    def __init__(self{init_args}):
        super().__init__()
        self.{name} = torch.nn.Linear(in_features={k}, out_features={n}, bias=False, dtype=None).to(torch.{dtype})

    def forward(self, x0):
        w = self.{name}.weight
        a = x0.reshape(-1, x0.shape[-1])
        m, k = a.shape
        n = w.shape[0]
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
        _gemm[grid](a, w, c, m, n, k, a.stride(0), a.stride(1), w.stride(1), w.stride(0), c.stride(0), c.stride(1),
                    BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=num_warps, num_stages=num_stages)
        c = c.reshape(*x0.shape[:-1], n)
        return {ret}
"""


def _seed_kernel() -> str:
    """The gemm_bf16 seed up to its ModelNew: imports, TUNABLES, launch constants and `_gemm`."""
    text = SEED.read_text()
    return text[: text.index("class ModelNew")].rstrip()


def write_starts(tasks: list[Path], folder: Path) -> dict[str, str]:
    """A starting kernel per task this script knows how to start (see START_MODULE); task stem -> what was done."""
    folder.mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    for task in tasks:
        text = task.read_text()
        m = LINEAR.search(text)
        act = "torch.nn.SiLU(" in text
        other_modules = len(re.findall(r"self\.\w+ = torch\.nn\.", text)) - 1 - int(act)
        if m is None or other_modules or (act and "self.act(self." not in text):
            done[task.stem] = "no start: not a bias-free Linear (+ SiLU); its tuner search stops at once"
            continue
        name, k, n, dtype = m.groups()
        # the task's constructor takes its sizes (its init inputs, shrunk with the smoke workload): so does the start
        sig = re.search(r"def __init__\(self((?:, \w+)*)\):", text)
        init_args = sig.group(1) if sig else ""
        consts = "\n".join(f"{c} = {v}" for c, v in re.findall(r"^(size_\d+) = (\d+)$", text, re.M))
        module = START_MODULE.format(
            consts=consts, stem=task.stem, act_doc=" then SiLU" if act else "", init_args=init_args, name=name, k=k,
            n=n, dtype=dtype, ret="torch.nn.functional.silu(c)" if act else "c",
        )  # fmt: skip
        (folder / task.name).write_text(_seed_kernel() + module)
        done[task.stem] = (
            f"start written: the gemm_bf16 seed's Triton GEMM{', then torch SiLU' if act else ''} ({folder / task.name})"
        )
    return done


# characters of each step's stdout / stderr kept in the JSON (all of it under WORK/logs/)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _gpu() -> dict[str, Any]:
    """The GPU as torch sees it (in a subprocess: this script never imports torch)."""
    code = (
        "import json, torch\n"
        "ok = torch.cuda.is_available()\n"
        "print(json.dumps({'cuda': ok, 'gpu': torch.cuda.get_device_name(0) if ok else None,"
        " 'torch': torch.__version__, 'cuda_version': torch.version.cuda}))"
    )
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception as e:
        return {"cuda": False, "gpu": None, "error": f"{type(e).__name__}: {e}"}


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keeps .whl's site
    return {**os.environ, "PYTHONPATH": path}


def _step(name: str, args: list[str], timeout_s: float, logs: Path) -> dict[str, Any]:
    """Run `ksearch ARGS...` under a timeout (SIGINT first, as Ctrl-C, so the CLI saves and reports; SIGKILL 20 s
    later); its output in logs/NAME.{out,err} and its tail in the record."""
    cmd = [sys.executable, "-m", "ksearch.server.cli", *args]
    t0 = time.monotonic()
    rec: dict[str, Any] = {"command": " ".join(cmd[2:]).replace("ksearch.server.cli", "ksearch", 1)}
    rec["timeout_s"] = round(timeout_s, 1)
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1.0))
        rec["timed_out"] = False
    except subprocess.TimeoutExpired:
        rec["timed_out"] = True
        os.killpg(proc.pid, 2)  # SIGINT to the group the step started
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
    rec["exit_code"] = proc.returncode
    rec["seconds"] = round(time.monotonic() - t0, 1)
    (logs / f"{name}.out").write_text(out or "")
    (logs / f"{name}.err").write_text(err or "")
    rec["stdout_tail"] = (out or "")[-TAIL:]
    rec["stderr_tail"] = (err or "")[-TAIL:]
    rec["_stdout"] = out or ""
    print(
        f"{name}: rc={proc.returncode} {rec['seconds']} s{' (timed out)' if rec['timed_out'] else ''}",
        flush=True,
    )
    return rec


def _json_of(text: str) -> Any:
    """The JSON object a `--json` command printed (the first `{` at a line's start to the end)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            try:
                return json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                continue
    return None


RANK_KEYS = (
    "rank", "label", "kind", "share", "calls", "per_call_us", "total_us", "inputs", "outputs", "dtype", "bound",
    "flops", "bytes", "roofline_us", "headroom", "task", "not_written", "faithful_max_abs", "sites",
)  # fmt: skip


def _ranking(prof: dict[str, Any]) -> dict[str, Any]:
    return {
        "device": prof.get("device"),
        "timed": prof.get("timed"),
        "iters": prof.get("iters"),
        "forward_us": prof.get("total_us"),
        "covered": prof.get("covered"),
        "dtype": prof.get("dtype"),
        "ceilings": prof.get("ceilings"),
        "rows": [{k: r.get(k) for k in RANK_KEYS} for r in prof.get("rows") or []],
        "written": prof.get("written"),
        "tasks_list": prof.get("tasks_list"),
        "suite_command": prof.get("suite_command"),
        "notes": prof.get("notes"),
    }


def _plugged(plug: dict[str, Any]) -> dict[str, Any]:
    return {
        "ok": plug.get("ok"),
        "device": plug.get("device"),
        "plugged_file": plug.get("plugged_file"),
        "check": plug.get("check"),
        "operators": plug.get("tasks"),
        "whole_model": {
            "eager": plug.get("eager"),
            "plugged": plug.get("plugged"),
            "torch_compile": plug.get("compiled"),
            "plugged_vs_eager": plug.get("vs_eager"),
            "plugged_vs_compile": plug.get("vs_compile"),
            "timing_note": plug.get("timing_note"),
        },
        "unused_kernels": plug.get("unused_kernels"),
        "notes": plug.get("notes"),
        "error": plug.get("error"),
    }


def _write(out: Path, report: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    steps = {
        k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in report["steps"].items()
    }
    out.write_text(json.dumps({**report, "steps": steps}, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"the model (default {DEFAULT_MODEL})")
    ap.add_argument("--dtype", default="bf16", help="fp32 | fp16 | bf16 (default bf16)")
    ap.add_argument("--top", type=int, default=5, help="task files to write (default 5)")
    ap.add_argument("--rounds", type=int, default=2, help="tuner rounds per task (default 2)")
    ap.add_argument("--suite-name", default="model-bench", help="the suite's name (default model-bench)")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds for the whole run (default 420)")
    ap.add_argument(
        "--timing-budget-s", type=float, default=None, help="plug-back's seconds per timed callable (default: "
        "the tool's, 5 on a GPU, 2 on a CPU; less when the deadline is short)",
    )  # fmt: skip
    ap.add_argument(
        "--work", type=Path, default=None, help="the run's folder (default: a new one under /tmp)"
    )
    ap.add_argument("--out", type=Path, default=None, help="default bench/results/model-h200.json on a GPU")
    a = ap.parse_args(argv)

    t_start = time.monotonic()
    gpu = _gpu()
    if a.out is None:
        if not gpu.get("cuda"):
            print(
                "no GPU here (torch.cuda is unavailable): give --out FILE (not a *-h200.json result)",
                file=sys.stderr,
            )
            return 2
        a.out = ROOT / "bench" / "results" / "model-h200.json"
    work = (a.work or Path(tempfile.mkdtemp(prefix="ksearch-model-"))).resolve()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ops = work / f"{Path(a.model.split(':')[0]).stem}-ops"
    db = work / "model.db"
    model = a.model
    report: dict[str, Any] = {
        "what": "ksearch model's whole-model flow: rank the operators, search the hottest as a suite (tuner policy, "
        "no LLM), plug the winners back; every figure as the tool reported it",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started": _now(),
        "commit": provenance.commit(),
        "machine": platform.node(),
        "gpu": gpu.get("gpu"),
        "cuda": gpu.get("cuda"),
        "torch": gpu.get("torch"),
        "python": platform.python_version(),
        "model": model,
        "dtype": a.dtype,
        "top": a.top,
        "rounds": a.rounds,
        "deadline_s": a.deadline,
        "work": str(work),
        "steps": {},
    }
    print(f"work folder {work}; GPU: {gpu.get('gpu') or 'none'}", flush=True)

    def left() -> float:
        return a.deadline - (time.monotonic() - t_start)

    # 1. rank and write the tasks
    cpu = not gpu.get("cuda")
    plug_reserve = max(60.0, 0.3 * a.deadline)  # plug-back: its check, and timing 5 x 3 callables and more
    prof_s = max(30.0, min(0.35 * a.deadline, left() - plug_reserve - 30))
    s = _step(
        "profile",
        ["model", model, "--dtype", a.dtype, "--top", str(a.top), "--out", str(ops), "--json"],
        prof_s,
        logs,
    )
    report["steps"]["profile"] = s
    prof = _json_of(s["_stdout"])
    report["ranking"] = _ranking(prof) if isinstance(prof, dict) else None
    _write(a.out, report)
    tasks_list = ops / "tasks.txt"
    if not tasks_list.is_file():
        report["stopped"] = "the ranking wrote no tasks.txt: nothing to search"
        report["finished"] = _now()
        _write(a.out, report)
        print(report["stopped"], file=sys.stderr)
        return 1

    tasks = [
        Path(t.strip()) for t in tasks_list.read_text().splitlines() if t.strip() and not t.startswith("#")
    ]
    tasks = [t if t.is_absolute() else (ops / t) for t in tasks]
    report["starts"] = write_starts(tasks, work / "starts")

    # 2. search them as a suite; the suite stops at its wall as Ctrl-C stops it, its report printed after
    suite_s = left() - plug_reserve
    suite_wall = max(10.0, suite_s - 30)  # the suite's own stop, 30 s before the step's timeout
    s = _step(
        "suite",
        ["suite", "run", str(tasks_list), "--name", a.suite_name, "--policy", "tuner", "--rounds", str(a.rounds),
         "--suite-wall", f"{suite_wall:.0f}", "--starts", str(work / "starts"), "--db", str(db)],
        max(suite_s, 40.0), logs,
    )  # fmt: skip
    report["steps"]["suite"] = s
    report["suite_wall_s"] = round(suite_wall)
    s = _step("suite-status", ["suite", "status", a.suite_name, "--json", "--db", str(db)], 60, logs)
    report["steps"]["suite-status"] = s
    report["suite"] = _json_of(s["_stdout"])
    _write(a.out, report)

    # 3. plug the winners back, timing on
    budget = a.timing_budget_s
    if budget is None and left() < (200 if cpu else 120):
        budget = 1.0  # a short deadline: less per timed callable than the tool's default
    plug = [
        "model",
        model,
        "--dtype",
        a.dtype,
        "--out",
        str(ops),
        "--plug-back",
        a.suite_name,
        "--db",
        str(db),
        "--json",
    ]
    if budget is not None:
        plug += ["--budget-s", str(budget)]
    s = _step("plug-back", plug, max(left() - 5, 30.0), logs)
    report["steps"]["plug-back"] = s
    got = _json_of(s["_stdout"])
    report["plug_back"] = _plugged(got) if isinstance(got, dict) else None
    report["exit_codes"] = {k: v["exit_code"] for k, v in report["steps"].items()}
    report["seconds"] = {k: v["seconds"] for k, v in report["steps"].items()}
    report["total_s"] = round(time.monotonic() - t_start, 1)
    report["finished"] = _now()
    _write(a.out, report)
    print(f"wrote {a.out} ({report['total_s']} s)", flush=True)
    return 0 if all(v == 0 for v in report["exit_codes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
