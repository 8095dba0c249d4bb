"""A candidate's tunables through the tools (tools/files/tunables.py): read, set, and refuse with what is accepted."""

from __future__ import annotations

import pytest

from ksearch.gpu.tasks import builtin_names, load_task
from ksearch.tools.files.tunables import TunableError, read_tunables, set_tunables
from ksearch.worldmodel.errors import KsearchError

SEED = load_task("softmax").seeds["triton"]


def test_read_a_builtin_seed() -> None:
    t = read_tunables(SEED)
    assert t.source == SEED and list(t.tunables) == ["BLOCK_N", "num_warps"]
    assert t.space() == {n: i.values for n, i in t.tunables.items()}
    assert t.current() == {n: i.current for n, i in t.tunables.items()}
    for name, info in t.tunables.items():  # each current value is allowed and sits on its own line
        assert info.current in info.values
        assert SEED.splitlines()[info.line - 1].startswith(f"{name} = {info.current!r}")


def test_every_builtin_triton_seed_declares_tunables() -> None:
    for name in builtin_names():
        seeds = load_task(name).seeds
        if "triton" in seeds:
            assert read_tunables(seeds["triton"]).tunables, name


def test_set_rewrites_only_the_named_lines() -> None:
    before = read_tunables(SEED)
    block = before.tunables["BLOCK_N"]
    new = next(v for v in block.values if v != block.current)
    after = set_tunables(SEED, {"BLOCK_N": new})
    assert after.current() == before.current() | {"BLOCK_N": new}
    assert after.space() == before.space()
    old_lines, new_lines = SEED.splitlines(), after.source.splitlines()
    assert len(old_lines) == len(new_lines)
    assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b] == [
        block.line - 1
    ]
    assert set_tunables(SEED, {}).source == SEED


def test_a_source_with_no_tunables() -> None:
    plain = "import torch\n\nBLOCK = 128\n"
    t = read_tunables(plain)
    assert t.tunables == {} and t.space() == {} and t.current() == {}
    with pytest.raises(TunableError, match="'BLOCK' is not a declared tunable; declared: none"):
        set_tunables(plain, {"BLOCK": 64})


@pytest.mark.parametrize(
    ("source", "settings", "says"),
    [
        (SEED, {"BLOCK_N": 3}, "BLOCK_N=3 is not allowed; allowed: ["),
        (SEED, {"STAGES": 2}, "'STAGES' is not a declared tunable; declared: BLOCK_N, num_warps"),
        ("TUNABLES = make_space()\n", {}, "TUNABLES must be a literal"),
        ('TUNABLES = {"BLOCK": [64, 128]}\n', {}, "tunable 'BLOCK' needs exactly one"),
        ('TUNABLES = {"BLOCK": [64]}\nBLOCK = (\n    64\n)\n', {}, "must fit on one line"),
        ("def broken(:\n", {}, "line 1: syntax error"),
    ],
)
def test_bad_declarations_and_values_are_refused(source: str, settings: dict[str, object], says: str) -> None:
    with pytest.raises(TunableError) as info:
        set_tunables(source, settings)
    assert says in str(info.value)
    assert isinstance(info.value, KsearchError)
    if not settings:  # a malformed declaration is refused by reading alone too
        with pytest.raises(TunableError) as read:
            read_tunables(source)
        assert str(read.value) == str(info.value)
