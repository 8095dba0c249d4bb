# Round 2: reflect on round 1, intent C (long rows: register prefix + tail re-read), intent D (#11: several short
# rows per program), then final_evaluation. Output kept compact (round 1's output was too large to come back).
import json, math, re, io, contextlib

S = "softmax"
AUTHOR = "llm:claude"
SEED_ATT, A1_ATT = 8, 9            # attempts from round 1
NODE_A, NODE_B = 9, 10             # intents of round 1

def q(tool, args, show_text=True):
    """call() with its printout cut to the text part (before the structured dump)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = call(tool, args)
    out = buf.getvalue()
    cut = out.find("STRUCTURED")
    text = out[:cut] if cut >= 0 else out[:3000]
    if show_text:
        # drop the echo of long arguments (sources) from the first line
        lines = text.splitlines()
        if lines and lines[0].startswith(">>> call"):
            lines[0] = lines[0][:160]
        print("\n".join(lines)[:4000])
    return r

def medians(r):
    out = {}
    ev = (r or {}).get("evaluation") or {}
    for t in ev.get("timings") or []:
        if isinstance(t, dict) and t.get("workload") and isinstance(t.get("median_us"), (int, float)):
            out[t["workload"]] = t["median_us"]
    return out

def set_const(src, name, value):
    new, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", src, flags=re.M)
    assert n == 1, name
    return new

def bench(node, src, label, base):
    args = {"search": S, "node_id": node, "author": AUTHOR, "base_attempt_id": base,
            "candidate": {"source": src, "language": "triton"}}
    r = q("benchmark", args)
    att = r.get("attempt_id") if isinstance(r, dict) else None
    print(f"=== {label}: attempt {att}; medians {medians(r)}; error {r.get('error') if isinstance(r, dict) else r}")
    return r, att

def med(r, wl):
    return medians(r).get(wl, float("inf"))

SRC_C = r'''"""Row softmax, whole row in registers for N <= MAX_REG_N (one HBM read, one write per element); longer rows
keep a LONG_REG_N-column prefix in registers and stream only the tail twice (online max/sum over the tail on
the first read, kept in L2 with evict_last; re-read and written on the second), so the extra traffic is the
tail's re-read only, instead of the whole row's.
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"MAX_REG_N": [8192, 16384, 32768], "WARPS_4K": [4, 8, 16], "WARPS_8K": [8, 16], "WARPS_16K": [8, 16, 32], "WARPS_32K": [16, 32], "LONG_REG_N": [8192, 16384, 32768], "TAIL_N": [1024, 2048, 4096], "LONG_WARPS": [8, 16, 32]}
MAX_REG_N = 32768
WARPS_4K = 8
WARPS_8K = 8
WARPS_16K = 16
WARPS_32K = 16
LONG_REG_N = 32768
TAIL_N = 2048
LONG_WARPS = 16


@triton.jit
def _softmax_row_reg(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    row_max = tl.max(x, axis=0)
    e = tl.exp(x - row_max)
    inv = 1.0 / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, e * inv, mask=mask)


@triton.jit
def _softmax_row_hybrid(x_ptr, y_ptr, n_cols, stride_x, stride_y, REG_N: tl.constexpr, TAIL_N: tl.constexpr):
    # requires n_cols > REG_N: the first REG_N columns stay in registers, the tail is read twice
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, REG_N)
    xr = tl.load(x_row + cols)
    tcols = tl.arange(0, TAIL_N)
    m = tl.full([TAIL_N], float("-inf"), tl.float32)
    s = tl.zeros([TAIL_N], tl.float32)
    for start in range(REG_N, n_cols, TAIL_N):
        x = tl.load(x_row + start + tcols, mask=start + tcols < n_cols, other=float("-inf"), eviction_policy="evict_last")
        m_new = tl.maximum(m, x)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_use) + tl.exp(x - m_use)
        m = m_new
    row_max = tl.maximum(tl.max(xr, axis=0), tl.max(m, axis=0))
    e = tl.exp(xr - row_max)
    inv = 1.0 / (tl.sum(e, axis=0) + tl.sum(s * tl.exp(m - row_max), axis=0))
    tl.store(y_row + cols, e * inv)
    for start in range(REG_N, n_cols, TAIL_N):
        mask = start + tcols < n_cols
        x = tl.load(x_row + start + tcols, mask=mask, other=float("-inf"))
        tl.store(y_row + start + tcols, tl.exp(x - row_max) * inv, mask=mask)


