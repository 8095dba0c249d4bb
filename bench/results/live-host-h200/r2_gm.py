# Round 2 (last GPU round) for search 'gm': finish round 1's intent with the reflection, one more round, final_evaluation,
# export_kernel (its text written to .lab/live2/export/submission.py). Generated from /tmp/r2/gen (sources inline; reads nothing else).
SRC = {
 "a4": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 8192\nNUM_WARPS = 8\nPROGS_PER_SM = 5\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4, 5, 8]}\n\n_STATE = {}\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    return out\n",
 "a5": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 8192\nNUM_WARPS = 8\nPROGS_PER_SM = 4\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n# Host launch path: the first call of a specialisation launches through Triton's JIT (binding, cache lookup) and\n# keeps the CompiledKernel it returns; later calls with the same specialisation (device, pointer alignment,\n# divisibility of the ints) launch that compiled kernel directly, skipping the JIT's per-call binding.\n# If the direct launch raises, the module goes back to the JIT launch for good.\n_COMPILED = {}\n_FAST = [True]\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    key = (x.device, x.data_ptr() % 16 == 0) + tuple((v % 16 == 0, v == 1) for v in (n, nblocks, pad))\n    ck = _COMPILED.get(key)\n    if ck is not None:\n        try:\n            ck[(grid, 1, 1)](x, out, scratch, ticket, n, nblocks, pad, BLOCK)\n            return out\n        except Exception:\n            _COMPILED.clear()\n            _FAST[0] = False\n    ck = _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    if _FAST[0] and x.is_cuda and ck is not None and hasattr(ck, \"__getitem__\"):\n        _COMPILED[key] = ck\n    return out\n",
 "a6": "import torch\nimport triton\nimport triton.language as tl\n\nBLOCK = 4096\nNUM_WARPS = 8\nPROGS_PER_SM = 2\nTUNABLES = {\"BLOCK\": [2048, 4096, 8192, 16384], \"NUM_WARPS\": [4, 8, 16], \"PROGS_PER_SM\": [1, 2, 4]}\n\n_STATE = {}\n\n# Host launch path: the first call of a specialisation launches through Triton's JIT (binding, cache lookup) and\n# keeps the CompiledKernel it returns; later calls with the same specialisation (device, pointer alignment,\n# divisibility of the ints) launch that compiled kernel directly, skipping the JIT's per-call binding.\n# If the direct launch raises, the module goes back to the JIT launch for good.\n_COMPILED = {}\n_FAST = [True]\n\n\n@triton.jit\ndef _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,\n                 BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    nprog = tl.num_programs(0)\n    offs = tl.arange(0, BLOCK)\n    hist = tl.zeros([256], dtype=tl.int32)\n    for blk in range(pid, nblocks, nprog):\n        idx = blk * BLOCK + offs\n        v = tl.load(x_ptr + idx, mask=idx < n, other=0)\n        hist += tl.histogram(v.to(tl.int32), 256)\n    bins = tl.arange(0, 256)\n    tl.atomic_add(scratch_ptr + bins, hist)\n    tl.debug_barrier()\n    t = tl.atomic_add(ticket_ptr, 1)\n    if t == nprog - 1:\n        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))\n        tot = tot - tl.where(bins == 0, pad, 0)\n        tl.store(out_ptr + bins, tot.to(tl.int64))\n        tl.atomic_xchg(ticket_ptr, 0)\n\n\ndef _state(dev):\n    st = _STATE.get(dev)\n    if st is None:\n        scratch = torch.zeros(257, dtype=torch.int32, device=dev)\n        if dev.type == \"cuda\":\n            sms = torch.cuda.get_device_properties(dev).multi_processor_count\n        else:\n            sms = 4\n        st = (scratch[:256], scratch[256:], sms)\n        _STATE[dev] = st\n    return st\n\n\ndef custom_kernel(data):\n    x, out = data\n    n = x.numel()\n    scratch, ticket, sms = _state(x.device)\n    nblocks = triton.cdiv(n, BLOCK)\n    grid = max(1, min(nblocks, sms * PROGS_PER_SM))\n    pad = nblocks * BLOCK - n\n    key = (x.device, x.data_ptr() % 16 == 0) + tuple((v % 16 == 0, v == 1) for v in (n, nblocks, pad))\n    ck = _COMPILED.get(key)\n    if ck is not None:\n        try:\n            ck[(grid, 1, 1)](x, out, scratch, ticket, n, nblocks, pad, BLOCK)\n            return out\n        except Exception:\n            _COMPILED.clear()\n            _FAST[0] = False\n    ck = _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)\n    if _FAST[0] and x.is_cuda and ck is not None and hasattr(ck, \"__getitem__\"):\n        _COMPILED[key] = ck\n    return out\n"
}

