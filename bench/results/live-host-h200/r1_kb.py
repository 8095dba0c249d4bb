# Round 1 script for the kb task (generated; kernel sources inline)

SRC = {
 "a1": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.\n# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,\n# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),\n# each combines its row's partials into mean/rstd and normalizes its chunk.\nBLOCK = 4096\nNUM_WARPS = 8\nSPLITS = 128\nBLOCK2 = 4096\nNUM_WARPS2 = 8\nCHUNK2_BLOCKS = 4\nTUNABLES = {\"BLOCK\": [1024, 2048, 4096, 8192], \"NUM_WARPS\": [4, 8, 16], \"SPLITS\": [32, 64, 128, 256],\n            \"BLOCK2\": [1024, 2048, 4096, 8192], \"NUM_WARPS2\": [4, 8, 16], \"CHUNK2_BLOCKS\": [1, 2, 4, 8]}\n\n\n@triton.jit\ndef _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    sp = tl.program_id(1)\n    base = x_ptr + row.to(tl.int64) * N\n    start = sp * CHUNK\n    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    acc2 = tl.zeros([BLOCK], dtype=tl.float32)\n    for off in range(0, CHUNK, BLOCK):\n        idx = start + off + offs\n        v = tl.load(base + idx, mask=idx < N, other=0.0)\n        acc += v\n        acc2 += v * v\n    p = part_ptr + (row * nsplit + sp) * 2\n    tl.store(p, tl.sum(acc, axis=0))\n    tl.store(p + 1, tl.sum(acc2, axis=0))\n\n\n@triton.jit\ndef _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,\n                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):\n    pid = tl.program_id(0)\n    row = pid % M\n    ch = pid // M\n    s = tl.arange(0, SPLITS_P2)\n    sm = s < nsplit\n    pp = part_ptr + (row * nsplit + s) * 2\n    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)\n    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)\n    mean = tot / N\n    var = tl.maximum(tot2 / N - mean * mean, 0.0)\n    rstd = 1.0 / tl.sqrt(var + eps)\n    base = row.to(tl.int64) * N\n    offs = tl.arange(0, BLOCK2)\n    for i in range(CHUNK2_BLOCKS):\n        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs\n        m = idx < N\n        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)\n        w = tl.load(w_ptr + idx, mask=m, other=0.0)\n        b = tl.load(b_ptr + idx, mask=m, other=0.0)\n        y = (x - mean) * rstd * w + b\n        tl.store(y_ptr + base + idx, y, mask=m)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n        self._part = None\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n        w = self.ln.weight\n        b = self.ln.bias\n        N = w.numel()\n        M = x.numel() // N\n        y = torch.empty_like(x)\n        nblk = triton.cdiv(N, BLOCK)\n        nsplit = min(SPLITS, nblk)\n        chunk = triton.cdiv(nblk, nsplit) * BLOCK\n        nsplit = triton.cdiv(N, chunk)\n        need = M * nsplit * 2\n        if self._part is None or self._part.numel() < need or self._part.device != x.device:\n            self._part = torch.empty(need, dtype=torch.float32, device=x.device)\n        part = self._part\n        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)\n        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)\n        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,\n                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,\n                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)\n        return y\n",
 "a2": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.\n# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,\n# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),\n# each combines its row's partials into mean/rstd and normalizes its chunk.\nBLOCK = 4096\nNUM_WARPS = 8\nSPLITS = 256\nBLOCK2 = 4096\nNUM_WARPS2 = 8\nCHUNK2_BLOCKS = 2\nTUNABLES = {\"BLOCK\": [1024, 2048, 4096, 8192], \"NUM_WARPS\": [4, 8, 16], \"SPLITS\": [32, 64, 128, 256],\n            \"BLOCK2\": [1024, 2048, 4096, 8192], \"NUM_WARPS2\": [4, 8, 16], \"CHUNK2_BLOCKS\": [1, 2, 4, 8]}\n\n\n@triton.jit\ndef _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    sp = tl.program_id(1)\n    base = x_ptr + row.to(tl.int64) * N\n    start = sp * CHUNK\n    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    acc2 = tl.zeros([BLOCK], dtype=tl.float32)\n    for off in range(0, CHUNK, BLOCK):\n        idx = start + off + offs\n        v = tl.load(base + idx, mask=idx < N, other=0.0)\n        acc += v\n        acc2 += v * v\n    p = part_ptr + (row * nsplit + sp) * 2\n    tl.store(p, tl.sum(acc, axis=0))\n    tl.store(p + 1, tl.sum(acc2, axis=0))\n\n\n@triton.jit\ndef _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,\n                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):\n    pid = tl.program_id(0)\n    row = pid % M\n    ch = pid // M\n    s = tl.arange(0, SPLITS_P2)\n    sm = s < nsplit\n    pp = part_ptr + (row * nsplit + s) * 2\n    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)\n    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)\n    mean = tot / N\n    var = tl.maximum(tot2 / N - mean * mean, 0.0)\n    rstd = 1.0 / tl.sqrt(var + eps)\n    base = row.to(tl.int64) * N\n    offs = tl.arange(0, BLOCK2)\n    for i in range(CHUNK2_BLOCKS):\n        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs\n        m = idx < N\n        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)\n        w = tl.load(w_ptr + idx, mask=m, other=0.0)\n        b = tl.load(b_ptr + idx, mask=m, other=0.0)\n        y = (x - mean) * rstd * w + b\n        tl.store(y_ptr + base + idx, y, mask=m)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n        self._part = None\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n        w = self.ln.weight\n        b = self.ln.bias\n        N = w.numel()\n        M = x.numel() // N\n        y = torch.empty_like(x)\n        nblk = triton.cdiv(N, BLOCK)\n        nsplit = min(SPLITS, nblk)\n        chunk = triton.cdiv(nblk, nsplit) * BLOCK\n        nsplit = triton.cdiv(N, chunk)\n        need = M * nsplit * 2\n        if self._part is None or self._part.numel() < need or self._part.device != x.device:\n            self._part = torch.empty(need, dtype=torch.float32, device=x.device)\n        part = self._part\n        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)\n        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)\n        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,\n                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,\n                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)\n        return y\n",
 "a3": "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.\n# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,\n# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),\n# each combines its row's partials into mean/rstd and normalizes its chunk.\nBLOCK = 8192\nNUM_WARPS = 16\nSPLITS = 128\nBLOCK2 = 8192\nNUM_WARPS2 = 16\nCHUNK2_BLOCKS = 2\nTUNABLES = {\"BLOCK\": [1024, 2048, 4096, 8192], \"NUM_WARPS\": [4, 8, 16], \"SPLITS\": [32, 64, 128, 256],\n            \"BLOCK2\": [1024, 2048, 4096, 8192], \"NUM_WARPS2\": [4, 8, 16], \"CHUNK2_BLOCKS\": [1, 2, 4, 8]}\n\n\n@triton.jit\ndef _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):\n    row = tl.program_id(0)\n    sp = tl.program_id(1)\n    base = x_ptr + row.to(tl.int64) * N\n    start = sp * CHUNK\n    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    acc2 = tl.zeros([BLOCK], dtype=tl.float32)\n    for off in range(0, CHUNK, BLOCK):\n        idx = start + off + offs\n        v = tl.load(base + idx, mask=idx < N, other=0.0)\n        acc += v\n        acc2 += v * v\n    p = part_ptr + (row * nsplit + sp) * 2\n    tl.store(p, tl.sum(acc, axis=0))\n    tl.store(p + 1, tl.sum(acc2, axis=0))\n\n\n@triton.jit\ndef _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,\n                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):\n    pid = tl.program_id(0)\n    row = pid % M\n    ch = pid // M\n    s = tl.arange(0, SPLITS_P2)\n    sm = s < nsplit\n    pp = part_ptr + (row * nsplit + s) * 2\n    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)\n    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)\n    mean = tot / N\n    var = tl.maximum(tot2 / N - mean * mean, 0.0)\n    rstd = 1.0 / tl.sqrt(var + eps)\n    base = row.to(tl.int64) * N\n    offs = tl.arange(0, BLOCK2)\n    for i in range(CHUNK2_BLOCKS):\n        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs\n        m = idx < N\n        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)\n        w = tl.load(w_ptr + idx, mask=m, other=0.0)\n        b = tl.load(b_ptr + idx, mask=m, other=0.0)\n        y = (x - mean) * rstd * w + b\n        tl.store(y_ptr + base + idx, y, mask=m)\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, normalized_shape: tuple):\n        super().__init__()\n        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)\n        self._part = None\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        x = x.contiguous()\n        w = self.ln.weight\n        b = self.ln.bias\n        N = w.numel()\n        M = x.numel() // N\n        y = torch.empty_like(x)\n        nblk = triton.cdiv(N, BLOCK)\n        nsplit = min(SPLITS, nblk)\n        chunk = triton.cdiv(nblk, nsplit) * BLOCK\n        nsplit = triton.cdiv(N, chunk)\n        need = M * nsplit * 2\n        if self._part is None or self._part.numel() < need or self._part.device != x.device:\n            self._part = torch.empty(need, dtype=torch.float32, device=x.device)\n        part = self._part\n        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)\n        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)\n        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,\n                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,\n                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)\n        return y\n"
}
ORDER = ['a1', 'a2', 'a3']
FALLBACK = None