def _reg_warps(block):
    if block <= 2048:
        return 4
    if block <= 4096:
        return WARPS_4K
    if block <= 8192:
        return WARPS_8K
    if block <= 16384:
        return WARPS_16K
    return WARPS_32K


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        if n <= MAX_REG_N:
            block = triton.next_power_of_2(n)
            _softmax_row_reg[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=_reg_warps(block))
        else:
            reg_n = min(LONG_REG_N, triton.next_power_of_2(n) // 2)
            _softmax_row_hybrid[(m,)](x, y, n, x.stride(0), y.stride(0), REG_N=reg_n, TAIL_N=TAIL_N, num_warps=LONG_WARPS)
        return y
'''

TILE_SRC = '@triton.jit\ndef _softmax_rows_tile(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):\n    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)\n    cols = tl.arange(0, BLOCK_N)\n    col_ok = (cols < n_cols)[None, :]\n    mask = (rows < n_rows)[:, None] & col_ok\n    rows64 = tl.minimum(rows, n_rows - 1).to(tl.int64)  # rows past the end re-read the last row; their stores are masked\n    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=col_ok, other=float("-inf"))\n    row_max = tl.max(x, axis=1)\n    e = tl.exp(x - row_max[:, None])\n    inv = 1.0 / tl.sum(e, axis=1)\n    tl.store(y_ptr + rows64[:, None] * stride_y + cols[None, :], e * inv[:, None], mask=mask)\n\n\n'

def SRC_C3_TO_D(src):
    s = src.replace("@triton.jit\ndef _softmax_row_hybrid", TILE_SRC + "@triton.jit\ndef _softmax_row_hybrid")
    s = s.replace('"LONG_WARPS": [8, 16, 32]}', '"LONG_WARPS": [8, 16, 32], "SHORT_N": [0, 2048, 4096], "ROWS": [2, 4, 8], "TILE_WARPS": [4, 8, 16]}')
    s = re.sub(r"^(LONG_WARPS = .*)$", r"\1\nSHORT_N = 4096\nROWS = 2\nTILE_WARPS = 8", s, count=1, flags=re.M)
    s = s.replace("""        if n <= MAX_REG_N:
            block""", """        if n <= SHORT_N:
            block = triton.next_power_of_2(n)
            _softmax_rows_tile[(triton.cdiv(m, ROWS),)](x, y, m, n, x.stride(0), y.stride(0), ROWS=ROWS, BLOCK_N=block, num_warps=TILE_WARPS)
        elif n <= MAX_REG_N:
            block""")
    s = s.replace('"""Row softmax, whole row', '"""Row softmax; rows of up to SHORT_N columns go ROWS at a time through a [ROWS, BLOCK_N] register tile.\nOtherwise: whole row', 1)
    assert "_softmax_rows_tile[" in s and "SHORT_N = 4096" in s
    return s

# ---------------- reflection on round 1 ----------------
REASON1 = ("Round 1. #9 register-resident row (attempt 9): 516.3 / 264.5 us, 1.575x vs eager, 1.505x over the seed "
           "(predicted 1.40x): the seed's 3 passes cost it on 128 KB rows (1017 us, re-reads from HBM). 8192x32768 runs at "
           "4.16 TB/s (~99% of the 4.20 TB/s measured copy ceiling) with 1 CTA/SM (103 regs, 25% occupancy): occupancy is "
           "not the limiter; 32768x4096 at 4.06 TB/s (~97%). Warps 4 vs 8 (4K) and 16 vs 32 (32K) within noise. "
           "evict_first on load+store cost 7-8% on both shapes (attempt 11). #10 online two-pass: best 717.6 / 307.5 us "
           "(attempt 13); evict_last on the first read (attempt 14) cut 128 KB rows to 579.5 us (re-read from L2) but hurt "
           "16 KB rows (368.5 us). The search shapes are at the copy ceiling; what is left is the path for rows longer than "
           "the register budget (the task: rows up to ~50k columns), where #9 falls back to an unhinted online two-pass.")
edits = [
    {"op": "update", "node_id": NODE_A, "notes": "Measured: 516.3 us (8192x32768, 4.16 TB/s, ~99% of copy ceiling) / 264.5 us (32768x4096, ~97%). 103 regs at 16 warps, 55-ish at 32 warps, no spills; warps choice within noise. evict_first on the single pass: -7..8%. Long rows (N>32768) use the unhinted online fallback (measured ~69% of roofline on 32K rows as attempt 13)."},
    {"op": "update", "node_id": NODE_B, "notes": "Measured: 777.5/330.4 (4096 chunk, 8 warps), 717.6/307.5 (8192, 16 warps), with evict_last first read + evict_first re-read/store 579.5/368.5. Re-read from L2 works on 128 KB rows only with the evict_last hint; loses to #9 everywhere. Use only where a row cannot stay in registers."},
    {"op": "prune", "node_id": 14, "reason": "measured inside #9 and #10: evict_first on a single pass -7%; evict_last on a two-pass first read +19% on 128 KB rows, -20% on 16 KB rows. Folded into the long-row intent."},
    {"op": "update", "node_id": 12, "priority": 0.2, "notes": "8192x32768 is already ~99% of the copy ceiling with 1 CTA/SM: little left to hide. Only worth it for long rows that cannot stay in registers."},
    {"op": "update", "node_id": 13, "priority": 0.15, "notes": "Needs cross-CTA exchange (global partials + a second read); the register-prefix approach covers long rows with less traffic. Keep as a fallback idea."},
    {"op": "update", "node_id": 11, "priority": 0.45, "notes": "Headroom on 32768x4096 is ~3% (264.5 us vs ~255 us at 4.2 TB/s). Bank: the same idea gave 1.01x on rmsnorm. Expect no gain beyond noise; cheap to confirm."},
]
r = q("edit_tree", {"search": S, "author": AUTHOR, "reason": REASON1, "edits": edits}, show_text=False)
if isinstance(r, dict) and "error" in r:
    print("EDIT ERROR", r["error"])

C_INTENT = {
    "title": "rows beyond the register budget: keep a prefix in registers, re-read only the tail",
    "rationale": "For N > 32768 the row cannot stay in registers. Keep the first LONG_REG_N columns in registers and run the online max/sum only over the tail (first read evict_last), then write the prefix from registers and re-read just the tail from L2. Extra traffic = the tail's re-read (35% of a 50k row) instead of the whole row; keeps 1-2 CTAs/SM as #9 does.",
    "priority": 0.75, "difficulty": 3, "expected_speedup": 1.0,
    "notes": "The search shapes take #9's path unchanged (expect 1.0x there). Measured by forcing the hybrid onto 32K rows (prefix 16384, tail 16384): refuted if that is no better than the two-pass with evict_last (579.5 us, attempt 14).",
    "parent_id": NODE_A, "base_attempt_id": A1_ATT,
    "params": {"LONG_REG_N": 32768, "TAIL_N": 2048, "LONG_WARPS": 32},
}
pi = q("propose_intents", {"search": S, "author": AUTHOR, "reason": "follow-up of #9 from round 1's reflection", "intents": [C_INTENT]})
C_ID = None
if isinstance(pi, dict) and isinstance(pi.get("result"), list) and pi["result"]:
    C_ID = pi["result"][0].get("id")
print("C_ID", C_ID, (pi or {}).get("error"))

# ---------------- intent C ----------------
sel = q("select_action", {"search": S, "node_id": C_ID}, show_text=False)
print("select C:", (sel or {}).get("error"), "base", (sel or {}).get("base_attempt_id"), "next", (sel or {}).get("next"))

# C1 / C2: experiments forcing the hybrid onto 8192x32768 (prefix 16384 + tail 16384); 32768x4096 keeps #9's path
exp = set_const(set_const(SRC_C, "MAX_REG_N", 16384), "LONG_REG_N", 16384)
c1, c1_att = bench(C_ID, set_const(exp, "LONG_WARPS", 16), "C1 forced hybrid 16K prefix, 16 warps (2 CTA/SM)", A1_ATT)
c2, c2_att = bench(C_ID, set_const(exp, "LONG_WARPS", 32), "C2 forced hybrid 16K prefix, 32 warps (1 CTA/SM)", A1_ATT)
W = "8192x32768"
m1, m2 = med(c1, W), med(c2, W)
if m2 <= m1:
    final_cfg = {"LONG_REG_N": 32768, "LONG_WARPS": 32}   # 1 CTA/SM with a small tail: 55 regs, no spills (compile_kernel)
else:
    final_cfg = {"LONG_REG_N": 16384, "LONG_WARPS": 16}   # 2 CTAs/SM mattered more than the tail's size
print("C3 long-row config:", final_cfg, "from C1", m1, "C2", m2)
src_c3 = SRC_C
for k, v in final_cfg.items():
    src_c3 = set_const(src_c3, k, v)
c3, c3_att = bench(C_ID, src_c3, "C3 #9 + hybrid long-row path (search shapes: #9's path)", A1_ATT)

note_c = (f"Forced onto 8192x32768 (prefix 16384, tail 16384 re-read, evict_last): 16 warps {m1:.1f} us, 32 warps {m2:.1f} us "
          f"vs full-register 516.3 and two-pass+evict_last 579.5 (attempt 14). 32768x4096 unchanged. Final form (attempt {c3_att}): "
          f"N<=32768 as #9, longer rows hybrid {final_cfg}; measured {medians(c3)} on the search shapes (same path as #9).")
fc = q("finish_intent", {"search": S, "node_id": C_ID, "reason": "C measured",
                         "edits": [{"op": "update", "node_id": C_ID, "notes": note_c}]}, show_text=False)
print("finish C:", (fc or {}).get("error") or (fc or {}).get("next") or (fc.get("loop") or {}).get("next"))

# ---------------- intent D (#11): several short rows per program, on top of C3 ----------------
D_ID = 11
base_d = c3_att if c3_att and (c3 or {}).get("evaluation", {}).get("status") == "ok" else A1_ATT
# #11 hangs under the root, whose code is the seed: re-base it on the code it will modify
r = q("edit_tree", {"search": S, "author": AUTHOR, "reason": "#11 builds on the best code, not on the seed",
                    "edits": [{"op": "move", "node_id": D_ID, "parent_id": C_ID if base_d == c3_att else NODE_A},
                              {"op": "update", "node_id": D_ID, "base_attempt_id": base_d}]}, show_text=False)
print("re-base #11:", (r or {}).get("error") or "ok")
sel = q("select_action", {"search": S, "node_id": D_ID}, show_text=False)
print("select D:", (sel or {}).get("error"), "base", (sel or {}).get("base_attempt_id"), "next", (sel or {}).get("next"))
src_d0 = SRC_C3_TO_D(src_c3 if base_d == c3_att else SRC_C)
d1, d1_att = bench(D_ID, set_const(set_const(src_d0, "ROWS", 2), "TILE_WARPS", 8), "D1 2 rows x 4096 / 8 warps", base_d)
d2, d2_att = bench(D_ID, set_const(set_const(src_d0, "ROWS", 4), "TILE_WARPS", 16), "D2 4 rows x 4096 / 16 warps", base_d)
W4 = "32768x4096"
ref4 = 264.5
best_d = min(med(d1, W4), med(d2, W4))
d3 = None
if best_d < ref4 * 0.99:
    rows3, w3 = (8, 16) if med(d2, W4) < med(d1, W4) else (2, 4)
    d3, d3_att = bench(D_ID, set_const(set_const(src_d0, "ROWS", rows3), "TILE_WARPS", w3), f"D3 {rows3} rows / {w3} warps", base_d)
note_d = (f"32768x4096: 2 rows/8 warps {med(d1, W4):.1f} us, 4 rows/16 warps {med(d2, W4):.1f} us"
          + (f", D3 {med(d3, W4):.1f} us" if d3 else "") + f" vs one row per program 264.5 us (attempt 9).")
fd = q("finish_intent", {"search": S, "node_id": D_ID, "reason": "D measured",
                         "edits": [{"op": "update", "node_id": D_ID, "notes": note_d}]}, show_text=False)
print("finish D:", (fd or {}).get("error") or (fd or {}).get("next"))

# ---------------- final evaluation ----------------
q("select_action", {"search": S, "claim": False})
fe = q("final_evaluation", {"search": S, "top_k": 5}, show_text=False)
if not isinstance(fe, dict) or "error" in fe:
    print("FINAL ERROR", fe)
else:
    for k in ("best_attempt_id", "best_lost", "chosen_by", "result_rule", "workloads", "skipped", "next"):
        print(f"FINAL {k}: {json.dumps(fe.get(k), default=str)[:1500]}")
    for row in fe.get("rows") or []:
        print(f"ROW attempt {row.get('attempt_id')} node {row.get('node_id')} status {row.get('status')} "
              f"vs eager {row.get('speedup_vs_eager')} vs compile {row.get('speedup_vs_compile')} device {row.get('device')} pure {row.get('pure_pytorch')}")
        for line in str(row.get("summary") or "").splitlines():
            if any(w in line for w in ("median", "correct", "incorrect", "geomean", "error", "flag", "status:")):
                print("   ", line[:400])
q("get_tree", {"search": S, "format": "text", "budget_chars": 5000})
