"""Suites over a real store: what sources name (level folders, GPU MODE problem folders, FlashInfer-Trace datasets,
list files), refusals kept with their reasons, and the result table's fast_p, exactly as KernelBench defines it
(`score.fastp`: correct and speedup > p, over every task)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from ksearch.tools.errors import ToolFailure
from ksearch.tools.suites.suite import (
    SuiteIn,
    SuiteRow,
    create_suite,
    expand,
    fast_p,
    list_suites,
    mark,
    progress_line,
    report_text,
    suite_report,
)
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import Conflict
from ksearch.worldmodel.models import SearchConfig
from tests.fixtures import evals
from tests.fixtures.cli import ksearch_cli

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
KB_SCORE = ROOT / ".ext" / "kb" / "src" / "kernelbench" / "score.py"
PROBLEM = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\n\ndef get_init_inputs():\n    return []\n"


def _rows(spec: list[tuple[bool, float | None]]) -> list[SuiteRow]:
    return [
        SuiteRow(idx=i, task=f"t{i}", status="done", correct=c, speedup_vs_eager=s)
        for i, (c, s) in enumerate(spec)
    ]


def test_fast_p_is_kernelbench_s_correct_and_strictly_faster_over_every_task() -> None:
    rows = _rows([(True, 2.5), (True, 1.0), (True, 1.2), (False, 3.0), (True, None), (False, None)])
    assert (
        fast_p(rows, 0.0, "eager") == 3 / 6
    )  # correct with a speedup; the untimed and the incorrect count in n
    assert fast_p(rows, 1.0, "eager") == 2 / 6  # 1.0 is not faster than 1
    assert fast_p(rows, 1.5, "eager") == 1 / 6 and fast_p(rows, 2.0, "eager") == 1 / 6
    assert fast_p([], 1.0, "eager") == 0.0


@pytest.mark.skipif(not KB_SCORE.is_file(), reason="needs KernelBench's copy at .ext/kb")
def test_fast_p_agrees_with_kernelbench_s_own_code() -> None:
    import numpy as np

    spec = importlib.util.spec_from_file_location("kb_score", KB_SCORE)
    assert spec is not None and spec.loader is not None
    kb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kb)
    speeds = [2.5, 1.0, 1.2, 3.0, 0.7, 1.5]
    correct = [True, True, True, False, True, True]
    rows = _rows(list(zip(correct, speeds, strict=True)))
    for p in (0.0, 1.0, 1.5, 2.0):
        theirs = kb.fastp(np.array(correct), np.array(speeds), np.ones(len(speeds)), len(speeds), p)
        assert fast_p(rows, p, "eager") == pytest.approx(theirs)


def test_sources_expand_to_level_folders_problem_folders_datasets_and_list_files(tmp_path: Path) -> None:
    level = tmp_path / "level1"
    level.mkdir()
    for n in ("2_relu.py", "1_relu.py", "_helper.py", "notes.md"):
        (level / n).write_text(PROBLEM)
    gm = tmp_path / "gpumode"
    for n in ("b_prob", "a_prob"):
        (gm / n).mkdir(parents=True)
        (gm / n / "task.yml").write_text("files: []\n")
    ds = tmp_path / "trace"
    (ds / "definitions" / "gemm").mkdir(parents=True)
    (ds / "definitions" / "gemm" / "g1.json").write_text("{}")
    lst = tmp_path / "tasks.txt"
    lst.write_text("# my suite\nsoftmax\nlevel1/1_relu.py   # a file beside the list\n\n")
    assert [Path(t).name for t in expand(str(level))] == ["1_relu.py", "2_relu.py"]
    assert [Path(t).name for t in expand(str(gm))] == ["a_prob", "b_prob"]
    assert [Path(t).name for t in expand(str(ds))] == ["g1.json"]
    assert [Path(t).name for t in expand(str(lst))] == ["softmax", "1_relu.py"]
    assert expand("softmax") == ["softmax"]


async def test_a_suite_keeps_refused_tasks_with_their_reasons_and_refuses_when_none_loads(
    bare_ws: Workspace, tmp_path: Path
) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("def nothing(:\n")
    s = await create_suite(
        bare_ws, SuiteIn(name="s1", sources=["softmax", str(bad), str(tmp_path / "gone.py")])
    )
    assert [t.status for t in s.tasks] == ["pending", "refused", "refused"]
    assert "no such task file" in s.tasks[2].error and s.tasks[1].error
    with pytest.raises(Conflict, match="--resume s1"):
        await create_suite(bare_ws, SuiteIn(name="s1", sources=["softmax"]))
    with pytest.raises(ToolFailure, match=r"no task of .* can be loaded, so no suite was made"):
        await create_suite(bare_ws, SuiteIn(name="s2", sources=[str(bad)]))
    with pytest.raises(ToolFailure, match="bad suite name"):
        await create_suite(bare_ws, SuiteIn(name="-x", sources=["softmax"]))
    assert [x.name for x in await list_suites(bare_ws)] == ["s1"]


async def test_the_table_takes_each_search_s_best_and_states_fast_p_only_for_gpu_timings(
    bare_ws: Workspace,
) -> None:
    store = bare_ws.store
    s = await create_suite(
        bare_ws, SuiteIn(name="kb", sources=["softmax", "row_sum", "layernorm", "rmsnorm"])
    )
    report = await suite_report(bare_ws, "kb")
    assert report.fast_p_eager is None and "no fast_p is stated" in report.note  # nothing timed yet
    for idx, (task, speedup) in enumerate([("softmax", 2.4), ("row_sum", 1.3), ("layernorm", 0.8)]):
        search = await store.create_search(f"kb.{idx}", task, SearchConfig())
        cand = await store.put_candidate(f"# kernel {idx}\n", "triton")
        await store.record_attempt(search.id, None, cand.id, evals.gpu_eval(speedup), round=0, author="llm:m")
        await mark(bare_ws, s.id, idx, "done", search_id=search.id)
    await mark(bare_ws, s.id, 3, "failed", error="the policy could not go on")
    r = await suite_report(bare_ws, "kb")
    assert (r.done, r.failed, r.correct, r.timed) == (3, 1, 3, 3)
    assert r.fast_p_eager == {"fast_0": 0.75, "fast_1": 0.5, "fast_1.5": 0.25, "fast_2": 0.25}
    assert r.fast_p_compile is not None  # the fixtures time no torch.compile baseline: none faster than it
    assert r.fast_p_compile == {"fast_0": 0.0, "fast_1": 0.0, "fast_1.5": 0.0, "fast_2": 0.0}
    text = report_text(r)
    assert "2.40x vs eager" in text and "NVIDIA H200" in text and "the policy could not go on" in text
    assert "fast_p vs eager:         fast_0 0.75, fast_1 0.50, fast_1.5 0.25, fast_2 0.25" in text


async def test_the_progress_line_names_each_running_task_s_best_and_the_slots_gpu_use(
    bare_ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nvidia-smi cannot run without a GPU: a stand-in on PATH prints what the real one prints for this query
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf '0, 97 %%, 41984 MiB\\n1, 3 %%, 512 MiB\\n2, 0 %%, 0 MiB\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    store = bare_ws.store
    s = await create_suite(bare_ws, SuiteIn(name="p", sources=["softmax", "row_sum", "layernorm"]))
    for idx, speedup in [(0, 2.4), (1, None)]:
        search = await store.create_search(f"p.{idx}", ["softmax", "row_sum"][idx], SearchConfig())
        if speedup is not None:
            cand = await store.put_candidate("# kernel\n", "triton")
            await store.record_attempt(
                search.id, None, cand.id, evals.gpu_eval(speedup), round=0, author="llm:m"
            )
        await mark(bare_ws, s.id, idx, "running", search_id=search.id)
    line = await progress_line(bare_ws, s.id, ["0", "1"])
    assert line == (
        "running: softmax 2.40x, row_sum no GPU-timed best yet | GPU 0 97 % busy, 41.0 GiB; GPU 1 3 % busy, 0.5 GiB"
    )
    assert await progress_line(bare_ws, s.id, []) == "running: softmax 2.40x, row_sum no GPU-timed best yet"


async def test_the_page_shows_a_suite_and_links_each_search(bare_ws: Workspace, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from ksearch.server.web.app import build_app

    s = await create_suite(bare_ws, SuiteIn(name="web", sources=["softmax", str(tmp_path / "gone.py")]))
    search = await bare_ws.store.create_search("web.000.softmax", "softmax", SearchConfig())
    cand = await bare_ws.store.put_candidate("# k\n", "triton")
    await bare_ws.store.record_attempt(search.id, None, cand.id, evals.gpu_eval(1.7), round=0, author="llm:m")
    await mark(bare_ws, s.id, 0, "done", search_id=search.id)
    with TestClient(build_app(bare_ws.store.path, host="testserver")) as client:  # the name the client sends
        index = client.get("/searches").text
        assert 'href="/suites/web"' in index and "2 tasks, 1 done" in index
        page = client.get("/suites/web").text
        assert f'href="/s/{search.id}"' in page and "no such task file" in page
        assert "fast_p vs eager: fast_0 0.50, fast_1 0.50, fast_1.5 0.50, fast_2 0.00" in page
        missing = client.get("/suites/nope")
        assert missing.status_code == 404 and "no suite" in missing.text


async def test_a_suite_exports_each_task_s_kernel_in_its_owner_s_format(
    bare_ws: Workspace, tmp_path: Path
) -> None:
    from ksearch.tools.suites.suite import export_suite

    problem = tmp_path / "1_relu.py"
    problem.write_text(PROBLEM)
    s = await create_suite(
        bare_ws, SuiteIn(name="ex", sources=[str(problem), "softmax", str(tmp_path / "gone.py")])
    )
    timed = await bare_ws.store.create_search("ex.000.1_relu", str(problem), SearchConfig())
    kernel = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    cand = await bare_ws.store.put_candidate(kernel, "triton")
    await bare_ws.store.record_attempt(timed.id, None, cand.id, evals.gpu_eval(1.2), round=0, author="llm:m")
    await mark(bare_ws, s.id, 0, "done", search_id=timed.id)
    untimed = await bare_ws.store.create_search("ex.001.softmax", "softmax", SearchConfig())
    await mark(bare_ws, s.id, 1, "done", search_id=untimed.id)
    rows = await export_suite(bare_ws, "ex", tmp_path / "out")
    assert rows[0].path is not None and "class ModelNew" in Path(rows[0].path).read_text()
    assert Path(rows[0].path).name.startswith("000-") and "ksearch" in Path(rows[0].path).read_text()
    assert rows[1].path is None and "no best kernel to export yet" in rows[1].skipped
    assert rows[2].path is None and "no such task file" in rows[2].skipped
    # the CLI lists every task with its whole reason, however long
    said = ksearch_cli(
        tmp_path, "suite", "export", "ex", str(tmp_path / "out2"), "--db", str(tmp_path / "k.db")
    )
    assert said.returncode == 0, said.stderr
    assert "wrote 1 of 3 tasks' kernels" in said.stdout
    assert f"gone.py: skipped: {' '.join(rows[2].skipped.split())}" in said.stdout, said.stdout
