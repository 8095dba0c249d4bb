"""What the page shows, read from the store in one place: the search, its tree, its attempts, its spend.

`fingerprint` is the cheap question the page asks every second or two ("did anything change?"); the
full `SearchView` (attempts with their evaluations) is read only when the answer is yes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ksearch.worldmodel import runs
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Attempt, Candidate, Node, Search
from ksearch.worldmodel.runs import RunHolder, ShownStatus
from ksearch.worldmodel.store import LLMTotals, Store


async def find_search(store: Store, ref: int | str) -> Search:
    """The search by id or name; NotFound names what exists."""
    return await store.get_search(ref)


async def fingerprint(store: Store, search_id: int) -> str:
    """A short token that changes whenever anything the page shows changes.

    Covers the search row (round, status, best), every node (edits, status, visits, best attempt),
    the attempt ids (new attempts) and the LLM spend. Attempt evaluations are immutable once written,
    so their ids suffice.
    """
    s = await store.get_search(search_id)
    nodes = await store.list_nodes(search_id)
    speedups = await store.attempt_speedups(search_id)
    totals = await store.llm_totals(search_id)
    payload = {
        "s": s.model_dump(mode="json"),
        "r": await runs.search_status(store, s),  # a run that dies flips the page to `interrupted`
        "n": [n.model_dump(mode="json") for n in nodes],
        "a": sorted(speedups.items()),
        "l": totals.model_dump(),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class NodeStats:
    attempts: int = 0
    ok: int = 0
    failed: int = 0
    best_speedup: float | None = None


@dataclass
class SearchView:
    """A consistent picture of one search plus what the page derives from it."""

    search: Search
    nodes: list[Node]
    attempts: list[Attempt]
    llm: LLMTotals
    version: str
    holder: RunHolder | None = None  # the process running the search, if a run recorded one
    by_id: dict[int, Node] = field(default_factory=dict)
    children: dict[int | None, list[Node]] = field(default_factory=dict)
    attempt_by_id: dict[int, Attempt] = field(default_factory=dict)
    stats: dict[int, NodeStats] = field(default_factory=dict)
    best_path: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.by_id = {n.id: n for n in self.nodes}
        self.children = {}
        for n in self.nodes:  # id order: creation order, so the drawing does not jump around
            self.children.setdefault(n.parent_id, []).append(n)
        self.attempt_by_id = {a.id: a for a in self.attempts}
        self.stats = {n.id: NodeStats() for n in self.nodes}
        for a in self.attempts:
            st = self.stats.get(a.node_id) if a.node_id is not None else None
            if st is None:
                continue
            st.attempts += 1
            if a.evaluation is not None and a.evaluation.status == "ok":
                st.ok += 1
            else:
                st.failed += 1
        for n in self.nodes:
            best = self.attempt_by_id.get(n.best_attempt_id) if n.best_attempt_id else None
            # CPU-interpreter timings rank nothing: such a best shows no speedup
            ranks = best is not None and best.evaluation is not None and best.evaluation.ranks
            self.stats[n.id].best_speedup = best.speedup if best and ranks else None
        self.best_path = self._path_to_best()

    @property
    def status(self) -> ShownStatus:
        """The search's status as a person should read it: `interrupted` when its run died."""
        return runs.shown_status(self.search, self.holder)

    @property
    def cpu_correct(self) -> int:
        """Correct attempts timed only on the CPU interpreter (they rank nothing)."""
        return sum(
            1
            for a in self.attempts
            if a.evaluation is not None and a.evaluation.status == "ok" and a.evaluation.cpu_interpreted
        )

    @property
    def root(self) -> Node:
        return next(n for n in self.nodes if n.kind == "root")

    @property
    def best_attempt(self) -> Attempt | None:
        bid = self.search.best_attempt_id
        return self.attempt_by_id.get(bid) if bid is not None else None

    def _path_to_best(self) -> set[int]:
        best = self.best_attempt
        path: set[int] = set()
        node_id = best.node_id if best is not None else None
        while node_id is not None and node_id not in path:
            path.add(node_id)
            node = self.by_id.get(node_id)
            node_id = node.parent_id if node else None
        if path:
            path.add(self.root.id)
        return path

    def unattached_attempts(self) -> list[Attempt]:
        """Attempts recorded on the search but on no node (e.g. a submission without --node)."""
        return [a for a in self.attempts if a.node_id is None]


async def load_view(store: Store, ref: int | str) -> SearchView:
    s = await find_search(store, ref)
    version = await fingerprint(store, s.id)
    # Read after the fingerprint: if a write lands in between, the next poll sees a new token and
    # reloads, so the page never keeps a stale picture under a fresh token.
    s = await store.get_search(s.id)
    nodes = await store.list_nodes(s.id)
    attempts = await store.list_attempts(s.id)
    llm = await store.llm_totals(s.id)
    holder = await runs.holder(store, s.id)
    return SearchView(search=s, nodes=nodes, attempts=attempts, llm=llm, version=version, holder=holder)


async def resolve_base(store: Store, a: Attempt) -> tuple[str, Attempt, Candidate] | None:
    """What to diff an attempt against, and why: its recorded base, else the code its intent starts from."""
    why, base_id = "its recorded base", a.base_attempt_id
    if base_id is None and a.node_id is not None:
        node = await store.get_node(a.node_id)
        why, base_id = "the intent's starting code", node.base_attempt_id
    if base_id is None or base_id == a.id:
        return None
    try:
        ba = await store.get_attempt(base_id)
        return why, ba, await store.get_candidate(ba.candidate_id)
    except NotFound:
        return None
