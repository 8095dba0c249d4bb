"""The kernel bank's operations: the lessons a prompt shows, and reading, searching, forgetting, exporting and
importing entries (`ksearch bank`, the MCP tool `query_bank` and resource `ksearch://bank`).

A prompt's lessons are the entries related to its search's task (worldmodel/bank.py: `rank`), its own search's
entries left out (the tree holds them already); which ones it showed is recorded with the search, so its page
can say what it was told. Numbers keep their device and protocol, and a kernel from the bank is a starting
point: it counts only once this search measures it.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from ksearch.about import __version__
from ksearch.gpu.task import Task
from ksearch.tools.bank.signature import search_signature, signature
from ksearch.tools.errors import ToolFailure
from ksearch.tools.prompting.phase_models import BankSetting
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel import bank_store
from ksearch.worldmodel.bank import BankEntry, Ranked, TaskSignature, dump_bank, load_bank, rank
from ksearch.worldmodel.bank_store import BankUse, Imported
from ksearch.worldmodel.models import Search

PROMPT_LIMIT = 6  # entries a prompt shows
Phase = Literal["analyse", "reflect", "implement"]


def _num(x: float | None, unit: str = "x") -> str:
    return f"{x:.3g}{unit}" if x is not None else "n/a"


def measured_words(e: BankEntry) -> str:
    """What an entry measured, with the device and protocol it was measured on."""
    o = e.outcome
    if o is None:
        return "a note"
    on = f" on {o.device}, {o.protocol} protocol" if o.device else ""
    if o.kind == "gain" and o.gain:
        ci = f" (95% CI {o.gain_ci[0]:.3g}-{o.gain_ci[1]:.3g})" if o.gain_ci else ""
        return f"worked: {_num(o.gain)} over its base{ci}{on}"
    if o.kind in ("no_gain", "slower"):
        what = "no gain beyond noise" if o.kind == "no_gain" else "slower"
        return f"{what}: {_num(o.gain)} vs its base{on}"
    if e.kind == "best":
        sp = f"{_num(o.speedup_vs_eager)} vs eager, {_num(o.speedup_vs_compile)} vs torch.compile{on}"
        return f"best kernel: {sp}" if o.device else f"best kernel: {o.detail}"
    if o.kind == "correct":
        return o.detail
    return f"{o.kind.replace('_', ' ')}: {o.detail}"


def entry_line(r: Ranked) -> str:
    """One entry for a prompt: what it was, what it measured, why it is related."""
    e = r.entry
    head = f"- [{e.uid}] {e.kind} from search {e.source.search!r} (task {e.signature.task})"
    title = f'"{e.title}"' if e.kind != "best" else e.title
    params = f" params {e.params}" if e.params else ""
    lines = [f"{head}: {title}{params}", f"  {measured_words(e)}"]
    mine, _, reflection = e.notes.partition("\nreflection: ")
    ids = f"; #N are search {e.source.search!r}'s node and attempt ids" if re.search(r"#\d", e.notes) else ""
    for label, text in (("notes", mine.strip()), ("reflection after it", reflection.strip())):
        if text:
            flat = " ".join(text.split())
            lines.append(
                f"  {label}{ids if label == 'notes' else ''}: {flat[:400]}{'...' if len(flat) > 400 else ''}"
            )
    if e.code:
        lines.append(f"  code: {e.language}, {len(e.code.splitlines())} lines (show the entry for it)")
    if e.credited:
        lines.append(f"  credited: {', '.join(e.credited)}")
    lines.append(f"  related: similarity {r.match.score:.2f} ({'; '.join(r.match.why)})")
    return "\n".join(lines)


def lessons_text(ranked: list[Ranked], total: int) -> str:
    """The prompt section's body, or "" when nothing is related."""
    if not ranked:
        return ""
    head = (
        f"{len(ranked)} of the bank's {total} entries, related to this task by op pattern, dtype, size, bound and "
        "ecosystem. They were measured in other searches, on the device and protocol each names: a kernel taken "
        "from here is a starting point, measured again before it counts. An entry's uid shows it whole, its code "
        "included (`query_bank` with `entry` over MCP, `ksearch bank show UID` on the command line)."
    )
    return head + "\n" + "\n".join(entry_line(r) for r in ranked)


async def related(
    ws: Workspace, sig: TaskSignature, *, exclude: tuple[str, int] | None = None, limit: int = PROMPT_LIMIT
) -> tuple[list[Ranked], int]:
    """The entries related to a task signature, best first, and how many the bank holds; `exclude` = (database
    identity, search id) leaves a search's own entries out."""
    entries = await bank_store.list_entries(await ws.bank())
    if exclude is not None:
        entries = [e for e in entries if (e.source.db, e.source.search_id) != exclude]
    return rank(sig, entries, limit=limit), len(entries)


