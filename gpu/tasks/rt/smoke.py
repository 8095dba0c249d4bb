"""The smaller smoke workload of a KernelBench file that declares none: searched in the facts subprocess.

Run by gpu/tasks/rt/facts.py. The candidates are the file's size knobs scaled down (gpu/tasks/shrink.py),
each judged by a fake run (gpu/tasks/rt/measure.py) against the smoke budget and confirmed by a real one.
"""

from __future__ import annotations

import time

from ksearch.gpu.task import Workload
from ksearch.gpu.tasks.facts import SmokeProbe, WorkloadProbe
from ksearch.gpu.tasks.rt.measure import Prober, first_line
from ksearch.gpu.tasks.shrink import FACTORS, SizeKnobs, halved, halving_moves, shrunk, size_knobs

SMOKE_ELEMENTS = 1 << 18  # a derived smoke workload touches at most this many elements ...
SMOKE_FLOPS = 1 << 28  # ... and counts at most this many FLOPs (cheap under the Triton interpreter)
MAX_REAL_TRIES = 3


def _budget_ratio(p: WorkloadProbe) -> float:
    """How far over the smoke budget a run is: 1.0 at the budget, below it inside."""
    return max(p.elements() / SMOKE_ELEMENTS, (p.flops_counted or 0.0) / SMOKE_FLOPS)


def _small(p: WorkloadProbe) -> bool:
    return _budget_ratio(p) <= 1.0


def _timed(prober: Prober, wl: Workload) -> tuple[WorkloadProbe, float]:
    t0 = time.perf_counter()
    p = prober.measure(wl, fake=False)
    return p, time.perf_counter() - t0


def derive_smoke(prober: Prober, probes: dict[str, WorkloadProbe]) -> tuple[SmokeProbe, WorkloadProbe]:
    """A smaller smoke workload for a native file that gave none, and its facts from a real run."""
    task = prober.task
    copy = task.smoke()
    base = next(w for w in task.workloads if w.split == "search")
    base_probe = probes[base.name]
    as_copy = base_probe.model_copy(update={"workload": copy.name, "split": "smoke"}, deep=True)
    report = SmokeProbe(derived_from=base.name, elements=base_probe.elements())
    if not base_probe.inputs:
        report.note = f"not shrunk: the inputs could not be made under fake tensors ({base_probe.error})"
        return report, as_copy
    knobs = size_knobs(task.source_path.read_text(), task.source_path, base.params)
    if knobs.empty():
        report.note = "not shrunk: the file sizes its inputs with no integer constant, parameter or literal size argument"
        return report, as_copy
    # the loader makes the same call without running anything (gpu/tasks/native.py): keep them in step
    if not knobs.worth_shrinking() or (base_probe.outputs is not None and _small(base_probe)):
        report.note = f"not shrunk: {base.name!r} is already small"
        return report, as_copy
    search = _SmokeSearch(prober, base, copy.name, knobs, base_probe)
    found = search.run()
    if found is None:
        report.note = "not shrunk: " + (
            "; ".join(search.failures[-3:]) or "no smaller size fit the smoke budget"
        )
        return report, as_copy
    return found


class _Ran:
    """A candidate whose fake run worked."""

    def __init__(self, knobs: SizeKnobs, label: str, factor: int, probe: WorkloadProbe) -> None:
        self.knobs, self.label, self.factor, self.probe = knobs, label, factor, probe
        self.ratio = _budget_ratio(probe)


