"""Is candidate A faster than candidate B beyond measurement noise?

Each evaluation carries, per workload, its protocol's statistic (ksearch's median with a 95% distribution-free
CI, or an owner's mean with its 95% CI). We turn each CI into a standard error of log(time) (so ratios combine additively), take the
geometric mean over the workloads both were timed on, and call A faster only when the lower bound
of the combined speedup is above 1 *and* the speedup itself reaches `min_gain`. Never a bare `<`.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from ksearch.worldmodel.models import Evaluation, WorkloadTiming

_Z95 = 1.959963984540054
# Timings quantize and medians drift between runs more than one run's CI admits; this floor
# (0.25% relative standard error per median) keeps near-zero CIs from claiming certainty.
_MIN_REL_SE = 0.0025


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faster: bool
    ratio: float | None  # geometric-mean speedup of A over B (>1: A is faster); None if not comparable
    ci_low: float | None
    ci_high: float | None
    reason: str
    per_workload: dict[str, float] = Field(
        default_factory=dict
    )  # B time / A time per workload (the protocol's statistic)


def _log_se(t: WorkloadTiming) -> float:
    """Standard error of log(time) implied by the stored 95% CI of the protocol's statistic."""
    if t.time_us <= 0:
        return math.inf
    lo = max(t.ci_low_us, 1e-12)
    hi = max(t.ci_high_us, lo)
    se = (math.log(hi) - math.log(lo)) / (2 * _Z95)
    return max(se, _MIN_REL_SE)


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


MIN_GAIN = 0.02  # the smallest speedup worth acting on
CONFIDENCE = 0.95


def compare(
    a: Evaluation, b: Evaluation, min_gain: float = MIN_GAIN, confidence: float = CONFIDENCE
) -> Verdict:
    """Decide whether `a` is faster than `b` beyond noise, over the workloads both were timed on.

    `min_gain` is the smallest speedup worth acting on (0.02 = 2%); `confidence` the level of the
    one-sided decision's two-sided interval on the geometric-mean speedup.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if min_gain < 0:
        raise ValueError(f"min_gain must be >= 0, got {min_gain}")

    def no(reason: str) -> Verdict:
        return Verdict(faster=False, ratio=None, ci_low=None, ci_high=None, reason=reason)

    if a.status != "ok":
        return no(f"A is not a valid timed result (status {a.status})")
    if b.status != "ok":
        # a correct, timed candidate beats one that is not: no noise question arises
        if a.timings:
            return Verdict(
                faster=True,
                ratio=None,
                ci_low=None,
                ci_high=None,
                reason=f"B has no valid timing (status {b.status}); A is correct and timed",
            )
        return no("neither has timings")
    ta = {t.workload: t for t in a.timings}
    tb = {t.workload: t for t in b.timings}
    common = sorted(set(ta) & set(tb))
    if not common:
        return no("no workload was timed for both")
    devices = {ta[w].device for w in common} | {tb[w].device for w in common}
    if len(devices) != 1:
        return no(f"timings come from different devices ({', '.join(sorted(devices))}); never compared")
    protocols = {ta[w].protocol for w in common} | {tb[w].protocol for w in common}
    if len(protocols) != 1:
        return no(f"timed by different protocols ({', '.join(sorted(protocols))}); never compared")
    if a.env and b.env and a.env.key() != b.env.key():
        return no(f"measured in different environments ({a.env.key()} vs {b.env.key()})")

    logs, var = [], 0.0
    per: dict[str, float] = {}
    for w in common:
        x, y = ta[w], tb[w]
        if x.time_us <= 0 or y.time_us <= 0:
            return no(f"workload {w} has a non-positive time")
        lr = math.log(y.time_us) - math.log(x.time_us)
        logs.append(lr)
        per[w] = math.exp(lr)
        var += _log_se(x) ** 2 + _log_se(y) ** 2
    k = len(logs)
    mean = sum(logs) / k
    se = math.sqrt(var) / k
    z = _z(confidence)
    ratio, lo, hi = math.exp(mean), math.exp(mean - z * se), math.exp(mean + z * se)
    where = f"over {k} workload(s)"
    if lo <= 1.0:
        reason = f"speedup {ratio:.4f} (CI {lo:.4f}-{hi:.4f}) {where}: not beyond noise"
        faster = False
    elif ratio < 1.0 + min_gain:
        reason = f"speedup {ratio:.4f} (CI {lo:.4f}-{hi:.4f}) {where}: real but below the {min_gain:.1%} minimum gain"
        faster = False
    else:
        reason = f"speedup {ratio:.4f} (CI {lo:.4f}-{hi:.4f}) {where}: faster beyond noise"
        faster = True
    return Verdict(faster=faster, ratio=ratio, ci_low=lo, ci_high=hi, reason=reason, per_workload=per)
