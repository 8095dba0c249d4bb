"""What a search taught, as kernel-bank entries: recorded when an intent ends, after a person's edits, and when
the search ends.

Each finished intent becomes an entry with its outcome: for a closed one, its best attempt against the code it
was built on by the loop's noise-aware comparison (gpu/timing/compare.py: the gain and its 95% interval), or, without
a base or a GPU timing, that it was correct; for a failed one, how its attempts failed; a pruned or vetoed one,
why and by whom. The reflection on an intent (the reasons given with the edits and intents that followed it)
goes with it, and a person's notes and vetoes are credited. The search's best kernel is an entry with its code
and numbers. Recording replaces the search's entries as a whole, so doing it again is harmless.
"""

from __future__ import annotations

import logging
from collections import Counter

from ksearch.gpu.timing.compare import compare
from ksearch.tools.bank.signature import search_signature
from ksearch.tools.common import why_failed
from ksearch.tools.prompting.contexts import params_of
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import bank_store
from ksearch.worldmodel.bank import BankEntry, BankOutcome, BankSource, OutcomeKind, TaskSignature, entry_uid
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import Attempt, Edit, Evaluation, Node, Search

log = logging.getLogger(__name__)

HUMAN = "human"
_FAILURES: tuple[OutcomeKind, ...] = ("compile_error", "incorrect", "crash", "timeout", "error")
_REFLECTION_LIMIT = 600


def _timed(ev: Evaluation | None) -> bool:
    return ev is not None and ev.status == "ok" and ev.ranks and bool(ev.timings)


def _measured(ev: Evaluation | None) -> dict[str, object]:
    if ev is None or not _timed(ev):
        return {}
    return {
        "speedup_vs_eager": ev.speedup_vs_eager,
        "speedup_vs_compile": ev.speedup_vs_compile,
        "device": ev.timings[0].device,
        "protocol": ev.timing_protocol,
    }


def closed_outcome(best: Attempt, base: Attempt | None) -> BankOutcome:
    """A closed intent's best attempt against its base, by the loop's comparison."""
    ev = best.evaluation
    if ev is None or not _timed(ev):
        where = (
            "timed only in the CPU interpreter (speed unknown)" if ev and ev.cpu_interpreted else "not timed"
        )
        return BankOutcome(kind="correct", detail=f"correct; {where}")
    if base is None or base.evaluation is None or not _timed(base.evaluation):
        return BankOutcome(kind="correct", detail="correct; no timed base to compare with", **_measured(ev))
    v = compare(ev, base.evaluation)
    if v.ratio is None:
        return BankOutcome(kind="correct", detail=f"correct; vs #{base.id}: {v.reason}", **_measured(ev))
    ci = (v.ci_low, v.ci_high) if v.ci_low is not None and v.ci_high is not None else None
    kind: OutcomeKind = "gain" if v.faster else ("slower" if ci and ci[1] < 1.0 else "no_gain")
    return BankOutcome(
        kind=kind,
        detail=f"vs attempt #{base.id}: {v.reason}",
        gain=round(v.ratio, 4),
        gain_ci=(round(ci[0], 4), round(ci[1], 4)) if ci else None,
        **_measured(ev),
    )


def failed_outcome(attempts: list[Attempt]) -> BankOutcome:
    """A failed intent: its attempts' most frequent failure, and the words of its last such attempt."""
    evs = [a.evaluation for a in attempts if a.evaluation is not None]
    kinds = Counter(ev.status for ev in evs if ev.status in _FAILURES)
    if not kinds:
        return BankOutcome(kind="error", detail=f"no attempt succeeded ({len(attempts)} made)")
    kind = kinds.most_common(1)[0][0]
    last = next(ev for ev in reversed(evs) if ev.status == kind)
    spread = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    return BankOutcome(kind=kind, detail=f"{len(attempts)} attempts ({spread}); last: {why_failed(last)}")


def _reflection(node: Node, nodes: dict[int, Node], edits: list[Edit], rounds: set[int]) -> str:
    """The reasons given, in the rounds the intent was refined in (its reflection follows in the same round), with
    the edits on it and the intents proposed under it: an earlier round's edit of it (a re-base, a new priority)
    was a reflection on another intent."""
    said: list[str] = []
    for e in edits:
        if e.round not in rounds:
            continue
        # its own insert's reason is why it was proposed (its rationale says that), not what it taught
        on_it = (e.node_id == node.id and e.op != "insert") or (
            e.op == "insert" and e.node_id in nodes and nodes[e.node_id].parent_id == node.id
        )
        if on_it and e.reason.strip() and e.reason.strip() not in said:
            said.append(e.reason.strip())
    text = " | ".join(said)
    return text[:_REFLECTION_LIMIT] + ("..." if len(text) > _REFLECTION_LIMIT else "")


def _credited(node: Node, edits: list[Edit]) -> list[str]:
    people = {e.author for e in edits if e.node_id == node.id and e.author == HUMAN}
    if node.author == HUMAN:
        people.add(HUMAN)
    return sorted(people)