class _SmokeSearch:
    """Smaller sizes whose fake run works and fits the smoke budget, confirmed by a real run.

    One common factor for every size first (keeps their relations), tried from the smallest sizes up:
    a fake run's cost grows with the sizes (a recurrent model's with its sequence length), so the
    runs near the file's GPU sizes, the slowest, are never made. The sizes grow while they fit the
    budget, and the largest that fits is used. Where no common factor both runs and fits (a size that
    must stay large, like an image that is pooled three times), single sizes are halved from the
    smallest that ran, as long as the model still runs. Where nothing fits at all (weights the
    constructor sizes by itself, as a ResNet's channel widths), the cheapest sizes that ran are used:
    still over the budget, but never the file's GPU sizes when anything smaller ran.
    """

    MAX_FAKE_RUNS = 120

    def __init__(
        self, prober: Prober, base: Workload, name: str, knobs: SizeKnobs, base_probe: WorkloadProbe
    ) -> None:
        self.prober, self.base, self.name, self.knobs = prober, base, name, knobs
        # a forward that fails under fake tensors anyway (an .item()) cannot tell a broken size: inputs only
        self.judge_forward = base_probe.outputs is not None
        self.base_ratio = _budget_ratio(base_probe)
        self.tried: set[str] = set()
        self.failures: list[str] = []
        self.ran: dict[str, _Ran] = {}  # by candidate
        self.rejected: set[str] = set()  # candidates whose real run failed
        self.fake_runs = 0
        self.reals = 0

    def _fake(self, cand: SizeKnobs, label: str, *, factor: int, ran_as: str = "") -> WorkloadProbe | None:
        """The fake run of a candidate, or None where the model does not run at these sizes (or it
        ran before). `ran_as`: how a report would describe these sizes (default: `label`)."""
        sig = cand.model_dump_json()
        if sig in self.tried or cand == self.knobs or self.fake_runs >= self.MAX_FAKE_RUNS:
            return None
        self.tried.add(sig)
        self.fake_runs += 1
        wl = _smoke_workload(self.name, self.base, self.knobs, cand)
        try:
            self.prober.impl.module_for(wl)
        except Exception as exc:  # the file's own module-level code rejects these sizes
            self.failures.append(f"{label}: {first_line(exc)}")
            return None
        fake = self.prober.measure(wl, fake=True)
        if not fake.inputs or (self.judge_forward and fake.outputs is None):
            self.failures.append(f"{label}: {fake.error}")
            return None
        self.ran[sig] = _Ran(cand, ran_as or label, factor, fake)
        return fake

    def _confirm(
        self, cand: SizeKnobs, label: str, factor: int, *, over_budget: bool = False
    ) -> tuple[SmokeProbe, WorkloadProbe] | None:
        self.reals += 1
        wl = _smoke_workload(self.name, self.base, self.knobs, cand)
        sig = cand.model_dump_json()
        ran = self.ran.get(sig)
        if ran is not None and ran.probe.outputs is not None:
            # the fake run gave the facts at these sizes: the real run only has to work
            t0 = time.perf_counter()
            error = self.prober.run_plain(wl)
            seconds = time.perf_counter() - t0
            real = ran.probe
        else:
            real, seconds = _timed(self.prober, wl)
            error = real.error if real.outputs is None else None
        if error is not None:
            self.failures.append(f"{label}: {error}")
            self.rejected.add(sig)
            return None
        report = SmokeProbe(
            derived_from=self.base.name,
            factor=factor,
            constants=wl.constants,
            params={k: v for k, v in wl.params.items() if self.base.params.get(k) != v},
            changes=self.knobs.changes(cand),
            verified=True,
            over_budget=over_budget,
            seconds=seconds,
            elements=real.elements(),
            note=f"sizes of {self.base.name!r} {label}; the reference ran on it",
        )
        return report, real

    def _ladder(self) -> list[tuple[int, SizeKnobs]]:
        """Each distinct common-factor candidate once (under its smallest factor), smallest sizes first."""
        out: list[tuple[int, SizeKnobs]] = []
        seen = {self.knobs.model_dump_json()}
        for factor in FACTORS[1:]:
            cand = shrunk(self.knobs, factor)
            sig = cand.model_dump_json()
            if sig not in seen:
                seen.add(sig)
                out.append((factor, cand))
        return out[::-1]

    def run(self) -> tuple[SmokeProbe, WorkloadProbe] | None:
        fits: list[tuple[int, SizeKnobs]] = []
        smallest_ran: tuple[SizeKnobs, int] | None = None
        prev_ratio: float | None = None  # of the next smaller candidate, where it ran
        for factor, cand in self._ladder():
            fake = self._fake(cand, f"divided by {factor}", factor=factor)
            if fake is None:
                prev_ratio = None
                continue
            if smallest_ran is None:
                smallest_ran = (cand, factor)
            ratio = _budget_ratio(fake)
            if ratio > 1.0:
                break  # larger sizes only cost more
            fits.append((factor, cand))
            # the cost grew by prev -> ratio in the last step; where one more step at that rate leaves
            # the budget, the (slowest) fake run that would show it is not made
            if prev_ratio and ratio * ratio / prev_ratio > 1.0:
                break
            prev_ratio = ratio
        for factor, cand in reversed(fits):  # the largest that fits first
            found = self._confirm(cand, f"divided by {factor}", factor)
            if found is not None or self.reals >= MAX_REAL_TRIES:
                return found
        if not fits and self.judge_forward:
            found = self._halve_from(*(smallest_ran or (self.knobs, 1)))
            if found is not None:
                return found
        return self._cheapest_that_ran()

    def _halve_from(self, current: SizeKnobs, factor: int) -> tuple[SmokeProbe, WorkloadProbe] | None:
        label = f"divided by {factor}, then some halved" if factor > 1 else "partly halved"
        while self.reals < MAX_REAL_TRIES and self.fake_runs < self.MAX_FAKE_RUNS:
            for refs in halving_moves(current):
                cand = halved(current, refs)
                fake = self._fake(
                    cand, f"halving {', '.join(n for _, n in refs)}", factor=factor, ran_as=label
                )
                if fake is not None:
                    current = cand
                    break
            else:
                return None  # no single step keeps the model running
            if _small(fake):
                found = self._confirm(current, label, factor)
                if found is not None:
                    return found
        return None

    def _cheapest_that_ran(self) -> tuple[SmokeProbe, WorkloadProbe] | None:
        """Nothing fit the budget: the cheapest sizes that ran (and cost less than the file's), if any."""
        left = sorted(
            (r for sig, r in self.ran.items() if r.ratio < self.base_ratio and sig not in self.rejected),
            key=lambda r: r.ratio,
        )
        for r in left:
            if self.reals >= MAX_REAL_TRIES:
                break
            found = self._confirm(r.knobs, r.label, r.factor, over_budget=True)
            if found is not None:
                found[0].note += f" (the cheapest sizes that ran, {r.ratio:.3g}x the smoke budget)"
                return found
        return None


def _smoke_workload(name: str, base: Workload, knobs: SizeKnobs, cand: SizeKnobs) -> Workload:
    constants = {k: v for k, v in cand.constants.items() if v != knobs.constants.get(k)}
    params = dict(base.params)
    params.update({k: v for k, v in cand.params.items() if v != knobs.params.get(k)})
    return Workload(name=name, params=params, split="smoke", constants=constants)
