"""The MCP server: every tool in tools/, plus resources (trees, nodes, attempts, tasks) and the
phase prompts the built-in driver itself follows.

Tool inputs are the pydantic models of tools/ flattened into parameters, so hosts see each field
with its description and bounds. This process never imports torch: GPU work runs in sandbox workers.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticUndefined

from ksearch.about import __version__
from ksearch.server.access import HttpAccess
from ksearch.server.mcp.args import RefuseUnknownArguments
from ksearch.server.mcp.calls import CallWatch, configure_log
from ksearch.server.mcp.http import serve_http
from ksearch.server.mcp.order import InOrder
from ksearch.server.mcp.record import HostRecorder
from ksearch.server.mcp.resources import node_ref_of, ref_of, refusals, register_resources
from ksearch.server.mcp.stdio_input import HostLines
from ksearch.server.mcp.text import text_of, took_of
from ksearch.tools.bank.ops import QueryBankIn, QueryBankOut, query_bank
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.benchmark_batch import BatchOut, BenchmarkBatchIn, benchmark_batch
from ksearch.tools.budgets import SetBudgetsIn, SetBudgetsOut, set_budgets
from ksearch.tools.common import BRIEF_S
from ksearch.tools.compile_kernel import CompileKernelIn, CompileOut, compile_kernel
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import describe_validation
from ksearch.tools.export_kernel import ExportedKernel, ExportKernelIn, export_kernel
from ksearch.tools.final_eval import FinalEvalIn, FinalOut, final_evaluation
from ksearch.tools.finish_intent import FinishIntentIn, FinishOut, finish_intent
from ksearch.tools.get_tree import GetTreeIn, TreeOut, get_tree
from ksearch.tools.list_searches import SearchRow, list_searches
from ksearch.tools.loop.call_clock import CallClock, part, started
from ksearch.tools.loop.state import loop_state
from ksearch.tools.model import (
    ModelProfileOut,
    PlugBackIn,
    PlugBackOut,
    ProfileModelIn,
    plug_back,
    profile_model,
)
from ksearch.tools.profile_ncu import ProfileIn, ProfileOut, profile_ncu
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.run_correctness import EvaluationOut, RunCorrectnessIn, run_correctness
from ksearch.tools.run_search import RunSearchIn, RunSearchOut, run_search
from ksearch.tools.select_action import SelectActionIn, SelectionOut, select_action
from ksearch.tools.tasks import TaskSummary, list_tasks
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import Node, Search

log = logging.getLogger("ksearch.mcp")

# tools whose result says how long the call took, however quick (an evaluation's says it in its text): the calls
# that can wait for a worker, the sandbox's start or the task's facts; any other's does from BRIEF_S on
TIMED = frozenset(
    {
        "create_search",
        "benchmark",
        "benchmark_batch",
        "run_correctness",
        "compile_kernel",
        "final_evaluation",
        "profile_ncu",
        "run_search",
        "profile_model",
        "plug_back",
    }
)


class CallRefused(ToolError, KsearchError):
    """A tool error with the kind of failure the server log says: refused, invalid, internal."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _refused(e: Exception, kind: str) -> CallRefused:
    return CallRefused(str(e), kind)


def _status(out: Any) -> str:
    """An evaluation's status for the log's end line ("" for other results)."""
    sc = getattr(out, "structured_content", None)
    ev = sc.get("evaluation") if isinstance(sc, dict) else None
    return f" status={ev.get('status')}" if isinstance(ev, dict) else ""


