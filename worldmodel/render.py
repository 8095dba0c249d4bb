"""Views of the intent tree: a compact text for prompts (with a hard size budget), JSON, and Mermaid.

The text view always keeps, in this order of precedence: the root and its analysis, the best path
(root → the node holding the search's best attempt), the open frontier (pinned first, then by
priority), then other nodes (best results first, pruned last). A kept node keeps its notes and
rationale: lower-value nodes are dropped whole before anyone's reasoning is shortened, and only
when even that is not enough are the notes of context nodes replaced by "(notes elided: N chars)".
The output never exceeds the budget; what was left out is counted at the end.

Timings from the CPU interpreter rank nothing: a node whose best attempt was timed there shows
"correct (CPU interpreter: not timed)", never a speedup, and is never marked BEST.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ksearch.worldmodel import runs
from ksearch.worldmodel.models import Attempt, AttemptSpeedups, KernelResources, Node, NodeStatus
from ksearch.worldmodel.store import Store

AttemptsById = Mapping[int, Attempt] | Mapping[int, float | None]
"""attempt id → Attempt, or → its speedup (None when not ok), e.g. `Store.attempt_speedups` (an
`AttemptSpeedups`, which also names the correct attempts timed on the CPU interpreter)."""

CPU_ONLY = "correct (CPU interpreter: not timed)"


def fmt_speedup(x: float) -> str:
    """The one way a speedup is written (CLI, run log, tree, web page, report): 0.076x, 1.234x."""
    return f"{x:.3f}x"


def no_best(cpu_correct: int) -> str:
    """Why a search has no best yet: CPU-interpreter timings never rank candidates."""
    if cpu_correct:
        return f"{cpu_correct} correct, none timed on a GPU"
    return "no timed correct attempt yet"


MIN_BUDGET = 400  # room for the header, the root line and the count of what was left out
_STATUS_ORDER = ("open", "active", "closed", "failed", "pruned")


def _speedup(attempts: AttemptsById, attempt_id: int | None) -> float | None:
    """The attempt's speedup if it may rank: None when not ok or timed on the CPU interpreter."""
    if attempt_id is None:
        return None
    value = attempts.get(attempt_id)
    if isinstance(value, Attempt):
        return value.speedup if value.evaluation is not None and value.evaluation.ranks else None
    if isinstance(attempts, AttemptSpeedups) and attempt_id in attempts.cpu_interpreted:
        return None
    return value


def _workloads(attempts: AttemptsById, attempt_id: int | None) -> int | None:
    """How many workloads the attempt's speedup is the geomean of (None where the mapping does not say)."""
    if attempt_id is None:
        return None
    value = attempts.get(attempt_id)
    if isinstance(value, Attempt):
        return len(value.evaluation.timings) if value.evaluation is not None else None
    return getattr(attempts, "workloads", {}).get(attempt_id)


def best_phrase(speedup: float, workloads: int | None, final: tuple[float, int] | None = None) -> str:
    """A best's speedup with the workloads it covers: the search set's geomean, or after a final evaluation the
    final figure over every workload with the search set's beside it (the two were read as one number)."""
    over = (
        f"over {workloads} search workload{'s' if workloads != 1 else ''}"
        if workloads
        else "on the search set"
    )
    if final is None:
        return f"{fmt_speedup(speedup)} {over}"
    return f"{fmt_speedup(final[0])} over all {final[1]} workloads (final evaluation; {fmt_speedup(speedup)} {over})"


def _cpu_only(attempts: AttemptsById, attempt_id: int | None) -> bool:
    """Whether the attempt is correct but was timed only on the CPU interpreter."""
    if attempt_id is None:
        return False
    if isinstance(attempts, AttemptSpeedups):
        return attempt_id in attempts.cpu_interpreted
    value = attempts.get(attempt_id)
    return (
        isinstance(value, Attempt)
        and value.evaluation is not None
        and value.evaluation.status == "ok"
        and value.evaluation.cpu_interpreted
    )


