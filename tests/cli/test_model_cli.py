"""`ksearch model` run as a user runs it, on the CPU: the small transformer of tests/fixtures/model_block.py profiled
and its hottest operator searched as a suite at once (`--suite`, the offline tuner: seedless tasks stop at once, the
suite's table comes back), then its kernels plugged back from a folder (`--plug-back`): correct ones plugged, a wrong
one refused with exit 1; bad input refused with exit 2 and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.cli import ksearch_cli
from tests.fixtures.model_kernels import MODEL_BLOCK, kernel_folder

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_model_is_profiled_searched_as_a_suite_and_plugged_back(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    first = ksearch_cli(tmp_path, "model", MODEL_BLOCK, "--out", "ops", "--top", "1", "--no-facts", "--suite", "blk",
                        "--policy", "tuner", "--rounds", "1", "--db", db)  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    assert "ranked by CPU time: no GPU here, so this ranks CPU time, not GPU time" in first.stdout
    assert (
        f"search them as a suite: ksearch suite run {tmp_path / 'ops' / 'tasks.txt'} --name blk"
        in first.stdout
    )
    assert "suite blk: 1 tasks: 1 done" in first.stdout and "blk.000." in first.stdout
    assert first.stdout.rstrip().endswith(f"--out {tmp_path / 'ops'} --plug-back blk")
    every = ksearch_cli(tmp_path, "model", MODEL_BLOCK, "--out", "ops", "--top", "9", "--no-facts")
    assert every.returncode == 0, every.stderr[-3000:]
    assert "wrote 9 task files" in every.stdout and (tmp_path / "ops" / "add_rmsnorm_2x16x64.py").is_file()
    good = kernel_folder(tmp_path / "good", "linear_gelu_2x16x64", "softmax_2x4x16x16")
    plugged = ksearch_cli(
        tmp_path, "model", MODEL_BLOCK, "--out", "ops", "--plug-back", str(good), "--no-timing"
    )
    assert plugged.returncode == 0, plugged.stderr[-3000:]
    assert "plugged 2 of 9 tasks" in plugged.stdout and "model check: ok" in plugged.stdout
    assert (tmp_path / "ops" / "plugged.py").is_file()
    bad = kernel_folder(tmp_path / "bad", "linear_gelu_2x16x64", "linear_2x16x256")
    refused = ksearch_cli(tmp_path, "model", MODEL_BLOCK, "--out", "ops", "--plug-back", str(bad), "--no-timing",
                          "-o", str(tmp_path / "p.py"))  # fmt: skip
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "linear_2x16x256: refused: wrong at blocks.0.mlp.fc2" in refused.stdout


def test_bad_input_is_refused_with_the_reason(tmp_path: Path) -> None:
    gone = ksearch_cli(tmp_path, "model", str(tmp_path / "gone.py"))
    assert gone.returncode == 2 and "no such model file" in gone.stderr, gone.stderr
    (tmp_path / "k.db").touch()
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "model.json").write_text('{"tasks": []}')
    suite = ksearch_cli(tmp_path, "model", MODEL_BLOCK, "--out", "ops", "--plug-back", "nope", "--db", "k.db")
    assert suite.returncode == 2, suite.stderr
    assert "no suite named 'nope'" in suite.stderr and "ksearch suite export SUITE FOLDER" in suite.stderr
    both = ksearch_cli(tmp_path, "model", MODEL_BLOCK, "--suite", "s", "--plug-back", "s")
    assert both.returncode == 2 and "give one of them" in both.stderr


# a model whose Linear is large enough that the smoke workload shrinks its sizes
BIG_LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2048, 512, bias=False)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(1, 256, 2048)]


def get_init_inputs():
    return []
"""

# a KernelBench candidate holding its own weights, built as KernelBench builds one: ModelNew(*get_init_inputs())
OWN_LINEAR = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.op = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.matmul(x, self.op.weight.t())
"""


def test_a_written_task_s_sizes_reach_a_candidate_on_the_smoke_workload(tmp_path: Path) -> None:
    """The constructor's sizes are the task's init inputs (read from its size constants when called), so the smoke
    workload's shrunk sizes build the candidate's weights as they build the reference's: correct, not wrong_shape."""
    (tmp_path / "big.py").write_text(BIG_LINEAR)
    p = ksearch_cli(tmp_path, "model", str(tmp_path / "big.py"), "--out", "ops", "--top", "1", "--no-facts")
    assert p.returncode == 0, p.stderr[-3000:]
    task = tmp_path / "ops" / "linear_1x256x2048.py"
    text = task.read_text()
    assert "def __init__(self, size_0, size_1):" in text and "    return [size_0, size_1]" in text
    (tmp_path / "cand.py").write_text(OWN_LINEAR)
    ev = ksearch_cli(tmp_path, "eval", str(task), str(tmp_path / "cand.py"), "--json", "--no-timing")
    assert ev.returncode == 0, (ev.stdout + ev.stderr)[-3000:]
    r = json.loads(ev.stdout)
    assert r["status"] == "ok", r
    assert [(c["workload"], c["kind"]) for c in r["correctness"]] == [("smoke", "ok")]
