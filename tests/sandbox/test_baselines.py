"""Baselines come from a fresh worker process that never ran candidate code (clean_baselines)."""

from __future__ import annotations

import pytest

from gpu.sandbox import LocalSandbox

pytestmark = pytest.mark.anyio

# A candidate that leaves a profile hook behind in the worker's main thread: it replaces no function,
# so no identity check sees it, yet in the process that ran it every later call of a `forward` (the
# reference's included) sleeps 2 ms, and any baseline measured there is slowed.
LINGERING = """
import sys
import time
import torch


def _hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "forward":
        time.sleep(0.002)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        sys.setprofile(_hook)
        return x * 2.0 + 1.0
"""


async def test_baselines_are_measured_in_a_fresh_process(tmp_path, affine, cand, st) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, clean_baselines=True)
    w = sb.pool.workers[0]
    try:
        ev = await sb.evaluate(cand(LINGERING), affine, st("small"))
        assert ev.timings and ev.timings[0].eager_median_us is not None, (ev.status, ev.error)
        # two restarts: into the baseline process, and back to a fresh candidate process
        assert w.starts == 3 and w.hello is not None and w.hello["mode"] == "candidate"
        assert not w.ran_candidate
        # the hook never existed in the baseline's process
        assert ev.timings[0].eager_median_us < 1_000, ev.timings[0]
        again = await sb.evaluate(cand("good_triton"), affine, st("small"))
        assert again.status == "ok" and w.starts == 3  # baselines cached: no restart
        assert again.timings[0].eager_median_us == ev.timings[0].eager_median_us
    finally:
        await sb.close()


async def test_without_clean_baselines_the_lingering_hook_slows_the_baseline(
    tmp_path, affine, cand, st
) -> None:
    """The threat the fresh process removes, shown: same candidate, baselines in its own worker."""
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, clean_baselines=False)
    try:
        ev = await sb.evaluate(cand(LINGERING), affine, st("small"))
        assert ev.timings and ev.timings[0].eager_median_us is not None, (ev.status, ev.error)
        assert ev.timings[0].eager_median_us > 1_000, ev.timings[0]
    finally:
        await sb.close()