NAME = "kb"
TASK = ".ext/kb/KernelBench/level1/40_LayerNorm.py"
PROFILE_WL = "default"
ANALYSIS = """Op: LayerNorm over the last three dims (64*256*256 = 4,194,304 elements per row), 16 rows, fp32, elementwise weight and bias (ones/zeros at init but must be applied). FLOPs ~8 per element (~0.5 GFLOP): memory-bound. Minimum bytes: x 268 MB read + y 268 MB written + weight/bias 33.6 MB = 570 MB -> ~0.12 ms at the 4.8 TB/s spec, ~0.14 ms at the ~4.2 TB/s a copy reaches. A realistic two-pass design reads x twice (stats, then normalize): ~840 MB -> ~0.2 ms; L2 (50 MB) can return the last-read part of x to the second pass. Regime: very few (16) very long rows; eager's layer-norm kernel gives a row to one block, so 16 of 132 SMs work: eager is likely several ms, far from the roofline. torch.compile likely splits the reduction. KernelBench timing clears L2 (256 MB) before each call and takes the mean of 100; launches (2 x few us) are negligible. Numerics: tolerance 1e-4 abs+rel; sum/sum-of-squares in fp32 lane accumulators with tree reduction is accurate enough for inputs in [0,1) (var 1/12, no heavy cancellation); a large mean would need shifted/Welford partials. Unsure: the best split count and tile, whether weight/bias re-reads per row hit L2, and torch.compile's time."""
INTENTS = [
    {"title": "split each row across many programs: partial sum/sumsq per (row, split), then a normalize pass that combines them",
     "rationale": "Eager uses one block per 4M-element row: 16 busy SMs of 132. Kernel 1: (row, split) programs write partial sum and sum of squares; kernel 2: (chunk, row) programs, row-minor so a weight/bias chunk is read by the 16 rows together (L2 reuse), combine the partials into mean/rstd and write y. Fills all SMs, two passes over x.",
     "priority": 0.95, "difficulty": 3, "expected_speedup": 15.0,
     "notes": "Refuted if not within ~1.5x of 0.2 ms, or if torch.compile is already there.",
     "params": {"SPLITS": 128, "BLOCK": 4096, "BLOCK2": 4096, "CHUNK2_BLOCKS": 4}},
    {"title": "normalize pass walks the chunks in reverse so the tail of x still in L2 is read first",
     "rationale": "After the stats pass the last ~40 MB of x touched are in L2; a normalize pass starting there reads them from L2, not HBM: ~5% fewer HBM bytes.",
     "priority": 0.5, "difficulty": 1, "expected_speedup": 1.04,
     "notes": "Refuted if no change beyond noise (L2 clear policy or write-allocate of y evicts it)."},
    {"title": "normalize pass loads each weight/bias tile once and applies it to all 16 rows",
     "rationale": "Loop the rows inside the program: weight/bias are read from HBM once (33.6 MB) instead of relying on L2 hits across programs; fewer load instructions per output.",
     "priority": 0.45, "difficulty": 2, "expected_speedup": 1.05,
     "notes": "Refuted if the base already reads weight/bias about once (DRAM bytes ~ 840 MB)."},
    {"title": "cache policy hints: evict_first for the streamed x/y, evict_last for the partials and weight/bias",
     "rationale": "Streaming 800 MB through a 50 MB L2 evicts the reused data; hints keep weight/bias and the tail of x resident.",
     "priority": 0.3, "difficulty": 1, "expected_speedup": 1.03,
     "notes": "Refuted if ncu L2 hit rate does not move."},
    {"title": "persistent grid sized to the SMs for both passes, each program striding over tiles",
     "rationale": "Thousands of short programs pay launch/tail effects and per-program prologue (partials combine); a grid of k x 132 programs with a stride loop amortises it.",
     "priority": 0.3, "difficulty": 2, "expected_speedup": 1.05,
     "notes": "Refuted if achieved DRAM throughput is already ~90% of the copy ceiling."},
]
import time

