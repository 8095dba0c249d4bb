"""submit_kernel: a person's own kernel, evaluated and recorded like any attempt, with author "human".

The one path `ksearch submit` and the page's "Submit a kernel" both take. On an open intent the submission
claims it first (a new round, whatever the round budget: a budget stops a policy's rounds, never a person's
kernel), measuring the task's seed before when the loop has not yet (the baseline every intent builds on); on
the root or an intent being refined it is one more attempt there; without a node it belongs to the search only.

Every refusal comes before anything is recorded: a source that defines nothing the task needs (notes, a log, the
wrong file), a node of another search or one that takes no attempt (closed, failed, pruned, vetoed), an unknown
base attempt, a source over the size limit. A kernel that names the entry point but does not compile is an
attempt like any other (the claim's refine phase counts it), as in the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import Field, field_validator

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import MAX_SOURCE_CHARS, CandidateRef, Progress, node_id_of
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.candidate import LanguageChoice, detect_language
from ksearch.tools.files.solutions import entry_missing, is_solution, submitted_candidate
from ksearch.tools.loop.state import give_back, phase_attempts, seed_unmeasured
from ksearch.tools.schema import ToolIn, ToolModel
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import NotFound
from ksearch.worldmodel.models import LANGUAGES, Evaluation, Node, NodeRef, Search

__all__ = [
    "MAX_SOURCE_BYTES",
    "Note",
    "SubmitKernelIn",
    "SubmitKernelOut",
    "check_submission",
    "submit_kernel",
]

MAX_SOURCE_BYTES = MAX_SOURCE_CHARS
"""The most bytes (UTF-8) a submitted source may have: the tools' limit on a candidate's source."""

Note = Callable[[str], Awaitable[None]]
"""Hears what a submission does besides evaluating (measuring the seed first, claiming the intent)."""


class SubmitKernelIn(ToolIn):
    """A person's kernel for a search."""

    search: int | str = Field(description="Search id or name")
    source: str = Field(
        min_length=1,
        description="The candidate: a Python module defining the task's entry point (ModelNew; custom_kernel for "
        "GPU MODE; run for FlashInfer-Bench), or a FlashInfer-Bench Solution JSON",
    )
    name: str = Field(
        "the submitted source",
        min_length=1,
        max_length=300,
        description="What to call the source in messages (its file name)",
    )
    node_id: NodeRef | None = Field(
        None,
        description="The root, or the intent it implements (its id or handle; an open one is claimed: a new "
        "round); None: the attempt belongs to the search but to no node",
    )
    language: LanguageChoice | None = Field(
        None,
        description="triton | cuda | cpp_ext | auto (detected from the source: cpp_ext when it mentions "
        "load_inline or cpp_ext, cuda when it mentions nvrtc, else triton); None: the search's language. A "
        "Solution JSON's own spec decides for it",
    )
    base_attempt_id: int | None = Field(
        None,
        ge=1,
        description="The attempt this code was edited from (for the diff); None: the node's best, else the "
        "intent's starting code, else the search's best",
    )
    trials: int = Field(3, ge=1, le=20, description="Correctness trials per workload")

    @field_validator("source")
    @classmethod
    def _bounded(cls, v: str) -> str:
        size = len(v.encode("utf-8", "surrogatepass"))
        if size > MAX_SOURCE_BYTES:
            raise ValueError(
                f"the source is {size} bytes; a candidate may be at most {MAX_SOURCE_BYTES} bytes"
            )
        if not v.strip():
            raise ValueError(
                "the source is empty; accepted: a Python module that defines the task's entry point"
            )
        return v

    @field_validator("language", mode="before")
    @classmethod
    def _known_language(cls, v: object) -> object:
        if isinstance(v, str) and v not in ("auto", *LANGUAGES):
            raise ValueError(f"unknown language {v!r}; accepted: auto, {', '.join(LANGUAGES)}")
        return v


class SubmitKernelOut(ToolModel):
    """What a submission recorded."""

    attempt_id: int
    """The attempt recorded (author "human")"""
    node_id: int | None
    """Where it is recorded (None: on the search, no node)"""
    language: str
    """The language it ran as ("solution" for a FlashInfer-Bench Solution JSON, whose spec says)"""
    evaluation: Evaluation
    summary: str
    """The evaluation in a few lines"""
    base_attempt_id: int | None
    """The attempt it is diffed against"""
    base_why: str
    """Why that base: 'as given', "the node's best", "the intent's starting code", "the search's best", or
    assumed (the refine phase's correct code closest to it); empty without a base"""
    seed_attempt_id: int | None = None
    """The task's seed, measured first because the loop had not yet (None: it was not needed)"""
    claimed_round: int | None = None
    """The round started by claiming the open intent it implements (None: no claim)"""
    is_best: bool = False
    """It is now the search's best"""
    next: str = ""
    """What to do next in the loop (on an intent being refined)"""


_ASSUMED = "assumed: the refine phase's correct code closest to it"


@dataclass(frozen=True)
class Submission:
    """A submission checked: the search, the node, the base and the candidate, nothing recorded yet."""

    search: Search
    node: Node | None
    base_attempt_id: int | None
    base_why: str
    candidate: CandidateRef
    language: str


