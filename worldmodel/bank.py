"""The kernel bank's records: what a search learned, kept for the searches after it, and how entries are matched.

An entry is one lesson from one search: an intent with its outcome (a measured gain over its base with the
confidence interval, or how it failed, or why it was pruned or vetoed), a person's note, or a search's best
kernel with its numbers. Each carries the signature of the task it was learned on (op patterns, dtype, bound,
size, ecosystem) and, for every number, the device and the timing protocol it was measured with: nothing from
the bank counts as a measurement on another machine.

Matching is deterministic and explainable: `similarity` scores two signatures from their parts and says which
parts agreed; `rank` orders related entries by that score and by what they measured. No external service.
The export file (`dump_bank` / `load_bank`) is versioned: a file from a newer ksearch is refused, never misread.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, ValidationError

from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import Strict, utcnow

BANK_FORMAT = "ksearch-bank"
BANK_VERSION = 1  # of an entry's and the export file's layout: raised when a field changes meaning

PATTERNS: tuple[str, ...] = (
    "elementwise",
    "reduction",
    "softmax",
    "scan",
    "norm",
    "gemm",
    "convolution",
    "attention",
)
"""The op patterns a task's signature is made of (a softmax is a reduction too)."""

EntryKind = Literal["intent", "best", "note"]
OutcomeKind = Literal[
    "gain",  # faster than its base beyond noise (the loop's gain rule)
    "no_gain",  # correct, but not faster than its base beyond noise
    "slower",  # correct and slower than its base beyond noise
    "correct",  # correct; no base to compare with, or timed only in the CPU interpreter
    "compile_error",
    "incorrect",
    "crash",
    "timeout",
    "error",
    "pruned",
    "vetoed",
]


class BankError(ValueError, KsearchError):
    """A bank file or entry that cannot be used, with the reason and what is accepted."""


class TaskSignature(Strict):
    """What a task is, for matching lessons across tasks."""

    task: str
    """The task's name."""
    ecosystem: str = "native"
    """Where the task comes from: native, kernelbench, flashinfer or gpumode."""
    patterns: list[str] = Field(default_factory=list)
    """Op patterns derived from the reference (see PATTERNS), sorted."""
    ops: list[str] = Field(default_factory=list)
    """The op names the patterns were read from (for the explanation)."""
    dtype: str = "unknown"
    """The main dtype (torch's name)."""
    bound: str = "unknown"
    """memory, compute, mixed, launch or unknown."""
    scale: float | None = None
    """log10 of the elements of the largest input of the search workloads; None when unknown."""


class BankSource(Strict):
    """Where an entry was learned."""

    db: str
    """The identity of the database the search lives in."""
    search_id: int
    search: str
    """The search's name."""
    node_id: int | None = None
    attempt_id: int | None = None


class BankOutcome(Strict):
    """What an intent came to, or a best kernel's numbers."""

    kind: OutcomeKind
    detail: str = ""
    """In words: the comparison, the failure, the reason it was pruned or vetoed."""
    gain: float | None = None
    """Geometric-mean speedup over the code it was built on (>1: faster)."""
    gain_ci: tuple[float, float] | None = None
    """95% confidence interval of `gain`."""
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    device: str | None = None
    """The GPU the numbers were measured on (None: none measured)."""
    protocol: str | None = None
    """The timing protocol the numbers were measured with."""


class BankEntry(Strict):
    """One lesson in the bank."""

    version: int = BANK_VERSION
    uid: str
    """Stable id: the same lesson from the same search has the same uid in every bank."""
    kind: EntryKind
    source: BankSource
    signature: TaskSignature
    title: str
    """The intent's title; for a best kernel, what it is."""
    rationale: str = ""
    notes: str = ""
    author: str = ""
    """Who proposed the intent or wrote the kernel or note."""
    credited: list[str] = Field(default_factory=list)
    """People whose notes or vetoes the entry carries ("human" and the edit)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The intent's or kernel's tunable settings."""
    outcome: BankOutcome | None = None
    language: str | None = None
    code: str | None = None
    """The kernel's source (a best kernel, or an intent's best attempt)."""
    recorded_at: datetime = Field(default_factory=utcnow)


def entry_uid(db: str, search_id: int, kind: str, key: int | str) -> str:
    """`b` + 11 hex digits of (database, search, kind, node or attempt id)."""
    return "b" + hashlib.sha256(f"{db}\0{search_id}\0{kind}\0{key}".encode()).hexdigest()[:11]


# ---------------------------------------------------------------------------------------- matching

WEIGHTS: dict[str, float] = {"patterns": 0.45, "dtype": 0.2, "scale": 0.15, "bound": 0.1, "ecosystem": 0.1}
RELATED_MIN = 0.55
"""Below this similarity an entry is not shown for a task."""
_HALF_FLOATS = {"float16", "bfloat16"}
_FLOATS = {"float16", "bfloat16", "float32", "float64"}


def _family(ecosystem: str) -> str:
    return "kernelbench" if ecosystem == "native" else ecosystem


class Match(Strict):
    """How alike two task signatures are, and why."""

    score: float
    """0 (unrelated) to 1 (the same kind of task)."""
    why: list[str] = Field(default_factory=list)
    """The parts that agreed or disagreed, in a few words each."""


def _short(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}.get(dtype, dtype)


