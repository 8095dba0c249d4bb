"""profile_model and plug_back called directly, on the CPU, with real components: a small transformer (two blocks of
RMSNorm, attention by matmul and softmax, a GELU MLP: tests/fixtures/model_block.py) profiled in its own process,
its operators found, ranked and written as task files that load and pass their check; its kernels (a Triton one among
them: tests/fixtures/model_kernels.py) plugged back from a folder shaped as `ksearch suite export` writes it and from
a suite in a real database, checked against the original model; a wrong kernel refused with the reason; bad input
refused saying what was wrong and what is accepted."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.tools.errors import ToolFailure
from ksearch.tools.model import ModelProfileOut, PlugBackIn, ProfileModelIn, plug_back, profile_model
from ksearch.tools.suites.suite import SuiteIn, create_suite, mark
from ksearch.tools.tasks import CheckTaskIn, check_task
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import CPU_INTERPRETER, SearchConfig
from tests.fixtures import evals
from tests.fixtures.model_kernels import ADD_RMSNORM, LINEAR_GELU, MODEL_BLOCK, kernel_folder

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(900)]

OPERATORS = {"Linear", "Linear + GELU", "add + RMSNorm", "RMSNorm", "matmul", "softmax", "mul"}


@pytest.fixture(scope="module")
async def profiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[ModelProfileOut, Path]]:
    """The block profiled once for the module, every operator written (top 9: all of them), facts derived."""
    out = tmp_path_factory.mktemp("model") / "ops"
    r = await profile_model(ProfileModelIn(model=MODEL_BLOCK, out=str(out), top=9))
    yield r, out


async def test_the_block_s_operators_are_found_ranked_and_written(
    profiled: tuple[ModelProfileOut, Path],
) -> None:
    r, out = profiled
    assert r.timed == "cpu" and "CPU time" in r.text and "not GPU time" in r.text
    assert {row.label for row in r.rows} == OPERATORS
    by = {Path(row.task).stem: row for row in r.rows if row.task}
    assert len(by) == len(r.rows) == len(r.written) == 9
    # the fusible pairs: fc1 with its GELU (alone consumes fc1's output), each residual add with the norm of its sum
    fused = by["add_rmsnorm_2x16x64"]
    assert fused.kind == "add_norm" and fused.calls == 4
    assert "blocks.0 (add) -> blocks.0.norm2" in fused.sites and "blocks.1 (add) -> norm" in fused.sites
    assert fused.inputs == ["2x16x64 float32", "2x16x64 float32"] and len(fused.outputs) == 2
    assert by["linear_gelu_2x16x64"].kind == "linear_act" and by["linear_gelu_2x16x64"].calls == 2
    assert by["linear_2x16x64"].calls == 8  # q, k, v and o of both blocks: one task
    assert by["rmsnorm_2x16x64"].sites == ["blocks.0.norm1"]  # the only norm not after an add
    # ranked by share of time, hottest first; each written task computes what the model computed at its site
    shares = [row.share for row in r.rows]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1.0 + 1e-9
    assert all(row.faithful_max_abs is not None and row.faithful_max_abs < 1e-6 for row in r.rows)
    # the facts of each task: its bound on an H200 (no GPU here, so no headroom)
    assert fused.bound == "memory" and fused.roofline_us and fused.roofline_us > 0
    assert all(row.headroom is None for row in r.rows) and "datasheet" in r.ceilings
    # what the files hold: the model's own RMSNorm copied in, the add and the norm fused, operands as transposed
    text = (out / "add_rmsnorm_2x16x64.py").read_text()
    assert "class RMSNorm(nn.Module)" in text and "return self.norm(h), h" in text
    assert "def get_init_inputs():" in text and "size_0 = 64" in text
    strided = [p for p in out.glob("matmul_*.py") if ".permute(" in p.read_text()]
    assert len(strided) == 2  # q @ k^T and att @ v take views that are not contiguous: drawn so
    listed = (out / "tasks.txt").read_text().split("\n", 1)[1].split()
    assert listed == [Path(p).name for p in r.written]
    assert r.suite_command == f"ksearch suite run {out / 'tasks.txt'} --name model_block-ops"
    assert "--plug-back model_block-ops" in r.plug_back_command and "ksearch suite run" in r.next


async def test_each_written_task_loads_and_passes_its_check(profiled: tuple[ModelProfileOut, Path]) -> None:
    r, _ = profiled
    sem = asyncio.Semaphore(2)

    async def one(path: str) -> tuple[str, bool, str | None]:
        async with sem:
            task = load_task(path)
            assert task.style == "kernelbench" and task.candidate_entry == "ModelNew"
            c = await check_task(CheckTaskIn(task=path))
            return path, c.ok, c.error

    results = await asyncio.gather(*(one(p) for p in r.written))
    assert [x for x in results if not x[1]] == []


def _import(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(f"_plugged_{abs(hash(str(path)))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


async def test_correct_kernels_are_plugged_checked_and_timed(
    profiled: tuple[ModelProfileOut, Path], tmp_path: Path
) -> None:
    _, out = profiled
    folder = kernel_folder(
        tmp_path / "kernels", "add_rmsnorm_2x16x64", "linear_gelu_2x16x64", "softmax_2x4x16x16"
    )
    target = tmp_path / "plugged" / "block_plugged.py"
    r = await plug_back(
        PlugBackIn(model=MODEL_BLOCK, out=str(out), kernels=str(folder), plugged=str(target), budget_s=0.1)
    )
    assert r.ok and r.error is None and r.check is not None and r.check.ok, r.text
    by = {t.task: t for t in r.tasks}
    assert {t for t, row in by.items() if row.status == "plugged"} == {
        "add_rmsnorm_2x16x64",
        "linear_gelu_2x16x64",
        "softmax_2x4x16x16",
    }
    assert "no kernel for it in" in by["rmsnorm_2x16x64"].reason
    # every site called its kernel in the checked forward, none fell back to the original
    assert [(by[t].hits, by[t].fallbacks) for t in ("add_rmsnorm_2x16x64", "linear_gelu_2x16x64")] == [
        (4, 0),
        (2, 0),
    ]
    assert all(
        row.max_abs is not None and row.max_abs < 1e-5 for row in by.values() if row.status == "plugged"
    )
    assert r.check.max_abs < 1e-4 and r.check.atol == pytest.approx(10 * 1.0001e-4, rel=1e-3)
    # the CPU's timings, said as such: a median with its CI and n, never a speedup claim
    assert r.eager is not None and r.plugged is not None and r.eager.clock == "cpu-wall" and r.eager.n >= 5
    assert r.vs_eager is not None and r.vs_eager.verdict == "CPU timing: never called a speedup"
    assert r.compiled is None and "not a GPU one" in r.timing_note
    fused = by["add_rmsnorm_2x16x64"]
    assert fused.original is not None and fused.kernel_timing is not None and fused.speedup is not None
    assert f"plugged 3 of {len(r.tasks)} tasks" in r.text and "model check: ok" in r.text
    # the written file is a module a user imports: the model with the kernels in place, as the original computes
    assert r.plugged_file == str(target) and (target.parent / "block_plugged_kernels").is_dir()
    mod = _import(target)
    plugged = mod.load(device="cpu")  # type: ignore[attr-defined]
    src = _import(Path(MODEL_BLOCK))
    torch.manual_seed(0)
    original = src.Model(*src.get_init_inputs()).eval()  # type: ignore[attr-defined]
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        torch.testing.assert_close(plugged(x), original(x), atol=1e-4, rtol=1e-4)
    handle = mod.plug_model(original)  # type: ignore[attr-defined]
    with torch.no_grad():
        original(x)
    assert handle.counts()["add_rmsnorm_2x16x64"] == {"hits": 4, "fallbacks": 0}
    handle.unplug()
    assert "forward" not in vars(original.blocks[0].norm2)


async def test_a_wrong_kernel_is_refused_with_the_reason(
    profiled: tuple[ModelProfileOut, Path], tmp_path: Path
) -> None:
    _, out = profiled
    folder = kernel_folder(tmp_path / "kernels", "linear_gelu_2x16x64", "linear_2x16x256", "linear_2x16x64")
    r = await plug_back(
        PlugBackIn(
            model=MODEL_BLOCK, out=str(out), kernels=str(folder), plugged=str(tmp_path / "p.py"), timing=False
        )
    )
    by = {t.task: t for t in r.tasks}
    assert not r.ok and by["linear_gelu_2x16x64"].status == "plugged" and r.check is not None and r.check.ok
    wrong = by["linear_2x16x256"]
    assert wrong.status == "refused"
    assert "wrong at blocks.0.mlp.fc2" in wrong.reason and "beyond its task's tolerance" in wrong.reason
    assert "Not plugged" in wrong.reason
    names = by["linear_2x16x64"]
    assert names.status == "refused" and "lacks op.weight" in names.reason and "it has weight" in names.reason
    assert "linear_2x16x256: refused: wrong at" in r.text and r.plugged_file is not None
    # nothing right: nothing plugged, nothing written
    only = kernel_folder(tmp_path / "wrong", "linear_2x16x256")
    r2 = await plug_back(
        PlugBackIn(
            model=MODEL_BLOCK, out=str(out), kernels=str(only), plugged=str(tmp_path / "q.py"), timing=False
        )
    )
    assert not r2.ok and r2.plugged_file is None and not (tmp_path / "q.py").exists()
    assert r2.error is not None and r2.error.startswith("no kernel was plugged")


async def test_kernels_come_back_from_a_suite_s_searches(
    profiled: tuple[ModelProfileOut, Path], bare_ws: Workspace, tmp_path: Path
) -> None:
    r, out = profiled
    suite = await create_suite(bare_ws, SuiteIn(name="ops", sources=[r.tasks_list]))
    idx = {Path(t.task).stem: t.idx for t in suite.tasks}
    store = bare_ws.store
    # one search whose best was timed on a GPU, one run without a GPU (correct, never timed: no best)
    timed = await store.create_search("ops.add", str(out / "add_rmsnorm_2x16x64.py"), SearchConfig())
    cand = await store.put_candidate(ADD_RMSNORM, "triton")
    await store.record_attempt(timed.id, None, cand.id, evals.gpu_eval(1.4), round=0, author="llm:m")
    await mark(bare_ws, suite.id, idx["add_rmsnorm_2x16x64"], "done", search_id=timed.id)
    cpu = await store.create_search("ops.gelu", str(out / "linear_gelu_2x16x64.py"), SearchConfig())
    cand = await store.put_candidate(LINEAR_GELU, "triton")
    ev = evals.gpu_eval(1.0)
    for t in ev.timings:
        t.device = CPU_INTERPRETER
    ev.speedup_vs_eager = None
    await store.record_attempt(cpu.id, None, cand.id, ev, round=0, author="llm:m")
    await mark(bare_ws, suite.id, idx["linear_gelu_2x16x64"], "done", search_id=cpu.id)
    res = await plug_back(
        PlugBackIn(
            model=MODEL_BLOCK, out=str(out), kernels="ops", plugged=str(tmp_path / "p.py"), timing=False
        ),
        bare_ws,
    )
    by = {t.task: t for t in res.tasks}
    assert by["add_rmsnorm_2x16x64"].status == "plugged" and by["linear_gelu_2x16x64"].status == "plugged", (
        res.text
    )
    assert res.kernels_dir == str(out / "kernels-ops")
    assert any("no GPU-timed best" in n and "never timed on a GPU" in n for n in res.notes)
    assert any(n.startswith("softmax_2x4x16x16: not searched (pending") for n in res.notes)
    with pytest.raises(NotFound, match=r"no suite named 'nope'.*ksearch suite list"):
        await plug_back(PlugBackIn(model=MODEL_BLOCK, out=str(out), kernels="nope"), bare_ws)


BAD_MODELS = {
    "no_model.py": (
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(2)]\n",
        r"no_model.py defines no `Model`; give a \.py file defining class Model\(torch\.nn\.Module\), get_inputs\(\) "
        r"and get_init_inputs\(\) \(KernelBench style\).* \(its classes: Net\)",
    ),
    "raises.py": (
        "import torch\n\nraise ValueError('boom')\n",
        r"raises\.py raised while being imported: ValueError: boom \(raises\.py, line 3\)",
    ),
    "no_inputs.py": (
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
        r"no get_inputs\(\): it returns the list of the model's forward inputs",
    ),
    "bad_forward.py": (
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        raise RuntimeError('no')\n\n\n"
        "def get_inputs():\n    return [torch.randn(2)]\n",
        r"the model's forward raised RuntimeError: no \(bad_forward\.py, line 6\)",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_MODELS))
async def test_a_bad_model_is_refused_saying_what_is_wrong(name: str, tmp_path: Path) -> None:
    source, message = BAD_MODELS[name]
    (tmp_path / name).write_text(source)
    with pytest.raises(TaskError, match=message):
        await profile_model(ProfileModelIn(model=str(tmp_path / name), out=str(tmp_path / "o"), facts=False))
    assert not (tmp_path / "o" / "model.json").exists()


async def test_plug_back_needs_the_tasks_and_a_kernel_source(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no such model file"):
        await profile_model(ProfileModelIn(model=str(tmp_path / "gone.py")))
    with pytest.raises(ToolFailure, match=r"no model\.json in .*: run `ksearch model .* first"):
        await plug_back(PlugBackIn(model=MODEL_BLOCK, out=str(tmp_path), kernels=str(tmp_path)))
    (tmp_path / "model.json").write_text(json.dumps({"tasks": []}))
    with pytest.raises(ToolFailure, match="no such folder: k/gone"):
        await plug_back(PlugBackIn(model=MODEL_BLOCK, out=str(tmp_path), kernels="k/gone"))
    with pytest.raises(ToolFailure, match="needs the project's database"):
        await plug_back(PlugBackIn(model=MODEL_BLOCK, out=str(tmp_path), kernels="some-suite"))
    assert os.listdir(tmp_path) == ["model.json"]
