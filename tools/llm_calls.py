"""record_llm_call: account one language-model call of a search (tokens, dollars, latency, its prompt and answer,
or its error). The budgets in tokens and dollars, and every face's spend, are read from these records."""

from __future__ import annotations

from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import LLMCall, LLMCallRecord


async def record_llm_call(ws: Workspace, search_id: int | None, call: LLMCallRecord) -> LLMCall:
    """Keep the call as its policy reported it, on the search (None: on no search; failed calls too, with their
    `error`); returns the stored record. NotFound for a search that does not exist: nothing is written."""
    return await ws.store.log_llm_call(search_id=search_id, **call.model_dump())
