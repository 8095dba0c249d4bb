"""The MCP server's resources: trees, nodes, attempts, tasks and the kernel bank, read through the tools."""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from ksearch.tools.bank.ops import QueryBankIn, query_bank
from ksearch.tools.common import gpu_lacking
from ksearch.tools.get_tree import GetTreeIn, get_tree
from ksearch.tools.prompting.facts_wait import bounded, facts_for
from ksearch.tools.tasks import task_named
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import NODE_REF_PATTERN


def register_resources(mcp: MCPServer, workspace: Callable[[], Awaitable[Workspace]]) -> None:
    """Add the resources to `mcp`; `workspace` gives the server's workspace (opened on first use)."""

    async def _tree_text(search: str) -> str:
        out = await get_tree(await workspace(), GetTreeIn(search=ref_of(search), format="text"))
        return out.text or ""

    async def _tree_json(search: str) -> str:
        out = await get_tree(await workspace(), GetTreeIn(search=ref_of(search), format="json"))
        return json.dumps(out.tree)

    async def _node(search: str, node_id: str) -> str:
        ws = await workspace()
        s = await ws.search(ref_of(search))
        node = await ws.records.get_node(id_of(node_id, "node id"))
        if node.search_id != s.id:
            raise ValueError(f"node {node_id} is not in search {s.name!r}")
        attempts = await ws.records.list_attempts(s.id, node.id)
        return json.dumps(
            {
                "node": node.model_dump(mode="json"),
                "attempts": [
                    {
                        "id": a.id,
                        "candidate_id": a.candidate_id,
                        "status": a.evaluation.status if a.evaluation else None,
                        "speedup_vs_eager": a.speedup,
                    }
                    for a in attempts
                ],
            }
        )

    async def _attempt(attempt_id: str) -> str:
        ws = await workspace()
        a = await ws.records.get_attempt(id_of(attempt_id, "attempt id"))
        cand = await ws.records.get_candidate(a.candidate_id)
        return json.dumps(
            {"attempt": a.model_dump(mode="json"), "language": cand.language, "source": cand.source}
        )

    async def _task(name: str) -> str:
        ws = await workspace()
        task = await task_named(ws, urllib.parse.unquote(name))
        ref = task.source_path
        src = ref.read_text() if ref.is_file() else ""
        # `task` holds what the task declares (op "" and bound "unknown" when it declares none); `facts` what
        # running its reference derived, as the prompts give it (a reading waits for them only briefly)
        needs = await gpu_lacking(ws, task)
        with bounded():
            facts = None if needs else await facts_for(task)
        if facts is not None:
            derived: object = facts.model_dump(mode="json", exclude={"key"})
        elif needs:
            derived = (
                f"not derivable on this machine: the task needs a GPU ({needs}) and this machine has none"
            )
        else:
            derived = "being derived from the reference in the background: read this resource again shortly"
        return json.dumps(
            {
                "task": task.model_dump(mode="json", exclude={"seeds"}),
                "facts": derived,
                "reference_source": src,
                "seed_languages": sorted(task.seeds),
            }
        )

    async def _bank() -> str:
        out = await query_bank(await workspace(), QueryBankIn(limit=100))
        return f"{out.bank}: {out.total} entries (newest first, at most 100)\n{out.text}"

    async def _bank_entry(entry: str) -> str:
        out = await query_bank(await workspace(), QueryBankIn(entry=entry))
        return out.hits[0].entry.model_dump_json()

    json_type = "application/json"
    for uri, name, mime, description, fn in (
        (
            "ksearch://bank",
            "bank",
            "text/plain",
            "The kernel bank's entries: lessons from earlier searches, newest first",
            _bank,
        ),
        (
            "ksearch://bank/{entry}",
            "bank_entry",
            json_type,
            "One kernel-bank entry whole (its task signature, outcome, notes, code), by uid",
            _bank_entry,
        ),
        (
            "ksearch://searches/{search}/tree",
            "tree",
            "text/plain",
            "A search's tree as the compact text view",
            _tree_text,
        ),
        (
            "ksearch://searches/{search}/tree.json",
            "tree_json",
            json_type,
            "A search's tree as JSON",
            _tree_json,
        ),
        (
            "ksearch://searches/{search}/nodes/{node_id}",
            "node",
            json_type,
            "One node with its attempts",
            _node,
        ),
        (
            "ksearch://attempts/{attempt_id}",
            "attempt",
            json_type,
            "An attempt's source and evaluation",
            _attempt,
        ),
        (
            "ksearch://tasks/{name}",
            "task",
            json_type,
            "A task: workloads, tolerance, reference source. {name}: a built-in task name, a task "
            "file's path percent-encoded (e.g. %2Fhome%2Fme%2Fproblem.py), a search's name or the name of a task a "
            "search runs",
            _task,
        ),
    ):
        # The task template takes a path, as create_search does (a file that is not a task is refused
        # by the loader), so its parameter is exempt from the SDK's path-traversal check.
        security = ResourceSecurity(exempt_params={"name"}) if name == "task" else None
        mcp.resource(uri, name=name, mime_type=mime, description=description, security=security)(refusals(fn))


def ref_of(search: str) -> int | str:
    return int(search) if search.isdecimal() else search


def node_ref_of(value: str) -> str:
    """A prompt's node argument: an id (12 or #12) or a handle, resolved in the search by the prompt."""
    if not re.fullmatch(NODE_REF_PATTERN, value.strip()):
        raise ValueError(f"node_id must be a node's id (12 or #12) or its handle, got {value[:80]!r}")
    return value.strip()


def id_of(value: str, what: str) -> int:
    if not value.isdecimal():
        raise ValueError(f"{what} must be a whole number, got {value[:80]!r}")
    return int(value)


def refusals(fn: Callable[..., Awaitable[str]], *, prompt: bool = False) -> Callable[..., Awaitable[str]]:
    """A resource's or prompt's refusal reaches the client with its message (the framework would replace
    it with a generic "error creating resource" / "internal server error")."""

    @functools.wraps(fn)
    async def read(**params: str) -> str:
        try:
            return await fn(**params)
        except (KsearchError, ValueError) as e:
            # a plain ValueError is a malformed argument (a node id that is no number); ksearch's own refusals
            # (an unknown search, a task that cannot be loaded) say the resource is not there
            if prompt or not isinstance(e, KsearchError):
                raise MCPError(code=INVALID_PARAMS, message=str(e)) from e
            raise ResourceNotFoundError(str(e)) from e

    return read
