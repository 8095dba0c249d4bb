"""A KernelBench file without a smoke workload gets a small one: its size constants shrunk, relations kept."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from ksearch.gpu.task import TaskError, Workload
from ksearch.gpu.tasks import load_task, native
from ksearch.gpu.tasks.rt.native import NativeRuntime
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module
from ksearch.gpu.tasks.shrink import SizeKnobs, patched_code, shrunk, size_knobs

KB = Path(__file__).parent / "fixtures" / "kernelbench"


def write(tmp_path: Path, text: str, name: str = "task_file.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


# ------------------------------------------------------------------------------- knobs (ast only)


def test_knobs_are_literal_constants_parameters_and_defaults() -> None:
    src = textwrap.dedent("""
        import torch
        batch_size = 16
        M = 1024 * 4
        height = width = 256
        rows, cols = 300, 200
        shape = (128, 4096)
        hidden = batch_size * 4       # computed: recomputed from the others, not a knob
        dim = -1
        eps = 1e-5
        flag = True
        twice = 10
        twice = 20                    # assigned twice: which one applies depends on flow
        WORKLOADS = 5
        def get_inputs(n=4096, dtype="float32", *, k=64):
            return []
        def get_init_inputs(n=1, m=2048):
            return []
    """)
    k = size_knobs(src, "f.py", {"n": 512, "label": "x", "on": True})
    assert k.constants == {
        "batch_size": 16, "M": 4096, "height": 256, "width": 256, "rows": 300, "cols": 200,
        "shape": [128, 4096], "dim": -1,
    }  # fmt: skip
    # workload params win over defaults; bools and strings are not sizes
    assert k.params == {"n": 512, "k": 64, "m": 2048}


def test_shrinking_keeps_order_equality_divisibility_and_small_values() -> None:
    k = SizeKnobs(
        constants={"embed": 6000, "heads": 6, "kernel": 3, "dim": -1, "a": 1000, "b": 1000, "seq": 4096},
        params={"hidden": 24000, "layers": [8192, 4096]},
    )
    s = shrunk(k, 16)
    c, p = s.constants, s.params
    assert (c["heads"], c["kernel"], c["dim"]) == (6, 3, -1)  # at or below KEEP: structural, untouched
    assert c["embed"] % c["heads"] == 0  # 6000 / 16 = 375 would break embed % heads; rounded to 378
    assert c["embed"] == 378
    assert c["a"] == c["b"] == 63  # equal stays equal
    assert p["hidden"] % c["embed"] == 0 and p["hidden"] < 24000  # 6000 divided 24000: still does
    assert c["seq"] == 256 and p["layers"] == [512, 256]
    values = [6000, 1000, 4096, 24000, 8192]
    new = [c["embed"], c["a"], c["seq"], p["hidden"], p["layers"][0]]
    assert sorted(range(5), key=lambda i: values[i]) == sorted(range(5), key=lambda i: new[i])
    assert shrunk(k, 1) == k
    assert min(shrunk(k, 1 << 14).values()) == -1 and all(
        v >= 3 for v in shrunk(k, 1 << 14).values() if v > 0
    )
    assert k.changes(s)[:2] == ["embed 6000->378", "a 1000->63"]


def test_worth_shrinking_is_judged_without_running() -> None:
    assert not SizeKnobs().worth_shrinking()
    assert not SizeKnobs(constants={"rows": 48, "cols": 640}).worth_shrinking()
    assert SizeKnobs(constants={"rows": 16, "dim": 16384}).worth_shrinking()
    assert SizeKnobs(params={"a": 300, "b": 300}).worth_shrinking()  # product 90000


def test_literal_sizes_where_inputs_and_weights_are_made_are_knobs() -> None:
    src = textwrap.dedent("""
        import torch
        batch = 16
        shape = (8, 8)
        def get_inputs():
            x = torch.randn(128, 4096, 4 * 1024)
            idx = torch.randint(0, 1000, (64,))          # 0 and 1000 are values (no size is 1000), (64,) the size
            fill = torch.full((32, 48), 1.5)
            w = torch.ones(size=(4096,))
            y = torch.rand(batch, *shape)               # a constant and a starred shape: no literal
            return [x, idx, fill, w, y]
        def get_init_inputs():
            return [4096, 0.5, batch, (3, 3)]
    """)
    k = size_knobs(src, "f.py", {})
    assert k.constants == {
        "batch": 16, "shape": [8, 8],
        "get_inputs:6:20": 128, "get_inputs:6:25": 4096, "get_inputs:6:31": 4096,
        "get_inputs:7:34": 64, "get_inputs:8:23": 32, "get_inputs:8:27": 48, "get_inputs:9:25": 4096,
        "get_init_inputs:13:12": 4096,
    }  # fmt: skip
    small = shrunk(k, 16)
    assert (
        small.constants["get_inputs:6:25"] == small.constants["get_init_inputs:13:12"] == 256
    )  # equal stays so
    assert k.changes(small)[:2] == ["batch 16->8", "get_inputs line 6 128->8"]
    ns: dict[str, object] = {}
    exec(patched_code(src, "f.py", small.constants), ns)
    x, idx, fill, w, y = ns["get_inputs"]()  # type: ignore[operator]
    assert x.shape == (8, 256, 256) and idx.shape == (8,) and fill.shape == (8, 8) and w.shape == (256,)
    assert y.shape == (8, 8, 8) and int(idx.max()) < 1000  # the values randint draws are untouched
    assert ns["get_init_inputs"]() == [256, 0.5, 8, (3, 3)]  # type: ignore[operator]
    with pytest.raises(
        TaskError, match="no integer literal sizing its inputs at get_inputs line 6, column 21"
    ):
        patched_code(src, "f.py", {"get_inputs:6:21": 3})


def test_patched_code_replaces_constants_and_recomputes_the_rest() -> None:
    src = "a = 16\nb = a * 4\nh = w = 256\nshape = (8, 64)\n"
    ns: dict[str, object] = {}
    exec(patched_code(src, "f.py", {"a": 2, "h": 32, "shape": [8, 16]}), ns)
    assert (ns["a"], ns["b"], ns["h"], ns["w"], ns["shape"]) == (2, 8, 32, 32, (8, 16))
    with pytest.raises(TaskError, match="no single top-level `b = <integer>`"):
        patched_code(src, "f.py", {"b": 3})
    with pytest.raises(TaskError, match="must be an integer"):
        patched_code(src, "f.py", {"a": "big"})


# ------------------------------------------------------------------------- loading real-shaped files


@pytest.mark.parametrize(
    ("fixture", "full_input"),
    [
        ("l1_matmul_bf16.py", [4096, 8192]),
        ("l2_conv_relu_bias.py", [64, 16, 256, 256]),
        ("l3_mlp.py", [128, 16384]),
    ],
)
@pytest.mark.slow
def test_kernelbench_levels_get_a_small_verified_smoke(fixture: str, full_input: list[int]) -> None:
    task = load_task(KB / fixture)
    smoke = task.smoke()
    assert task.smoke_derived and smoke.constants, task.extras["smoke_note"]
    assert "smaller sizes" in task.extras["smoke_note"]
    assert task.workload("default").constants == {}  # the search workload keeps the file's sizes
    rt = TaskRuntime(task)
    inputs = rt.make_inputs(smoke, 0, "cpu")
    assert inputs[0].numel() < 2**18 and list(inputs[0].shape) != full_input
    assert len(inputs[0].shape) == len(full_input)  # the structure is the same
    out = rt.build_reference(smoke, "cpu")(inputs)
    assert torch.isfinite(out).all()


@pytest.mark.slow
def test_literal_sizes_of_a_batched_matmul_are_shrunk_and_keep_their_relations(tmp_path: Path) -> None:
    task = load_task(KB / "l1_bmm_literal_sizes.py")
    smoke = task.smoke()
    assert smoke.constants and all(k.startswith("get_inputs:") for k in smoke.constants)
    note = task.extras["smoke_note"]
    assert "smaller sizes (get_inputs line 13 128->" in note and "the reference ran on it" in note, note
    rt = TaskRuntime(task)
    a, b = rt.make_inputs(smoke, 0, "cpu")
    assert a.shape[0] == b.shape[0] < 128 and a.shape[2] == b.shape[1] < 1024  # batch and inner dim agree
    assert a.numel() + b.numel() < 2**18
    # the literals shrank by one factor: their order and ratios are the file's
    assert (a.shape[1] * 2, b.shape[2] * 4) == (b.shape[1], b.shape[1])
    assert rt.build_reference(smoke, "cpu")([a, b]).shape == (a.shape[0], a.shape[1], b.shape[2])


@pytest.mark.slow
def test_a_randint_bound_shrinks_with_the_size_it_indexes(tmp_path: Path) -> None:
    """`randn(4096, 50257)` with `randint(0, 50257, (4096,))`: the targets index the logits' width, so the bound
    shrinks with it (it failed with "IndexError: Target 39270 is out of bounds" and kept the full 800 MB)."""
    src = (KB / "l1_cross_entropy_literal_vocab.py").read_text()
    k = size_knobs(src, "f.py", {})
    widths = [v for v in k.constants.values() if v == 50257]
    assert len(widths) == 2, k.constants  # the width and the bound are both knobs
    task = load_task(KB / "l1_cross_entropy_literal_vocab.py")
    smoke = task.smoke()
    note = task.extras["smoke_note"]
    assert "smaller sizes" in note and "the reference ran on it" in note, note
    rt = TaskRuntime(task)
    logits, targets = rt.make_inputs(smoke, 0, "cpu")
    assert logits.shape[1] < 50257 and logits.shape[0] == targets.shape[0] < 4096
    assert int(targets.max()) < logits.shape[1]  # every target indexes a class the smaller logits have
    assert torch.isfinite(rt.build_reference(smoke, "cpu")([logits, targets])).all()


@pytest.mark.slow
def test_literal_image_and_width_of_a_conv_are_shrunk_for_model_and_candidate(tmp_path: Path) -> None:
    task = load_task(KB / "l1_conv_literal_image.py")
    smoke = task.smoke()
    c = smoke.constants
    assert c["batch_size"] < 256, task.extras["smoke_note"]
    image = [v for k, v in c.items() if k.startswith("get_inputs:")]
    width = [v for k, v in c.items() if k.startswith("get_init_inputs:")]
    assert len(image) == 2 and image[0] == image[1] < 224 and width and width[0] < 96
    rt = TaskRuntime(task)
    (x,) = rt.make_inputs(smoke, 1, "cpu")
    assert list(x.shape) == [c["batch_size"], 3, image[0], image[0]]  # the 3 channels are kept
    expected = rt.build_reference(smoke, "cpu")([x])
    cand_src = (KB / "l1_conv_literal_image.py").read_text().replace("class Model(", "class ModelNew(")
    module = load_candidate_module(cand_src, "conv_candidate", tmp_path)
    got = rt.build_candidate(module, smoke, "cpu")([x])
    assert expected.shape[1] == width[0]  # the layer is as narrow as get_init_inputs now says
    torch.testing.assert_close(got, expected)  # the candidate is built from the same smaller literal


def test_the_smoke_constants_reach_init_inputs_and_the_candidate(tmp_path: Path) -> None:
    task = load_task(KB / "l3_mlp.py")
    smoke = task.smoke()
    cand_src = (KB / "l3_mlp.py").read_text().replace("class Model(", "class ModelNew(")
    module = load_candidate_module(cand_src, "mlp_candidate", tmp_path)
    rt = TaskRuntime(task)
    inputs = rt.make_inputs(smoke, 1, "cpu")
    expected = rt.build_reference(smoke, "cpu")(inputs)
    got = rt.build_candidate(module, smoke, "cpu")(inputs)
    # same weights (same init order and seed) at the smaller layer sizes the smoke workload names
    assert got.shape == expected.shape == (smoke.constants["batch_size"], smoke.constants["output_size"])
    torch.testing.assert_close(got, expected)


@pytest.mark.slow
def test_divisibility_the_forward_relies_on_survives(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        class Model(torch.nn.Module):
            def __init__(self, embed, heads):
                super().__init__()
                self.heads = heads
            def forward(self, x):
                b, s, e = x.shape
                return x.view(b, s, self.heads, e // self.heads).softmax(-1)
        batch = 16
        seq = 1000
        embed = 6000
        heads = 6
        def get_inputs():
            return [torch.randn(batch, seq, embed)]
        def get_init_inputs():
            return [embed, heads]
        """,
    )
    task = load_task(p)
    c = task.smoke().constants
    assert c and c["embed"] % 6 == 0 and "heads" not in c
    rt = TaskRuntime(task)
    out = rt.build_reference(task.smoke(), "cpu")(rt.make_inputs(task.smoke(), 0, "cpu"))
    assert out.shape[-2:] == (6, c["embed"] // 6)


@pytest.mark.slow
def test_sizes_that_break_the_model_are_skipped_for_larger_ones(tmp_path: Path) -> None:
    # three 2x2 poolings and a 5x5 conv need at least 5 * 8 = 40 pixels; a factor that leaves fewer fails
    p = write(
        tmp_path,
        """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.MaxPool2d(2), nn.MaxPool2d(2), nn.MaxPool2d(2), nn.Conv2d(3, 4, 5))
            def forward(self, x):
                return self.net(x)
        batch = 512
        size = 512
        def get_inputs():
            return [torch.randn(batch, 3, size, size)]
        def get_init_inputs():
            return []
        """,
    )
    task = load_task(p)
    c = task.smoke().constants
    assert c, task.extras["smoke_note"]
    assert 40 <= c["size"] < 512
    rt = TaskRuntime(task)
    rt.build_reference(task.smoke(), "cpu")(rt.make_inputs(task.smoke(), 0, "cpu"))


def test_a_declared_smoke_or_small_file_is_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(task: object) -> object:
        raise AssertionError("the loader ran the file")

    monkeypatch.setattr(native, "probe_task", no_probe)
    declared = write(
        tmp_path,
        """
        import torch
        WORKLOADS = [{"name": "big", "params": {"n": 100000}}, {"name": "s", "params": {"n": 8}, "split": "smoke"}]
        class Model(torch.nn.Module):
            def forward(self, x):
                return x
        def get_inputs(n):
            return [torch.randn(n)]
        def get_init_inputs(**params):
            return []
        """,
        "declared.py",
    )
    t = load_task(declared)
    assert not t.smoke_derived and t.smoke().params == {"n": 8}
    small = load_task(Path(__file__).parent / "fixtures" / "native" / "plain_gelu_scale.py")
    assert small.smoke_derived and small.smoke().constants == {}
    assert small.extras["smoke_note"].startswith("a copy of 'default'")


@pytest.mark.slow
def test_a_file_with_nothing_to_shrink_keeps_its_copy_and_says_why(tmp_path: Path) -> None:
    # sizes computed where no knob reaches them (a list times a count); the one constant there sizes nothing
    src = """
        import torch
        {constant}
        SHAPE = [4096] * 2
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs():
            return [torch.randn(*SHAPE)]
        def get_init_inputs():
            return []
        """
    for constant, why in (
        ("N = 2**20", "not shrunk: no smaller size fit"),
        ("", "no integer size to shrink"),
    ):
        task = load_task(write(tmp_path, src.format(constant=constant), f"f{len(constant)}.py"))
        assert task.smoke().constants == {} and task.smoke().params == {}
        note = task.extras["smoke_note"]
        assert note.startswith("a copy of 'default'") and why in note, note


def test_module_for_builds_each_variant_once_and_rejects_unknown_constants() -> None:
    task = load_task(KB / "l1_matmul_bf16.py")
    rt = NativeRuntime(task)
    smoke = task.smoke()
    assert rt.module_for(smoke) is rt.module_for(smoke) is not rt.module
    assert rt.module_for(smoke).M == smoke.constants["M"] and rt.module.M == 4096
    bad = Workload(name="bad", split="smoke", constants={"not_there": 3})
    with pytest.raises(TaskError, match="not_there"):
        rt.module_for(bad)
    with pytest.raises(TaskError, match="not_there"):
        NativeRuntime(task.model_copy(update={"workloads": [*task.workloads, bad]}))


def test_shrinking_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSEARCH_TASK_FACTS", "off")
    src = (KB / "l1_matmul_bf16.py").read_text().replace("K = 8192", "K = 8192 * 2")  # a new content hash
    task = load_task(write(tmp_path, src, "off.py"))
    assert task.smoke().constants == {}
    assert native.load_native(KB / "l1_matmul_bf16.py", shrink_smoke=False).smoke().constants == {}
