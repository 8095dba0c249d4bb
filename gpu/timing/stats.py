"""Robust summaries of repeated timings: median, IQR and a distribution-free CI of the median.

Pure Python (no torch, no numpy) so the server process and `compare` can use it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Summary:
    median: float
    iqr: float
    ci_low: float
    ci_high: float
    n: int
    mean: float
    minimum: float

    @property
    def rel_halfwidth(self) -> float:
        """Half the CI width relative to the median (inf when it cannot be bounded yet)."""
        if self.median <= 0 or not math.isfinite(self.ci_high - self.ci_low):
            return math.inf
        return max(self.median - self.ci_low, self.ci_high - self.median) / self.median


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted data."""
    if not sorted_xs:
        raise ValueError("quantile of no data")
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    frac = pos - lo
    return sorted_xs[lo] * (1 - frac) + sorted_xs[hi] * frac


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """0-based ranks (lo, hi) of the order statistics bounding the median with >= `confidence`.

    None when n is too small for any bound at that level (n < 6 at 95%).
    """
    alpha = 1.0 - confidence
    if n > 400:  # normal approximation of the binomial; exact sums get slow and add nothing
        z = NormalDist().inv_cdf(1 - alpha / 2)
        k = math.floor(n / 2 - z * math.sqrt(n) / 2)
        return (max(k - 1, 0), min(n - k, n - 1)) if k >= 1 else None
    # largest k with P(X <= k-1) <= alpha/2: then [x_(k), x_(n-k+1)] (1-based) covers the median
    log_half_n = -n * math.log(2.0)
    cdf, best = 0.0, None
    for k in range(1, n // 2 + 1):
        i = k - 1  # add P(X = k-1)
        cdf += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n)
        if cdf <= alpha / 2:
            best = k
        else:
            break
    if best is None:
        return None
    return best - 1, n - best


def summarize(samples: Sequence[float], confidence: float = 0.95) -> Summary:
    if not samples:
        raise ValueError("no samples to summarize")
    xs = sorted(samples)
    n = len(xs)
    med = quantile(xs, 0.5)
    ranks = median_ci_ranks(n, confidence)
    if ranks is None:
        lo, hi = xs[0], xs[-1]  # too few samples: the range is the honest bound
    else:
        lo, hi = xs[ranks[0]], xs[ranks[1]]
    return Summary(
        median=med,
        iqr=quantile(xs, 0.75) - quantile(xs, 0.25),
        ci_low=lo,
        ci_high=hi,
        n=n,
        mean=sum(xs) / n,
        minimum=xs[0],
    )


def mean_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float | None:
    """Half the width of the normal-approximation CI of the mean (None below 2 samples)."""
    n = len(samples)
    if n < 2:
        return None
    m = sum(samples) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in samples) / (n - 1))
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2) * sd / math.sqrt(n)


def geomean(xs: Sequence[float]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    if not vals:
        return None
    return math.exp(sum(math.log(x) for x in vals) / len(vals))


UNSTEADY_REL = 0.03
"""A baseline reading whose mean and median lie further apart than this (relative to the median), or whose 95% CI
is wider than this either side of its statistic, is too noisy to divide every later speedup by."""


def unsteady(
    value: float,
    median: float,
    mean: float | None,
    ci_low: float,
    ci_high: float,
    limit: float = UNSTEADY_REL,
) -> str | None:
    """Why one reading (its statistic `value` with its CI, its median and mean) is too noisy to keep, in words:
    "bimodal (mean 745.0 / median 769.0 us)" where the mean and median are more than `limit` apart (two clusters
    of calls pull the mean off the median: a workload that sometimes runs another kernel, a clock that changed
    mid-loop), "wide (95% CI ±4.1% of 769.0 us)" where the CI is; None where it is steady."""
    if mean is not None and median > 0 and abs(mean - median) / median > limit:
        return f"bimodal (mean {mean:.1f} / median {median:.1f} us)"
    if value > 0:
        half = max(value - ci_low, ci_high - value)
        if half / value > limit:
            return f"wide (95% CI ±{100 * half / value:.1f}% of {value:.1f} us)"
    return None
