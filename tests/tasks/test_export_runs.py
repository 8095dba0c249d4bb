"""Exported kernels run by their task owners' own evaluators, in a Python where ksearch cannot be imported.

On the CPU: a search's attempt, correct on the Triton interpreter, goes out through `ksearch export --submission
--attempt N` into a staged GPU MODE folder whose eval.py (tests/tasks/fixtures/gpumode/eval_runs.py, GPU MODE's
protocol) runs it; a KernelBench ModelNew export goes through KernelBench's loading and correctness steps
(tests/tasks/kernelbench_cpu_eval.py: KernelBench's own functions where its copy is at .ext/kb, with `requests`
installed). A search at KernelBench precision fp16 checks its candidates on fp16 inputs and weights, as KernelBench does.
On a GPU: GPU MODE's real eval.py (a copy of reference-kernels at .ext/reference-kernels) and KernelBench's real
`eval_kernel_against_ref` run exported CUDA kernels, their NVRTC launcher written in.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.export_kernel import ExportKernelIn, export_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import EvalSettings, Evaluation, SearchConfig, WorkloadCorrectness
from ksearch.worldmodel.store import Store
from tests.fixtures.cli import ksearch_cli

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"
SCALED_ADD = FIX / "gpumode" / "scaled_add"
ROW_SCALE = FIX / "kernelbench" / "l1_row_scale.py"
EVAL_RUNS = FIX / "gpumode" / "eval_runs.py"
KB_CPU_EVAL = Path(__file__).parent / "kernelbench_cpu_eval.py"
KB_SRC = ROOT / ".ext" / "kb" / "src" / "kernelbench"
PMPP = ROOT / ".ext" / "reference-kernels" / "problems" / "pmpp_v2"
HAVE_KB = (KB_SRC / "eval.py").is_file() and importlib.util.find_spec("requests") is not None

SCALED_ADD_TRITON = """import triton
import triton.language as tl


@triton.jit
def _scaled_add(a, b, out, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=m) * scale + tl.load(b + offs, mask=m), mask=m)


def custom_kernel(data):
    a, b, scale, out = data
    _scaled_add[(triton.cdiv(a.numel(), 256),)](a, b, out, scale, a.numel(), BLOCK=256)
    return out
"""

# Checks what it is given: at KernelBench precision fp16 its input and its weight arrive in fp16
ROW_SCALE_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_scale(x, s, out, n, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * tl.load(s + offs % dim, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        assert x.dtype == torch.float16 and self.scale.dtype == torch.float16, (x.dtype, self.scale.dtype)
        x = x.contiguous()
        out = torch.empty_like(x)
        _row_scale[(triton.cdiv(x.numel(), 128),)](x, self.scale, out, x.numel(), x.shape[-1], BLOCK=128)
        return out
"""

GRAYSCALE_CUDA = '''import torch

from ksearch.gpu import nvrtc

SRC = r"""
extern "C" __global__ void gray(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.2989f * x[3 * i] + 0.5870f * x[3 * i + 1] + 0.1140f * x[3 * i + 2];
}
"""
_kernel = None


def custom_kernel(data):
    global _kernel
    x, y = data
    if _kernel is None:
        _kernel = nvrtc.compile(SRC, "gray")
    n = y.numel()
    _kernel.launch(grid=((n + 255) // 256,), block=(256,), args=[x.contiguous(), y, nvrtc.i64(n)])
    return y
'''

ROW_SCALE_CUDA = '''import torch
import torch.nn as nn

from ksearch.gpu import nvrtc

SRC = r"""
extern "C" __global__ void row_scale(const float* x, const float* s, float* y, long long n, int dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s[i % dim];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))
        self.kernel = None

    def forward(self, x):
        if self.kernel is None:
            self.kernel = nvrtc.compile(SRC, "row_scale")
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        self.kernel.launch(grid=((n + 255) // 256,), block=(256,), args=[x, self.scale, out, nvrtc.i64(n), x.shape[-1]])
        return out
'''

