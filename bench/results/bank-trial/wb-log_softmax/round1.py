# Round 1 of the log_softmax search: analysis, first intents, 3 intents x up to 3 candidates, final evaluation.
# Written defensively: every result is checked for "error"; later candidates adapt to earlier measurements.
import json
import math

S = "log_softmax"
AUTHOR = "llm:claude"
LOG = []  # (label, attempt_id, correct, geomean, per-workload medians)


def say(*a):
    print("#### HOST:", *a, flush=True)


# ----------------------------------------------------------------------------------------------------------
# Candidate source: one template, settings substituted (each setting on its own module-level line).
# ----------------------------------------------------------------------------------------------------------
TEMPLATE = '''"""log_softmax over the last dim (fp32): @@DOC@@

Rows with N <= MAX_REG_N: one program per row, the whole row in registers (one HBM read, one write).
Longer rows: one program per row, a chunked online pass (per-lane running max and sum), then a write pass
that re-reads the row (REVERSE_WRITE: last chunks first, the ones most likely still in L2).
"""
import torch
import triton
import triton.language as tl

MAX_REG_N = @@MAX_REG_N@@
WARPS_1K = 4
WARPS_4K = @@WARPS_4K@@
WARPS_8K = @@WARPS_8K@@
WARPS_16K = @@WARPS_16K@@
WARPS_32K = @@WARPS_32K@@
CHUNK_N = @@CHUNK_N@@
CHUNK_WARPS = @@CHUNK_WARPS@@
REVERSE_WRITE = @@REVERSE@@

TUNABLES = {
    "MAX_REG_N": [4096, 8192, 16384, 32768],
    "WARPS_4K": [4, 8, 16],
    "WARPS_8K": [4, 8, 16],
    "WARPS_16K": [8, 16, 32],
    "WARPS_32K": [8, 16, 32],
    "CHUNK_N": [2048, 4096, 8192],
    "CHUNK_WARPS": [4, 8, 16],
    "REVERSE_WRITE": [False, True],
}


@triton.jit
def _row_kernel(x_ptr, y_ptr, N, stride_xm, stride_ym, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=float("-inf")@@LOAD1@@).to(tl.float32)
    m = tl.max(x, axis=0)
    z = x - m
    s = tl.sum(tl.exp2(z * 1.4426950408889634), axis=0)
    y = z - tl.log(s)
    tl.store(y_ptr + row * stride_ym + cols, y, mask=mask@@STORE@@)


@triton.jit
def _chunk_kernel(x_ptr, y_ptr, N, stride_xm, stride_ym, CHUNK: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, CHUNK)
    m_i = tl.full([CHUNK], float("-inf"), tl.float32)
    s_i = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, N, CHUNK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < N, other=float("-inf")@@LOADP1@@).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        s_i = s_i * tl.exp2((m_i - m_ref) * 1.4426950408889634) + tl.exp2((x - m_ref) * 1.4426950408889634)
        m_i = m_new
    m = tl.max(m_i, axis=0)
    s = tl.sum(s_i * tl.exp2((m_i - m) * 1.4426950408889634), axis=0)
    lse = m + tl.log(s)
    num_chunks = tl.cdiv(N, CHUNK)
    for i in range(0, num_chunks):
        c = i
        if REVERSE:
            c = num_chunks - 1 - i
        offs = c * CHUNK + cols
        mask = offs < N
        x = tl.load(x_row + offs, mask=mask, other=0.0@@LOADP2@@).to(tl.float32)
        tl.store(y_row + offs, x - lse, mask=mask@@STORE@@)


def _row_warps(block):
    if block <= 1024:
        return WARPS_1K
    if block <= 4096:
        return WARPS_4K
    if block <= 8192:
        return WARPS_8K
    if block <= 16384:
        return WARPS_16K
    return WARPS_32K


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        x2 = x.reshape(-1, n)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        m = x2.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        if m == 0 or n == 0:
            return y.reshape(x.shape)
        if n <= MAX_REG_N:
            block = triton.next_power_of_2(n)
            _row_kernel[(m,)](x2, y, n, x2.stride(0), y.stride(0), BLOCK_N=block, num_warps=_row_warps(block))
        else:
            _chunk_kernel[(m,)](x2, y, n, x2.stride(0), y.stride(0), CHUNK=CHUNK_N, REVERSE=REVERSE_WRITE,
                                num_warps=CHUNK_WARPS)
        return y.reshape(x.shape)
'''

