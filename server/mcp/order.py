"""A host's calls that change the records run in the order it sent them.

The SDK starts a task per request, so the calls a host sends in one turn (finish_intent, then select_action)
would otherwise run side by side, and a later one could act before an earlier one's change: a claim refused
because the intent it follows is not finished yet. So the calls that record or change something take turns,
first come first served (the lock's waiters are woken in order, and a handler's first await is taking it);
reads (get_tree, list_searches, resources, prompts) and the checks that record no attempt (compile_kernel,
run_correctness, profile_ncu) run alongside. The turns are the server's, not a connection's: the SDK offers
no public handle on a connection, so several hosts on one HTTP server take turns with each other too.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

# The tools whose effect a call sent after them may depend on. run_search is not one: it starts the driver in
# its own process and then only follows its progress.
CHANGING = frozenset(
    {
        "create_search",
        "propose_intents",
        "edit_tree",
        "select_action",
        "benchmark",
        "finish_intent",
        "final_evaluation",
        "set_budgets",
    }
)


class InOrder:
    """One first-come-first-served lock for the CHANGING tools."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()

    def turn(self, tool: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """`async with` this before the tool runs: it waits for the changing calls that arrived earlier."""
        return self._lock if tool in CHANGING else contextlib.nullcontext()