async def check_submission(ws: Workspace, inp: SubmitKernelIn) -> Submission:
    """Everything that refuses a submission, checked before anything is measured or recorded."""
    s = await ws.search(inp.search)
    missing = entry_missing(inp.source, ws.search_task(s))
    if missing is not None:
        raise ToolFailure(f"{inp.name} is no candidate for task {s.task!r}: {missing}. Nothing was recorded.")
    node = await _node(ws, s, inp.node_id) if inp.node_id is not None else None
    base_id, why = inp.base_attempt_id, "as given"
    if base_id is not None:
        try:
            b = await ws.store.get_attempt(base_id)
        except NotFound as e:
            raise ToolFailure(
                f"no attempt #{base_id} in search {s.name!r}: base_attempt_id names one of its attempts"
            ) from e
        if b.search_id != s.id:
            raise ToolFailure(f"attempt #{base_id} belongs to another search, not {s.name!r}")
    elif node is not None and node.best_attempt_id is not None:
        base_id, why = node.best_attempt_id, "the node's best"
    elif node is not None and node.base_attempt_id is not None:
        base_id, why = node.base_attempt_id, "the intent's starting code"
    if base_id is None and s.best_attempt_id is not None:
        base_id, why = s.best_attempt_id, "the search's best"
    language = s.config.language if inp.language is None else inp.language
    if language == "auto":
        language = detect_language(inp.source)
    candidate = submitted_candidate(inp.source, language)  # a Solution JSON: its spec gives the language
    shown = "solution" if is_solution(inp.source) else language
    return Submission(s, node, base_id, why if base_id is not None else "", candidate, shown)


async def _node(ws: Workspace, s: Search, ref: NodeRef) -> Node:
    """The node, checked to belong to the search and to take an attempt now."""
    node_id = await node_id_of(ws, s, ref)
    try:
        n = await ws.store.get_node(node_id)
    except NotFound as e:
        raise ToolFailure(f"no node #{node_id} in search {s.name!r}") from e
    if n.search_id != s.id:
        other = await ws.store.get_search(n.search_id)
        raise ToolFailure(f"node #{node_id} belongs to another search, {other.name!r}, not {s.name!r}")
    if n.kind == "root":
        return n
    if n.vetoed or n.status.value not in ("open", "active"):
        what = "vetoed" if n.vetoed else n.status.value
        undo = "unveto" if n.vetoed else "reopen"
        raise ToolFailure(
            f"intent #{node_id} is {what}: a kernel is recorded on the root, on an open intent (which it "
            f"claims) or on the intent being refined; {undo} #{node_id} first, or submit on another node"
        )
    return n


async def _interrupted(ws: Workspace, s: Search, node: Node | None, claimed: int | None) -> str:
    """What an interrupted submission leaves: the intent it claimed, with no attempt in its round, is given back
    (open again, the round not counted); otherwise nothing of the submission is recorded."""
    if node is None or claimed is None:
        return "interrupted before the kernel was recorded: no attempt, no intent claimed, no round used"
    current = await ws.store.get_node(node.id)
    if current.status.value == "active" and not await phase_attempts(ws, current):
        await give_back(ws, s, current)
        return (
            f"interrupted before the kernel was recorded: intent #{node.id} is open again and round {claimed} "
            "is not counted"
        )
    return (
        f"interrupted before the kernel was recorded: intent #{node.id} stays {current.status.value} in round "
        f"{claimed}, the round it was claimed in"
    )


async def submit_kernel(
    ws: Workspace, inp: SubmitKernelIn, progress: Progress | None = None, note: Note | None = None
) -> SubmitKernelOut:
    """Evaluate a person's kernel and record it as an attempt; `progress` hears the evaluation's steps, `note`
    what is done before it (the seed measured, the intent claimed)."""
    sub = await check_submission(ws, inp)
    s, node = sub.search, sub.node

    async def say(text: str) -> None:
        if note is not None:
            await note(text)

    seed_id: int | None = None
    claimed: int | None = None
    if node is not None and node.kind == "intent" and node.status.value == "open":
        if await seed_unmeasured(ws, s):
            # the loop measures the seed before the first round: do it for the person, and say so
            await say("measuring the task's seed on the root first (the baseline every intent builds on)")
            root = await ws.store.root(s.id)
            seeded = await benchmark(
                ws,
                BenchmarkIn(
                    search=s.id,
                    node_id=root.id,
                    candidate=CandidateRef(seed=True, language=s.config.language),
                    author="seed",
                ),
            )
            seed_id = seeded.attempt_id
            await say(f"seed: attempt #{seeded.attempt_id}, {seeded.evaluation.status}")
        # Submitting on an open intent starts its refine phase, as claiming it would. A person's kernel is
        # measured whatever the policy's round budget: it never blocks a submission.
        sel = await select_action(
            ws, SelectActionIn(search=s.id, node_id=node.id), budget_checked=True, round_budget=False
        )
        claimed = sel.round
        await say(
            f"claimed intent #{node.id}: round {sel.round} started; finish_intent (search={s.name!r}, "
            f"node_id={node.id}) ends its refine phase"
        )
    try:
        out = await benchmark(
            ws,
            BenchmarkIn(
                search=s.id,
                node_id=node.id if node is not None else None,
                candidate=sub.candidate,
                base_attempt_id=sub.base_attempt_id,
                trials=inp.trials,
                author="human",
            ),
            progress,
        )
    except asyncio.CancelledError:
        # Ctrl-C: the evaluation is abandoned (no attempt is recorded); say what the submission leaves behind
        await say(await _interrupted(ws, s, node if claimed is not None else None, claimed))
        raise
    assert out.attempt_id is not None  # benchmark on a search records the attempt
    after = await ws.search(s.id)
    return SubmitKernelOut(
        attempt_id=out.attempt_id,
        node_id=node.id if node is not None else None,
        language=sub.language,
        evaluation=out.evaluation,
        summary=out.summary,
        base_attempt_id=out.base_attempt_id,
        # none named or found before: within a refine phase benchmark takes the phase's closest correct code
        base_why=sub.base_why if out.base_attempt_id == sub.base_attempt_id else _ASSUMED,
        seed_attempt_id=seed_id,
        claimed_round=claimed,
        is_best=after.best_attempt_id == out.attempt_id,
        next=out.next,
    )
