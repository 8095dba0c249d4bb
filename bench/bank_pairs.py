"""With the kernel bank or without: how fast a model-driven search on a task reaches its best, read from the
searches' own databases.

For each pair (a first task searched before, a related second task searched twice: once in a database whose bank
holds the first task's search, once in a fresh one), it reads the second task's two searches and reports per arm:
the candidates in the order they were measured (model-written ones; the seed is not counted), the search's best
(by the loop's rule: highest GPU-timed speedup vs eager over the search workloads), the first candidate within 5%
of that best (its number and the round it came in), and which bank entries the search was shown.

    python bench/bank_pairs.py --pair rmsnorm:layernorm:.lab/bank/withbank-layernorm.db:.lab/bank/nobank-layernorm.db \
        --pair softmax:log_softmax:.lab/bank/withbank-log_softmax.db:.lab/bank/nobank-log_softmax.db \
        --out bench/results/bank-pairs-h200.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ksearch.worldmodel.bank_store import uses
from ksearch.worldmodel.store import Store

WITHIN = 0.95  # "within 5% of the final best": a speedup of at least 95% of the best's


class Candidate(BaseModel):
    n: int
    attempt_id: int
    round: int
    intent: str
    status: str
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None


class Arm(BaseModel):
    db: str
    search: str
    bank_entries_shown: list[str]
    candidates: list[Candidate]
    seed_speedup: float | None
    best_attempt_id: int | None
    best_speedup: float | None
    rounds: int
    first_within_5pct: Candidate | None
    correct: int
    device: str


def _speed(a: Any, key: str) -> float | None:
    e = a.evaluation
    if e is None or e.status != "ok" or e.cpu_interpreted:
        return None
    v = e.speedup_vs_eager if key == "eager" else e.speedup_vs_compile
    return float(v) if v is not None else None


async def read_arm(db: Path, search: str) -> Arm:
    async with await Store.open(db) as st:
        s = await st.get_search(search)
        nodes = {n.id: n for n in await st.list_nodes(s.id)}
        rows = sorted(await st.list_attempts(s.id), key=lambda a: a.id)
        seed = [a for a in rows if a.author == "seed"]
        cands = [
            Candidate(
                n=i + 1,
                attempt_id=a.id,
                round=a.round,
                intent=nodes[a.node_id].title if a.node_id in nodes else "",
                status=a.evaluation.status if a.evaluation else "none",
                speedup_vs_eager=_speed(a, "eager"),
                speedup_vs_compile=_speed(a, "compile"),
            )
            for i, a in enumerate(a for a in rows if a.author != "seed")
        ]
        best = await st.best_attempt(s.id)
        best_speed = best.speedup if best else None
        first = None
        if best_speed:
            first = next(
                (
                    c
                    for c in cands
                    if c.speedup_vs_eager is not None and c.speedup_vs_eager >= WITHIN * best_speed
                ),
                None,
            )
        shown = sorted({u.uid for u in await uses(st, s.id)})
        devices = {t.device for a in rows if a.evaluation for t in a.evaluation.timings}
        return Arm(
            db=str(db),
            search=search,
            bank_entries_shown=shown,
            candidates=cands,
            seed_speedup=_speed(seed[0], "eager") if seed else None,
            best_attempt_id=best.id if best else None,
            best_speedup=best_speed,
            rounds=s.round,
            first_within_5pct=first,
            correct=sum(c.status == "ok" for c in cands),
            device=", ".join(sorted(devices)) or "unknown",
        )


def _line(label: str, a: Arm) -> str:
    f = a.first_within_5pct
    reach = f"candidate {f.n} of {len(a.candidates)} (round {f.round})" if f else "never"
    best = f"{a.best_speedup:.2f}x" if a.best_speedup else "none"
    return (
        f"  {label:<8} best {best} vs eager (attempt {a.best_attempt_id}); within 5% of it: {reach}; "
        f"{a.correct} of {len(a.candidates)} correct; {a.rounds} rounds; {len(a.bank_entries_shown)} bank entries shown"
    )


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", required=True, help="FIRST:SECOND:WITH_BANK_DB:WITHOUT_DB")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    pairs = []
    for spec in a.pair:
        parts = spec.split(":")
        if len(parts) != 4:
            ap.error(f"--pair {spec!r}: expected FIRST:SECOND:WITH_BANK_DB:WITHOUT_DB")
        first, second, with_db, without_db = parts
        arms = {
            "with": await read_arm(Path(with_db), second),
            "without": await read_arm(Path(without_db), second),
        }
        pairs.append({"first": first, "second": second, "arms": {k: v.model_dump() for k, v in arms.items()}})
        print(f"{first} -> {second}")
        for label, arm in arms.items():
            print(_line(f"{label} bank", arm))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "what": "model-driven searches of a task, with a kernel bank holding a related task's search and without",
            "within": WITHIN,
            "pairs": pairs,
        }
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
