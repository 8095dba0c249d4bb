"""The flows an IDE assistant runs, played against a real `ksearch serve` over stdio, every call under a watchdog.

    python bench/host_flow.py [--flows trimul,kb,quickstart] [--budget-s 540] [--out FILE] [--smoke]
                              [--bound benchmark=180 --bound final_evaluation=600 ...] [--log-dir DIR] [--work DIR]

Each flow starts its own `ksearch serve` (stdio, as an IDE host does, with `--log FILE`: each call's start, phases, end)
over its own database, and calls its tools as an assistant following the README would:

  trimul      GPU MODE's TriMul folder: create_search, the analyse_kernel prompt read at once (no wait: the
              interleaving in which the prompt's background hardware measurement and the first benchmark raced for
              the only worker), propose_intents, select_action, benchmarks of published kernels, finish_intent,
              final_evaluation, export_kernel (submission.py) and the folder's own eval.py on it (when it has one)
  kb          three KernelBench-format files (bench/host_flow_tasks/) as three searches in one database, their
              benchmarks interleaved (a Triton ModelNew per task, then the reference itself as a candidate), then
              final_evaluation and export_kernel of one
  quickstart  the README's walk-through on the built-in softmax: the seed on the root, analyse_kernel, edit_tree,
              propose_intents, select_action, implement_intent, compile_kernel, run_correctness, benchmark,
              finish_intent, select_action at the spent budget, final_evaluation, export_kernel

A call past its bound is cancelled (the client's notifications/cancelled) and counted in `hangs`; the flow goes on,
or stops where the next calls need its answer. `--budget-s`: no call starts past it, and a running call is cut
`--grace-s` after it (recorded as `cut`, not as a hang). The JSON is rewritten after every call.
`--smoke` (implied without a GPU): what needs a GPU is skipped and said so (TriMul's inputs are made on CUDA: its
first benchmark is played once to see the refusal come at once).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import provenance  # bench/, the script's own folder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# bench/mcp.py would shadow the mcp package: drop this folder from the path before importing it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.dispatcher import ProgressFnT  # noqa: E402
from mcp.types import CallToolResult  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from ksearch.gpu.jail.smi import query_gpus  # noqa: E402  (standard library only: no torch in this process)

TASKS_DIR = HERE / "host_flow_tasks"
KB_TASKS = ("cross_entropy", "residual_rmsnorm", "conv_transpose2d_bf16")
KB_FINAL = "conv_transpose2d_bf16"
DEFAULT_TRIMUL = ROOT / ".ext" / "reference-kernels" / "problems" / "bioml" / "trimul"
TRIMUL_CANDIDATE_DIRS = (
    ROOT / ".ext" / "K-Search" / "results" / "gpumode_trimul",
    ROOT / ".ext" / "trimul-four",
)
# zeyushen first (a short Triton call, so the race with the background measurement is the first benchmark's own);
# shiyegao is left out by default: it builds a torch extension (about 40 s)
DEFAULT_TRIMUL_KERNELS = "zeyushen,ksearch_best,TTT"
DEFAULT_BOUNDS_S: dict[str, float] = {
    "create_search": 60,
    "prompt": 30,
    "resource": 30,
    "propose_intents": 30,
    "edit_tree": 30,
    "select_action": 30,
    "finish_intent": 60,
    "compile_kernel": 120,
    "run_correctness": 120,
    "benchmark": 180,
    "final_evaluation": 600,
    "export_kernel": 60,
    "eval_py": 300,
}
FALLBACK_BOUND_S = 60.0
T = TypeVar("T")

Outcome = Literal["ok", "error", "hang", "cut", "failed"]


class ProgressNote(BaseModel):
    t_s: float = Field(description="seconds since the call started")
    progress: float
    total: float | None
    message: str | None


class CallRecord(BaseModel):
    flow: str
    step: str
    kind: Literal["tool", "prompt", "eval_py"]
    name: str
    started_s: float = Field(description="seconds since the run started")
    seconds: float
    bound_s: float
    limit_s: float = Field(description="the bound, or less where --budget-s cut it shorter")
    within_bound: bool
    outcome: Outcome = Field(
        description="ok: answered; error: a tool error result (refused); hang: past its bound, cancelled; cut: "
        "cancelled at --budget-s before its own bound; failed: the client raised (the server went away...)"
    )
    expected: str = Field("", description="what this call was played to see, when not a plain answer")
    progress: list[ProgressNote] = Field(default_factory=list)
    text_head: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)


class Skipped(BaseModel):
    step: str
    why: str


class FlowReport(BaseModel):
    name: str
    task: str
    db: str
    server_command: list[str]
    server_log: str | None = Field(None, description="the server's --log file")
    server_stderr: str
    outcome: str = "running"
    seconds: float | None = None
    calls: list[CallRecord] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


class BaselineReading(BaseModel):
    eager_us: float | None
    compile_us: float | None
    compile_mode: str | None
    protocol: str | None
    device: str
    seen_in: list[str]


class Report(BaseModel):
    what: str = (
        "an IDE assistant's flows against `ksearch serve` over stdio: every call's seconds, progress notifications "
        "and outcome under a per-call bound"
    )
    command: list[str]
    started: str
    finished: str | None = None
    commit: str | None
    dirty: bool | None
    machine: dict[str, Any]
    smoke: bool
    budget_s: float
    grace_s: float
    bounds_s: dict[str, float]
    flows: list[FlowReport] = Field(default_factory=list)
    hangs: int = 0
    calls: int = 0
    calls_past_bound: list[str] = Field(default_factory=list)
    progress_notifications: int = 0
    baselines: dict[str, dict[str, list[BaselineReading]]] = Field(
        default_factory=dict,
        description="task -> workload -> the distinct eager / torch.compile readings benchmark results reported",
    )
    wall_s: float | None = None


class FlowStopped(Exception):
    """A call whose answer the next calls need did not answer: the flow ends here, cleanly."""


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_facts() -> dict[str, Any]:
    rows = query_gpus("name,uuid,driver_version")
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "gpus": [{"name": r[0], "uuid": r[1], "driver": r[2]} for r in rows if len(r) >= 3],
        "torch": _version("torch"),
        "triton": _version("triton"),
        "mcp": _version("mcp"),
        "cpu_mode_env": os.environ.get("KSEARCH_CPU_MODE"),
        "load_average_1_5_15": list(os.getloadavg()),
    }


def machine_label(facts: dict[str, Any], gpu: bool) -> str:
    if not gpu:
        return f"cpu{facts['cpus']}"
    name = str(facts["gpus"][0]["name"]) if facts["gpus"] else "gpu"
    m = re.search(r"(H200|H100|A100|B200|L40S?|GB200)", name)
    return (m.group(1) if m else re.sub(r"[^A-Za-z0-9]+", "-", name)).lower()


def texts_of(res: CallToolResult) -> str:
    return "\n".join(t for part in res.content if (t := getattr(part, "text", None)))


class Runner:
    def __init__(self, args: argparse.Namespace, report: Report, out: Path) -> None:
        self.args = args
        self.report = report
        self.out = out
        self.t0 = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def budget_left(self) -> float:
        return self.args.budget_s - self.elapsed()

    def save(self) -> None:
        r = self.report
        calls = [c for f in r.flows for c in f.calls]
        r.calls = len(calls)
        r.hangs = sum(c.outcome == "hang" for c in calls)
        r.calls_past_bound = [f"{c.flow}/{c.step}" for c in calls if not c.within_bound]
        r.progress_notifications = sum(len(c.progress) for c in calls)
        r.wall_s = round(self.elapsed(), 1)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(r.model_dump_json(indent=1) + "\n")

    def note_baselines(self, task: str, step: str, structured: dict[str, Any]) -> None:
        ev = structured.get("evaluation") or {}
        for t in ev.get("timings") or []:
            got = BaselineReading(
                eager_us=t.get("eager_us", t.get("eager_median_us")),
                compile_us=t.get("compile_us", t.get("compile_median_us")),
                compile_mode=t.get("compile_mode"),
                protocol=t.get("protocol"),
                device=str(t.get("device")),
                seen_in=[step],
            )
            if got.eager_us is None and got.compile_us is None:
                continue
            rows = self.report.baselines.setdefault(task, {}).setdefault(str(t.get("workload")), [])
            same = next(
                (
                    b
                    for b in rows
                    if (b.eager_us, b.compile_us, b.compile_mode, b.protocol, b.device)
                    == (got.eager_us, got.compile_us, got.compile_mode, got.protocol, got.device)
                ),
                None,
            )
            if same is None:
                rows.append(got)
            else:
                same.seen_in.append(step)


class Session:
    """One flow's client: every call timed, bounded, and recorded."""

    def __init__(self, runner: Runner, flow: FlowReport, client: Client) -> None:
        self.r = runner
        self.flow = flow
        self.c = client

    def skip(self, step: str, why: str) -> None:
        self.flow.skipped.append(Skipped(step=step, why=why))
        self.r.save()

    async def _bounded(
        self,
        step: str,
        kind: Literal["tool", "prompt", "eval_py"],
        name: str,
        bound_key: str,
        run: Callable[[ProgressFnT], Awaitable[T]],
        expected: str,
    ) -> tuple[CallRecord, T | None]:
        bound = float(self.r.args.bounds.get(bound_key, FALLBACK_BOUND_S))
        left = self.r.budget_left()
        if left <= 0:
            raise FlowStopped(f"--budget-s ({self.r.args.budget_s:.0f} s) spent before {step}")
        limit = min(bound, left + self.r.args.grace_s)
        notes: list[ProgressNote] = []
        t_call = time.monotonic()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            notes.append(
                ProgressNote(
                    t_s=round(time.monotonic() - t_call, 3), progress=progress, total=total, message=message
                )
            )

        started = round(self.r.elapsed(), 2)
        value: T | None = None
        outcome: Outcome = "ok"
        head = ""
        with anyio.move_on_after(limit) as scope:
            try:
                value = await run(on_progress)
            except Exception as e:  # the server went away, a protocol error: recorded, the flow decides
                outcome, head = "failed", f"{type(e).__name__}: {e}"[:600]
        took = time.monotonic() - t_call
        if scope.cancelled_caught:
            outcome = "hang" if limit >= bound else "cut"
            head = f"no answer within {limit:.0f} s: cancelled" + (
                "" if outcome == "hang" else f" (--budget-s cut it short of its {bound:.0f} s bound)"
            )
        rec = CallRecord(
            flow=self.flow.name,
            step=step,
            kind=kind,
            name=name,
            started_s=started,
            seconds=round(took, 3),
            bound_s=bound,
            limit_s=round(limit, 1),
            within_bound=took <= bound and outcome != "hang",
            outcome=outcome,
            expected=expected,
            progress=notes,
            text_head=head,
        )
        self.flow.calls.append(rec)
        self.r.save()
        return rec, value

    def said(self, rec: CallRecord) -> None:
        """The call's line on the console, once its outcome is settled (an error result is known only after)."""
        self.r.save()
        print(
            f"[{self.flow.name}] {rec.step}: {rec.outcome} in {rec.seconds:.2f} s ({len(rec.progress)} progress)",
            flush=True,
        )

    async def tool(
        self, step: str, name: str, args: dict[str, Any], *, required: bool = False, expected: str = ""
    ) -> dict[str, Any] | None:
        """The tool's structured content, or None (an error result, a hang, a failure); `required`: stop the
        flow when it is None."""

        async def run(
            progress: ProgressFnT,
        ) -> CallToolResult:
            return await self.c.call_tool(name, args, progress_callback=progress)

        rec, res = await self._bounded(step, "tool", name, name, run, expected)
        out: dict[str, Any] | None = None
        if res is not None:
            text = texts_of(res)
            rec.text_head = text[:600]
            if res.is_error:
                rec.outcome = "error"
            else:
                out = dict(res.structured_content or {})
                rec.detail = _detail(out)
                if name == "benchmark":
                    task = self.flow.extra.get("task_of", {}).get(
                        step, self.flow.extra.get("task_key", self.flow.task)
                    )
                    self.r.note_baselines(task, step, out)
        self.said(rec)
        if out is None and required:
            raise FlowStopped(f"{step} did not answer with a result ({rec.outcome}: {rec.text_head[:200]})")
        return out

    async def prompt(self, step: str, name: str, args: dict[str, str]) -> str | None:
        async def run(_progress: ProgressFnT) -> str:
            got = await self.c.get_prompt(name, args)
            return "\n".join(str(getattr(m.content, "text", "")) for m in got.messages)

        rec, text = await self._bounded(step, "prompt", name, "prompt", run, "")
        if text is not None:
            rec.detail = {"chars": len(text)}
            # what the reading said of the machine and the baselines (the lines a host reads first)
            rec.text_head = "\n".join(
                ln for ln in text.splitlines() if re.search(r"hardware|being measured|baseline|GPU", ln)
            )[:1200]
        self.said(rec)
        return text


