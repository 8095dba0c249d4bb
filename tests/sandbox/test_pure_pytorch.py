"""A candidate must be a kernel: one that computes with PyTorch ops is labelled, keeps its numbers and never
becomes a best. The loop as a host drives it (seed on the root, claim an intent, benchmark on it), through
the real tools, store and sandbox (CPU interpreter), then `ksearch best`. The task is the built-in softmax with a
9-row smoke workload (tests.fixtures.SOFTMAX): an evaluation takes a second."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import typer
from typer.testing import CliRunner

from ksearch.gpu.tasks import load_task
from ksearch.server.cli import kernels as cli_kernels
from ksearch.server.cli import steer as cli_steer
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.finish_intent import FinishIntentIn, finish_intent
from ksearch.tools.loop.state import improves
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Evaluation, IntentSpec
from ksearch.worldmodel.store import Store
from tests.fixtures import SOFTMAX

pytestmark = pytest.mark.anyio

PURE_SOFTMAX = """
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)
"""


@pytest.mark.slow
async def test_a_pure_pytorch_candidate_is_labelled_and_never_best(sandbox, tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    kernel = load_task(SOFTMAX).seeds["triton"] + "\n# the seed's kernel, written again for the intent\n"
    async with await Store.open(db) as store:
        ws = Workspace(store, sandbox)
        await create_search(ws, CreateSearchIn(task=SOFTMAX, name="pure", seed=5, stagnation=3))
        seed = await benchmark(ws, BenchmarkIn(search="pure", node_id=1, candidate=CandidateRef(seed=True)))
        assert seed.evaluation.status == "ok", seed.summary
        (intent,) = await propose_intents(
            ws, ProposeIntentsIn(search="pure", intents=[IntentSpec(title="call the library softmax")])
        )
        claimed = await select_action(ws, SelectActionIn(search="pure"))
        assert claimed.claimed and claimed.node is not None and claimed.node.id == intent.id

        pure = await benchmark(
            ws, BenchmarkIn(search="pure", node_id=intent.id, candidate=CandidateRef(source=PURE_SOFTMAX))
        )
        ev = pure.evaluation
        assert ev.status == "ok" and ev.correct and ev.pure_pytorch and not ev.ranks, pure.summary
        assert ev.timings and ev.timings[0].median_us > 0  # its numbers are kept
        assert "PURE PYTORCH" in pure.summary and "never a node's or the search's best" in pure.summary
        assert pure.refine is not None and pure.refine.best_attempt_id is None  # nothing to build on
        assert pure.refine.stagnant == 1  # and no gain: it counts toward the stagnation window
        assert (await store.get_node(intent.id)).best_attempt_id is None
        assert (await store.get_search("pure")).best_attempt_id is None

        real = await benchmark(
            ws, BenchmarkIn(search="pure", node_id=intent.id, candidate=CandidateRef(source=kernel))
        )
        assert real.evaluation.status == "ok" and not real.evaluation.pure_pytorch, real.summary
        assert "PURE PYTORCH" not in real.summary
        assert (await store.get_node(intent.id)).best_attempt_id == real.attempt_id
        closed = await finish_intent(ws, FinishIntentIn(search="pure", node_id=intent.id))
        assert closed.node.status.value == "closed"

    cli = typer.Typer()
    cli_steer.register(cli)
    cli_kernels.register(cli)
    # the CLI runs its own event loop: call it from a thread, as from a shell
    said = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, ["best", "pure", "--db", str(db)]))
    assert said.exit_code == 1, said.output
    text = " ".join(said.output.split())
    # on the CPU nothing is the search's best; the pure-PyTorch attempt is named as never a best kernel
    assert f"#{pure.attempt_id} are correct but pure PyTorch" in text and "never a best kernel" in text


@pytest.mark.slow
async def test_without_a_kernel_an_intent_fails(sandbox, tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        ws = Workspace(store, sandbox)
        await create_search(ws, CreateSearchIn(task=SOFTMAX, name="only-torch", seed=6))
        await benchmark(ws, BenchmarkIn(search="only-torch", node_id=1, candidate=CandidateRef(seed=True)))
        (intent,) = await propose_intents(
            ws, ProposeIntentsIn(search="only-torch", intents=[IntentSpec(title="use torch.softmax")])
        )
        await select_action(ws, SelectActionIn(search="only-torch"))
        await benchmark(
            ws,
            BenchmarkIn(search="only-torch", node_id=intent.id, candidate=CandidateRef(source=PURE_SOFTMAX)),
        )
        closed = await finish_intent(ws, FinishIntentIn(search="only-torch", node_id=intent.id))
        assert closed.node.status.value == "failed"  # correct numbers, but no kernel implemented the intent


def test_a_pure_pytorch_attempt_is_no_gain_in_the_refine_phase() -> None:
    pure = Evaluation(status="ok", speedup_vs_eager=3.0, pure_pytorch=True)
    assert not improves(pure, Evaluation(status="incorrect")) and not improves(pure, None)
    assert improves(Evaluation(status="ok", speedup_vs_eager=1.0), Evaluation(status="incorrect"))
