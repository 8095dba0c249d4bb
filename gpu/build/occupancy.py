"""Theoretical occupancy from a kernel's resources: resident blocks and warps per SM, and what limits them.

The rule is CUDA's occupancy calculator (cuda_occupancy.h): registers are allocated per warp in units
of 256 and split over the SM's four sub-partitions; shared memory per block is the kernel's own plus
1 KiB the driver reserves, in 128-byte units; warps and blocks per SM are hard caps. Nothing here needs
a GPU: the numbers are per architecture, for the kernel's compiled resources and its block size.
"""

from __future__ import annotations

from dataclasses import dataclass

from ksearch.worldmodel.models import Diagnostic, KernelOccupancy, KernelResources

WARP = 32


@dataclass(frozen=True)
class SmLimits:
    regs_per_sm: int
    regs_per_block: int
    max_regs_per_thread: int
    smem_per_sm: int  # the largest carveout: the driver picks one that reaches the best occupancy
    smem_per_block: int  # opt-in maximum a block may ask for
    smem_reserved_per_block: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int = 1024
    reg_unit: int = 256  # registers are allocated per warp in these units
    smem_unit: int = 128
    sub_partitions: int = 4


# H100/H200 (sm_90): 64 K registers, 228 KiB shared memory per SM (227 KiB per block), 64 warps, 32 blocks.
_LIMITS: dict[str, SmLimits] = {
    "sm_90": SmLimits(65536, 65536, 255, 228 * 1024, 227 * 1024, 1024, 64, 32),
    "sm_80": SmLimits(65536, 65536, 255, 164 * 1024, 163 * 1024, 1024, 64, 32),
    "sm_89": SmLimits(65536, 65536, 255, 100 * 1024, 99 * 1024, 1024, 48, 24),
    "sm_86": SmLimits(65536, 65536, 255, 100 * 1024, 99 * 1024, 1024, 48, 16),
}


def limits_for(arch: str) -> SmLimits | None:
    """Limits of `arch` ("sm_90", "sm_90a", "90"), None for one this table does not know."""
    a = arch.lower().removeprefix("sm_").rstrip("a")
    return _LIMITS.get(f"sm_{a}")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(
    arch: str, registers: int | None, shared_bytes: int | None, threads_per_block: int | None
) -> KernelOccupancy | None:
    """Resident blocks/warps per SM for a block of `threads_per_block` threads using `registers` per thread
    and `shared_bytes` (static + dynamic) of shared memory; None when an input or the arch is unknown."""
    lim = limits_for(arch)
    if lim is None or registers is None or threads_per_block is None or threads_per_block < 1:
        return None
    smem = shared_bytes or 0
    warps = -(-threads_per_block // WARP)
    caps: dict[str, int] = {"warps": lim.max_warps_per_sm // warps, "blocks": lim.max_blocks_per_sm}
    if threads_per_block > lim.max_threads_per_block:
        caps["warps"] = 0
    regs_per_warp = _round_up(max(registers, 1) * WARP, lim.reg_unit)
    if regs_per_warp * warps > lim.regs_per_block or registers > lim.max_regs_per_thread:
        caps["registers"] = 0
    else:
        per_partition = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
        caps["registers"] = per_partition * lim.sub_partitions // warps
    smem_block = _round_up(smem + lim.smem_reserved_per_block, lim.smem_unit)
    if smem > lim.smem_per_block:
        caps["shared memory"] = 0
    else:
        caps["shared memory"] = lim.smem_per_sm // smem_block
    blocks = min(caps.values())
    limiter = " and ".join(k for k, v in caps.items() if v == blocks)
    return KernelOccupancy(
        arch=arch if arch.startswith("sm_") else f"sm_{arch}",
        threads_per_block=threads_per_block,
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        max_warps_per_sm=lim.max_warps_per_sm,
        occupancy=round(blocks * warps / lim.max_warps_per_sm, 4),
        limiter=limiter,
        limits=caps,
    )


def describe(o: KernelOccupancy) -> str:
    """One line for a model to read: '6 blocks (48 of 64 warps, 75%) per SM, limited by registers'."""
    if o.blocks_per_sm == 0:
        return (
            f"a block of {o.threads_per_block} threads does not fit on an {o.arch} SM ({o.limiter}: over "
            "the per-block limit), so the launch fails"
        )
    return (
        f"{o.blocks_per_sm} block(s) of {o.threads_per_block} threads resident per {o.arch} SM = "
        f"{o.warps_per_sm} of {o.max_warps_per_sm} warps ({100 * o.occupancy:.0f}% occupancy), limited by "
        f"{o.limiter}"
    )


SPILL_MEANING = "ptxas, static; run-time spill traffic is profile_ncu's"
"""What a spill figure is: ptxas's count of the bytes its spill code stores (loads) per thread, read from the
compiled code, not how often that code runs: a profiler counts the requests executed, per warp and per loop
iteration (8 B per thread can be 393,216 local spilling requests)."""


def spill_text(k: KernelResources) -> str | None:
    """'8 B per thread stored, 12 B loaded', None when nothing spills or nobody counted."""
    if not (k.spill_stores_bytes or k.spill_loads_bytes):
        return None
    loads = "?" if k.spill_loads_bytes is None else k.spill_loads_bytes
    return f"{k.spill_stores_bytes or 0} B per thread stored, {loads} B loaded"


def _resources_text(k: KernelResources) -> str:
    parts = [f"{k.registers} registers/thread" if k.registers is not None else "registers unknown"]
    spills = spill_text(k)
    if spills is not None:
        parts.append(f"SPILLS {spills} ({SPILL_MEANING})")
    elif k.spill_stores_bytes is not None:
        parts.append("no spills")
    if k.stack_bytes:
        what = "spilled registers and local arrays" if spills else "local arrays or spilled registers"
        parts.append(f"{k.stack_bytes} B stack frame per thread (local memory: {what})")
    parts.append(f"{k.shared_bytes or 0} B shared/block")
    if k.num_warps is not None:
        parts.append(f"num_warps={k.num_warps}" + (f", num_stages={k.num_stages}" if k.num_stages else ""))
    return ", ".join(parts)


def annotate(k: KernelResources, arch: str) -> tuple[KernelResources, list[Diagnostic]]:
    """`k` with its occupancy filled in (when its block size is known), and one note saying what it means
    (an error when the block cannot be resident at all: such a launch fails)."""
    threads = k.threads_per_block
    if threads is None and k.num_warps is not None:
        threads = k.num_warps * WARP
    occ = k.occupancy or occupancy(arch, k.registers, k.shared_bytes, threads)
    k = k.model_copy(update={"occupancy": occ, "threads_per_block": threads})
    head = f"{k.name}" + (f" [{k.config}]" if k.config else "") + f": {_resources_text(k)}"
    if occ is not None:
        sev = "error" if occ.blocks_per_sm == 0 else "note"
        return k, [Diagnostic(severity=sev, message=f"{head}; {describe(occ)}", kernel=k.name)]
    if k.registers is not None and limits_for(arch) is not None:
        # a CUDA kernel's block size is chosen at launch: show what each common choice would give
        table = []
        for t in (128, 256, 512, 1024):
            o = occupancy(arch, k.registers, k.shared_bytes, t)
            assert o is not None
            table.append(f"{t} threads: {o.warps_per_sm}/{o.max_warps_per_sm} warps ({o.limiter})")
        msg = f"{head}; block size set at launch, resident warps per {arch} SM by block size: " + "; ".join(
            table
        )
        return k, [Diagnostic(severity="note", message=msg, kernel=k.name)]
    return k, []
