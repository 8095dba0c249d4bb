"""The final evaluation settles the search's best. A kernel hard-coded to the search workload's shape is correct
(and fastest) during the search; on the final evaluation's other shapes it is wrong, so it loses its place to the
best re-measured attempt that passes, or to none, and `status`, `tree`, `best` and `export` say so.

The sandbox is a simulated GPU (gpu/worker/simulated.py): a search timed on a GPU is never re-judged by the CPU interpreter,
so its final evaluation takes the GPU's path. The search phase's evaluations are run for real in the interpreter, on
the search workload, then marked as timed on a GPU: interpreter timings never rank, and only ranked attempts can be
a search's best. The final evaluation then runs for real on every workload (the held-out one a shape the hard-coded
kernel gets wrong)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import typer
from typer.testing import CliRunner

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.tasks import load_task
from ksearch.server.cli import exporting as cli_exporting
from ksearch.server.cli import kernels as cli_kernels
from ksearch.server.cli import loop as cli_loop
from ksearch.server.cli import steer as cli_steer
from ksearch.server.cli import tree as cli_tree
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.final_eval import FinalEvalIn, final_evaluation
from ksearch.tools.get_tree import GetTreeIn, get_tree
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Attempt, EvalSettings, Evaluation
from ksearch.worldmodel.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.cpu]

ROOT = Path(__file__).resolve().parents[2]
HARDCODED = (ROOT / "tests" / "adversarial" / "cheats" / "hardcoded_shapes.py").read_text()
HONEST = (ROOT / "gpu" / "tasks" / "builtin" / "row_sum" / "seed_triton.py").read_text()

TASK = '''"""Row sum with a search, a held-out and a smoke workload of different shapes."""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "row_sum", "dtype": "float32", "bound": "memory", "title": "Row sum (final test)"}

WORKLOADS = [
    {"name": "search", "params": {"M": 48, "N": 640}, "split": "search"},
    {"name": "heldout", "params": {"M": 40, "N": 700}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 8, "N": 100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-3}, "rtol": {"float32": 1e-5}}


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs(M=48, N=640):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
'''


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(
        scratch_dir=tmp_path_factory.mktemp("final-best"), call_timeout_s=120.0, simulated_gpus=1
    )
    try:
        yield sb
    finally:
        with anyio.fail_after(120):
            await sb.close()


@pytest.fixture(scope="module")
def task_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("task") / "rows_final.py"
    p.write_text(TASK)
    return p


async def _search_phase(sb: LocalSandbox, task_path: Path, source: str, speedup: float) -> Evaluation:
    """The search phase's evaluation on the search workload, run for real, its timing marked as a GPU's."""
    from ksearch.worldmodel.models import Candidate

    st = EvalSettings(seed=3, trials=2, workloads=["search"], min_reps=3, max_reps=5, time_budget_s=0.5)
    ev = await sb.evaluate(Candidate.of(source, "triton"), load_task(str(task_path)), st)
    assert ev.status == "ok", (ev.error, ev.flags)  # the hard-coded kernel is right on the search shape
    assert ev.env is not None
    # a GPU's timing whose figures agree with the speedup (a search's best is decided by time against its baseline)
    us = 100.0 / speedup
    t = ev.timings[0].model_copy(
        update={
            "device": "NVIDIA H200",
            "eager_us": 100.0,
            "median_us": us,
            "mean_us": us,
            "ci_low_us": 0.99 * us,
            "ci_high_us": 1.01 * us,
            "speedup_vs_eager": speedup,
        }
    )
    env = ev.env.model_copy(update={"device": "NVIDIA H200", "cpu_mode": False})
    gpu = ev.model_copy(update={"timings": [t], "speedup_vs_eager": speedup, "env": env})
    assert gpu.ranks
    return gpu


async def _record(store: Store, search: str, source: str, ev: Evaluation) -> Attempt:
    s = await store.get_search(search)
    root = await store.root(s.id)
    cand = await store.put_candidate(source, "triton")
    return await store.record_attempt(s.id, root.id, cand.id, ev, author="human")


def _cli(*args: object) -> str:
    app = typer.Typer(pretty_exceptions_enable=False)
    for mod in (cli_loop, cli_steer, cli_exporting, cli_kernels, cli_tree):
        mod.register(app)
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, (r.exit_code, r.output)
    return " ".join(r.output.split())


@pytest.mark.slow
async def test_a_best_that_fails_the_final_evaluation_loses_its_place(
    sandbox: LocalSandbox, task_path: Path, tmp_path: Path
) -> None:
    db = tmp_path / "k.db"
    async with await Store.open(db) as store:
        ws = Workspace(store, sandbox)
        await create_search(ws, CreateSearchIn(task=str(task_path), name="fin", seed=5))
        hard = await _record(store, "fin", HARDCODED, await _search_phase(sandbox, task_path, HARDCODED, 3.0))
        honest = await _record(store, "fin", HONEST, await _search_phase(sandbox, task_path, HONEST, 1.5))
        assert (await store.get_search("fin")).best_attempt_id == hard.id  # fastest on the search shape

        out = await final_evaluation(ws, FinalEvalIn(search="fin"))
        by_id = {r.attempt_id: r for r in out.rows}
        assert by_id[hard.id].status == "incorrect" and by_id[honest.id].status == "ok"
        assert out.best_attempt_id == honest.id == out.rows[0].attempt_id
        assert (await store.get_search("fin")).best_attempt_id == honest.id
        assert f"attempt #{hard.id}, the search's best, failed it (heldout: wrong_values" in out.best_lost
        assert f"the best is now attempt #{honest.id}" in out.best_lost
        assert out.next.startswith(out.best_lost)
        verdict = await store.final_verdict((await store.get_search("fin")).id)
        assert verdict is not None and (verdict.best_before, verdict.best_after) == (hard.id, honest.id)
        assert [o.passed for o in verdict.outcomes] == [True, False]  # the final's order: passing first
        tree = await get_tree(ws, GetTreeIn(search="fin", budget_chars=500))
        assert tree.best_attempt_id == honest.id and tree.best_lost == out.best_lost
        assert tree.text is not None and len(tree.text) <= 500 and tree.text.startswith("final evaluation:")

    # the CLI runs its own event loop: call it from a thread, as from a shell
    status = await anyio.to_thread.run_sync(_cli, "status", "fin", "--db", db)
    assert f"attempt #{hard.id}, the search's best, failed it" in status
    shown = await anyio.to_thread.run_sync(_cli, "tree", "fin", "--db", db)
    assert f"lost its place; the best is now attempt #{honest.id}" in shown
    best = await anyio.to_thread.run_sync(_cli, "best", "fin", "--db", db)
    assert f"#{honest.id}" in best and "SEARCH_SHAPE" not in best  # the honest kernel's source, not the cheat
    exported = json.loads(await anyio.to_thread.run_sync(_cli, "export", "fin", "--json", "--db", db))
    assert exported["search"]["best_attempt_id"] == honest.id
    assert exported["final"]["best_before"] == hard.id and "wrong_values" in exported["final"]["lost_because"]
    report = await anyio.to_thread.run_sync(_cli, "export", "fin", "--html", "--db", db)
    assert "lost its place" in report


@pytest.mark.slow
async def test_when_no_re_measured_attempt_passes_the_search_has_no_best(
    sandbox: LocalSandbox, task_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        ws = Workspace(store, sandbox)
        await create_search(ws, CreateSearchIn(task=str(task_path), name="only", seed=5))
        hard = await _record(
            store, "only", HARDCODED, await _search_phase(sandbox, task_path, HARDCODED, 3.0)
        )
        out = await final_evaluation(ws, FinalEvalIn(search="only"))
        assert out.best_attempt_id is None and (await store.get_search("only")).best_attempt_id is None
        assert f"attempt #{hard.id}, the search's best, failed it" in out.best_lost
        assert "no re-measured attempt passed it: the search has no best" in out.best_lost
        assert out.next.startswith(out.best_lost)
        logged = [r.getMessage() for r in caplog.records if r.name == "ksearch.tools.final_eval"]
        assert logged == [f"search only: {out.best_lost}"]
        # the tree's header says the same: no result, not the node's own best (one best on every face)
        tree = await get_tree(ws, GetTreeIn(search="only"))
        assert tree.text is not None
        assert "no result: the final evaluation named no best: none passed it timed on a GPU" in tree.text
        assert "best 3." not in tree.text.split("\n")[1]
        # once a round starts after it, that final evaluation no longer speaks for the search: the header says
        # what the tree holds (the node's own best), the note of what the final evaluation did stays
        await store.bump_round((await store.get_search("only")).id)
        tree = await get_tree(ws, GetTreeIn(search="only"))
        assert tree.text is not None and "no result: the final evaluation" not in tree.text, tree.text
        assert "the search's best, failed it" in tree.text.split("\n")[0]


async def test_a_best_that_passes_keeps_its_place(
    sandbox: LocalSandbox, task_path: Path, tmp_path: Path
) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        ws = Workspace(store, sandbox)
        await create_search(ws, CreateSearchIn(task=str(task_path), name="keeps", seed=5))
        honest = await _record(store, "keeps", HONEST, await _search_phase(sandbox, task_path, HONEST, 1.5))
        out = await final_evaluation(ws, FinalEvalIn(search="keeps"))
        assert out.best_attempt_id == honest.id and out.best_lost == ""
        assert out.rows[0].attempt_id == honest.id  # the first row is the result
        verdict = await store.final_verdict((await store.get_search("keeps")).id)
        assert verdict is not None and verdict.best_before == verdict.best_after == honest.id
