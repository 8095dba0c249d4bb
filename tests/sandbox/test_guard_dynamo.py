"""Workers do not import torch._dynamo at start (it is half of a worker's start-up): the functions dynamo replaces on
its first use (torch.manual_seed, nn.Module.__init__ / __setstate__) are told from a candidate's replacements by
what they are (dynamo's own code and globals, wrapping the function seen before), so a candidate that uses
torch.compile is not taken for a tamperer, and one that forges dynamo's wrapper still is. Real worker processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task

pytestmark = pytest.mark.anyio

GOOD = (Path(__file__).parent / "fixtures" / "candidates" / "good_triton.py").read_text()
# what torch.compile does on first use, done at import (the same calls dynamo makes)
USES_DYNAMO = GOOD.replace(
    "BLOCK = 64",
    "BLOCK = 64\nimport torch._dynamo.mutation_guard\n\ntorch._dynamo.mutation_guard.install_generation_tagging_init()\n",
)
# dynamo's own wrapper code, but wrapping the candidate's function: a forgery
FORGES = GOOD.replace(
    "BLOCK = 64",
    "BLOCK = 64\nimport types\nimport torch._dynamo.mutation_guard as _mg\n\n"
    "_code = next(c for c in _mg.install_generation_tagging_init.__code__.co_consts "
    "if getattr(c, 'co_name', '') == 'patched_init')\n\n\n"
    "def _mine(self, *a, **k):\n    torch.nn.Module.__dict__['__call__']\n\n\n"
    "def _cell(v):\n    return (lambda: v).__closure__[0]\n\n\n"
    "torch.nn.Module.__init__ = types.FunctionType(_code, _mg.__dict__, 'patched_init', None, (_cell(_mine),))\n",
)


def test_in_a_fresh_process_dynamo_s_own_wrappers_are_no_change_and_a_plain_replacement_is() -> None:
    script = textwrap.dedent(
        """
        import sys, torch
        from ksearch.gpu.checks import guard
        assert "torch._dynamo" not in sys.modules
        before = guard.fingerprint()
        import torch._dynamo.mutation_guard as mg  # replaces torch.manual_seed
        mg.install_generation_tagging_init()  # replaces Module.__init__ and __setstate__
        now = guard.fingerprint()
        changed = [k for k, v in before.items() if now.get(k) != v]
        print("changed", sorted(changed))
        print("replaced", guard.replaced(before, guard.fingerprint()))
        torch.nn.Module.__setstate__ = lambda self, state: None
        print("after", guard.replaced(before, guard.fingerprint()))
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["changed"] == str(
        ["torch.manual_seed", "torch.nn.Module.__init__", "torch.nn.Module.__setstate__"]
    )
    assert lines["replaced"] == "[]"
    assert lines["after"] == str(["torch.nn.Module.__setstate__"])


@pytest.mark.slow
async def test_a_candidate_that_starts_dynamo_passes_and_one_that_forges_its_wrapper_is_caught(
    tmp_path: Path, affine: Task, cand: Any, st: Any
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=120.0)
    try:
        ok = await sb.correctness(cand(USES_DYNAMO), affine, st("small"))
        assert ok.status == "ok", (ok.error, ok.flags)
        assert not [f for f in ok.flags if f.startswith("harness_tampered")]
        forged = await sb.correctness(cand(FORGES), affine, st("small"))
        tampered = [f for f in forged.flags if f.startswith("harness_tampered")]
        assert forged.status == "flagged" and tampered, (forged.status, forged.error, forged.flags)
        assert "torch.nn.Module.__init__" in tampered[0]
    finally:
        await sb.close()
