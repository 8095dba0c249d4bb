# Round 2 (last GPU round) for search 'kb': finish round 1's intent with the reflection, one more round, final_evaluation,
# export_kernel (its text written to .lab/live2/export/level1_40_LayerNorm.py). Generated from /tmp/r2/gen (sources inline; reads nothing else).
SRC = {
 "a4": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.\n# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,\n# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),\n# each combines its row's partials into mean/rstd and normalizes its chunk. The normalize pass walks the chunks in\n# reverse order, so the tail of x the stats pass read last (still in L2) is read first.\nBLOCK = 4096\nNUM_WARPS = 8\nSPLITS = 128\nBLOCK2 = 4096\nNUM_WARPS2 = 8\nCHUNK2_BLOCKS = 4\nTUNABLES = {\"BLOCK\": [1024, 2048, 4096, 8192], \"NUM_WARPS\": [4, 8, 16], \"SPLITS\": [32, 64, 128, 256],\n            \"BLOCK2\": [1024, 2048, 4096, 8192], \"NUM_WARPS2\": [4, 8, 16], \"CHUNK2_BLOCKS\": [1, 2, 4, 8]}\n\n\n@triton.jit\ndef _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    sp = tl.program_id(1)\n    base = x_ptr + row.to(tl.int64) * N\n    start = sp * CHUNK\n    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    acc2 = tl.zeros([BLOCK], dtype=tl.float32)\n    for off in range(0, CHUNK, BLOCK):\n        idx = start + off + offs\n        v = tl.load(base + idx, mask=idx < N, other=0.0)\n        acc += v\n        acc2 += v * v\n    p = part_ptr + (row * nsplit + sp) * 2\n    tl.store(p, tl.sum(acc, axis=0))\n    tl.store(p + 1, tl.sum(acc2, axis=0))\n\n\n@triton.jit\ndef _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,\n                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):\n    pid = tl.program_id(0)\n    row = pid % M\n    nch = tl.num_programs(0) // M\n    ch = nch - 1 - pid // M  # reverse: the chunks the stats pass read last (still in L2) first\n    s = tl.arange(0, SPLITS_P2)\n    sm = s < nsplit\n    pp = part_ptr + (row * nsplit + s) * 2\n    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)\n    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)\n    mean = tot / N\n    var = tl.maximum(tot2 / N - mean * mean, 0.0)\n    rstd = 1.0 / tl.sqrt(var + eps)\n    base = row.to(tl.int64) * N\n    offs = tl.arange(0, BLOCK2)\n    for i in range(CHUNK2_BLOCKS):\n        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs\n        m = idx < N\n        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)\n        w = tl.load(w_ptr + idx, mask=m, other=0.0)\n        b = tl.load(b_ptr + idx, mask=m, other=0.0)\n        y = (x - mean) * rstd * w + b\n        tl.store(y_ptr + base + idx, y, mask=m)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n        self._part = None\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n        w = self.ln.weight\n        b = self.ln.bias\n        N = w.numel()\n        M = x.numel() // N\n        y = torch.empty_like(x)\n        nblk = triton.cdiv(N, BLOCK)\n        nsplit = min(SPLITS, nblk)\n        chunk = triton.cdiv(nblk, nsplit) * BLOCK\n        nsplit = triton.cdiv(N, chunk)\n        need = M * nsplit * 2\n        if self._part is None or self._part.numel() < need or self._part.device != x.device:\n            self._part = torch.empty(need, dtype=torch.float32, device=x.device)\n        part = self._part\n        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)\n        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)\n        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,\n                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,\n                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)\n        return y\n",
 "a5": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.\n# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,\n# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),\n# each combines its row's partials into mean/rstd and normalizes its chunk. The normalize pass walks the chunks in\n# reverse order, so the tail of x the stats pass read last (still in L2) is read first.\nBLOCK = 4096\nNUM_WARPS = 8\nSPLITS = 128\nBLOCK2 = 4096\nNUM_WARPS2 = 8\nCHUNK2_BLOCKS = 2\nTUNABLES = {\"BLOCK\": [1024, 2048, 4096, 8192], \"NUM_WARPS\": [4, 8, 16], \"SPLITS\": [32, 64, 128, 256],\n            \"BLOCK2\": [1024, 2048, 4096, 8192], \"NUM_WARPS2\": [4, 8, 16], \"CHUNK2_BLOCKS\": [1, 2, 4, 8]}\n\n\n@triton.jit\ndef _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    sp = tl.program_id(1)\n    base = x_ptr + row.to(tl.int64) * N\n    start = sp * CHUNK\n    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    acc2 = tl.zeros([BLOCK], dtype=tl.float32)\n    for off in range(0, CHUNK, BLOCK):\n        idx = start + off + offs\n        v = tl.load(base + idx, mask=idx < N, other=0.0)\n        acc += v\n        acc2 += v * v\n    p = part_ptr + (row * nsplit + sp) * 2\n    tl.store(p, tl.sum(acc, axis=0))\n    tl.store(p + 1, tl.sum(acc2, axis=0))\n\n\n@triton.jit\ndef _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,\n                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):\n    pid = tl.program_id(0)\n    row = pid % M\n    nch = tl.num_programs(0) // M\n    ch = nch - 1 - pid // M  # reverse: the chunks the stats pass read last (still in L2) first\n    s = tl.arange(0, SPLITS_P2)\n    sm = s < nsplit\n    pp = part_ptr + (row * nsplit + s) * 2\n    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)\n    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)\n    mean = tot / N\n    var = tl.maximum(tot2 / N - mean * mean, 0.0)\n    rstd = 1.0 / tl.sqrt(var + eps)\n    base = row.to(tl.int64) * N\n    offs = tl.arange(0, BLOCK2)\n    for i in range(CHUNK2_BLOCKS):\n        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs\n        m = idx < N\n        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)\n        w = tl.load(w_ptr + idx, mask=m, other=0.0)\n        b = tl.load(b_ptr + idx, mask=m, other=0.0)\n        y = (x - mean) * rstd * w + b\n        tl.store(y_ptr + base + idx, y, mask=m)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n        self._part = None\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n        w = self.ln.weight\n        b = self.ln.bias\n        N = w.numel()\n        M = x.numel() // N\n        y = torch.empty_like(x)\n        nblk = triton.cdiv(N, BLOCK)\n        nsplit = min(SPLITS, nblk)\n        chunk = triton.cdiv(nblk, nsplit) * BLOCK\n        nsplit = triton.cdiv(N, chunk)\n        need = M * nsplit * 2\n        if self._part is None or self._part.numel() < need or self._part.device != x.device:\n            self._part = torch.empty(need, dtype=torch.float32, device=x.device)\n        part = self._part\n        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)\n        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)\n        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,\n                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,\n                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)\n        return y\n"
}