INSTRUCTIONS = """\
ksearch searches for fast GPU kernels with a persistent tree of optimization intents, in rounds of
three phases. Every tool result carries `next`: what the loop expects now; follow it.
0 init: create_search on a task; if the task has a seed kernel, benchmark it on the root
  (candidate {"seed": true}); then the prompt analyse_kernel → propose_intents (first intents) and
  edit_tree (your analysis as the root's notes).
1 select: select_action claims the next intent (a new round) and names the code to build on.
2 refine: write a complete candidate (prompt implement_intent), optionally compile_kernel and
  run_correctness, then benchmark with node_id: it records attempt k of the cap and says whether to
  write another implementation or to reflect (the stagnation window counts only gains beyond noise).
3 update: finish_intent closes the intent and returns the reflect prompt; apply your edits with
  edit_tree and propose_intents, or send them with finish_intent (`edits`, `new_intents`: applied in
  the same call, all or nothing, and no prompt comes back unless `with_prompt`); refused edits come back
  with reasons. Then select_action again.
When the budget is spent, final_evaluation re-measures the best candidates on every workload (on a
machine without a GPU: the smoke workload in Triton's interpreter, where timings never rank anything).
Refer to candidates by the candidate_id returned on first submission instead of resending source.
Node ids are global across searches; give intents a `handle` in propose_intents to name them in later
calls (node_id, parent_id, skip) before you have read their ids.
Calls that change records run one at a time in the order sent: finish_intent with your edits and the
next select_action can go in one turn; the next implementation waits for benchmark's answer.
"""


