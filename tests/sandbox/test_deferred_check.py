"""A final evaluation's per-call checks on the device, read once at the end (gpu/checks/deferred.py), give the verdict
the host check gives (`checking.compare_outputs`) on the same outputs, and name the first failing call."""

from __future__ import annotations

import pytest
import torch

from ksearch.gpu.checks.deferred import DeferredChecks, deferrable
from ksearch.gpu.checks.outputs import compare_outputs
from ksearch.gpu.task import Tolerance

TOL = Tolerance()


def _exp() -> torch.Tensor:
    return torch.linspace(-3, 3, 4096).reshape(64, 64)


def _cases() -> dict[str, torch.Tensor]:
    e = _exp()
    nan = e.clone()
    nan[3, 4] = float("nan")
    off = e.clone()
    off[10:20] += 1.0
    tiny = e + 1e-6  # within atol
    return {"same": e.clone(), "within": tiny, "nan": nan, "off": off}


@pytest.mark.parametrize("case", ["same", "within", "nan", "off"])
def test_the_device_verdict_is_the_host_verdict(case: str) -> None:
    e = _exp()
    got = _cases()[case]
    host = compare_outputs(got, e, TOL)
    dc = DeferredChecks(e, TOL)
    dc.add(0, got)
    fail = dc.first_failure()
    if host.passed:
        assert fail is None
    else:
        assert fail is not None and fail[0] == 0
        assert fail[1].kind == host.kind and fail[1].mismatches == host.mismatches, (fail, host)


def test_the_first_failing_call_is_named_after_one_read_back() -> None:
    e = _exp()
    cases = _cases()
    dc = DeferredChecks(e, TOL)
    for trial, got in enumerate([cases["same"], cases["within"], cases["off"], cases["nan"]]):
        dc.add(trial, got)
    fail = dc.first_failure()
    assert fail is not None and fail[0] == 2 and fail[1].kind == "wrong_values"
    assert "640 of 4096 elements differ beyond" in fail[1].message


def test_a_wrong_shape_or_dtype_is_known_at_once_and_earlier_calls_still_count() -> None:
    e = _exp()
    dc = DeferredChecks(e, TOL)
    dc.add(0, _cases()["nan"])
    dc.add(1, e.double())  # metadata failure: stops the queue
    dc.add(2, e[:3])
    assert dc.failure is not None and dc.failure[0] == 1 and dc.failure[1].kind == "wrong_dtype"
    fail = dc.first_failure()
    assert fail is not None and fail[0] == 0 and fail[1].kind == "nan_inf"  # the earlier call's values
    dc2 = DeferredChecks((e, e), TOL)
    dc2.add(0, (e,))
    assert dc2.first_failure() is not None and dc2.first_failure()[1].kind == "wrong_shape"  # type: ignore[index]


def test_a_non_finite_reference_must_be_matched_and_the_mismatch_ratio_is_allowed() -> None:
    e = _exp()
    e[0, 0] = float("inf")
    got = e.clone()
    got[0, 0] = 0.0
    dc = DeferredChecks(e, TOL)
    dc.add(0, got)
    fail = dc.first_failure()
    assert fail is not None and fail[1].kind == "wrong_values" and fail[1].mismatches == 1
    loose = Tolerance(mismatch_ratio=0.001)
    dc = DeferredChecks(e, loose)
    dc.add(0, got)
    assert dc.first_failure() is None
    assert compare_outputs(got, e, loose).passed


def test_integer_outputs_are_compared_exactly_and_complex_ones_are_not_deferred() -> None:
    e = torch.arange(100)
    dc = DeferredChecks(e, TOL)
    dc.add(0, e + (torch.arange(100) == 7))
    fail = dc.first_failure()
    assert fail is not None and fail[1].mismatches == 1
    assert deferrable(e) and deferrable((e, e.float()))
    assert (
        not deferrable(torch.zeros(3, dtype=torch.complex64)) and not deferrable(3.0) and not deferrable(())
    )


def test_a_sampled_check_draws_fresh_positions_per_call_and_says_it_sampled() -> None:
    e = torch.zeros(1 << 16)
    half_wrong = e.clone()
    half_wrong[::2] = 1.0  # half of the elements: 64 samples miss them all with probability 2^-64
    dc = DeferredChecks(e, TOL, sample=64)
    for trial in range(5):
        dc.add(trial, e.clone())
    dc.add(5, half_wrong)
    fail = dc.first_failure()
    assert fail is not None and fail[0] == 5 and fail[1].numel == 64
    assert "of 64 elements sampled" in fail[1].message
    # positions differ from call to call: one wrong element is found by some call among many
    one_wrong = e.clone()
    one_wrong[12345] = 1.0
    dc = DeferredChecks(e, TOL, sample=1 << 12)
    for trial in range(200):
        dc.add(trial, one_wrong)
    assert dc.first_failure() is not None  # missed by all 200 calls with probability (1 - 2^-4)^200 < 1e-5