def _cpu_correct(attempts: AttemptsById) -> int:
    """How many correct attempts were timed only on the CPU interpreter."""
    if isinstance(attempts, AttemptSpeedups):
        return len(attempts.cpu_interpreted)
    return sum(1 for a in attempts.values() if isinstance(a, Attempt) and _cpu_only(attempts, a.id))


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Tree:
    """Indexes over a node list shared by the three views."""

    def __init__(self, nodes: Iterable[Node], attempts: AttemptsById, best_attempt_id: int | None) -> None:
        self.by_id: dict[int, Node] = {}
        self.children: dict[int, list[int]] = {}
        self.root: Node | None = None
        self.status_counts = dict.fromkeys(_STATUS_ORDER, 0)
        in_order, last = True, -1
        for n in nodes:
            self.by_id[n.id] = n
            in_order, last = in_order and n.id > last, n.id
            if n.kind == "root":
                self.root = n
            else:
                self.status_counts[n.status.value] += 1
                if n.parent_id is not None:
                    self.children.setdefault(n.parent_id, []).append(n.id)
        if self.root is None:
            raise ValueError(
                "the node list has no root; accepted: all nodes of one search (Store.list_nodes)"
            )
        if not in_order:  # Store.list_nodes gives id order, so this is usually skipped
            for kids in self.children.values():
                kids.sort()
        self.attempts = attempts
        self.best_node_id = self._find_best(best_attempt_id)
        self.best_path: list[int] = self.path_to(self.best_node_id) if self.best_node_id is not None else []
        self._depth: dict[int, int] = {self.root.id: 0}

    def _find_best(self, best_attempt_id: int | None) -> int | None:
        if best_attempt_id is not None and _cpu_only(self.attempts, best_attempt_id):
            return None  # recorded before CPU timings stopped ranking: nothing is the best yet
        if best_attempt_id is not None:
            for n in self.by_id.values():
                if n.best_attempt_id == best_attempt_id:
                    return n.id
            attempt = self.attempts.get(best_attempt_id)
            if isinstance(attempt, Attempt) and attempt.node_id in self.by_id:
                return attempt.node_id
            return None
        best: tuple[float, int] | None = None
        for n in self.by_id.values():
            s = _speedup(self.attempts, n.best_attempt_id)
            if s is not None and (best is None or (s, -n.id) > (best[0], -best[1])):
                best = (s, n.id)
        return best[1] if best else None

    def parent(self, nid: int) -> int | None:
        p = self.by_id[nid].parent_id
        return p if p in self.by_id else None

    def path_to(self, nid: int) -> list[int]:
        path: list[int] = []
        x: int | None = nid
        while x is not None:
            path.append(x)
            x = self.parent(x)
        return path[::-1]

    def depth(self, nid: int) -> int:
        chain: list[int] = []
        x: int | None = nid
        while x is not None and x not in self._depth:
            chain.append(x)
            x = self.parent(x)
        d = self._depth[x] if x is not None else -1
        for y in reversed(chain):
            d += 1
            self._depth[y] = d
        return self._depth[nid]

    def speedup(self, nid: int) -> float | None:
        return _speedup(self.attempts, self.by_id[nid].best_attempt_id)

    def cpu_only(self, nid: int) -> bool:
        """The node's best attempt is correct but timed only on the CPU interpreter."""
        return _cpu_only(self.attempts, self.by_id[nid].best_attempt_id)

    def counts(self, excluding: Iterable[int] = ()) -> dict[str, int]:
        """Intents per status, leaving out the nodes in `excluding`."""
        out = dict(self.status_counts)
        for nid in excluding:
            n = self.by_id[nid]
            if n.kind == "intent":
                out[n.status.value] -= 1
        return {k: v for k, v in out.items() if v}

    def wanted(self) -> Iterator[int]:
        """Every intent, most valuable first (the root and best path are handled before).

        Lazy: the caller usually stops after a few hundred nodes, so heaps beat a full sort.
        """
        frontier: list[tuple[Any, ...]] = []
        rest: list[tuple[Any, ...]] = []
        attempts = self.attempts
        for n in self.by_id.values():
            if n.kind != "intent":
                continue
            status = n.status
            if (status == "open" or status == "active") and not n.vetoed:
                frontier.append((not n.pinned, -n.priority, n.id))
            else:
                s = _speedup(attempts, n.best_attempt_id) if n.best_attempt_id is not None else None
                correct = s is not None or _cpu_only(attempts, n.best_attempt_id)
                tier = 3 if status == "pruned" else 2 if n.vetoed else 0 if correct else 1
                rest.append((tier, -(s or 0.0), -n.priority, n.id))
        for heap in (frontier, rest):
            heapq.heapify(heap)
            while heap:
                yield heapq.heappop(heap)[-1]