# Imported first by every Python started with its folder on PYTHONPATH (spawned workers too): ksearch is not there
NO_KSEARCH = """import sys


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("ksearch", "gpu"):
            raise ImportError(f"{name}: ksearch is not installed where the owner's evaluator runs")
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=120.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


def outside_env(tmp: Path, *, interpret: bool) -> dict[str, str]:
    """The environment of an evaluator run: nothing of ksearch importable, Triton's interpreter on a CPU."""
    blocker = tmp / "no-ksearch"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(NO_KSEARCH)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POPCORN_SEED", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = str(blocker)
    env["TRITON_CACHE_DIR"] = str(tmp / "triton-cache")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def stage(folder: Path, submission: str, dst: Path, eval_py: Path | None = None) -> Path:
    """A GPU MODE task folder as its platform lays it out: the files task.yml lists, the submission among them."""
    raw = yaml.safe_load((folder / "task.yml").read_text())
    dst.mkdir(parents=True)
    for entry in raw.get("files") or []:
        name, source = str(entry["name"]), str(entry["source"])
        if source == "@SUBMISSION@":
            (dst / name).write_text(submission)
        elif not (name == "eval.py" and eval_py is not None):
            (dst / name).write_bytes((folder / source).read_bytes())
    if eval_py is not None:
        (dst / "eval.py").write_bytes(eval_py.read_bytes())
    return dst


def run_eval(
    work: Path, mode: str, cases: list[dict[str, Any]], env: dict[str, str]
) -> tuple[int, dict[str, str]]:
    """`python eval.py MODE cases.txt` as the platform runs it: the cases as `name: value; ...` lines, results
    read back from the file descriptor in POPCORN_FD."""
    (work / "cases.txt").write_text(
        "".join("; ".join(f"{k}: {v}" for k, v in c.items()) + "\n" for c in cases)
    )
    log = work / "popcorn.txt"
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, "eval.py", mode, "cases.txt"],
            cwd=work,
            env={**env, "POPCORN_FD": str(f.fileno())},
            pass_fds=(f.fileno(),),
            capture_output=True,
            text=True,
            timeout=600,
        )
    fields = {}
    for line in log.read_text().splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            fields[key.strip()] = value.strip()
    assert fields, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.returncode, fields


async def correct_on_the_cpu(
    ws: Workspace, task: Path, name: str, source: str, precision: str | None = None
) -> int:
    """A search on `task` and one attempt of `source`, evaluated by the real sandbox (the CPU interpreter)."""
    await create_search(ws, CreateSearchIn(task=str(task), name=name, seed=5, precision=precision))
    out = await benchmark(ws, BenchmarkIn(search=name, candidate=CandidateRef(source=source)))
    assert out.evaluation.status == "ok" and out.evaluation.cpu_interpreted, out.summary
    return out.attempt_id


# ---------------------------------------------------------------- on the CPU


@pytest.mark.cpu
@pytest.mark.slow
@pytest.mark.anyio
async def test_a_cpu_attempt_exported_as_a_submission_passes_the_folders_own_eval(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    db = tmp_path / "k.db"
    async with await Store.open(db) as store:
        attempt = await correct_on_the_cpu(Workspace(store, sandbox), SCALED_ADD, "sa", SCALED_ADD_TRITON)
    work = tmp_path / "task"
    stage(SCALED_ADD, "", work, eval_py=EVAL_RUNS)
    refused = ksearch_cli(tmp_path, "export", "sa", "--submission", "--db", str(db))
    assert (
        refused.returncode == 1
        and "1 correct, none timed on a GPU; pick one with --attempt N" in " ".join(refused.stderr.split())
    )
    said = ksearch_cli(
        tmp_path,
        "export",
        "sa",
        "--submission",
        "--attempt",
        str(attempt),
        "-o",
        str(work / "submission.py"),
        "--db",
        str(db),
    )
    assert said.returncode == 0, said.stderr
    assert f"attempt #{attempt} (triton): correct on the CPU interpreter, never timed on a GPU" in said.stderr
    text = (work / "submission.py").read_text()
    assert (
        "# status: correct on the CPU interpreter, never timed on a GPU" not in text
    )  # one header line says it all
    assert "status: correct on the CPU interpreter, never timed on a GPU" in text.splitlines()[1]
    env = outside_env(tmp_path, interpret=True)
    tests = yaml.safe_load((SCALED_ADD / "task.yml").read_text())["tests"]
    rc, fields = run_eval(work, "test", tests, env)
    assert rc == 0 and fields["check"] == "pass", fields
    assert [fields[f"test.{i}.status"] for i in range(len(tests))] == ["pass"] * len(tests)
    # the same folder fails a wrong kernel, and a file that needs ksearch cannot even be imported there
    (work / "submission.py").write_text(text.replace("* scale +", "* 2.0 +"))
    rc, fields = run_eval(work, "test", tests[:1], env)
    assert rc == 112 and fields["check"] == "fail" and "mismatches" in fields["test.0.error"], fields
    (work / "submission.py").write_text("from ksearch.gpu import nvrtc\n" + text)
    rc, _ = run_eval(work, "test", tests[:1], env)
    assert rc != 0


@pytest.mark.cpu
@pytest.mark.slow
@pytest.mark.anyio
async def test_a_kernelbench_export_passes_kernelbench_s_check_at_the_search_s_precision(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        ws = Workspace(store, sandbox)
        # the candidate insists on fp16 inputs and weights: at precision fp16 it gets them, as drawn it does not
        attempt = await correct_on_the_cpu(ws, ROW_SCALE, "fp16", ROW_SCALE_TRITON, precision="fp16")
        await create_search(ws, CreateSearchIn(task=str(ROW_SCALE), name="drawn", seed=5))
        drawn = await benchmark(
            ws, BenchmarkIn(search="drawn", candidate=CandidateRef(source=ROW_SCALE_TRITON))
        )
        assert drawn.evaluation.status != "ok" and "torch.float32" in (drawn.evaluation.error or ""), (
            drawn.summary
        )
        out = await export_kernel(ws, ExportKernelIn(search="fp16", format="kernelbench", attempt=attempt))
    assert any("evaluate with precision=fp16" in n for n in out.notes)
    new = tmp_path / out.filename
    new.write_text(out.text)
    env = outside_env(tmp_path, interpret=True)
    runs = [[]] + ([[str(KB_SRC)]] if HAVE_KB else [])  # the steps written out; KernelBench's own where it is
    for kb in runs:
        proc = subprocess.run(
            [sys.executable, str(KB_CPU_EVAL), str(ROW_SCALE), str(new), "fp16", *kb],
            env={**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], *map(str, _kb_deps_path())])},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        got = json.loads(proc.stdout.splitlines()[-1])
        assert got["ok"] and {t["dtype"] for t in got["trials"]} == {"torch.float16"}, got
        if kb:
            assert got["static"] == {"valid": True, "errors": [], "warnings": []}, got["static"]
        # at fp32 the same file fails KernelBench's run: its inputs and weights stay fp32
        bad = subprocess.run(
            [sys.executable, str(KB_CPU_EVAL), str(ROW_SCALE), str(new), "fp32", *kb],
            env={**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], *map(str, _kb_deps_path())])},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert bad.returncode != 0 and "torch.float32" in bad.stderr