DEFAULT = dict(MAX_REG_N=32768, WARPS_4K=8, WARPS_8K=8, WARPS_16K=16, WARPS_32K=16, CHUNK_N=8192,
               CHUNK_WARPS=16, REVERSE=False, HINTS="none")

HINTS = {
    # name: (row-kernel load, chunk pass-1 load, chunk pass-2 load, stores)
    "none": ("", "", "", ""),
    "both": (', eviction_policy="evict_first"', ', eviction_policy="evict_last"',
             ', eviction_policy="evict_first"', ', cache_modifier=".cs"'),
    "loads": (', eviction_policy="evict_first"', ', eviction_policy="evict_last"',
              ', eviction_policy="evict_first"', ""),
    "stores": ("", "", "", ', cache_modifier=".cs"'),
}


def make_source(cfg, doc):
    h = HINTS[cfg["HINTS"]]
    src = TEMPLATE
    for k in ("MAX_REG_N", "WARPS_4K", "WARPS_8K", "WARPS_16K", "WARPS_32K", "CHUNK_N", "CHUNK_WARPS"):
        src = src.replace("@@%s@@" % k, str(int(cfg[k])))
    src = src.replace("@@REVERSE@@", "True" if cfg["REVERSE"] else "False")
    src = src.replace("@@LOAD1@@", h[0]).replace("@@LOADP1@@", h[1]).replace("@@LOADP2@@", h[2])
    src = src.replace("@@STORE@@", h[3]).replace("@@DOC@@", doc)
    return src


# ----------------------------------------------------------------------------------------------------------
# Reading results defensively
# ----------------------------------------------------------------------------------------------------------
def find_key(obj, names, depth=0):
    """First value of any key in `names`, searched breadth-first through dicts (and lists of dicts)."""
    if depth > 4 or obj is None:
        return None
    if isinstance(obj, dict):
        for n in names:
            if n in obj and obj[n] is not None:
                return obj[n]
        for v in obj.values():
            if isinstance(v, (dict, list)):
                r = find_key(v, names, depth + 1)
                if r is not None:
                    return r
    elif isinstance(obj, list):
        for v in obj:
            r = find_key(v, names, depth + 1)
            if r is not None:
                return r
    return None


def num(v):
    try:
        f = float(v)
        return f if math.isfinite(f) else None
    except (TypeError, ValueError):
        return None


def per_workload(res):
    """{workload name: median seconds-or-us} from a benchmark result, whatever the exact layout."""
    out = {}
    rows = find_key(res, ["workloads", "results", "per_workload", "timings", "rows"])
    if isinstance(rows, dict):
        rows = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "median": v} for k, v in rows.items()]
    if isinstance(rows, list):
        for w in rows:
            if not isinstance(w, dict):
                continue
            name = w.get("name") or w.get("workload")
            med = None
            for k in ("median_us", "median_ms", "median_s", "median", "time_us", "us"):
                if num(w.get(k)) is not None:
                    med = num(w.get(k))
                    break
            if med is None and isinstance(w.get("timing"), dict):
                for k in ("median_us", "median_ms", "median_s", "median"):
                    if num(w["timing"].get(k)) is not None:
                        med = num(w["timing"][k])
                        break
            if name and med is not None:
                out[str(name)] = med
    return out


def summarize(label, res):
    """Record (label, attempt id, correct, geomean speedup vs eager, per-workload medians)."""
    if not isinstance(res, dict) or "error" in res:
        say(label, "ERROR:", (res or {}).get("error") if isinstance(res, dict) else res)
        LOG.append(dict(label=label, attempt=None, correct=False, geo=None, wl={}, cid=None))
        return LOG[-1]
    att = find_key(res, ["attempt_id"])
    if att is None:
        a = res.get("attempt")
        att = a.get("id") if isinstance(a, dict) else a
    ev = res.get("evaluation") if isinstance(res.get("evaluation"), dict) else {}
    status = ev.get("status") or find_key(res, ["status"])
    corr = ev.get("correctness") if isinstance(ev.get("correctness"), list) else []
    passed = bool(corr) and all(isinstance(c, dict) and c.get("passed") for c in corr)
    pure = ev.get("pure_pytorch")
    correct = status == "ok" and passed
    geo = num(find_key(res, ["speedup_vs_eager", "geomean_speedup_vs_eager", "speedup_geomean", "speedup"]))
    cid = find_key(res, ["candidate_id"])
    rec = dict(label=label, attempt=att, correct=bool(correct) and not pure, geo=geo if correct else None,
               wl=per_workload(res) if correct else {}, cid=cid, status=status)
    LOG.append(rec)
    say("RESULT", json.dumps(rec))
    return rec


