"""One baseline per search: the eager and torch.compile readings every speedup of a search divides by.

A baseline read twice is two numbers (an H200's torch.compile of one layer read 320 µs, then 467 µs on another
machine a quarter of an hour later), and a sandbox measures one again whenever its cache misses: a restart with
another cache, another process, a second GPU's lane, a changed cache key. Ranking attempts divided by different
readings side by side ranks the readings, not the kernels. So the first readings a search's evaluations used are
pinned to the search, per workload and kind (`search_baselines`, generation 1), and every later evaluation of the
search divides by them, whatever its sandbox read (`apply_in`: at recording, in the same transaction). A
re-measurement pins a new generation and restates every attempt of the search against it (`repin`), so one ranking
never mixes two generations. Restating is the evaluator's arithmetic on a measured baseline, not an edit: the
schema's trigger lets an attempt's baselines and the ratios divided by them change, and nothing else of what was
measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import aiosqlite

from ksearch.worldmodel import rows
from ksearch.worldmodel.models import (
    CPU_INTERPRETER,
    BaselineReading,
    Evaluation,
    Strict,
    WorkloadTiming,
    utcnow,
)

if TYPE_CHECKING:
    from ksearch.worldmodel.store import Store

DRIFT = 0.03
"""An evaluation whose own baseline reading is further than this from the search's pinned one says so."""
REMEASURE_HOW = "`ksearch baselines {search} --remeasure`"
"""How a search's baselines are measured again, in words every face shows."""


class PinnedBaseline(Strict):
    """A search's baseline for one workload: what its speedups divide by."""

    workload: str
    """The workload's name."""
    generation: int
    """1 for the search's first baselines, one more per re-measurement."""
    eager: BaselineReading | None = None
    """The reference in eager PyTorch."""
    compile: BaselineReading | None = None
    """The torch.compile baseline."""
    pinned_at: datetime
    """When it was pinned to the search."""
    reason: str = ""
    """Why it was pinned: the search's first evaluation on this workload, or a re-measurement."""


class Restated(Strict):
    """What a re-measurement did to a search."""

    generation: int
    """The new generation every attempt's ratios now divide by."""
    baselines: list[PinnedBaseline]
    """The new pinned baselines, per workload."""
    before: list[PinnedBaseline]
    """The ones they replace."""
    attempts_restated: int
    """Attempts whose ratios were restated against the new baselines."""


def when_where(r: BaselineReading, *, full_uuid: bool = False) -> str:
    """ "measured 2026-12-04 19:02 UTC on NVIDIA H200 GPU-1a2b3c4d…" (what is known of it)."""
    when = (
        f"measured {r.measured_at.strftime('%Y-%m-%d %H:%M')} UTC"
        if r.measured_at
        else "measured (when unknown)"
    )
    uuid = r.gpu_uuid if full_uuid or not r.gpu_uuid else f"{r.gpu_uuid[:12]}…"
    where = " ".join(x for x in (r.device, uuid) if x)
    return f"{when} on {where}" if where else when


def _reading(text: str | None) -> BaselineReading | None:
    return BaselineReading.model_validate_json(text) if text else None


def _dump(r: BaselineReading | None) -> str | None:
    return r.model_dump_json() if r is not None else None


async def pins_in(db: aiosqlite.Connection, search_id: int) -> dict[str, PinnedBaseline]:
    """The search's current pinned baselines by workload (its latest generation); {} before any."""
    found = await rows.fetchall(
        db,
        "SELECT workload, generation, eager, compile, pinned_at, reason FROM search_baselines "
        "WHERE search_id = ? AND generation = (SELECT max(generation) FROM search_baselines WHERE search_id = ?)",
        (search_id, search_id),
    )
    return {
        wl: PinnedBaseline(
            workload=wl,
            generation=gen,
            eager=_reading(e),
            compile=_reading(c),
            pinned_at=datetime.fromisoformat(at),
            reason=why,
        )
        for wl, gen, e, c, at, why in found
    }


