"""read_search: everything the database knows about one search, read in one place for the faces that show or
export a whole search (the web page, `ksearch export`).

`search_version` is the cheap question a live page asks every second or two ("did anything change?"); the
full snapshot (attempts with their evaluations) is worth reading only when the answer is yes.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import Field

from ksearch.tools.loop.declines import Decline, declines_in
from ksearch.tools.loop.runs import ShownStatus, run_status
from ksearch.tools.schema import ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import bank_store
from ksearch.worldmodel.bank_store import BankUse
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import Attempt, Candidate, Edit, FinalVerdict, LLMCall, Node, Search
from ksearch.worldmodel.store import LLMTotals

__all__ = [
    "AttemptBase",
    "AttemptRecord",
    "BankUse",  # the type of SearchSnapshot.bank_uses
    "Decline",  # the type of SearchSnapshot.declines
    "LLMTotals",  # the type of SearchSnapshot.llm_totals, for the faces that name it
    "SearchSnapshot",
    "attempt_base",
    "read_attempt",
    "read_search",
    "search_version",
]


class SearchSnapshot(ToolModel):
    """One search as the database holds it; `history` and `sources` are filled when asked for."""

    version: str
    """`search_version` taken before the reads: a write landing in between changes the next version, so a
    reader polling the version never keeps a stale snapshot under a fresh token"""
    search: Search
    status: ShownStatus
    """The search's status to show: `interrupted` when the process that was running it is gone"""
    nodes: list[Node]
    """Every node, in id (creation) order"""
    attempts: list[Attempt]
    """Every attempt with its evaluation, in id order"""
    llm_totals: LLMTotals
    """The language-model spend recorded on the search"""
    declines: list[Decline] = Field(default_factory=list)
    """The intents a policy declined, oldest first (read from the edit log)"""
    edits: list[Edit] = Field(default_factory=list)
    """The edit log (with `history`)"""
    llm_calls: list[LLMCall] = Field(default_factory=list)
    """Every language-model call (with `history`; prompts and responses emptied without `llm_text`)"""
    final: FinalVerdict | None = None
    """What the final evaluation did to the search's best (with `history`; None before it ran)"""
    candidates: dict[str, Candidate] = Field(default_factory=dict)
    """Candidate id -> candidate, for every attempt's candidate (with `sources`)"""
    bank_uses: list[BankUse] = Field(default_factory=list)
    """The kernel-bank entries its analyse and reflect prompts showed, in the order first shown"""


class AttemptBase(ToolModel):
    """What an attempt is diffed against, and why."""

    why: str
    """'its recorded base' or 'the intent's starting code'"""
    attempt: Attempt
    candidate: Candidate


class AttemptRecord(ToolModel):
    """One attempt with its candidate and its base."""

    attempt: Attempt
    candidate: Candidate
    base: AttemptBase | None
    """None: recorded on no base, and its intent starts from nothing"""


async def search_version(ws: Workspace, search_id: int) -> str:
    """A short token that changes whenever anything a search's page shows changes.

    Covers the search row (round, status, best), its shown status (a run that dies flips it to
    `interrupted`) and whether a driver run holds it, every node (edits, status, visits, best attempt), the
    attempt ids (new attempts) and the LLM spend. Attempt evaluations are immutable once written, so their ids suffice.
    """
    store = ws.store
    s = await store.get_search(search_id)
    nodes = await store.list_nodes(search_id)
    speedups = await store.attempt_speedups(search_id)
    totals = await store.llm_totals(search_id)
    payload = {
        "s": s.model_dump(mode="json"),
        "r": (run := await run_status(ws, s)).status,
        "h": run.holder is not None,  # a driver run taking over a `running` search changes what the page says
        "n": [n.model_dump(mode="json") for n in nodes],
        "a": sorted(speedups.items()),
        "l": totals.model_dump(),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


async def read_search(
    ws: Workspace, ref: int | str, *, history: bool = False, sources: bool = False, llm_text: bool = True
) -> SearchSnapshot:
    """The search by id or name (NotFound names what exists) with its tree, attempts and spend; `history`
    adds the edit log, the LLM calls (`llm_text=False` empties their prompts and responses, which are large)
    and the final verdict; `sources` adds the candidate of every attempt."""
    store = ws.store
    found = await ws.search(ref)
    version = await search_version(ws, found.id)
    s = await store.get_search(found.id)  # read after the version (see SearchSnapshot.version)
    snap = SearchSnapshot(
        version=version,
        search=s,
        status=(await run_status(ws, s)).status,
        nodes=await store.list_nodes(s.id),
        attempts=await store.list_attempts(s.id),
        llm_totals=await store.llm_totals(s.id),
    )
    edits = await store.list_edits(s.id)
    snap.declines = declines_in(edits)
    snap.bank_uses = await bank_store.uses(store, s.id)
    if history:
        calls = await store.list_llm_calls(s.id)
        if not llm_text:
            calls = [c.model_copy(update={"request": "", "response": ""}) for c in calls]
        snap.edits = edits
        snap.llm_calls = calls
        snap.final = await store.final_verdict(s.id)
    if sources:
        for a in snap.attempts:
            if a.candidate_id not in snap.candidates:
                snap.candidates[a.candidate_id] = await store.get_candidate(a.candidate_id)
    return snap


async def attempt_base(ws: Workspace, a: Attempt) -> AttemptBase | None:
    """What to diff an attempt against: its recorded base, else the code its intent starts from."""
    store = ws.store
    why, base_id = "its recorded base", a.base_attempt_id
    if base_id is None and a.node_id is not None:
        node = await store.get_node(a.node_id)
        why, base_id = "the intent's starting code", node.base_attempt_id
    if base_id is None or base_id == a.id:
        return None
    try:
        ba = await store.get_attempt(base_id)
        return AttemptBase(why=why, attempt=ba, candidate=await store.get_candidate(ba.candidate_id))
    except NotFound:  # a base that is gone: show the attempt without a diff
        return None


async def read_attempt(ws: Workspace, attempt_id: int) -> AttemptRecord:
    """The attempt (NotFound when there is none) with its candidate and its base."""
    a = await ws.store.get_attempt(attempt_id)
    return AttemptRecord(
        attempt=a, candidate=await ws.store.get_candidate(a.candidate_id), base=await attempt_base(ws, a)
    )