T0 = time.monotonic()
LIMIT_S = 228.0  # the round has 240 s per task; keep a margin


def left():
    return LIMIT_S - (time.monotonic() - T0)


def stamp(what):
    print(f"\n### [{time.monotonic() - T0:6.1f} s] {what}")


stamp("create_search")
s = call("create_search", {"task": TASK, "name": NAME, "rounds": 2, "stagnation": 2, "language": "triton"})
if "error" in s:
    print("create_search refused; assuming the search exists from an earlier try and going on with it")

stamp("analyse_kernel prompt")
prompt("analyse_kernel", {"search": NAME})

stamp("propose_intents")
pi = call("propose_intents", {"search": NAME, "intents": INTENTS, "author": "llm:assistant",
                              "reason": "first intents from the analysis (round 1)"})
root = None
if "error" not in pi and pi.get("result"):
    root = pi["result"][0]["parent_id"]
if root is None:
    tj = call("get_tree", {"search": NAME, "format": "json"})
    for nd in tj.get("nodes", []) if isinstance(tj, dict) else []:
        if nd.get("kind") == "root":
            root = nd["id"]
stamp(f"edit_tree root={root}")
if root is not None:
    call("edit_tree", {"search": NAME, "author": "llm:assistant", "reason": "analysis of the task (round 1)",
                       "edits": [{"op": "update", "node_id": root, "notes": ANALYSIS}]})