def similarity(a: TaskSignature, b: TaskSignature) -> Match:
    """Score `b` against `a`: no op pattern in common is unrelated (0); otherwise a weighted sum of the pattern
    overlap (Jaccard), dtype, size (within 1000x, closer is better), bound and ecosystem."""
    pa, pb = set(a.patterns), set(b.patterns)
    common = pa & pb
    if not common:
        return Match(score=0.0, why=["no op pattern in common"])
    parts: dict[str, float] = {"patterns": len(common) / len(pa | pb)}
    why = [
        f"same patterns {'+'.join(sorted(common))}"
        if pa == pb
        else f"patterns {'+'.join(sorted(common))} in common (of {'+'.join(sorted(pa | pb))})"
    ]
    if a.dtype == b.dtype and a.dtype != "unknown":
        parts["dtype"] = 1.0
        why.append(f"same dtype {_short(a.dtype)}")
    else:  # a lesson on one float type half holds for its 16-bit sibling, a little for another width
        floats = {a.dtype, b.dtype} <= _FLOATS
        parts["dtype"] = 0.5 if {a.dtype, b.dtype} <= _HALF_FLOATS else 0.25 if floats else 0.0
        why.append(f"dtype {_short(b.dtype)} (this task {_short(a.dtype)})")
    if a.scale is not None and b.scale is not None:
        d = abs(a.scale - b.scale)
        parts["scale"] = max(0.0, 1.0 - d / 3.0)
        why.append("size within 2x" if d <= math.log10(2) else f"size {10**d:.0f}x apart")
    else:
        parts["scale"] = 0.5
    if "unknown" in (a.bound, b.bound):
        parts["bound"] = 0.5
    else:
        parts["bound"] = 1.0 if a.bound == b.bound else 0.0
        why.append(
            f"same bound ({a.bound})" if a.bound == b.bound else f"{b.bound}-bound (this task {a.bound})"
        )
    # ksearch's own tasks and KernelBench's take the same candidate (a ModelNew module): one family
    parts["ecosystem"] = 1.0 if _family(a.ecosystem) == _family(b.ecosystem) else 0.0
    score = sum(WEIGHTS[k] * v for k, v in parts.items())
    return Match(score=round(score, 3), why=why)


def value(entry: BankEntry) -> float:
    """What an entry measured, as a weight in 0..1: a gain or a fast best counts most; a failure still teaches."""
    o = entry.outcome
    if o is None:
        return 0.1  # a note
    if o.kind == "gain" and o.gain:
        return min(1.0, 0.3 + 2.0 * math.log(o.gain))
    if entry.kind == "best" and o.speedup_vs_eager:
        return min(1.0, max(0.2, 0.2 + 0.4 * math.log2(o.speedup_vs_eager)))
    if o.kind in ("compile_error", "incorrect", "crash", "timeout", "error", "slower", "vetoed", "pruned"):
        return 0.2
    return 0.1


class Ranked(Strict):
    """An entry related to a task, with its match."""

    entry: BankEntry
    match: Match
    rank: float
    """similarity x (1 + value): the order entries are shown in."""


def rank(
    sig: TaskSignature, entries: list[BankEntry], *, limit: int = 8, min_score: float = RELATED_MIN
) -> list[Ranked]:
    """The entries related to a task with signature `sig`, best first."""
    out = []
    for e in entries:
        m = similarity(sig, e.signature)
        if m.score >= min_score:
            out.append(Ranked(entry=e, match=m, rank=round(m.score * (1.0 + value(e)), 4)))
    # ties: the earlier idea of its search first (a refinement reads better after what it refines), then by uid
    out.sort(key=lambda r: (-r.rank, r.entry.source.search_id, r.entry.source.node_id or 0, r.entry.uid))
    return out[:limit]


# ------------------------------------------------------------------------------------ the file


def dump_bank(entries: list[BankEntry], *, ksearch_version: str) -> str:
    """The export file's text: a header naming the format and version, then the entries."""
    doc = {
        "format": BANK_FORMAT,
        "version": BANK_VERSION,
        "ksearch": ksearch_version,
        "exported_at": utcnow().isoformat(),
        "entries": [e.model_dump(mode="json") for e in entries],
    }
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def load_bank(text: str, *, where: str = "the bank file") -> list[BankEntry]:
    """The entries of an export file. BankError (nothing read) for a file that is not JSON, not a ksearch bank,
    from a newer ksearch, or with an entry that does not validate (each problem named, at most five)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BankError(
            f"{where} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            f"a bank file is what `ksearch bank export` writes"
        ) from e
    if not isinstance(doc, dict) or doc.get("format") != BANK_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise BankError(
            f"{where} is not a ksearch bank (its format is {got!r}, expected {BANK_FORMAT!r}); "
            "a bank file is what `ksearch bank export` writes"
        )
    version = doc.get("version")
    if not isinstance(version, int) or version < 1:
        raise BankError(f"{where} has no valid version ({version!r}); expected an integer 1..{BANK_VERSION}")
    if version > BANK_VERSION:
        raise BankError(
            f"{where} is bank version {version}, written by ksearch {doc.get('ksearch', '?')}; this ksearch reads "
            f"versions up to {BANK_VERSION}: upgrade ksearch to import it"
        )
    raw = doc.get("entries")
    if not isinstance(raw, list):
        raise BankError(f"{where} has no `entries` list")
    entries: list[BankEntry] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        try:
            entry = BankEntry.model_validate(item)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            problems.append(f"entry {i}: {loc}: {first['msg']}")
            continue
        if entry.version > BANK_VERSION:
            problems.append(
                f"entry {i}: version {entry.version} is newer than this ksearch reads ({BANK_VERSION})"
            )
        entries.append(entry)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise BankError(f"{where}: nothing imported; " + "; ".join(problems[:5]) + more)
    return entries