def _detail(out: dict[str, Any]) -> dict[str, Any]:
    """The few fields of a result that say what happened (the whole result stays in the server's database)."""
    d: dict[str, Any] = {}
    ev = out.get("evaluation")
    if isinstance(ev, dict):
        d.update(
            status=ev.get("status"),
            seconds=ev.get("seconds"),
            seconds_by_step=ev.get("seconds_by_step"),
            speedup_vs_eager=ev.get("speedup_vs_eager"),
            speedup_vs_compile=ev.get("speedup_vs_compile"),
            pure_pytorch=ev.get("pure_pytorch"),
            device=(ev.get("env") or {}).get("device"),
            env=ev.get("env"),
            times_us={t["workload"]: round(t["median_us"], 2) for t in ev.get("timings") or []},
        )
    for k in ("attempt_id", "candidate_id", "best_attempt_id", "chosen_by", "skipped", "filename", "status"):
        if k in out:
            d[k] = out[k]
    if "rows" in out:  # final_evaluation
        d["rows"] = [
            {
                k: r.get(k)
                for k in (
                    "attempt_id",
                    "status",
                    "speedup_vs_eager",
                    "speedup_vs_compile",
                    "device",
                    "seconds",
                )
            }
            for r in out["rows"]
        ]
    if isinstance(out.get("node"), dict):
        d["node_id"] = out["node"].get("id")
    return d