async def pinned(store: Store, search_id: int) -> list[PinnedBaseline]:
    """The search's current pinned baselines, by workload name."""
    async with store.reading() as db:
        got = await pins_in(db, search_id)
    return [got[k] for k in sorted(got)]


async def _put(db: aiosqlite.Connection, search_id: int, p: PinnedBaseline) -> None:
    await db.execute(
        "INSERT INTO search_baselines (search_id, generation, workload, eager, compile, pinned_at, reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (search_id, generation, workload) DO UPDATE SET "
        "eager = excluded.eager, compile = excluded.compile, reason = excluded.reason",
        (
            search_id,
            p.generation,
            p.workload,
            _dump(p.eager),
            _dump(p.compile),
            p.pinned_at.isoformat(),
            p.reason,
        ),
    )


def _geomean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in vals) / len(vals)) if vals else None


def _time_us(t: Mapping[str, Any]) -> float:
    """The protocol's statistic of a stored timing (WorkloadTiming.time_us)."""
    if t.get("statistic") == "mean" and t.get("mean_us") is not None:
        return float(t["mean_us"])
    return float(t["median_us"])


def _restated_timing(t: Mapping[str, Any], pin: PinnedBaseline) -> dict[str, Any]:
    """The fields of one timing (as stored) that dividing by `pin` changes, with their new values."""
    if t.get("device") == CPU_INTERPRETER:
        return {}  # the interpreter's times are divided by nothing
    stat = t.get("statistic", "median")
    val = _time_us(t)
    out: dict[str, Any] = {"baseline_generation": pin.generation}
    for kind, r in (("eager", pin.eager), ("compile", pin.compile)):
        if r is None or r.statistic != stat:
            continue  # never divide one statistic by another
        # under the name the stored timing uses (`eager_median_us` before the field was named for what it holds)
        old = f"{kind}_median_us"
        out[old if old in t else f"{kind}_us"] = r.time_us
        out[f"{kind}_baseline"] = r.model_dump(mode="json")
        out[f"speedup_vs_{kind}"] = r.time_us / val if val > 0 else None
        if kind == "compile":
            out["compile_mode"] = r.compile_mode
    return out