async def _record(ws: Workspace, s: Search, shown: list[Ranked], phase: Phase) -> None:
    """Remember which entries a search's prompt showed (its page lists them)."""
    uses = [
        BankUse(
            uid=r.entry.uid,
            phase=phase,
            round=s.round,
            similarity=r.match.score,
            why="; ".join(r.match.why),
            title=r.entry.title,
        )
        for r in shown
    ]
    await bank_store.record_uses(ws.store, s.id, uses)


async def lessons_for(ws: Workspace, s: Search, phase: Phase) -> tuple[str, list[Ranked]]:
    """The lessons section for a search's prompt, recorded as used by it."""
    me = (await bank_store.db_uid(ws.store), s.id)
    ranked, total = await related(ws, await search_signature(ws, s), exclude=me)
    await _record(ws, s, ranked, phase)
    return lessons_text(ranked, total), ranked


KERNELS_LIMIT = 3  # related kernels an implement prompt names


async def kernels_for(ws: Workspace, s: Search) -> str:
    """For the implement prompt: the related entries that carry a kernel's code, one line each (recorded as shown)."""
    me = (await bank_store.db_uid(ws.store), s.id)
    ranked, _ = await related(ws, await search_signature(ws, s), exclude=me, limit=20)
    with_code = [r for r in ranked if r.entry.code][:KERNELS_LIMIT]
    if not with_code:
        return ""
    await _record(ws, s, with_code, "implement")
    lines = [
        f"- [{r.entry.uid}] {r.entry.signature.task} ({r.entry.language}): {r.entry.title[:100]} — "
        f"{measured_words(r.entry)}; similarity {r.match.score:.2f}"
        for r in with_code
    ]
    return (
        "Kernels of related tasks, measured elsewhere on the device and protocol each names: a starting point to read "
        "or adapt, measured here before it counts. Show one whole with `query_bank` (`entry`) over MCP or `ksearch "
        "bank show UID`.\n" + "\n".join(lines)
    )


def winning_settings(ranked: list[Ranked]) -> list[BankSetting]:
    """The settings of related best kernels and gains, most related first."""
    out = []
    for r in ranked:
        e = r.entry
        if e.params and e.outcome is not None and (e.kind == "best" or e.outcome.kind == "gain"):
            out.append(
                BankSetting(
                    uid=e.uid,
                    task=e.signature.task,
                    params=e.params,
                    speedup_vs_eager=e.outcome.speedup_vs_eager,
                    similarity=r.match.score,
                )
            )
    return out


# ------------------------------------------------------------------------------- reading and editing


# a few words are a query; a longer text would only be echoed back in a "no entry matches" answer
QUERY_TEXT_CHARS = 1000


class QueryBankIn(ToolIn):
    entry: str | None = Field(
        None, description="An entry's uid (or its first 4+ characters): that entry whole, code included"
    )
    search: int | str | None = Field(
        None, description="A search: the entries related to its task (its own left out)"
    )
    task: str | None = Field(None, description="A task (built-in name or path): the entries related to it")
    text: str | None = Field(
        None,
        max_length=QUERY_TEXT_CHARS,
        description=f"Words to find in entries' titles, notes, tasks and patterns (at most {QUERY_TEXT_CHARS} "
        "characters)",
    )
    limit: int = Field(10, ge=1, le=100, description="At most this many entries")


class BankHit(ToolModel):
    entry: BankEntry
    similarity: float | None = None
    why: list[str] = Field(default_factory=list)


class QueryBankOut(ToolModel):
    bank: str = Field(description="Where the bank lives: this database, or the shared file")
    total: int = Field(description="Entries in the bank")
    signature: TaskSignature | None = Field(
        None, description="The task signature entries were matched against"
    )
    hits: list[BankHit]
    text: str = Field(description="The answer in words")


def where(ws: Workspace) -> str:
    return f"shared bank {ws.bank_path}" if ws.bank_path is not None else "this database's bank"


def _task_signature(task: Task) -> TaskSignature:
    from ksearch.gpu.tasks.facts import task_facts

    facts = task_facts(task)
    return signature(task, None if facts.error and not facts.workloads else facts)


def _found(e: BankEntry, words: list[str]) -> bool:
    hay = " ".join(
        [e.title, e.rationale, e.notes, e.signature.task, " ".join(e.signature.patterns), e.source.search]
    ).lower()
    return all(w in hay for w in words)