def _language(source: str) -> str:
    return "cpp_ext" if "load_inline" in source or "cpp_extension" in source else "triton"


# ------------------------------------------------------------------------------------------------- flows


async def flow_trimul(s: Session, gpu: bool) -> None:
    a = s.r.args
    task: Path = a.trimul_task  # resolved in main()
    if not (task / "task.yml").is_file():
        raise FlowStopped(
            f"no GPU MODE task folder at {task} (see bench/run_h200.sh: carry .ext/reference-kernels)"
        )
    names = [n for n in a.trimul_kernels.split(",") if n]
    cand_dir = Path(a.trimul_candidates) if a.trimul_candidates else None
    if cand_dir is None or not cand_dir.is_dir():
        cand_dir = next((d for d in TRIMUL_CANDIDATE_DIRS if d.is_dir()), None)
    files = [cand_dir / f"{n}.py" for n in names if cand_dir and (cand_dir / f"{n}.py").is_file()]
    s.flow.extra["candidates"] = [str(f) for f in files]
    if not files:
        raise FlowStopped(f"none of {names} under {a.trimul_candidates or TRIMUL_CANDIDATE_DIRS}")
    await s.tool(
        "create_search", "create_search", {"task": str(task), "name": "trimul", "rounds": 1}, required=True
    )
    # at once, no wait: the reading's background hardware measurement and the first benchmark race for the worker
    await s.prompt("analyse_kernel (at once)", "analyse_kernel", {"search": "trimul"})
    await s.tool(
        "propose_intents",
        "propose_intents",
        {
            "search": "trimul",
            "intents": [
                {
                    "title": "published TriMul kernels as they stand",
                    "rationale": "known good kernels: measure them before writing new ones",
                }
            ],
        },
        required=True,
    )
    sel = await s.tool("select_action", "select_action", {"search": "trimul"}, required=True)
    node = int((sel or {}).get("node", {}).get("id", 2))
    for i, f in enumerate(files):
        if not gpu and i > 0:
            s.skip(
                f"benchmark {f.stem}",
                "no GPU: TriMul's inputs are made on CUDA (the first one shows the refusal)",
            )
            continue
        src = f.read_text()
        await s.tool(
            f"benchmark {f.stem}",
            "benchmark",
            {"search": "trimul", "node_id": node, "candidate": {"source": src, "language": _language(src)}},
            expected="" if gpu else "refused at once: the task needs a GPU",
        )
    await s.tool(
        "finish_intent", "finish_intent", {"search": "trimul", "node_id": node, "reason": "measured"}
    )
    if not gpu:
        for step in ("final_evaluation", "export_kernel submission", "eval.py on the export"):
            s.skip(step, "no GPU: nothing of TriMul can be checked or timed here")
        return
    await s.tool("final_evaluation", "final_evaluation", {"search": "trimul", "top_k": min(3, len(files))})
    exp = await s.tool(
        "export_kernel submission", "export_kernel", {"search": "trimul", "format": "submission"}
    )
    if exp is None:
        s.skip("eval.py on the export", "export_kernel gave no file")
        return
    if not (task / "eval.py").is_file() or a.no_eval_py:
        s.skip("eval.py on the export", "the folder has no eval.py" if not a.no_eval_py else "--no-eval-py")
        return
    await eval_py(s, task, str(exp.get("text", "")))


