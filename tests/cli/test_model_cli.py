"""`ksearch model` run as a user runs it, on the CPU: the small transformer of tests/fixtures/model_block.py profiled
and its hottest operator searched as a suite at once (`--suite`, the offline tuner: seedless tasks stop at once, the
suite's table comes back), then its kernels plugged back from a folder (`--plug-back`): correct ones plugged, a wrong
one refused with exit 1; bad input refused with exit 2 and the reason."""

from __future__ import annotations

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
