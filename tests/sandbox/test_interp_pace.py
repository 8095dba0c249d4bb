"""Triton's interpreter with its builtins listed once (ksearch.gpu.tasks.rt.interp_pace): the same outputs, the same
errors, the language restored after each launch as before, and left alone where it does not apply."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import inspect, json, sys
import torch, triton, triton.language as tl
from triton.runtime import interpreter
from ksearch.gpu.tasks.rt import interp_pace

@triton.jit
def _rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # helpers the interpreter calls as device functions: max, sum, cdiv, where, exp, math.sqrt
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, tl.cdiv(n, BLOCK)):
        offs = i * BLOCK + cols
        x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
        acc += tl.where(x > 0, tl.exp(x - tl.max(x, axis=0)), x)
    s = tl.sum(acc, axis=0)
    tl.store(y_ptr + row, tl.math.sqrt(tl.abs(s)) + tl.minimum(s, 0.0))

@triton.jit
def _bad(x_ptr):
    tl.store(x_ptr + tl.arange(0, 3), 1.0)  # not a power of two: the interpreter raises

def run():
    torch.manual_seed(0)
    x = torch.randn(19, 300)
    y = torch.empty(19)
    _rows[(19,)](x, y, 300, BLOCK=128)
    return y

def error():
    try:
        _bad[(1,)](torch.zeros(4))
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None

def builtins_now():
    pkgs = {"tl": tl, "tl.core": tl.core, "tl.tensor": tl.tensor, "tl.math": tl.math}
    return {k: sorted(n for n, m in inspect.getmembers(p) if tl.core.is_builtin(m)) for k, p in pkgs.items()}

mode = sys.argv[1]
if mode == "wrong-helper":  # an interpreter whose helper takes other arguments than the one pace was written for
    original = interpreter._patch_builtin
    interpreter._patch_builtin = lambda pkg, builder, scope, strict=True: original(pkg, builder, scope)
first = second = None
if mode in ("on", "wrong-helper"):  # as a worker does: before any launch
    first = interp_pace.install()
out1, err1 = run(), error()
if mode == "late":  # after launches have swapped builtins for good (the interpreter's helper calls leave theirs)
    first = interp_pace.install()
patched = interpreter._patch_builtin
if first is not None:
    second = interp_pace.install()
out2, err2 = run(), error()
block = tl.block_type(tl.float32, [4])
print(json.dumps({
    "first": first,
    "second": second,
    "not_wrapped_twice": interpreter._patch_builtin is patched,
    "marked": getattr(interpreter._patch_builtin, interp_pace.MARK, False),
    "outputs": [out1.tolist(), out2.tolist()],
    "errors": [err1, err2],
    "names_after": builtins_now(),
    "np_dtypes": [str(interpreter._get_np_dtype(t)) for t in (tl.float32, tl.bfloat16, block, tl.pointer_type(tl.int8))],
}))
"""


def _run(mode: str, interpret: str = "1") -> dict:
    env = {**os.environ, "TRITON_INTERPRET": interpret, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_interpreter_computes_fails_and_swaps_alike_with_pace_installed_before_or_after_launches() -> (
    None
):
    from ksearch.gpu.tasks.rt import interp_pace

    if not interp_pace.supported():
        pytest.skip(
            "this Triton's interpreter helpers are not the ones interp_pace was written for: it leaves them alone"
        )
    off, on, late = _run("off"), _run("on"), _run("late")
    assert off["first"] is None and not off["marked"]
    for r in (on, late):
        assert r["first"] is True and r["second"] is True
        assert r["not_wrapped_twice"] and r["marked"]
    assert all(math.isfinite(v) for v in off["outputs"][0])
    assert off["errors"][0] and "arange" in off["errors"][0]
    for r in (on, late):
        assert r["outputs"] == off["outputs"]  # bit for bit: floats survive JSON exactly
        assert r["errors"] == off["errors"]  # the same error, word for word
        assert r["names_after"] == off["names_after"]  # the language left as the interpreter alone leaves it
        assert r["np_dtypes"] == off["np_dtypes"] == ["float32", "uint16", "float32", "uint64"]


def test_pace_leaves_an_interpreter_it_was_not_written_for_alone() -> None:
    r = _run("wrong-helper")
    assert r["first"] is False and r["second"] is False
    assert not r["marked"]


def test_pace_does_nothing_where_the_interpreter_is_off() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(ROOT)}
    code = (
        "from triton.runtime import interpreter\n"
        "from ksearch.gpu.tasks.rt import interp_pace\n"
        "f = interpreter._patch_builtin\n"
        "print(interp_pace.install(), interpreter._patch_builtin is f)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["False", "True"]