async def eval_py(s: Session, task: Path, submission: str) -> None:
    """GPU MODE's own eval.py (benchmark mode) on the exported submission.py, in a thread, time-bounded."""
    sys.path.append(
        str(HERE)
    )  # bench/gpumode_side_by_side.py (mcp is imported already: bench/mcp.py cannot shadow it)
    from gpumode_side_by_side import run_gpumode_eval, task_yml

    names = [f"bench{i}" for i in range(len(task_yml(task).get("benchmarks") or []))]
    bound = float(s.r.args.bounds.get("eval_py", 300))
    inner = max(10.0, min(bound, s.r.budget_left() + s.r.args.grace_s) - 5)  # its own timeout first

    async def run(_p: ProgressFnT) -> dict[str, Any]:
        got: dict[str, Any] = await anyio.to_thread.run_sync(
            run_gpumode_eval, task, submission, names, inner, abandon_on_cancel=True
        )
        return got

    rec, got = await s._bounded("eval.py on the export", "eval_py", "eval.py", "eval_py", run, "")
    if got is not None:
        rec.detail = {k: v for k, v in got.items() if k != "tail"}
        rec.text_head = str(got.get("tail", ""))[-600:]
        if got.get("check") not in ("pass", None) or got.get("rc") not in (0, None):
            rec.outcome = "error"
    s.said(rec)