def best_of(recs):
    ok = [r for r in recs if r["correct"] and r["attempt"] is not None]
    if not ok:
        return None
    timed = [r for r in ok if r["geo"] is not None]
    if timed:
        return max(timed, key=lambda r: r["geo"])
    return ok[0]  # CPU interpreter: no timings, take the first correct one


def wl_time(rec, key):
    """Median on the workload whose name contains `key` (e.g. '32768x4096'), or None."""
    for name, v in (rec or {}).get("wl", {}).items():
        if key in name:
            return v
    return None


def bench(node, cfg, doc, label):
    src = make_source(cfg, doc)
    r = call("benchmark", {"search": S, "node_id": node, "candidate": {"source": src, "language": "triton"},
                           "author": AUTHOR})
    rec = summarize(label, r)
    rec["cfg"] = dict(cfg)
    return rec


def fmt(rec):
    if rec is None:
        return "none"
    wl = ", ".join("%s %.4g" % (k, v) for k, v in sorted(rec["wl"].items()))
    g = "%.3fx" % rec["geo"] if rec["geo"] is not None else "n/a"
    return "attempt #%s (%s): %s vs eager (geomean); medians: %s" % (rec["attempt"], rec["label"], g, wl or "n/a")


# ----------------------------------------------------------------------------------------------------------
# Phase 0: analysis as the root's notes, first intents
# ----------------------------------------------------------------------------------------------------------
ANALYSIS = """log_softmax over the last dim: y = x - max(x) - log(sum(exp(x - max(x)))), fp32 in and out. Per element
~1 exp and ~5 other flops; the minimum traffic is 8 B/elt (one read, one write). 8192x32768: 268M elts, 2.15 GB,
floor ~0.51 ms at the measured ~4.2 TB/s copy ceiling; 32768x4096: 1.07 GB, ~0.26 ms; held-out 4096x50257 (ragged,
not a power of two): 1.65 GB, ~0.39 ms. Intensity ~0.6 FLOP/B, far below the fp32 ridge: memory-bound. The SFU
(~4 T exp/s) has ~8x headroom over the ~0.5 T exp/s the roofline needs, so 2 exps/elt are affordable unless
they sit on the critical path between load and store.
Regimes: short rows (4096 = 16 KB) fit in registers of one CTA with several CTAs/SM (plenty of bytes in
flight); long rows (32768 = 128 KB) fit in registers only with 16-32 warps at 1 CTA/SM, so HBM may idle during
the two block reductions and the tail of each row; 50257 (196 KB) cannot sit in registers and needs a chunked
path with a second read, ideally from L2 (132 SMs x 2 rows x 200 KB ~ 53 MB ~ the 50 MB L2, tight).
Eager PyTorch caches a row in shared memory only when it fits the default 48 KB (N <= ~12K floats): one read at
N=4096, but 2-3 reads at N=32768 and 50257. Expected: ~1.5x over eager at 8192x32768, ~1.0-1.1x at
32768x4096. torch.compile (inductor looped/persistent reductions) is likely 2 reads at 32768, 1 at 4096.
Unsure: whether 1 CTA/SM at N=32768 leaves HBM idle enough that a chunked online path with several CTAs/SM
and an L2-hitting re-read beats the register path; whether eviction/streaming hints matter under an
L2-flushed protocol; the right warp count per row length (spills at 16 warps x 64 elts/thread?)."""