NAME = 'kb'
FORMAT = 'kernelbench'
EXPORT_PATH = '.lab/live2/export/level1_40_LayerNorm.py'
PRE_ATTEMPTS = []
ROUND1_NODE = 2
ROUND1_BASE = 1
REFLECTION = 'Measured (H200, kernelbench timing): a1 233.7 us = 35.7x vs eager (8.35 ms), 1.38x vs torch.compile (322 us); predicted 15x and 0.2-0.3 ms. The design is at its own bound: it moves ~840 MB (x read twice, y written, weight/bias) in 233.7 us = 3.6 TB/s, ~86% of the ~4.2 TB/s copy ceiling. a2 (256 splits, 2 blocks per normalize program) is within noise of a1; a3 (8192-wide tiles, 16 warps, 50% occupancy) is 13% slower: bytes in flight per SM matter, larger tiles with fewer resident warps lose. What dominates now is HBM bytes, and the second read of x (268 MB of 840) is the only large avoidable part. Parameter tuning and a persistent grid cannot give more than a few %; reading less from HBM can: the reverse normalize order (#3, ~5%) now, and a single persistent kernel that normalizes each group of rows while it is still in L2 (~1.4x, risky: a grid-wide barrier) later.'
EDITS = [{'op': 'update', 'node_id': 3, 'priority': 0.7, 'notes': 'Round 1: a1 runs at ~86% of the copy ceiling for 840 MB; only fewer HBM bytes helps. This is the cheapest way.'}, {'op': 'update', 'node_id': 6, 'priority': 0.15, 'notes': 'Round 1: DRAM throughput is already ~86% of the copy ceiling; a persistent grid alone cannot gain much.'}, {'op': 'update', 'node_id': 4, 'priority': 0.3, 'notes': 'Round 1: weight/bias are at most 33.6 MB of 840 MB; the gain is bounded by ~4%.'}]
NEW_INTENTS = [{'title': "one persistent kernel: stats then normalize per group of rows behind a grid-wide barrier, so x's second read hits L2", 'rationale': 'A group of 2 rows is 32 MB of x, inside the 50 MB L2. A persistent grid (all programs resident) sums its slice of the group, meets at an atomic-counter barrier, combines the partials and normalizes the same slice, still in L2: HBM bytes fall from ~840 MB to ~570 MB.', 'priority': 0.55, 'difficulty': 4, 'expected_speedup': 1.35, 'parent_id': 2, 'base_attempt_id': 1, 'notes': "Refuted if the barriers (8 per call) cost more than the ~90 us the saved HBM read is worth, or if L2 hit rate on the second read stays low (y's writes evict x). Needs a grid no larger than what is co-resident, else it deadlocks."}]
ROUND2_NODE = 3
ROUND2_MARKER = ''
ROUND2_ATTEMPTS = ['a4', 'a5']
ROUND2_BASE = 1

