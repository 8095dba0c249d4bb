"""What the page shows, read through ksearch.tools.read_search: the search, its tree, its attempts, its spend,
and what the page derives from them.

`fingerprint` is the cheap question the page asks every second or two ("did anything change?"); the
full `SearchView` (attempts with their evaluations) is read only when the answer is yes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ksearch.tools.loop.runs import ShownStatus
from ksearch.tools.read_search import (
    AttemptBase,
    BankUse,
    Decline,
    LLMTotals,
    SearchSnapshot,
    attempt_base,
    read_search,
    search_version,
)
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Attempt, Candidate, Node, Search


async def find_search(ws: Workspace, ref: int | str) -> Search:
    """The search by id or name; NotFound names what exists."""
    return await ws.search(ref)


async def fingerprint(ws: Workspace, search_id: int) -> str:
    """A short token that changes whenever anything the page shows changes (tools.read_search.search_version)."""
    return await search_version(ws, search_id)


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
    shown_status: ShownStatus  # `interrupted` for a search left `running` by a run that died
    declines: list[Decline] = field(default_factory=list)  # intents a policy declined, oldest first
    bank_uses: list[BankUse] = field(default_factory=list)  # kernel-bank entries its prompts showed
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
        return self.shown_status

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


def view_of(snap: SearchSnapshot) -> SearchView:
    return SearchView(
        search=snap.search,
        nodes=snap.nodes,
        attempts=snap.attempts,
        llm=snap.llm_totals,
        version=snap.version,
        shown_status=snap.status,
        declines=snap.declines,
        bank_uses=snap.bank_uses,
    )


async def load_view(ws: Workspace, ref: int | str) -> SearchView:
    return view_of(await read_search(ws, ref))


def base_of(b: AttemptBase | None) -> tuple[str, Attempt, Candidate] | None:
    """An attempt's base as the attempt panel takes it: (why it is the base, base attempt, its candidate)."""
    return (b.why, b.attempt, b.candidate) if b is not None else None


async def resolve_base(ws: Workspace, a: Attempt) -> tuple[str, Attempt, Candidate] | None:
    """What to diff an attempt against, and why: its recorded base, else the code its intent starts from."""
    return base_of(await attempt_base(ws, a))