def _annotations(read_only: bool, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def _flat_signature(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword parameter per model field, with its type, bounds and description."""
    params = []
    for name, fi in model.model_fields.items():
        ann: Any = Annotated[(fi.annotation, *fi.metadata, Field(description=fi.description))]
        if fi.is_required():
            default: Any = inspect.Parameter.empty
        elif fi.default_factory is not None:
            default = fi.default_factory()  # type: ignore[call-arg]
        else:
            default = fi.default if fi.default is not PydanticUndefined else None
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
        )
    return params


class KsearchServer:
    """Holds the workspace (opened on first use) and registers everything on an MCPServer."""

    def __init__(
        self, db: Path, *, n_workers: int | None = None, record: Path | None = None, ray: str | None = None
    ) -> None:
        self.db = db.resolve()
        self.n_workers = n_workers
        self.ray = ray  # a Ray cluster: every search this server runs spreads its candidates over its actors
        # The host's decisions as a replay file for `ksearch run --policy replay` (server/mcp/record.py).
        self.recorder = HostRecorder(record) if record is not None else None
        self._ws: Workspace | None = None
        self.mcp = MCPServer(name="ksearch", title="ksearch", instructions=INSTRUCTIONS, version=__version__)
        self._arguments: dict[str, set[str]] = {}  # tool -> its parameter names
        self._models: dict[str, type[BaseModel]] = {}  # tool -> its input model
        self._order = InOrder()  # a host's calls that change records, in the order it sent them
        self._calls = itertools.count(1)  # the number of each call, in the server log
        self.mcp.middleware.append(RefuseUnknownArguments(self._arguments, self._models))
        self._register_tools()
        self._register_resources()
        self._register_prompts()

    async def ws(self) -> Workspace:
        if self._ws is None:
            self._ws = await Workspace.open(self.db, n_workers=self.n_workers, ray=self.ray)
        return self._ws

    async def close(self) -> None:
        if self.recorder is not None:
            self.recorder.flush()
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    # ------------------------------------------------------------------ tools

    def _tool(
        self,
        name: str,
        description: str,
        model: type[BaseModel] | None,
        returns: Any,
        run: Callable[..., Awaitable[Any]],
        annotations: ToolAnnotations,
        progress: bool = False,
    ) -> None:
        async def handler(ctx: Context, **kwargs: Any) -> Any:
            async def send(value: float, message: str) -> None:
                await ctx.report_progress(progress=value, total=1.0, message=message)

            watch = CallWatch(next(self._calls), name, send)
            try:
                inp = model(**kwargs) if model is not None else None
            except ValidationError as e:
                watch.start(None, kwargs.get("search"))
                watch.end("error=invalid-arguments")
                raise ToolError(str(describe_validation(e, f"arguments to {name}"))) from e
            watch.start(inp)
            outcome, took = "error=internal", ""
            try:
                with started(watch.clock):
                    out, took = await self._run(name, inp, run, returns, progress, watch)
                outcome = "outcome=ok" + _status(out)
                return out
            except ToolError as e:
                outcome = f"error={e.kind if isinstance(e, CallRefused) else 'refused'}"
                raise
            except BaseException as e:
                outcome = "cancelled" if isinstance(e, anyio.get_cancelled_exc_class()) else outcome
                raise
            finally:
                watch.end(outcome, took)

        params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
        params += _flat_signature(model) if model is not None else []
        handler.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        handler.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
        handler.__name__ = name
        self._arguments[name] = {p.name for p in params if p.name != "ctx"}
        if model is not None:
            self._models[name] = model
        self.mcp.add_tool(
            handler, name=name, description=description, annotations=annotations, structured_output=True
        )

    async def _run(
        self,
        name: str,
        inp: BaseModel | None,
        run: Callable[..., Awaitable[Any]],
        returns: Any,
        progress: bool,
        watch: CallWatch,
    ) -> tuple[CallToolResult, str]:
        """Run the tool on its turn and answer with its result and its took line."""
        async with contextlib.AsyncExitStack() as turn:
            # the first await: calls that change records are served in the order they arrived (order.py)
            with part("wait_for_earlier_calls", "waiting for the earlier calls that change records"):
                await turn.enter_async_context(self._order.turn(name))
            try:
                with part("opening_database", "opening the database"):
                    ws = await self.ws()
                out = await run(ws, inp, watch.report) if progress else await run(ws, inp)
                if self.recorder is not None:
                    await self.recorder.observe(ws, name, inp, out)
                return await self._with_next(ws, name, inp, out, returns, watch.clock)
            except ToolError:  # already an answer (a CallRefused is a KsearchError too: kept as it is)
                raise
            except KsearchError as e:  # the one place a ksearch refusal becomes an MCP tool error
                raise _refused(e, "refused") from e
            except ValidationError as e:
                raise _refused(ToolError(str(describe_validation(e, name))), "invalid") from e
            except Exception as e:
                # Unexpected: keep the traceback in the server log, give the caller a plain statement.
                log.exception("tool %s failed", name)
                raise _refused(
                    ToolError(f"{name} failed inside ksearch: {type(e).__name__}: {e}"), "internal"
                ) from e

    async def _with_next(
        self, ws: Workspace, name: str, inp: BaseModel | None, out: Any, returns: Any, clock: CallClock
    ) -> tuple[CallToolResult, str]:
        """The tool's result, and as a second text block the loop's next step: every result of a tool that
        works on a search says what the loop expects now (the tool's own `next` when it has one). With them the
        call's took line (`took_of`): the whole call's seconds, as the host waits for them."""
        nxt = getattr(out, "next", "") or ""
        search = getattr(inp, "search", None) if inp is not None else None
        if isinstance(out, Search):
            search = out.id
        if not nxt and search is not None:
            try:
                with part("next_step", "reading the loop's next step"):
                    nxt = (await loop_state(ws, search)).next
            except KsearchError:  # the search went away meanwhile: the answer stands without a next step
                nxt = ""
        clock.stop()  # the answer's took line and the log's say the same seconds
        out, took = took_of(out, clock)
        wrapped = not (isinstance(returns, type) and issubclass(returns, BaseModel))
        data = TypeAdapter(returns).dump_python(out, mode="json")
        structured = {"result": data} if wrapped else data
        content = [TextContent(type="text", text=text_of(out, structured, took))]
        # an evaluation's text ends with its took line; another result's follows it where the call can be long
        if not isinstance(out, EvaluationOut) and (name in TIMED or clock.elapsed() >= BRIEF_S):
            content.append(TextContent(type="text", text=took))
        if nxt:
            content.append(TextContent(type="text", text=f"next: {nxt}"))
            # a tool without a next of its own: its structured `next` says the same as its text
            if isinstance(structured, dict) and structured.get("next") == "":
                structured["next"] = nxt
        return CallToolResult(content=content, structured_content=structured), took

    def _register_tools(self) -> None:
        t = self._tool
        t(
            "create_search",
            "Start a search on a task (built-in name like 'softmax', or a path). Returns the "
            "search with its root node ready for intents.",
            CreateSearchIn,
            Search,
            create_search,
            _annotations(False),
        )
        t(
            "list_searches",
            "List the searches in this project's database with their best speedup so far.",
            None,
            list[SearchRow],
            lambda ws, _i: list_searches(ws),
            _annotations(True, idempotent=True),
        )
        t(
            "list_tasks",
            "List the built-in tasks (name, op, dtype, bound, workloads) create_search takes by name; any other "
            "task is given by path.",
            None,
            list[TaskSummary],
            lambda _ws, _i: list_tasks(),
            _annotations(True, idempotent=True),
        )
        t(
            "get_tree",
            "Read a search's world-model tree: compact text (with the model's notes, the best path "
            "and the open frontier, within a size budget), JSON, or Mermaid.",
            GetTreeIn,
            TreeOut,
            get_tree,
            _annotations(True, idempotent=True),
        )
        t(
            "propose_intents",
            "Add open optimization intents under a node (the root by default). Each has a "
            "title, rationale, priority 0-1, difficulty 1-5, optional expected speedup and params, and an "
            "optional `handle` (a name of yours, unique in the search, that every later call takes in place of the "
            "node id: plan a round before you know the ids; a later item's parent_id may name an earlier item's "
            "handle). Near-duplicates of existing intents are refused; all-or-nothing.",
            ProposeIntentsIn,
            list[Node],
            propose_intents,
            _annotations(False),
        )
        t(
            "edit_tree",
            "Edit nodes: update priority/difficulty/notes/rationale/title/params/base_attempt_id (the "
            "attempt an intent starts from), move an intent under another parent, prune a branch, reopen, "
            "pin, unpin, veto, unveto. Results cannot be edited. All-or-nothing.",
            EditTreeIn,
            list[Node],
            edit_tree,
            _annotations(False, destructive=True),
        )
        t(
            "select_action",
            "Phase 1: claim the next open intent by the search's selection rule (priority, difficulty "
            "cap, exploration; pinned first, vetoed never) or the one you name: it becomes active, a new "
            "round starts, and the answer names the attempt whose code to build on and what to do next.",
            SelectActionIn,
            SelectionOut,
            lambda ws, i: select_action(ws, i),
            _annotations(False),
        )
        t(
            "finish_intent",
            "End phase 2 for the intent being refined: close it (closed with a correct attempt, else "
            "failed) and get the reflect prompt for phase 3 (update). Reflected already? Send your `edits` (as "
            "edit_tree takes them) and `new_intents` (as propose_intents) with it: they are applied right after "
            "the close, all or nothing (a refused one changes nothing, the intent stays being refined); the reflect "
            "prompt then comes back only with `with_prompt`.",
            FinishIntentIn,
            FinishOut,
            finish_intent,
            _annotations(False),
        )
        t(
            "final_evaluation",
            "End the search: re-measure its best few distinct candidates (GPU: by speedup; without a GPU, "
            "where interpreter timings never rank: each intent's latest correct attempt, the latest intents first) with "
            "fresh inputs on every workload, held-out ones included (without a GPU: the smoke workload only). "
            "The search ends `done` (nothing left open) or `stopped` (a budget ended it).",
            FinalEvalIn,
            FinalOut,
            final_evaluation,
            _annotations(False),
            progress=True,  # minutes on a task whose inputs are slow to draw: each candidate's steps are reported
        )
        t(
            "export_kernel",
            "Write a search's kernel (its best, or a correct `attempt`) as a file its task owner's evaluator runs "
            "unchanged: format submission (a GPU MODE folder's submission.py), kernelbench (a KernelBench ModelNew "
            "file), solution (a FlashInfer-Bench Solution JSON). Returns the file's name and text, what ksearch "
            "measured of it and how to run it; nothing is written to disk.",
            ExportKernelIn,
            ExportedKernel,
            export_kernel,
            _annotations(True, idempotent=True),
        )
        t(
            "profile_model",
            "A whole model in: profile it (a .py file defining Model, get_inputs, get_init_inputs, KernelBench style; "
            "or pkg.module:Class), rank its operators and fusible pairs by share of the forward's time (CUDA time on "
            "a GPU, CPU time without one), and write the hottest `top` as KernelBench task files with the shapes and "
            "dtypes they see. Returns the ranking (bound, roofline headroom) and the suite command that searches them.",
            ProfileModelIn,
            ModelProfileOut,
            lambda _ws, i: profile_model(i),
            _annotations(False, idempotent=True),  # it writes the task files (again, the same)
        )
        t(
            "plug_back",
            "Put the winning kernels of a model's tasks (a suite's searches, or a folder of ModelNew files) back in "
            "place of its operators: each checked at its sites, the plugged model against the original on fresh "
            "inputs (a model-level tolerance), both timed end to end (median, CI, n); the plugged model is written "
            "as a Python file to import. A refused kernel says why.",
            PlugBackIn,
            PlugBackOut,
            lambda ws, i: plug_back(i, ws),
            _annotations(False, idempotent=True),  # it writes the plugged model's file
        )
        t(
            "set_budgets",
            "Change a search's budgets (rounds in all or more_rounds beyond those started, attempts, wall_s, "
            "tokens, usd, target_speedup; lift removes one): to search further past a spent budget, or to stop "
            "sooner. What was spent is not changed.",
            SetBudgetsIn,
            SetBudgetsOut,
            set_budgets,
            _annotations(False, idempotent=True),
        )
        t(
            "compile_kernel",
            "Compile a candidate without running it: diagnostics with line numbers in your "
            "source (ptxas's warnings with their codes, e.g. C7511 'wgmma ... serialized'), registers, spills "
            "(ptxas's static bytes per thread), shared memory, occupancy, compile time. Without a GPU its kernels "
            "are compiled for sm_90 all the same. Returns a candidate_id to reuse.",
            CompileKernelIn,
            CompileOut,
            compile_kernel,
            _annotations(False, idempotent=True),  # it stores the candidate (for its candidate_id)
        )
        t(
            "run_correctness",
            "Run a candidate against the reference on fresh random inputs: per workload "
            "pass/fail, max abs/rel error, where it differs.",
            RunCorrectnessIn,
            EvaluationOut,
            run_correctness,
            _annotations(False, idempotent=True),  # it stores the candidate; it records no attempt
            progress=True,
        )
        t(
            "benchmark",
            "Compile, check and time a candidate (median, spread, speedup vs eager and "
            "torch.compile, roofline fraction). With `search`, every call records an attempt; with node_id "
            "(a claimed intent) it is attempt k of that intent's refine phase and the result says whether to "
            "write another implementation or to reflect; base_attempt_id names the attempt whose code this "
            "one modifies (default: of the phase's correct code, the one its source is closest to; the result says which).",
            BenchmarkIn,
            EvaluationOut,
            benchmark,
            _annotations(False),
            progress=True,
        )
        t(
            "benchmark_batch",
            "Benchmark up to 8 candidates of one search in one call (several implementations written at once), each "
            "recorded as benchmark records it, in the given order: items are checked first (a refused item says why, "
            "the others go on), then evaluated together (several GPUs or CPU workers run them side by side; on one "
            "GPU each is timed alone), then recorded; an item whose intent's refine phase the items before it ended "
            "comes back evaluated, not recorded. Returns each item's result and the batch's pace.",
            BenchmarkBatchIn,
            BatchOut,
            benchmark_batch,
            _annotations(False),
            progress=True,
        )
        t(
            "profile_ncu",
            "Nsight Compute on one workload: duration, DRAM/SM throughput, occupancy, registers, "
            "cache hit rates, top warp stalls and ncu's advice (GPU machines only).",
            ProfileIn,
            ProfileOut,
            profile_ncu,
            _annotations(True, idempotent=True),
        )
        t(
            "query_bank",
            "The kernel bank: what earlier searches learned (intents with their measured outcome and its device and "
            "protocol, failures and why, people's notes and vetoes, best kernels with their code). `search` or "
            "`task`: the entries related to it, ranked, with why; `entry`: one entry whole (its code); `text`: "
            "entries with these words. The analyse and reflect prompts show the most related ones already.",
            QueryBankIn,
            QueryBankOut,
            query_bank,
            _annotations(True, idempotent=True),
        )
        t(
            "run_search",
            "Start ksearch's built-in driver on a search in the background (select, refine, "
            "update rounds). Optionally follow its progress for wait_s seconds.",
            RunSearchIn,
            RunSearchOut,
            lambda ws, i, p: run_search(ws, i, self.db, p),
            _annotations(False),
            progress=True,
        )

    # ------------------------------------------------------------------ resources

    def _register_resources(self) -> None:
        register_resources(self.mcp, self.ws)

    # ------------------------------------------------------------------ prompts

    def _checked_prompts(self) -> None:
        """prompts/get of an unknown prompt or without a required argument is an invalid-params error with
        the accepted names (the SDK answers both as an internal error, with a traceback in the log)."""
        render = self.mcp.get_prompt
        prompts = self.mcp._prompt_manager  # the SDK offers no public lookup by name

        async def get_prompt(name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
            prompt = prompts.get_prompt(name)
            if prompt is None:
                known = ", ".join(sorted(p.name for p in prompts.list_prompts()))
                raise MCPError(
                    code=INVALID_PARAMS, message=f"unknown prompt {name[:80]!r}; the prompts are: {known}"
                )
            given = arguments or {}
            missing = [a.name for a in prompt.arguments or [] if a.required and not given.get(a.name)]
            if missing:
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"prompt {name!r} needs the argument(s) {', '.join(missing)}; it takes: "
                    + ", ".join(
                        f"{a.name}{'' if a.required else ' (optional)'}" for a in prompt.arguments or []
                    ),
                )
            return await render(name, arguments, context)

        self.mcp.get_prompt = get_prompt  # type: ignore[method-assign]

    def _register_prompts(self) -> None:
        self._checked_prompts()
        from ksearch.tools.prompting.facts_wait import ANALYSE_WAIT_S, bounded
        from ksearch.tools.prompting.phases import analyse_kernel, implement_intent, reflect_and_edit

        # an assistant's reading never waits long for the task's facts: it is told they are being derived
        async def p_analyse(search: str) -> str:
            with bounded(ANALYSE_WAIT_S):  # the first prompt: the facts the first intents are planned from
                return await analyse_kernel(await self.ws(), ref_of(search))

        async def p_implement(search: str, node_id: str = "") -> str:
            nid = node_ref_of(node_id) if node_id else None
            with bounded():
                return await implement_intent(await self.ws(), ref_of(search), nid)

        async def p_reflect(search: str, node_id: str = "") -> str:
            nid = node_ref_of(node_id) if node_id else None
            with bounded():
                return await reflect_and_edit(await self.ws(), ref_of(search), nid)

        self.mcp.prompt(
            "analyse_kernel",
            description="Phase 0: analyse the kernel and seed the tree with "
            "first intents (what ksearch's driver asks its model)",
        )(refusals(p_analyse, prompt=True))
        self.mcp.prompt(
            "implement_intent",
            description="Phase 2: implement the intent being refined (or node_id), from the code it builds "
            "on and the evaluator's feedback on its last attempt",
        )(refusals(p_implement, prompt=True))
        self.mcp.prompt(
            "reflect_and_edit",
            description="Phase 3: reflect on the intent finished last (or node_id) and edit the tree",
        )(refusals(p_reflect, prompt=True))


def build_server(
    db: Path, *, n_workers: int | None = None, record: Path | None = None, ray: str | None = None
) -> KsearchServer:
    return KsearchServer(db, n_workers=n_workers, record=record, ray=ray)


async def _run_stdio(ks: KsearchServer) -> None:
    """MCPServer.run_stdio_async, with host lines made decodable first (server/stdio_input.py)."""
    lowlevel = ks.mcp._lowlevel_server  # the SDK's own stdio runner offers no way to filter its input
    async with stdio_server(stdin=HostLines()) as (read_stream, write_stream):  # type: ignore[arg-type]
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def serve(
    db: Path,
    *,
    http: HttpAccess | None = None,
    port: int = 8765,
    record: Path | None = None,
    allow_unjailed: bool = False,
    ray: str | None = None,
    log_file: Path | None = None,
) -> None:
    """stdio, or streamable HTTP under `http`'s token rule (server/mcp/http.py). Each tool call's start, phases and
    end are logged at INFO (server/mcp/calls.py), with the warnings, to `log_file` or else stderr: never stdout,
    the stdio transport's."""
    if log_file is not None:
        logging.basicConfig(filename=log_file, encoding="utf-8", level=logging.WARNING)
    else:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    configure_log(log_file)
    ks = build_server(db, record=record, ray=ray)

    async def run() -> None:
        try:
            if http is not None:
                await serve_http(ks, http, port, allow_unjailed=allow_unjailed)
            else:
                await _run_stdio(ks)
        finally:
            # The database connection's thread (and the sandbox workers) would keep the process alive
            # after the host hangs up; close them even when the run was cancelled (Ctrl-C).
            with anyio.CancelScope(shield=True):
                await ks.close()

    anyio.run(run)
