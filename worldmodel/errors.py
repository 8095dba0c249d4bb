"""Errors raised by the world model. Each message says what was wrong and what is accepted."""

from __future__ import annotations

import sqlite3

from pydantic import BaseModel


class NotFound(LookupError):
    """A search, node, attempt or candidate that does not exist (or belongs to another search)."""


class Conflict(ValueError):
    """A write that would break a uniqueness rule, e.g. a second search with the same name."""


class InvalidTransition(ValueError):
    """A node status change the lifecycle does not allow (e.g. closing a node with no correct attempt)."""


class StoreBusy(sqlite3.OperationalError):
    """Another process held the database's write lock for longer than the busy timeout; nothing was
    written. (A subclass of sqlite3.OperationalError, which is what SQLite raised before.)"""


class SchemaError(RuntimeError):
    """The database file was written by a newer ksearch, or is not a ksearch database."""


class EditProblem(BaseModel):
    """Why one item of a requested tree change was refused, and what would be accepted instead."""

    index: int  # position of the item in the request (0-based)
    node_id: int | None = None
    field: str | None = None
    problem: str
    accepted: str

    def __str__(self) -> str:
        where = f"item {self.index}"
        if self.node_id is not None:
            where += f" (node #{self.node_id})"
        if self.field:
            where += f" field '{self.field}'"
        return f"{where}: {self.problem}; accepted: {self.accepted}"


class EditRejected(ValueError):
    """A batch of intents or edits was refused as a whole; nothing was written.

    `problems` holds one line per refused item ("item 2 field 'priority': …; accepted: …"), every
    problem and not just the first, so the caller can fix them all in one go; `details` holds the
    same as structured `EditProblem`s.
    """

    def __init__(self, details: list[EditProblem]) -> None:
        self.details = details
        self.problems: list[str] = [str(p) for p in details]
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"{len(details)} problem(s); nothing was changed:\n{lines}")

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form for tool answers."""
        return {"error": "edit_rejected", "problems": [p.model_dump() for p in self.details]}