import json as _json
import os as _os
import time

T0 = time.monotonic()
LIMIT_S = 140.0  # round 2 has 150 s per task; keep a margin
RESERVE_S = 65.0  # kept for the export before and after final_evaluation, and final_evaluation itself
if _os.environ.get("R2_EXPORT_DIR"):  # dry runs write elsewhere
    EXPORT_PATH = _os.path.join(_os.environ["R2_EXPORT_DIR"], _os.path.basename(EXPORT_PATH))


def left():
    return LIMIT_S - (time.monotonic() - T0)


def stamp(what):
    print(f"\n### [{time.monotonic() - T0:6.1f} s] {what}")


def write_export(tag):
    """export_kernel, then write its text to disk (the tool writes nothing itself)."""
    stamp(f"export_kernel {FORMAT} ({tag})")
    r = call("export_kernel", {"search": NAME, "format": FORMAT})
    if not isinstance(r, dict) or "error" in r:
        print(f"### export ({tag}) refused: {r}")
        return False
    text = None
    for k in ("text", "content", "source", "file_text"):
        if isinstance(r.get(k), str) and len(r[k]) > 50:
            text = r[k]
            break
    if text is None:  # look one level down
        for v in r.values():
            if isinstance(v, dict):
                for k in ("text", "content", "source"):
                    if isinstance(v.get(k), str) and len(v[k]) > 50:
                        text = v[k]
                        break
    if text is None:
        print(f"### export ({tag}): no file text found in keys {list(r)}")
        return False
    _os.makedirs(_os.path.dirname(EXPORT_PATH), exist_ok=True)
    with open(EXPORT_PATH, "w") as f:
        f.write(text)
    print(f"### export ({tag}) written: {EXPORT_PATH} ({len(text)} chars; tool named it {r.get('name') or r.get('filename')})")
    return True


def _walk(o):
    if isinstance(o, dict):
        yield o
        for v in o.values():
            yield from _walk(v)
    elif isinstance(o, list):
        for v in o:
            yield from _walk(v)


