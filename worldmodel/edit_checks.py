"""What every change to the intent tree is checked against before anything is written: each item's fields
(validated through IntentSpec / EditSpec, result keys refused by name, text limits), its author and round, and
near-duplicate titles among siblings. Shared by `intents.py` (new intents) and `edits.py` (edits of nodes)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiosqlite
from pydantic import BaseModel, ValidationError

from ksearch.worldmodel import rows
from ksearch.worldmodel.errors import EditProblem
from ksearch.worldmodel.models import EditSpec, IntentSpec
from ksearch.worldmodel.similarity import TitleKey, near_duplicate, stored_key

SpecT = TypeVar("SpecT", IntentSpec, EditSpec)

# Keys a caller might use to smuggle a result in; named in the refusal so the intent is clear.
RESULT_KEYS = frozenset(
    {
        "best_attempt_id",
        "best_attempt",
        "best",
        "best_speedup",
        "evaluation",
        "result",
        "results",
        "speedup",
        "speedup_vs_eager",
        "speedup_vs_compile",
        "timings",
        "correctness",
        "attempt_id",
        "visits",
        "status",
    }
)

_ACCEPTED: dict[str, str] = {
    "title": "a short imperative idea of 3-200 characters",
    "rationale": "text up to 4000 characters",
    "notes": "text up to 4000 characters",
    "priority": "a number from 0 (least) to 1 (most promising)",
    "difficulty": "an integer from 1 (a parameter change) to 5 (a rewrite)",
    "expected_speedup": "a number above 0 and at most 1000, or null",
    "parent_id": "the id or handle of a node of this search, or the handle of an earlier item of the request "
    "(the root when omitted)",
    "handle": "a name not yet used in this search: a letter, then up to 39 letters, digits, '_', '.' or '-'",
    "params": "a JSON object of concrete settings",
    "base_attempt_id": "the id of an attempt of this search",
    "edit.base_attempt_id": "the id of a correct attempt (status ok) of this search, or null to clear it",
    "edit.parent_id": "the id or handle of a node of this search that is not pruned, not vetoed and not inside the "
    "moved subtree",
    "op": "one of update, move, prune, reopen, pin, unpin, veto, unveto",
    "node_id": "the id (12 or '#12') or handle of a node of this search",
    "reason": "text up to 2000 characters",
}
# ---------------------------------------------------------------------- item validation


def _fields_of(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _accepted(model: type[BaseModel], field: str) -> str:
    """What a field accepts; an edit's base attempt and parent have stricter rules than an intent's."""
    if model is EditSpec and f"edit.{field}" in _ACCEPTED:
        return _ACCEPTED[f"edit.{field}"]
    return _ACCEPTED.get(field, "see the schema")


def _validate_items(
    model: type[SpecT], items: Sequence[SpecT | Mapping[str, Any]]
) -> tuple[list[SpecT | None], list[EditProblem]]:
    """Validate each item through `model` (also model instances, in case they were built unchecked)."""
    specs: list[SpecT | None] = []
    problems: list[EditProblem] = []
    for index, item in enumerate(items):
        if isinstance(item, model):
            # exclude_unset: an explicit null (base_attempt_id: clear it) differs from a field left out
            data: Any = item.model_dump(exclude_unset=True)
            extra = getattr(item, "__pydantic_extra__", None)
            if extra:
                data.update(extra)
        elif isinstance(item, Mapping):
            data = dict(item)
        else:
            specs.append(None)
            problems.append(
                EditProblem(
                    index=index,
                    problem=f"expected an object, got {type(item).__name__}",
                    accepted=f"an object with fields {_fields_of(model)}",
                )
            )
            continue
        try:
            spec = model.model_validate(data)
        except ValidationError as exc:
            specs.append(None)
            node_id = data.get("node_id") if isinstance(data.get("node_id"), int) else None
            problems.extend(_pydantic_problems(model, index, node_id, exc))
            continue
        recheck = _recheck(spec)
        node_id = spec.node_id if isinstance(spec, EditSpec) else None
        problems.extend(
            EditProblem(index=index, node_id=node_id, field=f, problem=p, accepted=_accepted(model, f))
            for f, p in recheck
        )
        specs.append(None if recheck else spec)
    return specs, problems


def _pydantic_problems(
    model: type[BaseModel], index: int, node_id: int | None, exc: ValidationError
) -> list[EditProblem]:
    out: list[EditProblem] = []
    for err in exc.errors():
        field = ".".join(str(x) for x in err["loc"]) or None
        top = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            if top in RESULT_KEYS:
                problem = (
                    f"'{top}' cannot be set by an edit: results, best attempts and lifecycle status are "
                    "written only by the evaluator (status changes: op prune / reopen)"
                )
            else:
                problem = f"unknown field '{top}'"
            accepted = f"only the fields {_fields_of(model)}"
        else:
            shown = repr(err.get("input"))
            if len(shown) > 60:
                shown = shown[:57] + "..."
            problem = f"{err['msg']} (got {shown})"
            accepted = _accepted(model, top)
        out.append(EditProblem(index=index, node_id=node_id, field=field, problem=problem, accepted=accepted))
    return out


def text_problem(value: str, *, one_line: bool = False) -> str | None:
    """Why `value` cannot be stored as text, or None. SQLite stores UTF-8, so a lone surrogate (e.g.
    from an undecodable command-line byte) cannot be written; a NUL byte cuts the text short in C
    tools and terminals, so it is refused everywhere; a one-line field (a title) takes no control
    characters at all."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains {value[exc.start]!r} at position {exc.start}, which is not valid Unicode text"
    for i, ch in enumerate(value):
        if ch == "\x00" or (one_line and (ch < " " or ch == "\x7f")):
            return f"contains the control character {ch!r} at position {i}"
    return None