INTENTS = [
    dict(title="keep the whole row in registers: one program per row, one HBM read and one write",
         rationale="Cuts HBM bytes to the 8 B/elt minimum: eager reads rows > ~12K floats 2-3 times. One program "
                   "per row, BLOCK_N = next_pow2(N), masked; warps scaled with N so each thread holds 16-64 "
                   "elements. Rows above MAX_REG_N (held-out 50257) fall back to a chunked online kernel.",
         priority=0.9, difficulty=2, expected_speedup=1.3,
         notes="Refuted if 8192x32768 is not >= 1.3x over eager (then 1 CTA/SM bubbles or spills dominate: check "
               "registers/spills) or if 32768x4096 is slower than eager.",
         params={"MAX_REG_N": 32768, "WARPS_4K": [4, 8], "WARPS_32K": [16, 32]}),
    dict(title="chunked online-softmax for long rows (N > 8192): per-lane running max/sum, then an L2-hitting write pass",
         rationale="At N=32768 the register path runs 1 CTA/SM, so HBM idles during reductions and row tails. A "
                   "chunked kernel (CHUNK_N elts in flight, ~60 regs/thread) fits 2-4 CTAs/SM that overlap each "
                   "other's bubbles; its re-read should hit L2 if few rows are in flight (and more so if the write "
                   "pass walks the row backwards, most recent chunks first). Trades a re-read (L2) for occupancy.",
         priority=0.7, difficulty=3, expected_speedup=1.05,
         notes="Builds on the register kernel's best (short rows unchanged). Refuted if 8192x32768 is slower than "
               "the register path (the re-read misses L2: DRAM bytes > 1.3x the minimum in ncu).",
         params={"MAX_REG_N": 8192, "CHUNK_N": [4096, 8192], "CHUNK_WARPS": [8, 16], "REVERSE_WRITE": [True, False]}),
    dict(title="streaming cache hints: evict_first loads and .cs (streaming) stores",
         rationale="Nothing is reused across rows: loads and stores marked streaming leave L2 to the lines that "
                   "are reused (the chunked path's re-read) and may lower write-back contention. Instruction-level "
                   "change only.",
         priority=0.5, difficulty=1, expected_speedup=1.02,
         notes="Refuted if no workload gains beyond noise; under the L2-flushed protocol the effect may be nil.",
         params={"HINTS": ["both", "loads", "stores"]}),
    dict(title="several short rows per program as a [ROWS, BLOCK_N] register tile",
         rationale="For N=4096 one row is 16 KB per program; 2-4 rows per program put more bytes in flight per "
                   "CTA and amortise the reduction barriers and program start-up.",
         priority=0.3, difficulty=2, expected_speedup=1.02,
         notes="The bank's rmsnorm search saw no gain (1.01x) from this; refuted if 32768x4096 gains < 2%.",
         params={"ROWS": [2, 4]}),
    dict(title="persistent grid: one program per SM slot looping over rows",
         rationale="Removes per-program launch and start-up cost and the last-wave tail (8192 rows at 1 CTA/SM = "
                   "62.06 waves); with a row loop the compiler can issue the next row's loads before the current "
                   "row's store drains.",
         priority=0.35, difficulty=3, expected_speedup=1.04,
         notes="Refuted if neither workload gains 3%: launch and tail were not the cost."),
    dict(title="fuse the max and sum reductions into one (max, sum) tl.reduce with a custom combine",
         rationale="One cross-warp reduction (shared memory + barrier) per row instead of two, shortening the "
                   "bubble between a row's load and its store at N=32768 where 1 CTA/SM cannot hide it.",
         priority=0.25, difficulty=2, expected_speedup=1.03,
         notes="Costs ~2 exps per element inside the combine; refuted if slower (SFU on the critical path)."),
]

r = call("get_tree", {"search": S, "format": "json"})
root_id = None


def tree_nodes(t):
    if isinstance(t, dict) and isinstance(t.get("tree"), dict) and isinstance(t["tree"].get("nodes"), list):
        return t["tree"]["nodes"]
    return []


if isinstance(r, dict) and "error" not in r:
    root_id = (r.get("tree") or {}).get("root_id")
    if root_id is None:
        for n in tree_nodes(r):
            if isinstance(n, dict) and n.get("parent_id") is None and n.get("id"):
                root_id = n["id"]
                break
if root_id is None:
    root_id = 15  # the tree shown in round 0: '#15 root'
say("root id", root_id)

r = call("propose_intents", {"search": S, "intents": INTENTS, "author": AUTHOR,
                             "reason": "First intents from the analysis (memory traffic, occupancy, cache policy, "
                                       "per-program work, launch/tail, reduction count)."})