def _restated(
    ev: Mapping[str, Any], pins: Mapping[str, PinnedBaseline]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per timing, the fields restating changes; and the evaluation's own (its geomean speedups)."""
    per: list[dict[str, Any]] = []
    merged: list[dict[str, Any]] = []
    for t in ev.get("timings") or []:
        pin = pins.get(t.get("workload", ""))
        change = _restated_timing(t, pin) if pin is not None else {}
        per.append(change)
        merged.append({**t, **change})
    top = {
        "speedup_vs_eager": _geomean(m.get("speedup_vs_eager") for m in merged),
        "speedup_vs_compile": _geomean(m.get("speedup_vs_compile") for m in merged),
    }
    return per, top


def restate(ev: Evaluation, pins: Mapping[str, PinnedBaseline]) -> Evaluation:
    """The evaluation with its speedups divided by the pinned baselines (pure arithmetic on what was measured)."""
    per, top = _restated(ev.model_dump(mode="json"), pins)
    if not any(per):
        return ev
    timings = [t.model_copy(update=_typed(ch)) if ch else t for t, ch in zip(ev.timings, per, strict=True)]
    return ev.model_copy(update={"timings": timings, **top})


def _typed(change: dict[str, Any]) -> dict[str, Any]:
    out = dict(change)
    for k in ("eager_baseline", "compile_baseline"):
        if k in out:
            out[k] = BaselineReading.model_validate(out[k])
    return out


def _first_pins(ev: Evaluation, pins: dict[str, PinnedBaseline], generation: int) -> list[PinnedBaseline]:
    """The readings of `ev` that become the search's pinned baselines: those of a workload or kind none is pinned
    for yet (GPU timings only: the interpreter's are divided by nothing)."""
    out = []
    for t in ev.timings:
        if t.device == CPU_INTERPRETER or (t.eager_baseline is None and t.compile_baseline is None):
            continue
        have = pins.get(t.workload)
        if have is None:
            p = PinnedBaseline(
                workload=t.workload,
                generation=generation,
                eager=t.eager_baseline,
                compile=t.compile_baseline,
                pinned_at=utcnow(),
                reason="the search's first evaluation on this workload",
            )
        elif (have.eager is None and t.eager_baseline) or (have.compile is None and t.compile_baseline):
            p = have.model_copy(
                update={
                    "eager": have.eager or t.eager_baseline,
                    "compile": have.compile or t.compile_baseline,
                }
            )
        else:
            continue
        pins[t.workload] = p
        out.append(p)
    return out


def _notes(ev: Evaluation, pins: Mapping[str, PinnedBaseline], search: str) -> list[str]:
    """What an evaluation says about the baselines it was divided by: its own reading far off the pinned one, or
    the pinned one measured on another GPU."""
    notes: list[str] = []
    how = REMEASURE_HOW.format(search=search)
    for t in ev.timings:
        pin = pins.get(t.workload)
        if pin is None or t.device == CPU_INTERPRETER:
            continue
        for label, own, kept in (
            ("eager", t.eager_baseline, pin.eager),
            ("torch.compile", t.compile_baseline, pin.compile),
        ):
            if own is None or kept is None or kept.time_us <= 0:
                continue
            off = own.time_us / kept.time_us - 1
            if abs(off) > DRIFT and own != kept:
                notes.append(
                    f"note: this evaluation's own {label} reading on {t.workload} was {own.time_us:.1f} us, "
                    f"{off:+.0%} off the search's baseline {kept.time_us:.1f} us ({when_where(kept)}); its speedups "
                    f"divide by the search's; re-measure with {how}"
                )
        kept_on = next((r for r in (pin.compile, pin.eager) if r is not None and r.gpu_uuid), None)
        if kept_on is not None and t.gpu_uuid and kept_on.gpu_uuid != t.gpu_uuid:
            notes.append(
                f"note: baseline measured on another GPU ({when_where(kept_on)}) than this evaluation's "
                f"({t.device} {t.gpu_uuid[:12]}…); re-measure with {how}"
            )
    return list(dict.fromkeys(notes))


async def apply_in(db: aiosqlite.Connection, search_id: int, ev: Evaluation) -> Evaluation:
    """Within a write transaction: pin what `ev` measured where the search has no baseline yet, then divide `ev` by
    the search's pinned baselines, with notes where its own reading or GPU differs. Idempotent."""
    pins = await pins_in(db, search_id)
    generation = max((p.generation for p in pins.values()), default=1)
    for p in _first_pins(ev, pins, generation):
        await _put(db, search_id, p)
    if not pins:
        return ev
    search = await rows.search_row(db, search_id)
    notes = [n for n in _notes(ev, pins, search.name) if n not in ev.flags]
    out = restate(ev, pins)
    return out.model_copy(update={"flags": [*out.flags, *notes]}) if notes else out


async def apply(store: Store, search_id: int, ev: Evaluation) -> Evaluation:
    """`apply_in` in a transaction of its own: a tool's evaluation as the search records it."""
    async with store.transaction() as db:
        return await apply_in(db, search_id, ev)


async def repin(
    store: Store, search_id: int, readings: Mapping[str, Mapping[str, BaselineReading | None]], reason: str
) -> Restated:
    """Pin a new generation of the search's baselines from fresh `readings` (workload → eager / compile) and
    restate every attempt of the search against it, in one transaction. A kind that could not be measured anew
    keeps its reading from the generation before (said in `reason`): no ratio of the search is left behind."""
    async with store.transaction() as db:
        before = await pins_in(db, search_id)
        generation = max((p.generation for p in before.values()), default=0) + 1
        now = utcnow()
        new: dict[str, PinnedBaseline] = {}
        for wl in sorted(set(before) | set(readings)):
            got, old = readings.get(wl, {}), before.get(wl)
            eager = got.get("eager") or (old.eager if old else None)
            comp = got.get("compile") or (old.compile if old else None)
            kept = [
                k
                for k, r in (("eager", got.get("eager")), ("torch.compile", got.get("compile")))
                if r is None
            ]
            kept = [k for k in kept if (old and (old.eager if k == "eager" else old.compile))]
            why = reason + (
                f"; {' and '.join(kept)} kept from generation {old.generation}" if kept and old else ""
            )
            if eager is None and comp is None:
                continue
            new[wl] = PinnedBaseline(
                workload=wl, generation=generation, eager=eager, compile=comp, pinned_at=now, reason=why
            )
            await _put(db, search_id, new[wl])
        found = await rows.fetchall(
            db,
            "SELECT id, evaluation FROM attempts WHERE search_id = ? AND evaluation IS NOT NULL",
            (search_id,),
        )
        restated = 0
        for aid, text in found:
            if await _restate_stored(db, int(aid), json.loads(text), new):
                restated += 1
    return Restated(
        generation=generation,
        baselines=[new[k] for k in sorted(new)],
        before=[before[k] for k in sorted(before)],
        attempts_restated=restated,
    )


async def _restate_stored(
    db: aiosqlite.Connection, attempt_id: int, ev: dict[str, Any], pins: Mapping[str, PinnedBaseline]
) -> bool:
    """Restate one stored attempt in place: json_set changes only the restated fields, so the rest of what was
    measured stays as written, byte for byte (the trigger compares it)."""
    per, top = _restated(ev, pins)
    if not any(per):
        return False
    paths: list[Any] = []
    for i, change in enumerate(per):
        for k, v in change.items():
            paths += [f"$.timings[{i}].{k}", rows.dumps(v)]
    for k, v in top.items():
        paths += [f"$.{k}", rows.dumps(v)]
    sets = ", ".join("?, json(?)" for _ in range(len(paths) // 2))
    speedup = top["speedup_vs_eager"] if ev.get("status") == "ok" else None
    await db.execute(
        f"UPDATE attempts SET evaluation = json_set(evaluation, {sets}), speedup = ? WHERE id = ?",
        (*paths, speedup, attempt_id),
    )
    return True


def _read(t: WorkloadTiming) -> list[BaselineReading]:
    return [r for r in (t.eager_baseline, t.compile_baseline) if r is not None]


def baselines_line(ev: Evaluation) -> str | None:
    """When and where the baselines an evaluation's GPU speedups divide by were measured, in one line:
    "baselines: the search's (generation 1), measured 2026-12-04 19:02 UTC on NVIDIA H200 GPU-1a2b3c4d-…"; None
    where no GPU timing was divided by one."""
    timed = [t for t in ev.timings if t.device != CPU_INTERPRETER and _read(t)]
    if not timed:
        return None
    gens = sorted({t.baseline_generation for t in timed if t.baseline_generation is not None})
    whose = f"the search's (generation {', '.join(map(str, gens))})" if gens else "this evaluation's"
    by_place: dict[str, list[str]] = {}
    for t in timed:
        for r in _read(t):
            names = by_place.setdefault(when_where(r), [])
            if t.workload not in names:
                names.append(t.workload)
    if len(by_place) == 1:
        return f"baselines: {whose}, {next(iter(by_place))}"
    parts = [f"{', '.join(w)}: {place}" for place, w in by_place.items()]
    return f"baselines: {whose}; " + "; ".join(parts)


def pinned_text(pins: Iterable[PinnedBaseline]) -> list[str]:
    """One line per pinned workload: each baseline's statistic, spread, n, when and where."""
    out = []
    for p in pins:
        parts = []
        for label, r in (("eager", p.eager), ("torch.compile", p.compile)):
            if r is None:
                continue
            half = 100 * r.rel_ci
            mode = f" [{r.compile_mode}]" if r.compile_mode else ""
            parts.append(
                f"{label}{mode} {r.statistic} {r.time_us:.1f} us (95% CI ±{half:.1f}%, n={r.n}, {r.protocol}; "
                f"{when_where(r, full_uuid=True)})"
                + (f" re-measured: {r.remeasured}" if r.remeasured else "")
            )
        out.append(f"{p.workload} (generation {p.generation}): " + ("; ".join(parts) or "none"))
    return out