stamp("select_action")
sel = call("select_action", {"search": NAME})
node = (sel.get("node") or {}).get("id") if "error" not in sel else None
stamp(f"implement_intent prompt node={node}")
prompt("implement_intent", {"search": NAME})

results = {}
cid_of = {}
base_aid = None
best_cid = None
queue = list(ORDER)
used_fallback = False
while queue and node is not None:
    key = queue.pop(0)
    if left() < 45:
        stamp(f"skip {key}: only {left():.0f} s left")
        break
    stamp(f"benchmark {key}")
    args = {"search": NAME, "node_id": node, "candidate": {"source": SRC[key], "language": "triton"}}
    if base_aid is not None:
        args["base_attempt_id"] = base_aid  # later attempts are variants of the first correct one
    r = call("benchmark", args)
    results[key] = r
    ev = r.get("evaluation") or {}
    ok = "error" not in r and ev.get("status") == "ok"
    print(f"### {key}: ok={ok} status={ev.get('status')} attempt={r.get('attempt_id')} "
          f"vs_eager={ev.get('speedup_vs_eager')} vs_compile={ev.get('speedup_vs_compile')} refine={r.get('refine')}")
    if ok:
        cid_of[r.get("attempt_id")] = r.get("candidate_id")
        if base_aid is None:
            base_aid = r.get("attempt_id")
        best_cid = cid_of.get((r.get("refine") or {}).get("best_attempt_id"), best_cid)
    if not ok and key == "a1" and FALLBACK and not used_fallback:
        # the first design failed: its variants would fail too; try the fallback implementation and its variant
        used_fallback = True
        queue = list(FALLBACK)
        continue
    if (r.get("refine") or {}).get("over"):
        stamp("the refine phase says it is over (stagnation window or cap)")
        break

stamp("status after the attempts")
call("get_tree", {"search": NAME, "format": "text", "budget_chars": 8000})
if left() > 40:
    stamp("implement_intent prompt again (the feedback on the last attempt, as the loop shows it)")
    prompt("implement_intent", {"search": NAME})
if best_cid and left() > 70:
    stamp("profile_ncu on the intent's best correct candidate")
    call("profile_ncu", {"search": NAME, "candidate": {"candidate_id": best_cid, "language": "triton"},
                         "workload": PROFILE_WL})
stamp("done")