ids = {}
created = (r.get("result") or find_key(r, ["ids", "node_ids", "created", "intents"])) if isinstance(r, dict) else None
if isinstance(created, list):
    for spec, c in zip(INTENTS, created):
        if isinstance(c, dict):
            ids[spec["title"]] = c.get("id") or c.get("node_id")
        elif isinstance(c, int):
            ids[spec["title"]] = c
say("intent ids", json.dumps(ids))

r = call("edit_tree", {"search": S, "author": AUTHOR, "reason": "analysis of the task (root notes)",
                       "edits": [{"op": "update", "node_id": root_id, "notes": ANALYSIS}]})

# Fall back to the tree if propose_intents did not name the ids
if len(ids) < len(INTENTS):
    t = call("get_tree", {"search": S, "format": "json"})
    nodes = tree_nodes(t)
    if nodes:
        for n in nodes:
            if isinstance(n, dict):
                for spec in INTENTS:
                    if n.get("title") == spec["title"]:
                        ids[spec["title"]] = n.get("id")
    say("intent ids (from tree)", json.dumps(ids))

I_REG, I_CHUNK, I_HINT = (ids.get(INTENTS[0]["title"]), ids.get(INTENTS[1]["title"]), ids.get(INTENTS[2]["title"]))


def claim(node):
    r = call("select_action", {"search": S, "node_id": node})
    return isinstance(r, dict) and "error" not in r


# ----------------------------------------------------------------------------------------------------------
# Intent 1: whole row in registers; warps per row length
# ----------------------------------------------------------------------------------------------------------
rec1 = []
if I_REG and claim(I_REG):
    c1 = dict(DEFAULT)
    rec1.append(bench(I_REG, c1, "row in registers, 8 warps at 4K, 16 warps at 32K", "1a"))
    c2 = dict(DEFAULT, WARPS_4K=4, WARPS_32K=32)
    rec1.append(bench(I_REG, c2, "row in registers, 4 warps at 4K, 32 warps at 32K", "1b"))
    # 1c: per row length, keep the faster warp count; step further in the winning direction where one of them
    # was an extreme of what was tried, else combine.
    a, b = rec1[0], rec1[1]
    c3 = None
    if a["correct"] and b["correct"]:
        ta4, tb4 = wl_time(a, "32768x4096"), wl_time(b, "32768x4096")
        ta32, tb32 = wl_time(a, "8192x32768"), wl_time(b, "8192x32768")
        if None not in (ta4, tb4, ta32, tb32):
            w4 = 8 if ta4 <= tb4 else 4
            w32 = 16 if ta32 <= tb32 else 32
            if (w4, w32) == (8, 16):
                c3 = dict(DEFAULT, WARPS_4K=16, WARPS_32K=16)  # 1a won both: try more warps at 4K
            elif (w4, w32) == (4, 32):
                c3 = dict(DEFAULT, WARPS_4K=2, WARPS_32K=32)  # 1b won both: try fewer warps at 4K
            else:
                c3 = dict(DEFAULT, WARPS_4K=w4, WARPS_32K=w32)  # mixed: combine the winners
    elif a["correct"] or b["correct"]:
        good = a if a["correct"] else b
        c3 = dict(good["cfg"], WARPS_4K=16 if good["cfg"]["WARPS_4K"] == 8 else 8)
    else:
        c3 = dict(DEFAULT, WARPS_4K=4, WARPS_32K=16)  # both failed: the most conservative settings
    if c3 is not None:
        rec1.append(bench(I_REG, c3, "row in registers, %d warps at 4K, %d warps at 32K" % (c3["WARPS_4K"],
                                                                                           c3["WARPS_32K"]), "1c"))
best1 = best_of(rec1)
say("intent 1 best:", fmt(best1))
base_cfg = dict(best1["cfg"]) if best1 else dict(DEFAULT)

edits = []
new = []
if best1 and I_CHUNK:
    edits.append({"op": "update", "node_id": I_CHUNK, "base_attempt_id": best1["attempt"],
                  "reason": "build on the register kernel's best"})
if best1 and I_HINT:
    edits.append({"op": "update", "node_id": I_HINT, "base_attempt_id": best1["attempt"],
                  "reason": "build on the best so far"})
