"""A separate process that writes to a ksearch database, for the concurrency and crash tests.

    python wm_writer.py burst DB SEARCH_ID TAG COUNT   # prints "ready", waits for a line on stdin, writes COUNT
                                                       # intents with some edits and attempts, then exits
    python wm_writer.py loop DB SEARCH_ID              # write until killed
    python wm_writer.py create DB NAME                 # open (creating and migrating) DB, add one search

Every line printed names changes that are already committed ("node <id>", "attempt <id>"), flushed
before the next write starts, so a parent that kills this process knows what must have survived.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import Evaluation
from ksearch.worldmodel.store import Store


def report(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def burst(db: str, search_id: int, tag: str, count: int) -> None:
    async with await Store.open(db) as store:
        cand = await store.put_candidate(f"# {tag}\nclass ModelNew: pass\n", "triton")
        report("ready")
        await asyncio.to_thread(sys.stdin.readline)  # the parent starts all writers at once
        mine: list[int] = []
        for i in range(count):
            # A short pause between writes, as any real client has: without it SQLite's busy handler (which
            # polls) can leave one writer waiting until the other has finished its whole burst.
            await asyncio.sleep(random.uniform(0, 0.003))
            (node,) = await apply_intents(
                store, search_id, [{"title": f"{tag} writer idea {i}"}], f"llm:{tag}", 1
            )
            mine.append(node.id)
            report(f"node {node.id}")
            if i % 5 == 4:
                await apply_edits(
                    store,
                    search_id,
                    [{"op": "update", "node_id": mine[-2], "notes": f"{tag} {i}"}],
                    f"llm:{tag}",
                    1,
                )
                ev = Evaluation(status="ok", speedup_vs_eager=1.0 + i / 1000)
                att = await store.record_attempt(search_id, mine[-3], cand.id, ev, author=tag)
                report(f"attempt {att.id}")


async def loop(db: str, search_id: int) -> None:
    async with await Store.open(db) as store:
        cand = await store.put_candidate("class ModelNew: pass\n", "triton")
        i = 0
        while True:
            specs = [{"title": f"looping idea {i} part {k}", "notes": "n" * 2000} for k in range(3)]
            nodes = await apply_intents(store, search_id, specs, "llm:loop", 1)
            report("node " + " ".join(str(n.id) for n in nodes))
            att = await store.record_attempt(
                search_id, nodes[0].id, cand.id, Evaluation(status="ok", speedup_vs_eager=1.0)
            )
            report(f"attempt {att.id}")
            i += 1


async def create(db: str, name: str) -> None:
    async with await Store.open(db) as store:
        search = await store.create_search(name, "softmax")
        report(f"search {search.id}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "burst":
        asyncio.run(burst(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])))
    elif mode == "create":
        asyncio.run(create(sys.argv[2], sys.argv[3]))
    elif mode == "loop":
        asyncio.run(loop(sys.argv[2], int(sys.argv[3])))
    else:
        raise SystemExit(f"unknown mode {mode!r}; accepted: burst, loop, create")