def find_node(marker):
    tj = call("get_tree", {"search": NAME, "format": "json"})
    for nd in _walk(tj):
        if isinstance(nd.get("id"), int) and nd.get("title") == marker:
            return nd["id"]
    return None


def attempt(key, node, base):
    stamp(f"benchmark {key} on node {node} (base attempt {base})")
    args = {"search": NAME, "node_id": node, "candidate": {"source": SRC[key], "language": "triton"}}
    if base is not None:
        args["base_attempt_id"] = base
    r = call("benchmark", args)
    ev = r.get("evaluation") or {}
    ok = "error" not in r and ev.get("status") == "ok"
    print(f"### {key}: ok={ok} status={ev.get('status')} attempt={r.get('attempt_id')} "
          f"vs_eager={ev.get('speedup_vs_eager')} vs_compile={ev.get('speedup_vs_compile')} refine={r.get('refine')}")
    return r, ok


stamp("status at the start of round 2")
call("get_tree", {"search": NAME, "format": "text", "budget_chars": 6000})

# 1. finish round 1's intent (gm: one more variant first, its refine is not over)
for key in PRE_ATTEMPTS:
    if left() < RESERVE_S + 15:
        stamp(f"skip {key}: {left():.0f} s left")
        break
    r, ok = attempt(key, ROUND1_NODE, ROUND1_BASE)
    if (r.get("refine") or {}).get("over"):
        break

stamp(f"finish_intent {ROUND1_NODE} with the reflection")
fi = call("finish_intent", {"search": NAME, "node_id": ROUND1_NODE, "author": "llm:assistant", "reason": REFLECTION,
                            "edits": EDITS, "new_intents": NEW_INTENTS})
if "error" in fi:
    # refused as a whole: close the intent alone, then apply the reflection piecewise
    stamp("finish_intent refused; closing without edits, then edit_tree / propose_intents separately")
    call("finish_intent", {"search": NAME, "node_id": ROUND1_NODE, "author": "llm:assistant"})
    if EDITS:
        call("edit_tree", {"search": NAME, "author": "llm:assistant", "reason": REFLECTION, "edits": EDITS})
    if NEW_INTENTS:
        call("propose_intents", {"search": NAME, "intents": NEW_INTENTS, "author": "llm:assistant",
                                 "reason": REFLECTION})

# 2. round 2: select and implement
node = ROUND2_NODE
if node is None:  # the new intent: finish_intent's `applied.new_intents` holds its id; else look it up by title
    ids = ((fi.get("applied") or {}).get("new_intents") or []) if isinstance(fi, dict) and "error" not in fi else []
    node = ids[0] if ids and isinstance(ids[0], int) else find_node(ROUND2_MARKER)
stamp(f"select_action node={node}")
sel = call("select_action", {"search": NAME, "node_id": node} if node else {"search": NAME})
if "error" not in sel:
    node = (sel.get("node") or {}).get("id", node)
    base = ROUND2_BASE
    for key in ROUND2_ATTEMPTS:
        if left() < RESERVE_S:
            stamp(f"skip {key}: {left():.0f} s left")
            break
        r, ok = attempt(key, node, base)
        if (r.get("refine") or {}).get("over"):
            stamp("refine over")
            break
    if left() > RESERVE_S:
        stamp("finish_intent of round 2 (no further implementation in this session)")
        call("finish_intent", {"search": NAME, "node_id": node, "author": "llm:assistant"})

# 3. an export now (in case final_evaluation is cut off), final_evaluation, the export again
write_export("before final_evaluation")
stamp("final_evaluation")
fe = call("final_evaluation", {"search": NAME, "top_k": 3})
write_export("after final_evaluation")
stamp("tree at the end")
call("get_tree", {"search": NAME, "format": "text", "budget_chars": 6000})
stamp("done")