async def flow_kb(s: Session, gpu: bool) -> None:
    """Three KernelBench-format searches in one database, their calls interleaved."""
    names = {t: f"kb-{t.replace('_', '-')}" for t in KB_TASKS}
    for t in KB_TASKS:
        await s.tool(
            f"create_search {t}",
            "create_search",
            {"task": str(TASKS_DIR / f"{t}.py"), "name": names[t], "rounds": 1},
            required=True,
        )
    nodes: dict[str, int] = {}
    for t in KB_TASKS:
        await s.tool(
            f"propose_intents {t}",
            "propose_intents",
            {
                "search": names[t],
                "intents": [
                    {
                        "title": "one program per row or output tile, fp32 accumulation",
                        "rationale": "a plain Triton kernel first, the reference's own ops as the yardstick",
                        "priority": 0.8,
                    }
                ],
            },
            required=True,
        )
    for t in KB_TASKS:
        sel = await s.tool(f"select_action {t}", "select_action", {"search": names[t]}, required=True)
        nodes[t] = int((sel or {}).get("node", {}).get("id", 2))
    attempts: dict[str, int] = {}
    for kind in ("triton", "reference"):
        for t in KB_TASKS:
            step = f"benchmark {t} ({kind})"
            s.flow.extra.setdefault("task_of", {})[step] = t
            if kind == "triton":
                src = (TASKS_DIR / "candidates" / f"{t}.py").read_text()
            else:  # the reference as a candidate: ksearch records it as pure PyTorch, never a best
                src = (TASKS_DIR / f"{t}.py").read_text() + (
                    '\n\nclass ModelNew(Model):\n    """The reference itself, as a candidate."""\n'
                )
            got = await s.tool(
                step,
                "benchmark",
                {"search": names[t], "node_id": nodes[t], "candidate": {"source": src, "language": "triton"}},
                expected="" if kind == "triton" else "recorded as pure PyTorch",
            )
            if got and kind == "triton" and got.get("attempt_id"):
                attempts[t] = int(got["attempt_id"])
    for t in KB_TASKS:
        await s.tool(
            f"finish_intent {t}",
            "finish_intent",
            {
                "search": names[t],
                "node_id": nodes[t],
                "reason": "the plain kernel is measured; enough for this flow",
            },
        )
    await s.tool(f"final_evaluation {KB_FINAL}", "final_evaluation", {"search": names[KB_FINAL], "top_k": 2})
    exp: dict[str, Any] = {"search": names[KB_FINAL], "format": "kernelbench"}
    if not gpu and KB_FINAL in attempts:
        exp["attempt"] = attempts[KB_FINAL]  # no GPU, no best: a correct attempt by number
    await s.tool(f"export_kernel {KB_FINAL}", "export_kernel", exp)