def _kb_deps_path() -> list[Path]:
    """Where what KernelBench's eval imports (`requests`, `pydantic`) is installed, for the evaluator's Python
    (a PYTHONPATH folder, as on the GPU machine, is not on it otherwise; ksearch stays blocked there)."""
    out: list[Path] = []
    for name in ("requests", "pydantic"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            out.append(Path(spec.origin).parent.parent)
    return list(dict.fromkeys(out))


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_KB, reason="needs KernelBench's copy at .ext/kb and `requests`")
@pytest.mark.anyio
async def test_kernelbench_loads_an_nvrtc_export_with_its_build_directory_and_names_its_static_check(
    tmp_path: Path,
) -> None:
    """KernelBench's backend='cuda' loader exec()s the text after lines of its own; the static checker asks an
    NVRTC kernel for load_inline, as the export's note says."""
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await ws.store.create_search("nv", str(ROW_SCALE), SearchConfig())
        cand = await ws.store.put_candidate("from __future__ import annotations\n" + ROW_SCALE_CUDA, "cuda")
        ev = Evaluation(
            status="ok",
            correctness=[WorkloadCorrectness(workload="smoke", passed=True, kind="ok", trials=1)],
            settings=EvalSettings(seed=1),
        )
        a = await ws.store.record_attempt(s.id, (await ws.store.root(s.id)).id, cand.id, ev)
        out = await export_kernel(ws, ExportKernelIn(search="nv", format="kernelbench", attempt=a.id))
    assert any("check_kernel=False" in n for n in out.notes)
    script = (
        "import importlib, json, sys, types\n"
        # KernelBench's utils import its LLM clients, which its eval never calls: stand-ins where not installed
        "for name, attr in (('dotenv', 'load_dotenv'), ('tqdm', 'tqdm'), ('openai', 'OpenAI'), ('litellm', 'completion')):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        m = types.ModuleType(name); setattr(m, attr, lambda *a, **k: None); sys.modules[name] = m\n"
        "pkg = types.ModuleType('kernelbench'); pkg.__path__ = [sys.argv[1]]; sys.modules['kernelbench'] = pkg\n"
        "kb = importlib.import_module('kernelbench.eval')\n"
        "checker = importlib.import_module('kernelbench.kernel_static_checker')\n"
        "src = open(sys.argv[2]).read()\n"
        "valid, errors, warnings = checker.validate_kernel_static(src, backend='cuda', precision='fp32')\n"
        "model_new = kb.load_custom_model(src, {}, sys.argv[3])\n"
        "print(json.dumps({'errors': errors, 'loaded': model_new(96).scale.shape[0]}))\n"
    )
    new = tmp_path / out.filename
    new.write_text(out.text)
    env = outside_env(tmp_path, interpret=False)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *map(str, _kb_deps_path())])
    proc = subprocess.run(
        [sys.executable, "-c", script, str(KB_SRC), str(new), str(tmp_path / "build")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {
        "errors": ["Missing load_inline or cpp_extension for compilation"],
        "loaded": 96,
    }


# ---------------------------------------------------------------- on a GPU


async def _recorded(db: Path, task: Path, name: str, source: str, language: str) -> int:
    """A search whose only attempt is `source`, recorded as correct (the export picks it; the owner's evaluator
    below is what judges it)."""
    async with await Store.open(db) as store:
        s = await store.create_search(name, str(task), SearchConfig())
        cand = await store.put_candidate(source, language)
        ev = Evaluation(
            status="ok",
            correctness=[WorkloadCorrectness(workload="smoke", passed=True, kind="ok", trials=1)],
            settings=EvalSettings(seed=1),
        )
        return (await store.record_attempt(s.id, (await store.root(s.id)).id, cand.id, ev)).id


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(
    not (PMPP / "eval.py").is_file(), reason="needs a reference-kernels copy at .ext/reference-kernels"
)
@pytest.mark.anyio
async def test_gpu_mode_s_own_eval_runs_an_exported_nvrtc_kernel(tmp_path: Path) -> None:
    folder = PMPP / "grayscale_py"
    a = await _recorded(tmp_path / "k.db", folder, "gray", GRAYSCALE_CUDA, "cuda")
    work = stage(folder, "", tmp_path / "task")
    out = str(work / "submission.py")
    said = ksearch_cli(
        tmp_path,
        "export",
        "gray",
        "--submission",
        "--attempt",
        str(a),
        "-o",
        out,
        "--db",
        str(tmp_path / "k.db"),
    )
    assert said.returncode == 0, said.stderr
    tests = yaml.safe_load((folder / "task.yml").read_text())["tests"]
    rc, fields = run_eval(work, "test", tests, outside_env(tmp_path, interpret=False))
    assert rc == 0 and fields["check"] == "pass", fields


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not HAVE_KB, reason="needs KernelBench's copy at .ext/kb and `requests`")
@pytest.mark.anyio
async def test_kernelbench_s_own_evaluation_runs_exported_kernels(tmp_path: Path) -> None:
    ids = {}
    ids["cuda"] = await _recorded(tmp_path / "k.db", ROW_SCALE, "cuda", ROW_SCALE_CUDA, "cuda")
    ids["triton"] = await _recorded(
        tmp_path / "t.db",
        ROW_SCALE,
        "triton",
        ROW_SCALE_TRITON.replace(
            "        assert x.dtype == torch.float16 and self.scale.dtype == torch.float16, (x.dtype, self.scale.dtype)\n",
            "",
        ),
        "triton",
    )
    script = (
        "import importlib, json, sys, types\n"
        # KernelBench's utils import its LLM clients, which its eval never calls: stand-ins where not installed
        "for name, attr in (('dotenv', 'load_dotenv'), ('tqdm', 'tqdm'), ('openai', 'OpenAI'), ('litellm', 'completion')):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        m = types.ModuleType(name); setattr(m, attr, lambda *a, **k: None); sys.modules[name] = m\n"
        "pkg = types.ModuleType('kernelbench'); pkg.__path__ = [sys.argv[1]]; sys.modules['kernelbench'] = pkg\n"
        "kb = importlib.import_module('kernelbench.eval')\n"
        "r = kb.eval_kernel_against_ref(open(sys.argv[2]).read(), open(sys.argv[3]).read(), num_correct_trials=5,\n"
        "    backend=sys.argv[4], build_dir=sys.argv[5])\n"
        "print(json.dumps({'compiled': r.compiled, 'correctness': r.correctness}))\n"
    )
    env = outside_env(tmp_path, interpret=False)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *map(str, _kb_deps_path())])
    for db, backend in (("k.db", "cuda"), ("t.db", "triton")):
        new = tmp_path / f"{backend}.py"
        said = ksearch_cli(
            tmp_path,
            "export",
            backend,
            "--kernelbench",
            "--attempt",
            str(ids[backend]),
            "-o",
            str(new),
            "--db",
            str(tmp_path / db),
        )
        assert said.returncode == 0, said.stderr
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                str(KB_SRC),
                str(ROW_SCALE),
                str(new),
                backend,
                str(tmp_path / "build"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json.loads(proc.stdout.splitlines()[-1]) == {"compiled": True, "correctness": True}, (
            proc.stdout[-2000:]
        )
        assert torch.cuda.is_available()