def _plan(
    tree: _Tree,
    budget: int,
    cost_full: Callable[[int], int],
    cost_compact: Callable[[int], int],
    floor: Callable[[int], int],
    smallest: int,
) -> dict[int, bool]:
    """Choose nodes to show (id → shown in full) within `budget`, every kept node with its ancestors."""
    assert tree.root is not None
    kept: dict[int, bool] = {tree.root.id: True}
    left = budget - cost_full(tree.root.id)  # `smallest`: no node costs less; below it nothing fits

    def add(nid: int, compact_ok: bool) -> bool:
        nonlocal left
        chain: list[int] = []
        x: int | None = nid
        while x is not None and x not in kept:
            chain.append(x)
            x = tree.parent(x)
        if not chain:
            return True
        if sum(floor(c) for c in chain) > left:  # even the most compact form cannot fit
            return False
        options = [[True] * len(chain)]
        if compact_ok:
            options += [[True] + [False] * (len(chain) - 1), [False] * len(chain)]
        for full in options:
            cost = sum(cost_full(c) if f else cost_compact(c) for c, f in zip(chain, full, strict=True))
            if cost <= left:
                left -= cost
                kept.update(zip(chain, full, strict=True))
                return True
        return False

    if tree.best_node_id is not None:
        add(tree.best_node_id, compact_ok=True)
    for nid in tree.wanted():
        if left < smallest:
            break
        n = tree.by_id[nid]
        must = str(n.status) in ("open", "active") and not n.vetoed
        add(nid, compact_ok=must)
    return kept


