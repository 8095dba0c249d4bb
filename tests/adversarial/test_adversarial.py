"""Each cheat in cheats/ must be rejected or flagged, with the reason named (see adversarial_cases.py).

CPU cases run Triton under the interpreter; the side-stream case needs a GPU. Controls at the end
show the same tasks and settings accept an honest kernel, so the cases are not caught by accident.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adversarial_cases import CASES, CHEATS, Case, verdict

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import Candidate, EvalSettings

pytestmark = pytest.mark.anyio

BUILTIN = Path(__file__).resolve().parents[2] / "gpu" / "tasks" / "builtin"


def _param(c: Case) -> object:
    return pytest.param(c, id=c.name, marks=[pytest.mark.gpu] if c.gpu_only else [])


def test_every_cheat_file_has_a_case() -> None:
    assert sorted(p.stem for p in CHEATS.glob("*.py")) == sorted(c.name for c in CASES)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
@pytest.mark.slow
async def test_cheat_is_caught(sandbox: LocalSandbox, case: Case) -> None:
    ev = await sandbox.evaluate(case.candidate(), case.load_task(), case.settings(), timing=case.timing)
    caught, reason = verdict(case, ev)
    assert caught, (
        f"{case.name} ({case.cheat}) got through: status={ev.status}, error={ev.error!r}, "
        f"flags={ev.flags}, correctness={[(c.workload, c.kind, c.message) for c in ev.correctness]}"
    )
    assert reason, "caught, but the evaluation names no reason"


@pytest.mark.slow
async def test_shape_hardcoding_passes_on_the_search_workload_alone(sandbox: LocalSandbox) -> None:
    """Why final evaluation over every workload matters: the search workload alone accepts it."""
    case = next(c for c in CASES if c.name == "hardcoded_shapes")
    st = case.settings().model_copy(update={"workloads": ["search"], "final": False})
    ev = await sandbox.evaluate(case.candidate(), case.load_task(), st)
    assert ev.status == "ok", (ev.status, ev.error, ev.flags)


@pytest.mark.parametrize("task", ["softmax", "row_sum"])
@pytest.mark.slow
async def test_honest_kernel_passes_the_same_checks(sandbox: LocalSandbox, task: str) -> None:
    source = (BUILTIN / task / "seed_triton.py").read_text()
    st = CASES[0].settings().model_copy(update={"workloads": ["smoke"]})
    ev = await sandbox.evaluate(Candidate.of(source, "triton"), load_task(task), st)
    assert ev.status == "ok", (ev.status, ev.error, ev.flags)
    assert not any(f.startswith("no_custom_kernel") for f in ev.flags)


async def test_honest_kernel_passes_final_evaluation(sandbox: LocalSandbox) -> None:
    source = (BUILTIN / "row_sum" / "seed_triton.py").read_text()
    case = next(c for c in CASES if c.name == "hardcoded_shapes")
    st: EvalSettings = case.settings()
    ev = await sandbox.evaluate(Candidate.of(source, "triton"), case.load_task(), st)
    assert ev.status == "ok", (ev.status, ev.error, ev.flags)
    assert [c.workload for c in ev.correctness] == ["search", "heldout"]
