"""The reflect prompt's "Declared tunables" are the space the intent's own code declares (its last correct attempt),
not the base's: an attempt that declares other tunables than the code it was built on is reflected on with its own."""

from __future__ import annotations

import pytest

from ksearch.tools.prompting.contexts import update_context
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_edits, apply_intents
from ksearch.worldmodel.models import IntentSpec, SearchConfig
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

BASE = 'TUNABLES = {"BLOCK_N": [1024, 2048]}\nBLOCK_N = 1024\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n'
MINE = (
    'TUNABLES = {"ROWS": [1, 2, 4]}\nROWS = 2\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n'
)


async def test_the_reflect_prompt_shows_the_intent_s_own_declared_space(ws: Workspace) -> None:
    store = ws.store
    s = await store.create_search("tun", "softmax", SearchConfig())
    (rows,) = await apply_intents(store, s.id, [IntentSpec(title="several rows per program")], "llm:m", 1)
    base_c = await store.put_candidate(BASE, "triton")
    mine_c = await store.put_candidate(MINE, "triton")
    base = await store.record_attempt(s.id, None, base_c.id, evals.gpu_eval(1.0), round=0, author="llm:m")
    # re-based on the base attempt, as a reflection may do: the base's code declares BLOCK_N
    await apply_edits(
        store, s.id, [{"op": "update", "node_id": rows.id, "base_attempt_id": base.id}], "llm:m", 0
    )
    await store.set_node_status(rows.id, "active")
    await store.record_attempt(
        s.id, rows.id, mine_c.id, evals.gpu_eval(1.1), base_attempt_id=base.id, round=1, author="llm:m"
    )
    await store.close_node(rows.id, "closed")
    ctx = await update_context(ws, s, await store.get_node(rows.id))
    assert ctx.tunables == {"ROWS": [1, 2, 4]}
