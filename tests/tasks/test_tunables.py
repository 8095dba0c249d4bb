"""Declared tunables: read, rewrite exactly their lines, refuse what is not allowed."""

from __future__ import annotations

import pytest

from ksearch.gpu.tasks.tunables import TunableError, apply_tunables, read_tunables

SOURCE = """import triton

TUNABLES = {"BLOCK": [64, 128, 256], "num_warps": [4, 8]}
BLOCK = 128  # rows per program
num_warps = 4


def launch():
    return BLOCK, num_warps
"""


def test_read_and_apply() -> None:
    t = read_tunables(SOURCE)
    assert {n: (v.values, v.current, v.line) for n, v in t.items()} == {
        "BLOCK": ([64, 128, 256], 128, 4),
        "num_warps": ([4, 8], 4, 5),
    }
    out = apply_tunables(SOURCE, {"BLOCK": 256, "num_warps": 8})
    assert out.splitlines()[3] == "BLOCK = 256  # rows per program"
    assert out.splitlines()[4] == "num_warps = 8"
    changed = [
        i for i, (a, b) in enumerate(zip(SOURCE.splitlines(), out.splitlines(), strict=True)) if a != b
    ]
    assert changed == [3, 4]
    ns: dict = {}
    exec(out.replace("import triton", ""), ns)
    assert ns["launch"]() == (256, 8)
    assert read_tunables("x = 1\n") == {}


@pytest.mark.parametrize(
    ("source", "settings", "says"),
    [
        (SOURCE, {"BLOCK": 512}, "BLOCK=512 is not allowed; allowed: [64, 128, 256]"),
        (SOURCE, {"STAGES": 2}, "'STAGES' is not a declared tunable"),
        (SOURCE.replace("num_warps = 4\n", ""), {}, "tunable 'num_warps' needs exactly one"),
        (SOURCE.replace("BLOCK = 128", "BLOCK = 64 * 2"), {}, "must be assigned a literal"),
        (SOURCE + "BLOCK = 64\n", {}, "found 2"),
        (SOURCE.replace('"num_warps": [4, 8]', '"num_warps": []'), {}, "non-empty list"),
    ],
)
def test_errors(source: str, settings: dict, says: str) -> None:
    with pytest.raises(TunableError, match=None) as info:
        apply_tunables(source, settings)
    assert says in str(info.value)
