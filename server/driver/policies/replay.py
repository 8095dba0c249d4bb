"""Recorded answers: `RecordingPolicy` writes every answer of any policy to a JSONL file, and
`ReplayPolicy` plays such a file back in order (tests, demos, reproducing a run without a model).

One line per call: {"phase": "init" | "write_code" | "update", "result": {...}} plus optional keys
("model", "policy") that replay ignores, and "intent": the title of the intent a write_code or update
answer was for. When every write_code and update line names its intent, replay serves each intent its
own answers in order: a run on other hardware, where the loop takes another course (another attempt
count per intent, say), still gets each intent's code; an intent whose answers run out is declined, a
missing update is an empty one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ksearch.server.driver.policies.base import (
    CallRecord,
    CallSink,
    CodeResult,
    InitContext,
    InitResult,
    IntentDeclined,
    Policy,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.tools.prompting.fill import PHASES, Phase
from ksearch.worldmodel.models import EditSpec, NodeRef

RESULT_MODELS: dict[str, type[BaseModel]] = {
    "init": InitResult,
    "write_code": CodeResult,
    "update": UpdateResult,
}


class ReplayLine(BaseModel):
    model_config = ConfigDict(extra="ignore")

    phase: Phase
    result: dict[str, Any]
    intent: str | None = None
    nodes: dict[int, str] | None = None  # an update's node ids -> titles where it was recorded


def referenced(result: UpdateResult) -> set[int]:
    """The node ids an update answer names: its edits' nodes and its new intents' parents (handles are the
    search's own names, kept as they are)."""
    refs = [e.node_id for e in result.edits] + [e.parent_id for e in result.edits]
    refs += [i.parent_id for i in result.new_intents]
    return {r for r in refs if isinstance(r, int)}


def node_map(result: UpdateResult, titles: dict[int, str]) -> dict[int, str]:
    """What a recorded update line keeps beside its answer: each node id it names, by title."""
    return {i: titles[i] for i in sorted(referenced(result)) if i in titles}


RECORDED_ROOT_ID = 1
"""The root's id in a recording that kept no node titles: such recordings were made in a database of their own, whose
first search's root is node 1 and whose nodes follow in the order they were made."""


def remap(result: UpdateResult, recorded: dict[int, str], here: dict[int, str]) -> UpdateResult:
    """A recorded update answer with its node ids made this search's: each id by its title where it was
    recorded, then that title's node here. An edit on a node this search lacks is left out (said in the
    reflection); a new intent whose parent it lacks goes under the root."""
    by_title: dict[str, int] = {}
    for nid, title in sorted(here.items()):
        by_title.setdefault(title, nid)

    def mapped(old: int) -> int | None:
        title = recorded.get(old)
        return by_title.get(title) if title is not None else None

    return _renumbered(result, mapped, lambda old: recorded.get(old, f"#{old}"))


def remap_in_order(
    result: UpdateResult, here: dict[int, str], attempts: list[int] | None = None
) -> UpdateResult:
    """A recorded update answer without node titles (recorded before they were kept), its node ids made this
    search's by order: the recording's k-th node (id `RECORDED_ROOT_ID` + k) is the k-th node this search made
    (the replay makes them in the recording's order: the root, the first intents, each update's new ones), and so
    are the attempts its edits and intents start from (`attempts`: this search's attempt ids, the recording's k-th
    attempt being id `RECORDED_FIRST_ATTEMPT` + k). In a fresh database that is the identity; in one that holds other
    searches it finds the replay's own nodes and attempts."""
    mine = sorted(here)

    def mapped(old: int) -> int | None:
        k = old - RECORDED_ROOT_ID
        return mine[k] if 0 <= k < len(mine) else None

    out = _renumbered(result, mapped, lambda old: f"#{old}")
    return out if attempts is None else _attempts_in_order(out, sorted(attempts))


RECORDED_FIRST_ATTEMPT = 1
"""The first attempt's id in a recording that kept no node titles (made in a database of its own)."""


def _attempts_in_order(result: UpdateResult, mine: list[int]) -> UpdateResult:
    """`result` with each `base_attempt_id` its edits and intents name made this search's by order (see
    `remap_in_order`); one beyond this search's attempts is cleared (the intent then starts from the best on its
    path), said in the reflection."""
    lost: list[int] = []

    def mapped(old: int | None) -> int | None:
        if old is None:
            return None
        k = old - RECORDED_FIRST_ATTEMPT
        if 0 <= k < len(mine):
            return mine[k]
        lost.append(old)
        return None

    edits = [
        e.model_copy(update={"base_attempt_id": mapped(e.base_attempt_id)})
        if e.base_attempt_id is not None
        else e
        for e in result.edits
    ]
    intents = [
        i.model_copy(update={"base_attempt_id": mapped(i.base_attempt_id)})
        if i.base_attempt_id is not None
        else i
        for i in result.new_intents
    ]
    note = (
        f" (recorded base attempts this search lacks were left out: {', '.join(f'#{a}' for a in lost)})"
        if lost
        else ""
    )
    return result.model_copy(
        update={"edits": edits, "new_intents": intents, "reflection": result.reflection + note}
    )


def _renumbered(
    result: UpdateResult, mapped: Callable[[int], int | None], named: Callable[[int], str]
) -> UpdateResult:
    """`result` with each node id replaced by `mapped(id)`: an edit whose node has none is left out (said in the
    reflection by `named(id)`); a new intent whose parent has none goes under the root."""

    def opt(old: NodeRef | None) -> NodeRef | None:
        return old if old is None or isinstance(old, str) else mapped(old)

    edits: list[EditSpec] = []
    dropped: list[str] = []
    for e in result.edits:
        new_id = opt(e.node_id)
        if new_id is None:
            assert isinstance(e.node_id, int)  # a handle is kept as it is: only an id maps to nothing
            dropped.append(named(e.node_id))
            continue
        update: dict[str, Any] = {"node_id": new_id}
        if e.parent_id is not None:
            update["parent_id"] = opt(e.parent_id)
        edits.append(e.model_copy(update=update))
    intents = [i.model_copy(update={"parent_id": opt(i.parent_id)}) for i in result.new_intents]
    note = f" (recorded edits on nodes this search lacks were left out: {', '.join(map(repr, dropped))})"
    return result.model_copy(
        update={
            "edits": edits,
            "new_intents": intents,
            "reflection": result.reflection + (note if dropped else ""),
        }
    )


class ReplayPolicy(Policy):
    name = "replay"

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self.model = f"replay:{self.path.name}"
        self._entries = self._load(self.path)
        self._pos = 0
        self._last: ReplayLine | None = None  # the line an answer came from
        keyed = [e for _, e in self._entries if e.phase != "init"]
        self.by_intent = bool(keyed) and all(e.intent is not None for e in keyed)
        self._queues: dict[tuple[str, str], list[tuple[int, ReplayLine]]] = {}
        for n, e in self._entries:
            if self.by_intent and e.phase != "init":
                self._queues.setdefault((e.phase, e.intent or ""), []).append((n, e))

    @staticmethod
    def _load(path: Path) -> list[tuple[int, ReplayLine]]:
        if path.exists() and not path.is_file():  # a directory, or a device that never ends (/dev/zero)
            raise PolicyError(
                f"the replay file {path} is not a regular file; give a JSONL file recorded with --record"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise PolicyError(f"cannot read the replay file {path}: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise PolicyError(
                f"the replay file {path} is not UTF-8 text ({e.reason} at byte {e.start})"
            ) from e
        entries: list[tuple[int, ReplayLine]] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((n, ReplayLine.model_validate_json(line)))
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "(line)"
                raise PolicyError(
                    f"{path} line {n} is not a replay record ({where}: {first['msg']}); each line must be "
                    f'{{"phase": one of {", ".join(PHASES)}, "result": {{...}}}}'
                ) from e
        return entries

    @property
    def remaining(self) -> int:
        if self.by_intent:
            inits = sum(1 for _, e in self._entries[self._pos :] if e.phase == "init")
            return inits + sum(len(q) for q in self._queues.values())
        return len(self._entries) - self._pos

    async def _keyed(self, phase: Phase, intent: str) -> BaseModel | None:
        """The next recorded answer for this intent (by-intent replay), or None when there is none left."""
        queue = self._queues.get((phase, intent), [])
        if not queue:
            return None
        lineno, entry = queue.pop(0)
        return await self._use(phase, lineno, entry)

    async def _next(self, phase: Phase) -> BaseModel:
        if self.by_intent and phase == "init":
            inits = [(n, e) for n, e in self._entries[self._pos :] if e.phase == "init"]
            if inits:
                self._pos = len(self._entries)
                return await self._use(phase, *inits[0])
        if self._pos >= len(self._entries):
            raise PolicyError(
                f"the replay {self.path} is exhausted: all {len(self._entries)} recorded answers were used, "
                f"and a {phase} answer was asked for"
            )
        lineno, entry = self._entries[self._pos]
        if entry.phase != phase:
            raise PolicyError(
                f"{self.path} line {lineno} holds a {entry.phase} answer, but a {phase} answer was asked for: "
                "the run has diverged from the recording"
            )
        self._pos += 1
        return await self._use(phase, lineno, entry)

    async def _use(self, phase: Phase, lineno: int, entry: ReplayLine) -> BaseModel:
        self._last = entry
        try:
            result = RESULT_MODELS[phase].model_validate(entry.result)
        except ValidationError as e:
            raise PolicyError(
                f"{self.path} line {lineno}: the recorded {phase} answer is invalid: {e}"
            ) from e
        await self._record(
            CallRecord(
                phase=phase,
                provider="replay",
                model=self.model,
                request=f"{self.path}:{lineno}",
                response=json.dumps(entry.result, ensure_ascii=False),
            )
        )
        return result

    async def init(self, ctx: InitContext) -> InitResult:
        return await self._next("init")  # type: ignore[return-value]

    async def write_code(self, ctx: WriteContext) -> CodeResult:
        if self.by_intent:
            got = await self._keyed("write_code", ctx.intent_title)
            if got is None:
                raise IntentDeclined(
                    f"the recording holds no further attempt for intent {ctx.intent_title!r}"
                )
            return got  # type: ignore[return-value]
        return await self._next("write_code")  # type: ignore[return-value]

    async def update(self, ctx: UpdateContext) -> UpdateResult:
        if self.by_intent:
            got = await self._keyed("update", ctx.intent_title)
            if got is None:
                return UpdateResult()
        else:
            got = await self._next("update")
        assert isinstance(got, UpdateResult)
        recorded = self._last.nodes if self._last is not None else None
        # node ids name nodes of the search it was recorded in (ids are the database's, not the search's): said by
        # title, they find this search's; a recording without titles names them in the order they were made
        if not ctx.node_titles or not referenced(got):
            return got
        if recorded:
            return remap(got, recorded, ctx.node_titles)
        return remap_in_order(got, ctx.node_titles, ctx.attempt_ids)


class RecordingPolicy(Policy):
    """Wraps a policy and appends each of its answers to `path` (flushed and synced per line, so a crash
    loses at most the answer in flight). The user-visible name stays the inner policy's."""

    def __init__(self, inner: Policy, path: str | Path) -> None:
        super().__init__()
        self.inner = inner
        self.path = Path(path)
        self.name = inner.name
        self.model = inner.model
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def on_call(self, sink: CallSink) -> None:
        self.inner.on_call(sink)

    def _append(
        self, phase: Phase, result: BaseModel, intent: str | None = None, nodes: dict[int, str] | None = None
    ) -> None:
        line: dict[str, Any] = {
            "phase": phase,
            "result": result.model_dump(mode="json"),
            "policy": self.inner.name,
        }
        if intent is not None:
            line["intent"] = intent
        if nodes:
            line["nodes"] = nodes
        if self.inner.model:
            line["model"] = self.inner.model
        with self.path.open("a") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    async def init(self, ctx: InitContext) -> InitResult:
        result = await self.inner.init(ctx)
        self._append("init", result)
        return result

    async def write_code(self, ctx: WriteContext) -> CodeResult:
        result = await self.inner.write_code(ctx)
        self._append("write_code", result, ctx.intent_title)
        return result

    async def update(self, ctx: UpdateContext) -> UpdateResult:
        result = await self.inner.update(ctx)
        self._append("update", result, ctx.intent_title, node_map(result, ctx.node_titles))
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()
