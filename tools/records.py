"""records: the faces' read-only view of the world model (`ws.records`).

A face (CLI, MCP server, driver, web page) reads searches, nodes, attempts, candidates, edits and spend through
here and changes them only through the tools' operations: no write is reachable from a `Records`. The methods
are the store's reads of the same names, with the same answers and the same errors (NotFound names what
exists).
"""

from __future__ import annotations

from pydantic import BaseModel

from ksearch.worldmodel.models import Attempt, AttemptSpeedups, Candidate, Edit, FinalVerdict, Node, Search
from ksearch.worldmodel.render import best_phrase, fmt_speedup
from ksearch.worldmodel.store import LLMTotals, Store

__all__ = ["BestFigure", "LLMTotals", "Records"]


class BestFigure(BaseModel):
    """A search's best as a number that says which workloads it covers: its search-set geomean, and after a final
    evaluation that kept it, the final figure over every workload."""

    attempt_id: int
    speedup_vs_eager: float
    workloads: int | None = None
    """How many (search) workloads `speedup_vs_eager` is the geomean of."""
    final_speedup_vs_eager: float | None = None
    final_workloads: int | None = None

    def final(self) -> tuple[float, int] | None:
        if self.final_speedup_vs_eager is None or not self.final_workloads:
            return None
        return self.final_speedup_vs_eager, self.final_workloads

    def text(self) -> str:
        """`10.038x over 3 search workloads`, or `9.985x over all 7 workloads (final evaluation; 10.038x over ...)`."""
        return best_phrase(self.speedup_vs_eager, self.workloads, self.final())

    def short(self) -> str:
        """For a table cell: `10.038x (3 search workloads)`, `9.985x (final, all 7)`."""
        final = self.final()
        if final is not None:
            return f"{fmt_speedup(final[0])} (final, all {final[1]})"
        n = f"{self.workloads} search workload{'s' if self.workloads != 1 else ''}" if self.workloads else "search set"
        return f"{fmt_speedup(self.speedup_vs_eager)} ({n})"


class Records:
    """The reads of one Workspace's store."""

    __slots__ = ("_db",)

    def __init__(self, store: Store) -> None:
        self._db = store

    # searches (one search by id or name: Workspace.search)

    async def list_searches(self) -> list[Search]:
        """Every search, in id order."""
        return await self._db.list_searches()

    async def best_attempt(self, search_id: int) -> Attempt | None:
        """The search's best attempt, None before it has one."""
        return await self._db.best_attempt(search_id)

    async def final_verdict(self, search_id: int) -> FinalVerdict | None:
        """What the search's last final evaluation decided about its best (None: none was recorded)."""
        return await self._db.final_verdict(search_id)

    async def best_figure(self, s: Search) -> BestFigure | None:
        """The search's best with the workloads its figure covers (None before it has a GPU-timed best)."""
        if s.best_attempt_id is None:
            return None
        speedups = await self._db.attempt_speedups(s.id)
        x = speedups.get(s.best_attempt_id)
        if x is None:
            return None
        verdict = await self._db.final_verdict(s.id)
        final = verdict.final_figure(s.best_attempt_id) if verdict is not None else None
        return BestFigure(
            attempt_id=s.best_attempt_id,
            speedup_vs_eager=x,
            workloads=speedups.workloads.get(s.best_attempt_id),
            final_speedup_vs_eager=final[0] if final else None,
            final_workloads=final[1] if final else None,
        )

    async def llm_totals(self, search_id: int) -> LLMTotals:
        """Calls, tokens and dollars the search's language-model calls spent."""
        return await self._db.llm_totals(search_id)

    async def list_edits(self, search_id: int) -> list[Edit]:
        """The search's edit log, oldest first."""
        return await self._db.list_edits(search_id)

    # nodes

    async def get_node(self, node_id: int) -> Node:
        """The node (ids are global: check `search_id` when it must belong to a given search)."""
        return await self._db.get_node(node_id)

    async def list_nodes(self, search_id: int) -> list[Node]:
        """Every node of the search, in id order (the root first)."""
        return await self._db.list_nodes(search_id)

    async def root(self, search_id: int) -> Node:
        """The search's root node (its kernel analysis)."""
        return await self._db.root(search_id)

    async def node_counts(self, search_id: int) -> dict[str, int]:
        """How many intents (the root excluded) have each status."""
        return await self._db.node_counts(search_id)

    # attempts and candidates

    async def get_attempt(self, attempt_id: int) -> Attempt:
        return await self._db.get_attempt(attempt_id)

    async def list_attempts(self, search_id: int, node_id: int | None = None) -> list[Attempt]:
        """The search's attempts (or one node's), oldest first."""
        return await self._db.list_attempts(search_id, node_id)

    async def attempt_speedups(self, search_id: int) -> AttemptSpeedups:
        """Attempt id -> speedup vs eager (None unless correct and GPU-timed), with the CPU-interpreted ones."""
        return await self._db.attempt_speedups(search_id)

    async def get_candidate(self, candidate_id: str) -> Candidate:
        return await self._db.get_candidate(candidate_id)