def _last_edit(node: Node, edits: list[Edit], op: str) -> Edit | None:
    return next((e for e in reversed(edits) if e.node_id == node.id and e.op == op), None)


async def entries_of(ws: Workspace, s: Search, sig: TaskSignature, db: str) -> list[BankEntry]:
    """The bank entries a search's records give today (see the module's docstring)."""
    nodes = {n.id: n for n in await ws.store.list_nodes(s.id)}
    attempts = {a.id: a for a in await ws.store.list_attempts(s.id)}
    edits = await ws.store.list_edits(s.id)
    out: list[BankEntry] = []

    def source(node_id: int | None = None, attempt_id: int | None = None) -> BankSource:
        return BankSource(db=db, search_id=s.id, search=s.name, node_id=node_id, attempt_id=attempt_id)

    for n in nodes.values():
        if n.kind != "intent":
            continue
        code: str | None = None
        language: str | None = None
        best_id: int | None = None
        if n.vetoed:
            e = _last_edit(n, edits, "veto")
            who = e.author if e else "someone"
            outcome = BankOutcome(
                kind="vetoed", detail=f"vetoed by {who}" + (f": {e.reason}" if e and e.reason else "")
            )
        elif n.status == "pruned":
            e = _last_edit(n, edits, "prune")
            why = (e.reason or str(e.payload.get("reason", ""))) if e else ""
            outcome = BankOutcome(
                kind="pruned",
                detail=f"pruned by {e.author if e else 'someone'}" + (f": {why}" if why else ""),
            )
        elif n.status == "closed" and n.best_attempt_id in attempts:
            best = attempts[n.best_attempt_id]
            base_id = best.base_attempt_id if best.base_attempt_id is not None else n.base_attempt_id
            outcome = closed_outcome(best, attempts.get(base_id) if base_id is not None else None)
            best_id = best.id
            # the code of what worked (or was correct where nothing was timed): a starting point, measured again
            if outcome.kind in ("gain", "correct"):
                cand = await ws.store.get_candidate(best.candidate_id)
                code, language = cand.source, cand.language
        elif n.status == "failed":
            outcome = failed_outcome([a for a in attempts.values() if a.node_id == n.id])
        else:
            if n.author != HUMAN and not any(e.node_id == n.id and e.author == HUMAN for e in edits):
                continue  # open and untried: nothing learned yet, unless a person wrote it or about it
            out.append(
                BankEntry(
                    uid=entry_uid(db, s.id, "note", n.id),
                    kind="note",
                    source=source(n.id),
                    signature=sig,
                    title=n.title,
                    rationale=n.rationale,
                    notes=n.notes,
                    author=n.author,
                    credited=_credited(n, edits),
                    params=n.params,
                )
            )
            continue
        refined = {a.round for a in attempts.values() if a.node_id == n.id}
        reflection = _reflection(n, nodes, edits, refined)
        out.append(
            BankEntry(
                uid=entry_uid(db, s.id, "intent", n.id),
                kind="intent",
                source=source(n.id, best_id),
                signature=sig,
                title=n.title,
                rationale=n.rationale,
                notes=n.notes + (f"\nreflection: {reflection}" if reflection else ""),
                author=n.author,
                credited=_credited(n, edits),
                params=n.params,
                outcome=outcome,
                language=language,
                code=code,
            )
        )
    if s.best_attempt_id in attempts:
        best = attempts[s.best_attempt_id]
        cand = await ws.store.get_candidate(best.candidate_id)
        ev = best.evaluation
        if _timed(ev):
            outcome = BankOutcome(kind="correct", detail="the search's best", **_measured(ev))
        else:
            outcome = BankOutcome(
                kind="correct", detail="the search's best; correct, speed not measured on a GPU"
            )
        out.append(
            BankEntry(
                uid=entry_uid(db, s.id, "best", best.id),
                kind="best",
                source=source(best.node_id, best.id),
                signature=sig,
                title=f"best kernel of search {s.name} (attempt #{best.id})",
                author=best.author,
                params=params_of(cand.source),
                outcome=outcome,
                language=cand.language,
                code=cand.source,
            )
        )
    return out


async def record_search(ws: Workspace, search: int | str) -> int:
    """Record (again) what a search taught into the workspace's bank; returns the number of entries stored."""
    s = await ws.search(search)
    bank = await ws.bank()
    sig = await search_signature(ws, s)
    entries = await entries_of(ws, s, sig, await bank_store.db_uid(ws.store))
    return await bank_store.replace_search(bank, await bank_store.db_uid(ws.store), s.id, entries)


async def record_quietly(ws: Workspace, search: int | str) -> None:
    """`record_search` where the bank is a side effect of another operation: a failure to record is logged with
    its reason and never undoes or fails that operation."""
    try:
        await record_search(ws, search)
    except (KsearchError, OSError, ValueError) as e:
        log.warning("the kernel bank did not record search %s: %s", search, e)
