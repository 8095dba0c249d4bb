"""`ksearch tasks` and `ksearch task show` through the real CLI functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ksearch.gpu.tasks import builtin_names, load_task
from ksearch.server.cli import tasks as cli_tasks

FIX = Path(__file__).parent / "fixtures"


def _app() -> typer.Typer:
    app = typer.Typer()
    cli_tasks.register(app)
    return app


def invoke(*args: str):
    return CliRunner().invoke(_app(), list(args))


@pytest.mark.slow
def test_tasks_lists_the_builtins() -> None:
    result = invoke("tasks", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == builtin_names()
    gemm = next(r for r in rows if r["name"] == "gemm_bf16")
    assert (
        gemm["bound"] == "compute" and gemm["dtype"] == "bfloat16" and gemm["workloads"]["smoke"] == ["smoke"]
    )
    table = invoke("tasks")
    assert table.exit_code == 0 and "softmax" in table.stdout and "memory" in table.stdout


@pytest.mark.usefixtures("facts_off")
def test_show_json_has_workloads_tolerance_and_tunables() -> None:
    result = invoke("task", "show", "softmax", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["name"] == "softmax" and data["seed_languages"] == ["cuda", "triton"]
    assert "seeds" not in data
    assert data["tunables"]["triton"]["BLOCK_N"]["current"] in data["tunables"]["triton"]["BLOCK_N"]["values"]
    assert [w["split"] for w in data["workloads"]].count("heldout") == 1
    assert data["tolerance"]["atol"]["float32"] == 1e-7 and data["warnings"] == []


@pytest.mark.usefixtures("facts_off")
def test_show_text_and_derived_smoke_note() -> None:
    result = invoke("task", "show", str(FIX / "native" / "plain_gelu_scale.py"))
    assert result.exit_code == 0, result.output
    assert "default" in result.stdout and "ModelNew" in result.stdout
    assert "may be slow on the CPU" in result.output and "no cost model" in result.output


@pytest.mark.slow
def test_show_notes_a_reference_whose_own_rounding_fails_its_tolerance() -> None:
    path = str(FIX / "kernelbench" / "l1_cusum_long_rows.py")
    result = invoke("task", "show", path)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "note: the reference's own fp32 result differs from its float64 run by up to" in said
    data = json.loads(invoke("task", "show", path, "--json").stdout)
    assert data["reference_rounding"]["verdict"] == "fails" and data["reference_rounding"]["over"] > 0
    assert any(w.startswith("the reference's own fp32 result") for w in data["warnings"])


def test_show_unknown_task_is_a_clear_error() -> None:
    result = invoke("task", "show", "softmaxx")
    assert result.exit_code == 2
    assert "unknown task 'softmaxx'" in result.output and "softmax" in result.output


@pytest.mark.slow
def test_check_runs_the_reference_and_flags_a_degenerate_rule() -> None:
    result = invoke("task", "show", str(FIX / "native" / "loose_tolerance.py"), "--check")
    assert result.exit_code == 0, result.output
    assert "reference ran on the CPU" in result.stdout
    assert "degenerate rule" in result.output and "all zeros passes" in result.output


@pytest.mark.slow
def test_check_json_for_a_sound_builtin() -> None:
    result = invoke("task", "show", "rmsnorm", "--check", "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.stdout)["check"]
    smoke = load_task("rmsnorm").smoke().params  # the check runs the reference at the smoke workload
    assert (
        check["ok"]
        and check["warnings"] == []
        and check["outputs"] == [{"shape": [smoke["M"], smoke["N"]], "dtype": "bfloat16"}]
    )
