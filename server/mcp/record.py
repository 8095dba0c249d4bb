"""Record an MCP host's decisions as a replay file: the search it drove becomes a fixture for
`ksearch run --policy replay --replay FILE`, which plays the same decisions through the built-in driver.

The host's decisions are the three the driver asks its policy for, read off the tool calls:
- init: the analysis (edit_tree on the root) and the first intents (propose_intents) before any claim;
- write_code: each benchmark on a claimed intent (the candidate's source);
- update: the edits and new intents given with finish_intent or made between it and the next select_action /
  final_evaluation (an empty update when the host made none: the driver asks after every refine phase all the
  same).
One JSON line per decision, in the order the driver will ask for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ksearch.tools.prompting.contexts import ROOT_TITLE
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import EditSpec, IntentSpec


class HostRecorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")  # a fresh recording per server start
        self._init: dict[str, Any] | None = None  # pending init decision
        self._update: dict[str, Any] | None = None  # pending update decision
        self._claimed = False
        self._intent: str | None = None  # the intent the pending update reflects on
        self._nodes: dict[
            int, str
        ] = {}  # the pending update's node ids -> titles (replay maps them by title)

    def _write(
        self,
        phase: str,
        result: dict[str, Any],
        intent: str | None = None,
        nodes: dict[int, str] | None = None,
    ) -> None:
        # `intent` lets a replay on other hardware match answers to intents when the loop takes another
        # course there (server/driver/policies/replay.py, by_intent); `nodes`, the titles of the node ids an
        # update names, lets it find the same nodes in another search
        line: dict[str, Any] = {"phase": phase, "policy": "mcp-host", "result": result}
        if intent is not None:
            line["intent"] = intent
        if nodes:
            line["nodes"] = nodes
        with self.path.open("a") as f:
            f.write(json.dumps(line) + "\n")

    def flush(self) -> None:
        if self._init is not None:
            self._write("init", self._init)
            self._init = None
        if self._update is not None:
            self._write("update", self._update, intent=self._intent, nodes=self._nodes)
            self._update = None
            self._nodes = {}

    async def observe(self, ws: Workspace, tool: str, inp: BaseModel | None, out: Any) -> None:
        """Called after a tool call succeeded, with its input and output."""
        if inp is None:
            return
        args = inp.model_dump(mode="json")
        if tool == "select_action" and args.get("claim", True):
            self.flush()
            self._claimed = True
        elif tool == "final_evaluation":
            self.flush()
        elif tool == "finish_intent":
            self.flush()
            # the reflection's edits may come with the finish: they open the round's update decision
            edits = [EditSpec.model_validate(e) for e in args.get("edits", [])]
            added = [IntentSpec.model_validate(i) for i in args.get("new_intents", [])]
            self._update = {
                "reflection": args.get("reason", ""),
                "edits": [e.model_dump(mode="json", exclude_none=True) for e in edits],
                "new_intents": [i.model_dump(mode="json", exclude_none=True) for i in added],
            }
            self._intent = out.node.title
            ids = [
                *(e.node_id for e in edits),
                *(e.parent_id for e in edits),
                *(i.parent_id for i in added),
            ]
            await self._titles(ws, ids)
        elif tool == "propose_intents":
            intents = [
                IntentSpec.model_validate(i).model_dump(mode="json", exclude_none=True)
                for i in args["intents"]
            ]
            if self._update is not None:
                self._update["new_intents"] += intents
                await self._titles(ws, [i.get("parent_id") for i in intents])
                if args.get("reason"):
                    self._update["reflection"] = args["reason"]
            elif not self._claimed:
                self._init = self._init or {"analysis": "", "intents": []}
                self._init["intents"] += intents
        elif tool == "edit_tree":
            edits = [EditSpec.model_validate(e) for e in args["edits"]]
            if self._update is not None:
                self._update["edits"] += [e.model_dump(mode="json", exclude_none=True) for e in edits]
                await self._titles(ws, [*(e.node_id for e in edits), *(e.parent_id for e in edits)])
            elif not self._claimed:
                root = await ws.records.root((await ws.search(args["search"])).id)
                for e in edits:
                    if e.op == "update" and e.node_id == root.id and e.notes:
                        self._init = self._init or {"analysis": "", "intents": []}
                        self._init["analysis"] = e.notes
        elif tool == "benchmark" and args.get("node_id") is not None and getattr(out, "refine", None):
            cand = await ws.records.get_candidate(out.candidate_id)
            node = await ws.records.get_node(out.refine.node_id)
            self._write("write_code", {"source": cand.source, "language": cand.language}, intent=node.title)

    async def _titles(self, ws: Workspace, ids: Iterable[int | str | None]) -> None:
        for i in ids:  # a handle (a str) is the search's own name: a replay's search has it too
            if isinstance(i, int) and i not in self._nodes:
                node = await ws.records.get_node(i)
                self._nodes[i] = ROOT_TITLE if node.kind == "root" else node.title