def render_tree(
    nodes: Sequence[Node],
    attempts_by_id: AttemptsById,
    budget_chars: int = 6000,
    *,
    best_attempt_id: int | None = None,
    no_result: bool = False,
    final: tuple[float, int] | None = None,
) -> str:
    """The tree as compact text for a prompt, never longer than `budget_chars`.

    Each line: `#id (handle) [status] p<priority> d<difficulty> best <speedup>x <flags> title` (the handle
    where its proposer gave one), indented by depth; the node's rationale ("why:") and notes follow, indented. `best_attempt_id` is the
    search's best (it marks the best path); when omitted, the highest speedup among the nodes is used, unless
    `no_result` (a final evaluation left the search without a best): then the header says so, not a node's best.
    The header names the workloads the best's speedup covers, and `final` (speedup, workloads: the final
    evaluation's figure of the search's best) puts the final figure first; nodes show search-set figures.
    """
    if budget_chars < MIN_BUDGET:
        raise ValueError(f"budget_chars {budget_chars} is too small; accepted: at least {MIN_BUDGET}")
    tree = _Tree(nodes, attempts_by_id, best_attempt_id)
    assert tree.root is not None
    root = tree.root
    full_lines: dict[int, list[str]] = {}
    compact_lines: dict[int, list[str]] = {}

    def head(nid: int) -> str:
        n = tree.by_id[nid]
        pad = "  " * tree.depth(nid)
        if n.kind == "root":
            return f"{pad}#{nid} root: {_one_line(n.title)[:80]}"
        s = tree.speedup(nid)
        named = f" ({n.handle})" if n.handle else ""
        parts = [f"{pad}#{nid}{named} [{n.status}] p{n.priority:.2f} d{n.difficulty}"]
        if s is not None:
            parts.append(f"best {fmt_speedup(s)}")
        elif tree.cpu_only(nid):
            parts.append(f"best {CPU_ONLY}")
        if n.expected_speedup is not None:
            parts.append(f"exp {n.expected_speedup:.2f}x")
        if n.visits:
            parts.append(f"tries {n.visits}")
        if n.pinned:
            parts.append("PINNED")
        if n.vetoed:
            parts.append("VETOED")
        if nid == tree.best_node_id:
            parts.append("<-BEST")
        parts.append(_one_line(n.title))
        return " ".join(parts)

    def body(nid: int) -> list[str]:
        n = tree.by_id[nid]
        pad = "  " * tree.depth(nid) + "   "
        labels = (
            (("analysis", n.rationale), ("notes", n.notes))
            if n.kind == "root"
            else (
                ("why", n.rationale),
                ("notes", n.notes),
            )
        )
        out: list[str] = []
        for label, text in labels:
            text_lines = text.strip().splitlines()
            if not text_lines:
                continue
            out.append(f"{pad}{label}: {text_lines[0]}")
            cont = pad + " " * (len(label) + 2)
            out.extend(cont + line for line in text_lines[1:])
        return out

    def reserve(nid: int) -> int:
        kids = tree.children.get(nid)
        return len(f" [+{len(kids)} hidden]") if kids else 0

    def lines_full(nid: int) -> list[str]:
        if nid not in full_lines:
            full_lines[nid] = [head(nid), *body(nid)]
        return full_lines[nid]

    def lines_compact(nid: int) -> list[str]:
        if nid not in compact_lines:
            hidden = sum(len(x) + 1 for x in body(nid))
            suffix = f" (notes elided: {hidden} chars)" if hidden else ""
            compact_lines[nid] = [head(nid) + suffix]
        return compact_lines[nid]

    def cost_full(nid: int) -> int:
        return sum(len(x) + 1 for x in lines_full(nid)) + reserve(nid)

    def cost_compact(nid: int) -> int:
        return sum(len(x) + 1 for x in lines_compact(nid)) + reserve(nid)

    def floor(nid: int) -> int:
        # A cheap lower bound of the compact cost, to skip hopeless candidates without formatting them.
        return len(tree.by_id[nid].title) + 20

    total_counts = tree.counts()
    total = len(tree.by_id)
    # The search's best attempt, also when it is on no node (e.g. submitted without --node).
    best_s = _speedup(tree.attempts, best_attempt_id) if best_attempt_id is not None else None
    if best_s is None and tree.best_node_id is not None and not no_result:
        best_s = tree.speedup(tree.best_node_id)
    if no_result and best_s is None:
        # a best that failed the final evaluation, or none ever (nothing timed on a GPU): the same verdict
        best_text = "no result: the final evaluation named no best: none passed it timed on a GPU (nodes show their own)"
    elif best_s is not None:
        att = best_attempt_id
        if att is None and tree.best_node_id is not None:
            att = tree.by_id[tree.best_node_id].best_attempt_id
        where = (
            f"#{tree.best_node_id} (attempt #{att})"
            if tree.best_node_id is not None
            else f"attempt #{best_attempt_id} (no node)"
        )
        shown_final = final if best_attempt_id is not None else None
        best_text = f"best {best_phrase(best_s, _workloads(tree.attempts, att), shown_final)} at {where}"
    else:
        cpu = sorted(nid for nid in tree.by_id if tree.cpu_only(nid))
        best_text = f"no best yet: {no_best(_cpu_correct(tree.attempts))}"
        if cpu:
            more = f" and {len(cpu) - 3} more" if len(cpu) > 3 else ""
            best_text += (
                " (at nodes " + ", ".join(f"#{i}" for i in cpu[:3]) + more + ")"
            )  # not attempt numbers
    header = f"tree: {total} nodes ({_fmt_counts(total_counts) or 'no intents yet'}); {best_text}"
    header = header[: budget_chars // 4]

    long_footer = len(_footer(total, total, total_counts, True)) <= budget_chars // 4

    def footer(hidden: int, counts: Mapping[str, int]) -> str:
        return _footer(hidden, total, counts, long_footer)

    reserve_footer = len(footer(total, total_counts)) + 1 if total > 1 else 0
    available = budget_chars - (len(header) + 1) - reserve_footer
    if cost_full(root.id) > available:
        # The root analysis alone is over budget: cut it (the only text ever cut mid-way).
        text = "\n".join(lines_full(root.id)[1:])
        marker_room = len(f" …[analysis cut at {len(text)} of {len(text)} chars]")
        room = available - reserve(root.id) - (len(head(root.id)) + 1) - 1 - marker_room
        if room > 0:
            cut = text[:room] + f" …[analysis cut at {room} of {len(text)} chars]"
            full_lines[root.id] = [head(root.id), cut]
        else:
            full_lines[root.id] = lines_compact(root.id)
    kept = _plan(tree, available, cost_full, cost_compact, floor, smallest=24)

    out = [header]
    stack = [root.id]
    while stack:
        nid = stack.pop()
        lines = list(lines_full(nid) if kept[nid] else lines_compact(nid))
        kids = tree.children.get(nid, [])
        shown = [k for k in kids if k in kept]
        if len(shown) < len(kids):
            lines[0] += f" [+{len(kids) - len(shown)} hidden]"
        out.extend(lines)
        stack.extend(reversed(shown))
    hidden = total - len(kept)
    if hidden:
        out.append(footer(hidden, tree.counts(excluding=kept)))
    return "\n".join(out)


# How to see what a budget left out: the MCP tool and the CLI command that render this view.
MORE = "get_tree with a larger budget_chars (ksearch tree SEARCH --budget N) shows them"


def _footer(hidden: int, total: int, counts: Mapping[str, int], detailed: bool) -> str:
    if detailed:
        return f"[{hidden} of {total} nodes not shown: {_fmt_counts(counts)}; {MORE}]"
    return f"[{hidden} of {total} nodes not shown]"


def _fmt_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def tree_json(
    nodes: Sequence[Node], attempts_by_id: AttemptsById, *, best_attempt_id: int | None = None
) -> dict[str, Any]:
    """The whole tree as JSON-ready data: a flat node list (each with children ids and best speedup;
    `best_cpu_interpreter` is true where the best attempt is correct but timed on the CPU interpreter,
    so `best_speedup` is null)."""
    tree = _Tree(nodes, attempts_by_id, best_attempt_id)
    assert tree.root is not None
    out_nodes = []
    for nid in sorted(tree.by_id):
        data = tree.by_id[nid].model_dump(mode="json")
        data["best_speedup"] = tree.speedup(nid)
        data["best_cpu_interpreter"] = tree.cpu_only(nid)
        data["children"] = tree.children.get(nid, [])
        out_nodes.append(data)
    return {
        "root_id": tree.root.id,
        "best_node_id": tree.best_node_id,
        "best_path": tree.best_path,
        "counts": tree.counts(),
        "nodes": out_nodes,
    }


_MERMAID_STYLE = {
    "open": "fill:#eef3ff,stroke:#5577cc",
    "active": "fill:#fff6d5,stroke:#cc9900",
    "closed": "fill:#e3f6e3,stroke:#339933",
    "failed": "fill:#fbe3e3,stroke:#cc3333",
    "pruned": "fill:#eeeeee,stroke:#999999,color:#888888",
}


def _mermaid_text(text: str) -> str:
    return _one_line(text).replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def tree_mermaid(
    nodes: Sequence[Node],
    attempts_by_id: AttemptsById,
    *,
    best_attempt_id: int | None = None,
    max_nodes: int = 150,
) -> str:
    """A Mermaid flowchart of the tree, at most `max_nodes` nodes chosen as in the text view."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes {max_nodes}; accepted: at least 1")
    tree = _Tree(nodes, attempts_by_id, best_attempt_id)
    assert tree.root is not None
    kept = _plan(tree, max_nodes, lambda _: 1, lambda _: 1, lambda _: 1, smallest=1)
    lines = ["flowchart TD"]
    for nid in sorted(kept):
        n = tree.by_id[nid]
        if n.kind == "root":
            label = f"#{nid} root"
        else:
            s = tree.speedup(nid)
            best = (
                f" best {fmt_speedup(s)}"
                if s is not None
                else f" best {CPU_ONLY}"
                if tree.cpu_only(nid)
                else ""
            )
            marks = (" PINNED" if n.pinned else "") + (" VETOED" if n.vetoed else "")
            label = (
                f"#{nid} {n.status}{marks} p{n.priority:.2f} d{n.difficulty}{best}<br/>"
                f"{_mermaid_text(n.title[:60])}"
            )
        lines.append(f'  n{nid}["{label}"]')
    for nid in sorted(kept):
        p = tree.parent(nid)
        if p is not None:
            lines.append(f"  n{p} --> n{nid}")
    hidden = len(tree.by_id) - len(kept)
    if hidden:
        lines.append(f'  hidden["{hidden} more nodes not shown"]')
    for status, style in _MERMAID_STYLE.items():
        members = [
            f"n{nid}"
            for nid in sorted(kept)
            if tree.by_id[nid].kind == "intent" and tree.by_id[nid].status == status
        ]
        lines.append(f"  classDef {status} {style}")
        if members:
            lines.append(f"  class {','.join(members)} {status}")
    if tree.best_node_id is not None and tree.best_node_id in kept:
        lines.append("  classDef best stroke-width:4px")
        lines.append(f"  class n{tree.best_node_id} best")
    return "\n".join(lines)


async def render_search(store: Store, search_id: int, budget_chars: int = 6000) -> str:
    """Load a search and render its tree for a prompt (search name, task and round first)."""
    search = await store.get_search(search_id)
    nodes = await store.list_nodes(search_id)
    speedups = await store.attempt_speedups(search_id)
    status = await runs.search_status(store, search)  # `interrupted` when its run died
    title = f"search {search.name!r} on {search.task} (round {search.round}, {status})"
    if budget_chars < MIN_BUDGET + 1:
        raise ValueError(f"budget_chars {budget_chars} is too small; accepted: at least {MIN_BUDGET + 1}")
    title = title[: budget_chars - MIN_BUDGET - 1]
    verdict = await store.final_verdict(search_id)
    room = budget_chars - MIN_BUDGET - len(title) - 2
    # a best that failed the final evaluation lost its place: say so under the title
    if verdict is not None and verdict.note() and room > 0:
        title += "\n" + verdict.note()[:room]
    text = render_tree(
        nodes,
        speedups,
        budget_chars - len(title) - 1,
        best_attempt_id=search.best_attempt_id,
        no_result=verdict is not None and search.best_attempt_id is None and verdict.current(search.round),
        final=verdict.final_figure(search.best_attempt_id) if verdict is not None else None,
    )
    return f"{title}\n{text}"


__all__ = ["AttemptsById", "NodeStatus", "render_search", "render_tree", "tree_json", "tree_mermaid"]


def kernel_resources(k: KernelResources) -> str:
    """`regs=40 spills=0/0B smem=32B stack=0B`: a count nobody reported is `?`, never a number (Triton's
    metadata after a launch gives no spill loads or stack)."""

    def n(v: int | None, unit: str = "") -> str:
        return "?" if v is None else f"{v}{unit}"

    spills = f"{n(k.spill_stores_bytes)}/{n(k.spill_loads_bytes)}"
    return (
        f"regs={n(k.registers)} spills={spills}B smem={n(k.shared_bytes, 'B')} stack={n(k.stack_bytes, 'B')}"
    )
