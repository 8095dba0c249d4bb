"""A passing check says how much of its tolerance the worst element used (max |got - ref| / (atol + rtol * |ref|)):
a margin a model can act on, where a relative error alone ("max rel err 5e7% ... accepted by its absolute tolerance")
says nothing. Real sandbox, CPU interpreter."""

from __future__ import annotations

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.tools.common import summarize
from tests.sandbox.conftest import candidate, settings

pytestmark = [pytest.mark.anyio, pytest.mark.cpu]

# the affine task's rule is atol 1e-5, rtol 1e-5: an error of 6e-6 on outputs of order 1 uses about a third of it
OFF_BY_A_LITTLE = candidate("good_triton").source.replace("x * 2.0 + 1.0", "x * 2.0 + 1.000006")


async def test_a_passing_check_states_how_much_of_its_tolerance_the_worst_element_used(
    sandbox: LocalSandbox, affine: Task
) -> None:
    exact = await sandbox.correctness(candidate("good_triton"), affine, settings(trials=1))
    near = await sandbox.correctness(candidate(OFF_BY_A_LITTLE), affine, settings(trials=1))
    assert exact.status == near.status == "ok", (exact.error, near.error)
    (c_exact,), (c_near,) = exact.correctness, near.correctness
    assert c_exact.tolerance_used is not None and c_exact.tolerance_used < 0.05
    assert c_near.tolerance_used is not None and 0.1 < c_near.tolerance_used < 1.0, c_near.tolerance_used
    said = summarize(near)
    assert f"{100 * c_near.tolerance_used:.2g}% of tolerance used" in said, said