ONLINE_SOFTMAX = '''"""Softmax, one program per row: the max and the sum of exponentials in one pass (online: the running sum
is rescaled when the max grows), then one pass that writes."""

import torch
import triton
import triton.language as tl

BLOCK_N = 2048


@triton.jit
def _softmax_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], -1e30, tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-1e30)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.where(mask, tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-1e30)
        tl.store(y_row + start + cols, tl.exp(x - row_max) / denom, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _softmax_online[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK_N=BLOCK_N, num_warps=8)
        return y
'''


async def flow_quickstart(s: Session, gpu: bool) -> None:
    """The README's walk-through ("A search driven by the assistant") on the built-in softmax, as MCP calls."""
    q = "quickstart"
    await s.tool("create_search", "create_search", {"task": "softmax", "name": q, "rounds": 1}, required=True)
    await s.tool(
        "benchmark seed (root)", "benchmark", {"search": q, "node_id": 1, "candidate": {"seed": True}}
    )
    await s.prompt("analyse_kernel", "analyse_kernel", {"search": q})
    await s.tool(
        "edit_tree (root notes)",
        "edit_tree",
        {
            "search": q,
            "edits": [
                {"op": "update", "node_id": 1, "notes": "memory-bound: the seed reads each row three times"}
            ],
        },
    )
    await s.tool(
        "propose_intents",
        "propose_intents",
        {
            "search": q,
            "intents": [
                {
                    "title": "online softmax: max and sum in one pass",
                    "rationale": "two reads of each row instead of three",
                    "priority": 0.9,
                    "difficulty": 2,
                    "expected_speedup": 1.3,
                },
                {
                    "title": "keep the whole row in registers",
                    "rationale": "one read when a row fits",
                    "priority": 0.6,
                    "difficulty": 3,
                    "expected_speedup": 1.5,
                },
            ],
        },
        required=True,
    )
    sel = await s.tool("select_action", "select_action", {"search": q}, required=True)
    node = int((sel or {}).get("node", {}).get("id", 2))
    await s.prompt("implement_intent", "implement_intent", {"search": q})
    cand = {"source": ONLINE_SOFTMAX, "language": "triton"}
    await s.tool("compile_kernel", "compile_kernel", {"search": q, "candidate": cand})
    await s.tool("run_correctness", "run_correctness", {"search": q, "candidate": cand})
    await s.tool("benchmark attempt", "benchmark", {"search": q, "node_id": node, "candidate": cand})
    await s.tool(
        "finish_intent",
        "finish_intent",
        {
            "search": q,
            "node_id": node,
            "reason": "one pass fewer over each row; the registers idea stays open",
        },
    )
    await s.tool(
        "select_action (budget spent)",
        "select_action",
        {"search": q},
        expected="refused: the round budget is spent, final_evaluation is next",
    )
    fin = await s.tool("final_evaluation", "final_evaluation", {"search": q})
    exp: dict[str, Any] = {"search": q, "format": "kernelbench"}
    rows = (fin or {}).get("rows") or []
    if not gpu and rows:
        exp["attempt"] = rows[0]["attempt_id"]  # no GPU, no best: a correct attempt by number
    await s.tool("export_kernel", "export_kernel", exp)


# flow -> (what it runs on, the task key its baselines are filed under, the flow)
FLOWS: dict[str, tuple[str, str, Callable[[Session, bool], Awaitable[None]]]] = {
    "trimul": ("GPU MODE problems/bioml/trimul", "trimul", flow_trimul),
    "kb": (", ".join(f"bench/host_flow_tasks/{t}.py" for t in KB_TASKS), "kb", flow_kb),
    "quickstart": ("softmax (built-in)", "softmax", flow_quickstart),
}