NAME = 'gm'
FORMAT = 'submission'
EXPORT_PATH = '.lab/live2/export/submission.py'
PRE_ATTEMPTS = ['a4']
ROUND1_NODE = 2
ROUND1_BASE = 2
REFLECTION = 'Measured (H200, gpumode timing): a1 8.09x, a2 8.94x, a3 6.78x geomean vs eager (4.3x-30x per workload, about the same vs torch.compile); predicted 5x. a2: bench0 (1.3 MB) 13.8 us, bench5 (10.5 MB) 42.1 us. The slope, ~3.2 us per MB (~310 GB/s), is far below HBM: on large inputs the per-element work of tl.histogram dominates, not bytes and not contention (bench1-3, same design, differ by <1 us whatever the hot-value share). On small inputs the host launch path dominates: every workload carries a launch_bound flag, 31-38 us to issue one call on the host. a2 (8192-element tiles, 4 programs/SM) vs a1 (4096, 2/SM): within noise on small sizes, ~13% better on bench5; a3 (16 warps, 1/SM) worse: more work in flight per SM helps the histogram. The atomic-ticket merge is correct and shows no cost. Next: cut the host launch path (launch the compiled kernel directly), and for large inputs a CUDA per-warp shared-memory histogram (#7).'
EDITS = [{'op': 'update', 'node_id': 6, 'priority': 0.1, 'notes': 'Round 1: contention shows no cost (bench1-3 within ~1 us of each other with the same design); likely refuted.'}, {'op': 'update', 'node_id': 3, 'priority': 0.2, 'notes': 'Round 1: the one-launch ticket merge is correct and costs nothing visible; a second launch adds host time, which already dominates small inputs.'}, {'op': 'update', 'node_id': 5, 'priority': 0.2, 'notes': 'Round 1: ~310 GB/s on bench5, far from HBM: the histogram work, not load width, bounds it.'}, {'op': 'update', 'node_id': 7, 'priority': 0.6, 'notes': 'Round 1: tl.histogram bounds large inputs at ~310 GB/s; a hand-written shared-memory histogram should do several times better on bench4/5.'}]
NEW_INTENTS = [{'title': "launch the cached CompiledKernel directly to cut Triton's per-call host binding", 'rationale': "launch_bound flags: issuing one call takes 31-38 us on the host, more than the kernel on small inputs. Triton's JIT launch binds and specialises the arguments on every call; keeping the CompiledKernel from the first call per specialisation and launching it directly skips that.", 'priority': 0.7, 'difficulty': 2, 'expected_speedup': 1.3, 'parent_id': 2, 'base_attempt_id': 2, 'notes': 'Refuted if bench0-3 do not drop by several us. Risk: the CompiledKernel launch signature differs across Triton versions (the code falls back to the JIT launch if it raises).'}]
ROUND2_NODE = None
ROUND2_MARKER = "launch the cached CompiledKernel directly to cut Triton's per-call host binding"
ROUND2_ATTEMPTS = ['a5', 'a6']
ROUND2_BASE = 2

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
