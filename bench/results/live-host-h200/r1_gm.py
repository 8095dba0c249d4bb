# Round 1 script for the gm task (generated; kernel sources inline)

SRC = {
 "a1": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 4096\nNUM_WARPS = 8\nPROGS_PER_SM = 2\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    return out\n",
 "a2": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 8192\nNUM_WARPS = 8\nPROGS_PER_SM = 4\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    return out\n",
 "a3": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 16384\nNUM_WARPS = 16\nPROGS_PER_SM = 1\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    return out\n",
 "fb": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 4096\nNUM_WARPS = 8\nPROGS_PER_SM = 2\nRED_ROWS = 16\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _partial_kernel(x_ptr, part_ptr, n, nblocks, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.store(part_ptr + pid * 256 + bins, hist)\n\n\n@triton.jit\ndef _reduce_kernel(part_ptr, out_ptr, nprog, pad, RED_ROWS: tl.constexpr):\n    bins = tl.arange(0, 256)\n    rows = tl.arange(0, RED_ROWS)\n    acc = tl.zeros([256], dtype=tl.int64)\n    for r0 in range(0, nprog, RED_ROWS):\n        r = r0 + rows\n        p = tl.load(part_ptr + r[:, None] * 256 + bins[None, :], mask=(r < nprog)[:, None], other=0)\n        acc += tl.sum(p.to(tl.int64), axis=0)\n    acc = acc - tl.where(bins == 0, pad, 0).to(tl.int64)\n    tl.store(out_ptr + bins, acc)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == \"cuda\" else 4\n        part = torch.empty(sms * 16 * 256, dtype=torch.int32, device=dev)\n        st = (part, sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    part, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _partial_kernel[(grid,)](x, part, n, nblocks, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    _reduce_kernel[(1,)](part, out, grid, pad, RED_ROWS=RED_ROWS, num_warps=4)\n    return out\n",
 "fb2": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 8192\nNUM_WARPS = 8\nPROGS_PER_SM = 1\nRED_ROWS = 16\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _partial_kernel(x_ptr, part_ptr, n, nblocks, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.store(part_ptr + pid * 256 + bins, hist)\n\n\n@triton.jit\ndef _reduce_kernel(part_ptr, out_ptr, nprog, pad, RED_ROWS: tl.constexpr):\n    bins = tl.arange(0, 256)\n    rows = tl.arange(0, RED_ROWS)\n    acc = tl.zeros([256], dtype=tl.int64)\n    for r0 in range(0, nprog, RED_ROWS):\n        r = r0 + rows\n        p = tl.load(part_ptr + r[:, None] * 256 + bins[None, :], mask=(r < nprog)[:, None], other=0)\n        acc += tl.sum(p.to(tl.int64), axis=0)\n    acc = acc - tl.where(bins == 0, pad, 0).to(tl.int64)\n    tl.store(out_ptr + bins, acc)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == \"cuda\" else 4\n        part = torch.empty(sms * 16 * 256, dtype=torch.int32, device=dev)\n        st = (part, sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    part, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _partial_kernel[(grid,)](x, part, n, nblocks, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    _reduce_kernel[(1,)](part, out, grid, pad, RED_ROWS=RED_ROWS, num_warps=4)\n    return out\n"
}
ORDER = ['a1', 'a2', 'a3']
FALLBACK = ['fb', 'fb2']

NAME = "gm"
TASK = ".ext/reference-kernels/problems/pmpp_v2/histogram_py"
PROFILE_WL = "bench5"
ANALYSIS = """Op: 256-bin histogram (torch.bincount, minlength 256) of a uint8 vector into the int64 `output` that arrives in data (the reference writes it in place and returns it; it is torch.empty, so every bin must be written). No FLOPs to speak of; bytes: n bytes read + 2 KB written: 1.3 MB (bench0) to 10.5 MB (bench5). At ~4 TB/s that is 0.3-2.6 us: far below one kernel launch, so the floor is set by launches and the merge of per-program histograms, not by HBM. GPU MODE's timing records events around custom_kernel after an L2-clearing kernel, so part of the host launch path overlaps the clear; a second launch is still ~2-5 us more. Regimes: size 1.3M-10.5M (all multiples of 4096*5), contention 10/40/90% (one value repeated): at 90% a global-atomic histogram serialises on one address, a privatised one (per-program counts, shared-memory atomics inside tl.histogram) does not. Eager loses time in bincount's min/max pass with a host sync (.item) before the counting kernel, plus global atomics. Unsure: how tl.histogram lowers on sm_90 (per-element shared atomics vs ballots) and its cost per byte at 90% contention; the cost of 256 x P global atomics in the merge (P ~ 264 programs); Triton's host launch cost on this machine. Also note the task.yml description (range 0-100, bins = size/16) contradicts reference.py (256 bins of 0..255); the reference is what is checked."""
INTENTS = [
    {"title": "privatised per-program tl.histogram over a grid-stride range, merged in one launch via an atomic ticket",
     "rationale": "One launch instead of eager's max pass + host sync + atomic kernel: each program histograms its blocks into registers (tl.histogram), adds its 256 counts to an int32 scratch with global atomics, and the last program (atomic ticket) converts to int64 into output and resets the scratch. Cuts launches and host syncs, removes per-element global atomics (contention at 90%).",
     "priority": 0.9, "difficulty": 3, "expected_speedup": 5.0,
     "notes": "Refuted if a single launch is not clearly faster than eager, or if correctness fails from the ticket ordering.",
     "params": {"BLOCK": 4096, "NUM_WARPS": 8, "PROGS_PER_SM": 2}},
    {"title": "two launches without atomics: per-program partial histograms, then one program reduces them to int64",
     "rationale": "No global atomics and no ticket: kernel 1 writes P x 256 int32 partials, kernel 2 sums them. Costs a second launch (~2-5 us) but no atomic contention in the merge; a safe fallback for the ticket design.",
     "priority": 0.55, "difficulty": 2, "expected_speedup": 3.0,
     "notes": "Refuted if it is slower than the one-launch ticket version by about a launch."},
    {"title": "size the grid to the input: fewer, longer programs for small inputs",
     "rationale": "The merge costs 256 atomics per program on 256 addresses (serialised at L2); for 1.3 MB a grid of 2x132 programs has only ~1.2 blocks each. Fewer programs cut merge atomics; bigger inputs keep enough programs to fill HBM bandwidth.",
     "priority": 0.45, "difficulty": 1, "expected_speedup": 1.15,
     "notes": "Refuted if time is flat in the program count."},
    {"title": "widen loads: more bytes in flight per thread (16-32 B of uint8 per thread per step)",
     "rationale": "A uint8 stream needs many bytes per thread in flight to reach HBM bandwidth; larger BLOCK per warp raises memory-level parallelism.",
     "priority": 0.35, "difficulty": 2, "expected_speedup": 1.1,
     "notes": "Refuted if profile shows DRAM throughput already high or time is launch-bound."},
    {"title": "handle the hot value separately under contention: count matches of the block's first value with a vector compare",
     "rationale": "At 90% contention one bin takes most elements; if tl.histogram lowers to shared-memory atomics, those serialise on one address. Counting equality with the most common value by a reduction and histogramming the rest avoids it.",
     "priority": 0.25, "difficulty": 4, "expected_speedup": 1.2,
     "notes": "Refuted if bench3 (90%) is no slower than bench1 (10%) at the same size."},
    {"title": "CUDA C++ kernel with per-warp shared-memory sub-histograms and a single launch",
     "rationale": "The classic fastest histogram: 16-byte loads, per-warp privatised shared histograms, block merge, global atomics, last-block conversion; a C++ extension's launch has less host overhead than Triton's Python launcher.",
     "priority": 0.3, "difficulty": 5, "expected_speedup": 1.3,
     "notes": "Needs the cuda/cpp_ext language; compile time of a torch extension (~30 s) counts in a round."},
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

