"""Baselines come from a fresh worker process that never ran candidate code (clean_baselines), with compiler
caches of its own that a jailed candidate cannot write."""

from __future__ import annotations

import pytest

from ksearch.gpu.jail import launch as jail
from ksearch.gpu.sandbox.local import LocalSandbox

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


@pytest.mark.slow
async def test_baselines_are_measured_in_a_fresh_process(tmp_path, affine, cand, st) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, clean_baselines=True)
    w = sb.pool.workers[0]
    try:
        ev = await sb.evaluate(cand(LINGERING), affine, st("small"))
        assert ev.timings and ev.timings[0].eager_us is not None, (ev.status, ev.error)
        # two restarts: into the baseline process, and back to a fresh candidate process
        assert w.starts == 3 and w.hello is not None and w.hello["mode"] == "candidate"
        assert not w.ran_candidate
        # the hook (like anything else living in the candidate's process) never existed in the baseline's
        assert ev.timings[0].eager_us < 1_000, ev.timings[0]
        again = await sb.evaluate(cand("good_triton"), affine, st("small"))
        assert again.status == "ok" and w.starts == 3  # baselines cached: no restart
        assert again.timings[0].eager_us == ev.timings[0].eager_us
    finally:
        await sb.close()


@pytest.mark.slow
async def test_without_clean_baselines_the_lingering_hook_slows_the_baseline(
    tmp_path, affine, cand, st
) -> None:
    """The threat the fresh process removes, shown: same candidate, baselines in its own worker."""
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, clean_baselines=False)
    try:
        ev = await sb.evaluate(cand(LINGERING), affine, st("small"))
        assert ev.timings and ev.timings[0].eager_us is not None, (ev.status, ev.error)
        assert ev.timings[0].eager_us > 1_000, ev.timings[0]
    finally:
        await sb.close()


# A candidate that plants entries in the Triton and inductor caches: its own, and those of the baseline process
# (their path follows from its own: <sandbox>/shared/<cache> vs <sandbox>/baseline-caches/<cache>).
PLANTS_CACHE_ENTRIES = """
import contextlib
import os
import pathlib
import torch


def _plant():
    for var in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        own = pathlib.Path(os.environ[var])
        for where in (own, own.parent.parent / "baseline-caches" / own.name):
            with contextlib.suppress(OSError):  # a refused write is the point of the test, not an error here
                where.mkdir(parents=True, exist_ok=True)
                (where / "planted-by-candidate").write_text("a kernel that sleeps")


_plant()


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0
"""


async def _planted(tmp_path, affine, cand, st, isolation: str) -> list[str]:
    """Where the planting candidate's files ended up (the first folder under the sandbox's directory)."""
    sb = LocalSandbox(
        scratch_dir=tmp_path, n_workers=1, call_timeout_s=60.0, clean_baselines=True, isolation=isolation
    )
    try:
        ev = await sb.evaluate(cand(PLANTS_CACHE_ENTRIES), affine, st("small"))
        assert ev.timings and ev.timings[0].eager_us is not None, (ev.status, ev.error)
        assert sb.pool.workers[0].starts == 3  # the baselines came from a process of their own
    finally:
        await sb.close()
    assert (tmp_path / "baseline-caches").is_dir()  # where the candidate aimed: the baselines' caches
    return sorted(p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("planted-by-candidate"))


@pytest.mark.skipif(
    jail.unavailable_reason() is not None, reason=f"no isolation: {jail.unavailable_reason()}"
)
@pytest.mark.slow
async def test_a_jailed_candidate_cannot_plant_entries_in_the_baselines_compiler_caches(
    tmp_path, affine, cand, st
) -> None:
    # it did plant (so its code ran), only in the candidates' shared caches
    assert await _planted(tmp_path, affine, cand, st, "namespaces") == ["shared", "shared"]


@pytest.mark.slow
async def test_unjailed_the_same_candidate_reaches_the_baselines_caches(tmp_path, affine, cand, st) -> None:
    """The control: without the jail's read-only mounts the baselines' caches are open to it (the README says
    isolation `none` gives this up)."""
    planted = await _planted(tmp_path, affine, cand, st, "none")
    assert planted.count("baseline-caches") == 2, planted