summary1 = "; ".join(fmt(x) for x in rec1)
if best1 and I_REG:
    new.append(dict(title="tune warps per row length for the register kernel (8K, 16K buckets untested)",
                    rationale="Round 1 tried only the 4K and 32K buckets of the warp table; the held-out and "
                              "other shapes use the others. Measured: " + summary1[:1500],
                    priority=0.3, difficulty=1, expected_speedup=1.02, parent_id=I_REG,
                    base_attempt_id=best1["attempt"],
                    notes="Refuted if no bucket gains beyond noise."))
if I_REG:
    r = call("finish_intent", {"search": S, "node_id": I_REG, "author": AUTHOR, "edits": edits, "new_intents": new,
                               "reason": ("Register kernel: " + summary1)[:1990]})
    if isinstance(r, dict) and "error" in r:
        r = call("finish_intent", {"search": S, "node_id": I_REG, "author": AUTHOR})

# ----------------------------------------------------------------------------------------------------------
# Intent 2: chunked online path for rows > 8192 (short rows keep the best register path)
# ----------------------------------------------------------------------------------------------------------
rec2 = []
if I_CHUNK and claim(I_CHUNK):
    c1 = dict(base_cfg, MAX_REG_N=8192, CHUNK_N=8192, CHUNK_WARPS=16, REVERSE=True)
    rec2.append(bench(I_CHUNK, c1, "chunked online path above 8192, CHUNK 8192 x 16 warps, reverse write pass", "2a"))
    c2 = dict(base_cfg, MAX_REG_N=8192, CHUNK_N=4096, CHUNK_WARPS=8, REVERSE=True)
    rec2.append(bench(I_CHUNK, c2, "chunked online path above 8192, CHUNK 4096 x 8 warps, reverse write pass", "2b"))
    w = best_of([x for x in rec2 if wl_time(x, "8192x32768") is not None]) or best_of(rec2)
    if w is not None and wl_time(rec2[0], "8192x32768") is not None and wl_time(rec2[1], "8192x32768") is not None:
        w = rec2[0] if wl_time(rec2[0], "8192x32768") <= wl_time(rec2[1], "8192x32768") else rec2[1]
    wc = dict(w["cfg"]) if w else dict(c1)
    c3 = dict(wc, REVERSE=False)  # ablation: does the reverse write pass matter?
    rec2.append(bench(I_CHUNK, c3, "chunked online path above 8192, CHUNK %d x %d warps, forward write pass" % (
        c3["CHUNK_N"], c3["CHUNK_WARPS"]), "2c"))
best2 = best_of(rec2)
say("intent 2 best:", fmt(best2))

# Best chunked configuration by the long-row time: the fallback used for rows > MAX_REG_N from now on
chunk_ok = [x for x in rec2 if x["correct"]]
best_chunk = None
if chunk_ok:
    timed = [x for x in chunk_ok if wl_time(x, "8192x32768") is not None]
    best_chunk = min(timed, key=lambda x: wl_time(x, "8192x32768")) if timed else chunk_ok[0]
overall = best_of(rec1 + rec2)
say("best so far:", fmt(overall))
base3 = dict(overall["cfg"]) if overall else dict(DEFAULT)
if best_chunk is not None and base3.get("MAX_REG_N", 32768) > 8192:
    # keep the register path for <= MAX_REG_N but use the measured-best chunked settings for longer rows
    base3.update(CHUNK_N=best_chunk["cfg"]["CHUNK_N"], CHUNK_WARPS=best_chunk["cfg"]["CHUNK_WARPS"],
                 REVERSE=best_chunk["cfg"]["REVERSE"])

edits = []
new = []
summary2 = "; ".join(fmt(x) for x in rec2)
if overall and I_HINT:
    edits.append({"op": "update", "node_id": I_HINT, "base_attempt_id": overall["attempt"],
                  "reason": "build on the best so far"})
