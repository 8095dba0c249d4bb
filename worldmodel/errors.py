"""ksearch's errors: the base every package's errors derive from, and the world model's own.

`KsearchError` lives here because `worldmodel` is the leaf package: it imports no other ksearch
package, and `gpu`, `tools` and `server` already import it, so every error class can derive from the
base without an import cycle (this module imports only the standard library and pydantic). A caller
that embeds ksearch catches `KsearchError` for every refusal ksearch makes; each message says what was
wrong and what is accepted. Each class keeps the builtin base it had (ValueError, LookupError,
RuntimeError, sqlite3.OperationalError), so code catching those still works.

The tree (tests/test_errors.py checks it against the classes):

    KsearchError
    ├── NotFound             ksearch.worldmodel.errors               (LookupError)
    ├── Conflict             ksearch.worldmodel.errors               (ValueError)
    │   └── RunInProgress    ksearch.worldmodel.runs
    ├── InvalidTransition    ksearch.worldmodel.errors               (ValueError)
    ├── EditRejected         ksearch.worldmodel.errors               (ValueError)
    ├── StoreBusy            ksearch.worldmodel.errors               (sqlite3.OperationalError)
    ├── SchemaError          ksearch.worldmodel.errors               (RuntimeError)
    ├── BankError            ksearch.worldmodel.bank                 (ValueError)
    ├── TaskError            ksearch.gpu.task                        (ValueError)
    │   └── ProbeFailed      ksearch.gpu.tasks.probe
    ├── TunableError         ksearch.gpu.tasks.tunables              (ValueError)
    ├── SolutionError        ksearch.gpu.tasks.flashinfer.solution   (ValueError)
    ├── CandidateError       ksearch.gpu.tasks.rt.common             (ValueError)
    ├── StandaloneError      ksearch.gpu.export.standalone           (ValueError)
    ├── NotLiteral           ksearch.gpu.tasks.literals
    ├── CandidateFailure     ksearch.gpu.worker.core
    ├── SandboxError         ksearch.gpu.sandbox.api                 (RuntimeError)
    ├── WorkerError          ksearch.gpu.sandbox.process
    │   └── WorkerBusy       ksearch.gpu.sandbox.pool
    ├── LeaseTimeout         ksearch.gpu.sandbox.lease
    ├── ZygoteUnavailable    ksearch.gpu.jail.zygote_client
    ├── ProfileError         ksearch.gpu.timing.ncu                  (RuntimeError)
    ├── ExtensionBuildError  ksearch.gpu.cpp_ext                     (RuntimeError)
    ├── NvrtcError           ksearch.gpu.nvrtc                       (RuntimeError)
    ├── ProfilerReplaced     ksearch.gpu.worker.protocol_flashinfer  (RuntimeError)
    ├── TimedCallFailed      ksearch.gpu.worker.protocol_flashinfer
    ├── ToolFailure          ksearch.tools.errors
    ├── PolicyError          ksearch.server.driver.policies.base     (RuntimeError)
    │   └── IntentDeclined   ksearch.server.driver.policies.base
    ├── ProviderError        ksearch.server.driver.policies.llm
    ├── OutputInvalid        ksearch.server.driver.policies.llm
    ├── HttpError            ksearch.server.web.app
    ├── CallRefused          ksearch.server.mcp.server
    └── Interrupted          ksearch.server.cli.interrupt

One class stays outside on purpose: `ksearch.gpu.worker.dryrun.DryRunTimeout` derives from BaseException so that a
candidate's own `except Exception` cannot swallow the dry run's deadline.

Each face turns a `KsearchError` into its own kind of answer in one place: the CLI in
`server/cli/common.py` (`refusals`, around every command's `run_async`), the MCP server in
`server/mcp/server.py` (`KsearchServer._tool`), the web page in `server/web/app.py` (`_guard`). The driver's
`run_main` raises them as they are, and `ksearch run` (`server/cli/run.py`) turns them into its exit.
"""

from __future__ import annotations

import sqlite3

from pydantic import BaseModel


class KsearchError(Exception):
    """The base of every error ksearch raises on purpose; `str(e)` is the whole user-facing message."""


class NotFound(LookupError, KsearchError):
    """A search, node, attempt or candidate that does not exist (or belongs to another search)."""


class Conflict(ValueError, KsearchError):
    """A write that would break a uniqueness rule, e.g. a second search with the same name."""


class InvalidTransition(ValueError, KsearchError):
    """A node status change the lifecycle does not allow (e.g. closing a node with no correct attempt)."""


class StoreBusy(sqlite3.OperationalError, KsearchError):
    """Another process held the database's write lock for longer than the busy timeout; nothing was
    written. (A subclass of sqlite3.OperationalError, which is what SQLite raised before.)"""


class SchemaError(RuntimeError, KsearchError):
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


class EditRejected(ValueError, KsearchError):
    """A batch of intents or edits was refused as a whole; nothing was written.

    `problems` holds one line per refused item ("item 2 field 'priority': …; accepted: …"), every
    problem and not just the first, so the caller can fix them all in one go; `details` holds the
    same as structured `EditProblem`s. `part` names the list of a request that holds several (the
    `edits` or the `new_intents` given with finish_intent); "" when the request has one.
    """

    def __init__(self, details: list[EditProblem], *, part: str = "") -> None:
        self.details = details
        self.part = part
        self.problems: list[str] = [str(p) for p in details]
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"{len(details)} problem(s); nothing was changed:\n{lines}")

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form for tool answers."""
        return {"error": "edit_rejected", "problems": [p.model_dump() for p in self.details]}