async def query_bank(ws: Workspace, inp: QueryBankIn) -> QueryBankOut:
    given = [k for k in ("entry", "search", "task", "text") if getattr(inp, k) not in (None, "")]
    if len(given) > 1:
        raise ToolFailure(f"give one of entry, search, task or text, not {' and '.join(given)}")
    bank = await ws.bank()
    entries = await bank_store.list_entries(bank)
    sig: TaskSignature | None = None
    if inp.entry:
        e = await bank_store.get_entry(bank, inp.entry)
        hits = [BankHit(entry=e)]
        text = entry_text(e)
    elif inp.search is not None or inp.task:
        if inp.search is not None:
            s = await ws.search(inp.search)
            sig = await search_signature(ws, s)
            ranked, _ = await related(
                ws, sig, exclude=(await bank_store.db_uid(ws.store), s.id), limit=inp.limit
            )
        else:
            sig = await asyncio.to_thread(_task_signature, ws.task(str(inp.task)))
            ranked, _ = await related(ws, sig, limit=inp.limit)
        hits = [BankHit(entry=r.entry, similarity=r.match.score, why=r.match.why) for r in ranked]
        text = lessons_text(ranked, len(entries)) or (
            f"No entry of {where(ws)} ({len(entries)} entries) is related to task {sig.task} "
            f"(patterns {'+'.join(sig.patterns) or 'none'}, {sig.dtype}, {sig.bound}-bound)."
        )
    else:
        words = (inp.text or "").lower().split()
        chosen = [e for e in reversed(entries) if _found(e, words)][: inp.limit]
        hits = [BankHit(entry=e) for e in chosen]
        text = "\n".join(list_line(e) for e in chosen) or (
            f"No entry of {where(ws)} matches {inp.text!r}."
            if words
            else f"{where(ws)[0].upper()}{where(ws)[1:]} is empty."
        )
    return QueryBankOut(bank=where(ws), total=len(entries), signature=sig, hits=hits, text=text)


def list_line(e: BankEntry) -> str:
    return f"{e.uid}  {e.kind:<6} {e.signature.task:<24} {e.source.search:<16} {e.title[:70]} — {measured_words(e)[:90]}"


def entry_text(e: BankEntry) -> str:
    """An entry whole, for `ksearch bank show` and `query_bank(entry=...)`."""
    sig = e.signature
    lines = [
        f"{e.uid} ({e.kind}) from search {e.source.search!r} #{e.source.search_id}"
        + (f", node #{e.source.node_id}" if e.source.node_id else "")
        + (f", attempt #{e.source.attempt_id}" if e.source.attempt_id else ""),
        f"task {sig.task} ({sig.ecosystem}): patterns {'+'.join(sig.patterns) or 'none'} (from {', '.join(sig.ops) or 'no op'}), "
        f"{sig.dtype}, {sig.bound}-bound"
        + (f", largest input 10^{sig.scale:g} elements" if sig.scale is not None else ""),
        f"title: {e.title}",
    ]
    if e.rationale:
        lines.append(f"rationale: {e.rationale}")
    if e.params:
        lines.append(f"params: {e.params}")
    lines.append(
        f"outcome: {measured_words(e)}"
        + (
            f" ({e.outcome.detail})"
            if e.outcome and e.outcome.detail and e.outcome.kind in ("gain", "no_gain", "slower")
            else ""
        )
    )
    if e.notes:
        lines.append(f"notes: {e.notes}")
    lines.append(
        f"author: {e.author or 'unknown'}" + (f"; credited: {', '.join(e.credited)}" if e.credited else "")
    )
    lines.append(f"recorded: {e.recorded_at.isoformat(timespec='seconds')}")
    if e.code:
        lines.append(f"code ({e.language}; a starting point: measured again before it counts):\n{e.code}")
    return "\n".join(lines)


async def list_bank(ws: Workspace) -> list[BankEntry]:
    return await bank_store.list_entries(await ws.bank())


async def forget_entries(ws: Workspace, uids: list[str], reason: str = "") -> list[str]:
    if not uids:
        raise ToolFailure("name the entries to forget by uid (`ksearch bank list` shows them)")
    return await bank_store.forget(await ws.bank(), uids, reason)


async def export_bank(ws: Workspace, path: Path) -> int:
    """Write every entry to a JSON file (`load_bank` reads it back); returns how many."""
    entries = await bank_store.list_entries(await ws.bank())
    await asyncio.to_thread(path.write_text, dump_bank(entries, ksearch_version=__version__))
    return len(entries)


async def import_bank(ws: Workspace, path: Path) -> Imported:
    try:
        text = await asyncio.to_thread(path.read_text)
    except (OSError, UnicodeDecodeError) as e:
        raise ToolFailure(f"cannot read the bank file {path}: {e}") from e
    return await bank_store.import_entries(await ws.bank(), load_bank(text, where=str(path)))


async def bank_uses(ws: Workspace, search: int | str) -> list[BankUse]:
    s = await ws.search(search)
    return await bank_store.uses(ws.store, s.id)
