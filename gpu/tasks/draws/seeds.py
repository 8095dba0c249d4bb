"""The input seeds an evaluation draws, in one place: the worker draws by them and the sandbox draws ahead by them.

A correctness trial t draws `seed + t`; timing draws from `seed + TIMING`, its re-check after timing from
`TIMING + RECHECK`, a final evaluation's pristine copy from `TIMING + PRISTINE`, and a GPU MODE evaluator's
fresh data per call (its leaderboard mode) from `TIMING + EVALUATOR_STEP * k` for call k.
"""

from __future__ import annotations

import os

TIMING = 1000  # timing inputs differ from the correctness trials
RECHECK = 77_777  # new values written into the timed tensors after timing
PRISTINE = 90_000  # a final evaluation's copy of untouched inputs
FINAL_REPS = 50_000  # the ksearch protocol's final mode: fresh inputs per repetition
EVALUATOR_STEP = 13  # GPU MODE's evaluator adds 13 to the seed per call
AHEAD_CALLS = 3  # fresh per-call draws of a final evaluation drawn ahead (it may make more)


def gpumode_seeds(seed: int, trials: int, final: bool, timed: bool = True) -> list[int]:
    """The seeds a GPU MODE evaluation with these settings draws for a workload: its correctness trials and, for
    a workload it times, the timing's (besides the task's own seed, which its benchmark mode times outside a
    final evaluation)."""
    seeds = [seed + t for t in range(max(1, trials))]
    if not timed:
        return seeds
    timing = seed + TIMING
    seeds.append(timing + RECHECK)
    if final:
        seeds += [timing + PRISTINE] + [timing + EVALUATOR_STEP * k for k in range(AHEAD_CALLS)]
    return seeds


def parallel_draws() -> int:
    """How many child processes may draw at once: half the machine's cores, at most 8 (the worker lowers it
    further when its draws are large for its host-memory limit)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))