async def play(runner: Runner, name: str, gpu: bool, work: Path, logs: Path) -> None:
    label, key, fn = FLOWS[name]
    db = work / f"{name}.db"
    cmd = [sys.executable, "-m", "ksearch.server.cli", "serve", "--db", str(db)]
    server_log = logs / f"{name}.serve.log"  # each call's start, phases and end
    cmd += ["--log", str(server_log)]
    stderr_path = logs / f"{name}.stderr.log"
    flow = FlowReport(
        name=name,
        task=label,
        db=str(db),
        server_command=cmd,
        server_log=str(server_log),
        server_stderr=str(stderr_path),
        extra={"task_key": key},
    )
    runner.report.flows.append(flow)
    runner.save()
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=str(ROOT))
    try:
        with stderr_path.open("w") as errlog:
            # no read timeout of the client's own: each call's bound is the watchdog's
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=None) as client:
                try:
                    await fn(Session(runner, flow, client), gpu)
                    flow.outcome = "completed"
                except FlowStopped as e:  # caught here: the client's task group would wrap it in a group
                    flow.outcome = f"stopped: {e}"
    except Exception as e:  # the server could not start, or its connection broke: said, the next flow runs
        flow.outcome = f"failed: {type(e).__name__}: {e}"[:1000]
    flow.seconds = round(time.monotonic() - t0, 2)
    print(f"[{name}] {flow.outcome} in {flow.seconds:.1f} s", flush=True)
    runner.save()


def parse_bounds(items: list[str]) -> dict[str, float]:
    out = dict(DEFAULT_BOUNDS_S)
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise SystemExit(f"--bound takes TOOL=SECONDS (tools: {', '.join(out)}), got {it!r}")
        out[k.strip()] = float(v)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", default="trimul,kb,quickstart", help=f"comma-separated, of {', '.join(FLOWS)}")
    ap.add_argument("--budget-s", type=float, default=540.0, help="no call starts past this many seconds")
    ap.add_argument(
        "--grace-s", type=float, default=20.0, help="a call running at --budget-s is cut this later"
    )
    ap.add_argument("--bound", action="append", default=[], metavar="TOOL=SECONDS", help="a call's bound")
    ap.add_argument("--smoke", action="store_true", help="CPU: skip what needs a GPU (implied without one)")
    ap.add_argument("--out", type=Path, default=None, help="default bench/results/host-flow-<machine>.json")
    ap.add_argument("--machine", default=None, help="the <machine> of the default --out (h200, cpu2...)")
    ap.add_argument(
        "--log-dir", type=Path, default=None, help="server logs (default: a new temporary folder)"
    )
    ap.add_argument(
        "--work", type=Path, default=None, help="the flows' databases (default: a new temporary folder)"
    )
    ap.add_argument("--trimul-task", default=str(DEFAULT_TRIMUL))
    ap.add_argument(
        "--trimul-candidates", default=None, help="folder of published kernels (default: .ext/K-Search/...)"
    )
    ap.add_argument("--trimul-kernels", default=DEFAULT_TRIMUL_KERNELS, help="their file stems, in order")
    ap.add_argument("--no-eval-py", action="store_true", help="do not run GPU MODE's eval.py on the export")
    a = ap.parse_args(argv)
    a.bounds = parse_bounds(a.bound)
    a.trimul_task = Path(a.trimul_task).resolve()
    flows = [f for f in a.flows.split(",") if f]
    unknown = [f for f in flows if f not in FLOWS]
    if unknown:
        ap.error(f"unknown flow(s) {unknown}; the flows: {', '.join(FLOWS)}")
    facts = machine_facts()
    gpu = bool(facts["gpus"]) and not os.environ.get("KSEARCH_CPU_MODE") and not a.smoke
    smoke = not gpu
    out = a.out or ROOT / "bench" / "results" / f"host-flow-{a.machine or machine_label(facts, gpu)}.json"
    work = a.work or Path(tempfile.mkdtemp(prefix="host-flow-"))
    logs = a.log_dir or work / "logs"
    work.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    report = Report(
        command=[sys.executable, *sys.argv],
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        commit=provenance.commit(),
        dirty=provenance.dirty(),
        machine=facts,
        smoke=smoke,
        budget_s=a.budget_s,
        grace_s=a.grace_s,
        bounds_s=a.bounds,
    )
    runner = Runner(a, report, out)
    runner.save()

    async def run_all() -> None:
        for name in flows:
            if runner.budget_left() <= 0:
                report.flows.append(
                    FlowReport(
                        name=name,
                        task=FLOWS[name][0],
                        db="",
                        server_command=[],
                        server_stderr="",
                        outcome="not started: --budget-s spent",
                    )
                )
                continue
            await play(runner, name, gpu, work, logs)

    anyio.run(run_all)
    report.finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    runner.save()
    print(
        f"{report.calls} calls, {report.hangs} past their bound, {report.progress_notifications} progress "
        f"notifications, {report.wall_s} s -> {out}",
        flush=True,
    )
    return 1 if report.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