def _recheck(spec: IntentSpec | EditSpec) -> list[tuple[str, str]]:
    """Range checks repeated here so they hold even if the pydantic models are loosened later."""
    bad: list[tuple[str, str]] = []
    for name in ("title", "rationale", "notes", "reason"):
        value = getattr(spec, name, None)
        why = text_problem(value, one_line=name == "title") if isinstance(value, str) else None
        if why is not None:
            bad.append((name, f"{name} {why}"))
    title = spec.title
    if title is not None and len(title.strip()) < 3:
        bad.append(("title", "title is blank or shorter than 3 characters once spaces are removed"))
    p = spec.priority
    if p is not None and not (math.isfinite(p) and 0.0 <= p <= 1.0):
        bad.append(("priority", f"priority {p} is outside 0..1"))
    d = spec.difficulty
    if d is not None and not (isinstance(d, int) and 1 <= d <= 5):
        bad.append(("difficulty", f"difficulty {d} is outside 1..5"))
    e = spec.expected_speedup
    if e is not None and not (math.isfinite(e) and 0.0 < e <= 1000.0):
        bad.append(("expected_speedup", f"expected_speedup {e} is outside (0, 1000]"))
    if spec.params is not None:  # the same rule for a new intent's params and an edit's
        try:
            rows.dumps(spec.params)
        except TypeError as exc:
            bad.append(("params", str(exc)))
    return bad


# Who may write the tree: a person, the offline tuner, or a language model named after "llm:". An edit's
# author is shown beside it everywhere, so an unknown word would credit the tree to nobody in particular.
EDIT_AUTHORS = ("human", "tuner")


def _check_author(author: str) -> None:
    if (
        not isinstance(author, str)
        or not author.strip()
        or len(author) > 100
        or text_problem(author, one_line=True)
        or not (author in EDIT_AUTHORS or (author.startswith("llm:") and author[4:].strip()))
    ):
        raise ValueError(
            f"bad author {author!r}; accepted: 'human', 'tuner' or 'llm:<model>' (1-100 characters)"
        )


def _check_round(round: int) -> None:
    if not isinstance(round, int) or round < 0:
        raise ValueError(f"bad round {round!r}; accepted: an integer >= 0")


# ---------------------------------------------------------------------- sibling titles


class _Siblings:
    """Titles under each parent, loaded once per batch and kept current as the batch is checked."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._by_parent: dict[int, dict[int | str, tuple[TitleKey, str, str]]] = {}

    async def under(self, parent_id: int) -> dict[int | str, tuple[TitleKey, str, str]]:
        """key (node id, or 'item N' for a not-yet-inserted intent) → (title key, title, status)."""
        found = self._by_parent.get(parent_id)
        if found is None:
            found = {}
            for nid, title, status, params in await rows.fetchall(
                self._db, "SELECT id, title, status, params FROM nodes WHERE parent_id = ?", (parent_id,)
            ):
                found[nid] = (stored_key(title, params), title, status)
            self._by_parent[parent_id] = found
        return found

    async def duplicate_of(
        self, parent_id: int, key: TitleKey, exclude: int | str | None = None
    ) -> tuple[int | str, str, str] | None:
        for other, (okey, title, status) in (await self.under(parent_id)).items():
            if other != exclude and near_duplicate(key, okey):
                return other, title, status
        return None


def _duplicate_problem(
    index: int, node_id: int | None, title: str, dup: tuple[int | str, str, str]
) -> EditProblem:
    other, other_title, status = dup
    if isinstance(other, int):
        what = f"node #{other} {other_title!r} ({status})"
        if status in ("closed", "failed", "pruned"):
            instead = f"a distinct idea, or reopen #{other} instead"
        else:
            instead = f"a distinct idea, or update #{other} (priority, notes) instead"
    else:
        what = f"{other} of this request ({other_title!r})"
        instead = "one of the two, or distinct ideas"
    return EditProblem(
        index=index,
        node_id=node_id,
        field="title",
        problem=f"title {title!r} is a near-duplicate of {what} under the same parent",
        accepted=instead,
    )
