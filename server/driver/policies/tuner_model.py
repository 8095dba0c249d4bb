"""The offline tuner's model of what it measured: each (parameter, value)'s additive effect on the log-speedup,
fitted by ridge least squares to every correct, GPU-timed attempt; a prior for values not measured yet; the
observations it is fitted to. Pure arithmetic: no store, no sandbox, no tree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ksearch.server.driver.policies.base import AttemptOutcome
from ksearch.server.driver.policies.tuner_tree import Config

Feature = tuple[str, str]  # (parameter, repr(value))

# Names that grow the work per program: for a compute-bound op, larger is the better first bet.
_SIZE_LIKE = re.compile(r"BLOCK|TILE|WARP|STAGE|SIZE|GROUP|SPLIT|_[MNK]$", re.IGNORECASE)


def ordered(allowed: list[Any]) -> list[Any]:
    """Allowed values in their natural order: numeric ones sorted, others as declared; duplicates dropped."""
    seen: list[Any] = []
    for v in allowed:
        if v not in seen:
            seen.append(v)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen)
    return sorted(seen) if numeric else seen


def config_key(cfg: Config) -> tuple[Feature, ...]:
    return tuple(sorted((k, repr(v)) for k, v in cfg.items()))


def prior(name: str, current: Any, new: Any, allowed: list[Any], bound: str) -> float:
    """How promising a one-at-a-time move looks before anything is measured: near moves first, and
    moves to larger tiles / more warps / more stages first for compute-bound work."""
    order = ordered(allowed)
    step: float
    if current in order:
        step = order.index(new) - order.index(current)
    else:
        step = order.index(new) - (len(order) - 1) / 2
    p = 0.6 - 0.07 * (abs(step) - 1)
    if _SIZE_LIKE.search(name) and step > 0:
        p += 0.1 if bound in ("compute", "mixed") else 0.03
    return round(min(0.95, max(0.05, p)), 4)


@dataclass
class Observation:
    cfg: Config
    log_speedup: float | None  # None: the attempt failed (compile error, incorrect, crash, ...)
    outcome: AttemptOutcome
    # not measured and not failed (the CPU interpreter ran out of time): never blamed on its values
    inconclusive: bool = False

    @property
    def correct(self) -> bool:
        """It ran correctly, timed on a GPU or not (the CPU interpreter's times rank nothing)."""
        return self.outcome.status == "ok"


class EffectModel:
    """Additive model of log-speedup: mean + one effect per (parameter, value), fitted by ridge least
    squares. With one-at-a-time data it predicts a combination of two good moves as the sum of their gains.
    An unmeasured value of a numeric parameter is estimated from its measured neighbours (interpolated
    between them, or continued past the last one at half the slope), so a trend is followed."""

    def __init__(
        self, observations: list[tuple[Config, float]], space: dict[str, list[Any]], ridge: float = 0.05
    ) -> None:
        self.space = space
        self.features = sorted({(k, repr(v)) for cfg, _ in observations for k, v in cfg.items()})
        index = {f: i for i, f in enumerate(self.features)}
        ys = [y for _, y in observations]
        self.mean = sum(ys) / len(ys) if ys else 0.0
        n = len(self.features)
        a = [[0.0] * n for _ in range(n)]
        b = [0.0] * n
        for cfg, y in observations:
            rows = [index[(k, repr(v))] for k, v in cfg.items()]
            for i in rows:
                b[i] += y - self.mean
                for j in rows:
                    a[i][j] += 1.0
        for i in range(n):
            a[i][i] += ridge
        self.weights = dict(zip(self.features, _solve(a, b), strict=True))

    def knows(self, cfg: Config) -> bool:
        return all((k, repr(v)) in self.weights for k, v in cfg.items())

    def predict(self, cfg: Config) -> float:
        return self.mean + sum(self.estimate(k, v) for k, v in cfg.items())

    def effect(self, name: str, value: Any) -> float | None:
        """The fitted effect of a measured value; None when the value was never measured."""
        return self.weights.get((name, repr(value)))

    def estimate(self, name: str, value: Any) -> float:
        known = self.effect(name, value)
        if known is not None:
            return known
        order = ordered(self.space.get(name, []))
        numeric = order and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in order)
        if not numeric or value not in order:
            return 0.0
        j = order.index(value)
        measured = [(i, e) for i, v in enumerate(order) if (e := self.effect(name, v)) is not None]
        below = [(i, e) for i, e in measured if i < j]
        above = [(i, e) for i, e in measured if i > j]
        if below and above:
            (i0, e0), (i1, e1) = below[-1], above[0]
            return e0 + (e1 - e0) * (j - i0) / (i1 - i0)
        side = below[-2:] if below else above[:2]
        if not side:
            return 0.0
        (i_near, e_near) = side[-1] if below else side[0]
        if len(side) < 2:
            return e_near
        slope = (side[1][1] - side[0][1]) / (side[1][0] - side[0][0])
        return e_near + 0.5 * slope * (j - i_near)


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the system is small and, with the ridge, regular)."""
    n = len(b)
    m = [[*row, rhs] for row, rhs in zip(a, b, strict=True)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x