reg32 = wl_time(best1, "8192x32768") if best1 else None
chk32 = wl_time(best_chunk, "8192x32768") if best_chunk else None
if I_CHUNK and reg32 is not None and chk32 is not None:
    if chk32 < reg32:
        new.append(dict(title="tune the chunked long-row path (chunk, warps, MAX_REG_N threshold 16384)",
                        rationale="The chunked path beat the register path at N=32768 (%.4g vs %.4g): occupancy "
                                  "mattered more than the re-read. Next: where the threshold should sit." % (
                                      chk32, reg32),
                        priority=0.45, difficulty=1, expected_speedup=1.03, parent_id=I_CHUNK,
                        base_attempt_id=best_chunk["attempt"], notes="Refuted if no setting gains beyond noise."))
    else:
        new.append(dict(title="overlap the long row's reductions: split the register row into two half-row programs per SM",
                        rationale="The register path beat the chunked one at N=32768 (%.4g vs %.4g): the re-read "
                                  "costs more than the 1 CTA/SM bubble. Halving the per-program footprint (2 programs "
                                  "x 16K per row, combining (max, sum) through a tiny workspace and a second light "
                                  "kernel) would allow 2 CTAs/SM without a re-read." % (reg32, chk32),
                        priority=0.3, difficulty=4, expected_speedup=1.05, parent_id=I_REG,
                        base_attempt_id=best1["attempt"],
                        notes="Refuted if the combine kernel's launch and traffic outweigh the overlap."))
if I_CHUNK:
    r = call("finish_intent", {"search": S, "node_id": I_CHUNK, "author": AUTHOR, "edits": edits, "new_intents": new,
                               "reason": ("Chunked long-row path: " + summary2)[:1990]})
    if isinstance(r, dict) and "error" in r:
        r = call("finish_intent", {"search": S, "node_id": I_CHUNK, "author": AUTHOR})

# ----------------------------------------------------------------------------------------------------------
# Intent 3: streaming cache hints on the best so far
# ----------------------------------------------------------------------------------------------------------
rec3 = []
if I_HINT and claim(I_HINT):
    doc3 = "best so far (MAX_REG_N %d, chunk %d x %d, reverse %s) + cache hints: %%s" % (
        base3["MAX_REG_N"], base3["CHUNK_N"], base3["CHUNK_WARPS"], base3["REVERSE"])
    base_att = overall["attempt"] if overall else None

    def bench3(cfg, label):
        src = make_source(cfg, doc3 % cfg["HINTS"])
        args = {"search": S, "node_id": I_HINT, "candidate": {"source": src, "language": "triton"},
                "author": AUTHOR}
        if base_att and cfg["HINTS"] != "none":
            args["base_attempt_id"] = base_att
        rec = summarize(label, call("benchmark", args))
        rec["cfg"] = dict(cfg)
        return rec

    rec3.append(bench3(dict(base3, HINTS="both"), "3a"))
    rec3.append(bench3(dict(base3, HINTS="stores"), "3b"))
    # 3c: loads only, completing the ablation (both / stores only / loads only)
    rec3.append(bench3(dict(base3, HINTS="loads"), "3c"))
best3 = best_of(rec3)
say("intent 3 best:", fmt(best3))
summary3 = "; ".join(fmt(x) for x in rec3)
overall = best_of(rec1 + rec2 + rec3)
if I_HINT:
    new = [dict(title="ncu-guided check of the best kernel: DRAM throughput and stalls at N=32768",
                rationale="Best so far: %s. Profile it to see how far from the ~4.2 TB/s ceiling each workload "
                          "is and which stall dominates before choosing the next structural change." % fmt(overall),
                priority=0.4, difficulty=1, expected_speedup=1.0,
                base_attempt_id=overall["attempt"] if overall else None,
                notes="Measurement intent: refuted (nothing to gain) if DRAM throughput is already >= 90% of peak.")]
    r = call("finish_intent", {"search": S, "node_id": I_HINT, "author": AUTHOR, "edits": [], "new_intents": new,
                               "reason": ("Cache hints: " + summary3)[:1990]})
    if isinstance(r, dict) and "error" in r:
        r = call("finish_intent", {"search": S, "node_id": I_HINT, "author": AUTHOR})

say("ALL ATTEMPTS:")
for x in LOG:
    say("  ", fmt(x), "| correct" if x["correct"] else "| NOT correct", x.get("status"))

# ----------------------------------------------------------------------------------------------------------
# Final evaluation and the tree
# ----------------------------------------------------------------------------------------------------------
r = call("final_evaluation", {"search": S, "top_k": 3})
call("get_tree", {"search": S, "format": "text", "budget_chars": 12000})
