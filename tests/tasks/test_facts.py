"""Task facts derived by running the reference once: shapes, dtypes, bytes, FLOPs, bound, cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ksearch.gpu.tasks import facts, load_task
from ksearch.gpu.tasks.facts import Ceilings, task_facts

KB = Path(__file__).parent / "fixtures" / "kernelbench"


def write(tmp_path: Path, text: str, name: str = "task_file.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.slow
def test_bf16_matmul_shapes_bytes_flops_and_bound() -> None:
    task = load_task(KB / "l1_matmul_bf16.py")
    f = task_facts(task)
    assert f.error is None
    assert (f.dtype, f.dtype_source) == ("bfloat16", "derived")
    assert (f.bound, f.bound_source) == ("compute", "derived")
    assert (f.op, f.op_source) == ("mm", "derived")
    w = f.workload("default")
    assert w is not None and w.method == "fake"
    assert [(t.name, t.shape, t.dtype) for t in w.inputs] == [
        ("A", [4096, 8192], "bfloat16"),
        ("B", [8192, 2048], "bfloat16"),
    ]
    assert [(t.shape, t.dtype) for t in w.outputs] == [([4096, 2048], "bfloat16")]
    assert w.bytes == 2 * (4096 * 8192 + 8192 * 2048 + 4096 * 2048)
    assert w.flops == 2 * 4096 * 8192 * 2048 and not w.uncounted_ops
    assert w.compute_dtype == "bfloat16" and not w.bound_estimated
    text = f.text()
    assert "A[4096,8192] bf16, B[8192,2048] bf16 -> out[4096,2048] bf16" in text
    assert "137 GFLOP" in text
    assert (
        "compute-bound on H200 (4.8 TB/s, 989 TFLOP/s bf16 dense, datasheet; roofline fractions use the measured "
        "ceilings)" in text
    )
    assert "in place" not in text  # a matmul writes none of its inputs
    assert "fake-tensor run" in text


@pytest.mark.slow
def test_conv_relu_bias_counts_the_conv_and_names_what_it_cannot_count() -> None:
    f = task_facts(load_task(KB / "l2_conv_relu_bias.py"))
    w = f.workload("default")
    assert w is not None and w.method == "fake"
    assert [t.shape for t in w.outputs] == [[64, 64, 254, 254]]
    assert w.params == 3  # conv weight, conv bias, the extra bias
    assert w.params_bytes == 4 * (64 * 16 * 3 * 3 + 64 + 64)
    conv = 2 * (64 * 64 * 254 * 254) * (16 * 3 * 3)
    assert w.flops is None and w.flops_counted == conv  # relu and add: unknown, not 0
    assert w.uncounted_ops == ["relu", "add"]
    assert w.bytes == 4 * (64 * 16 * 256 * 256 + 64 * 64 * 254 * 254) + w.params_bytes
    # cuDNN's fp32 convolutions run in TF32: ~58 FLOP/B sits just below that ridge (~103 FLOP/B)
    assert w.compute_dtype == "tf32" and w.intensity == pytest.approx(
        (conv + 2 * 64 * 64 * 254 * 254) / w.bytes
    )
    assert w.bound == "mixed" and w.bound_estimated
    assert "relu, add not counted" in f.text()


@pytest.mark.slow
def test_mlp_weights_are_part_of_the_bytes() -> None:
    f = task_facts(load_task(KB / "l3_mlp.py"))
    w = f.workload("default")
    assert w is not None
    sizes = [(16384, 8192), (8192, 4096), (4096, 1000)]
    assert w.params == 6
    assert w.params_bytes == 4 * sum(i * o + o for i, o in sizes)
    assert w.flops_counted == 2 * 128 * sum(i * o for i, o in sizes)
    assert w.uncounted_ops == ["relu"] and w.flops is None
    assert "+ 6 weight tensors (688 MB)" in f.text()


@pytest.mark.slow
def test_elementwise_task_is_memory_bound_by_estimate() -> None:
    f = task_facts(load_task(Path(__file__).parent / "fixtures" / "native" / "plain_gelu_scale.py"))
    w = f.workload("default")
    assert w is not None and w.flops is None and w.flops_counted == 0
    assert w.bound == "memory" and w.bound_estimated
    assert w.intensity == pytest.approx((2 * 8 * 300) / (2 * 4 * 8 * 300))  # gelu + mul, 1 FLOP/element
    assert "FLOPs unknown (gelu, mul not counted)" in f.text()
    assert "memory-bound (est.)" in f.text()


@pytest.mark.slow
def test_declared_meta_and_cost_win_over_derived() -> None:
    f = task_facts(load_task("gemm_bf16"))
    assert (f.dtype_source, f.bound_source, f.op_source) == ("declared", "declared", "declared")
    assert (f.dtype, f.bound, f.op) == ("bfloat16", "compute", "gemm")
    w = f.workload("4096^3")
    assert w is not None and w.bytes_source == "declared" and w.flops_source == "declared"
    assert w.bytes == 2.0 * 3 * 4096 * 4096 and w.flops == 2.0 * 4096**3
    # the shapes are still derived
    assert [t.shape for t in w.outputs] == [[4096, 4096]]
    smoke = f.workload("smoke")
    assert smoke is not None and [t.dtype for t in smoke.inputs] == ["float16", "float16"]


@pytest.mark.slow
def test_declared_dtype_wins_even_against_the_inputs(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        META = {"dtype": "float16"}
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs():
            return [torch.randn(64, 64, dtype=torch.bfloat16)]
        def get_init_inputs():
            return []
        """,
    )
    f = task_facts(load_task(p))
    assert (f.dtype, f.dtype_source) == ("float16", "declared")
    assert f.bound_source == "derived"  # META says nothing about the bound


@pytest.mark.slow
def test_mixed_input_dtypes_are_named_most_bytes_first(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        class Model(torch.nn.Module):
            def forward(self, x, scale, idx, k):
                return x.float() * scale[idx] * k
        def get_inputs():
            return [torch.randn(256, 512, dtype=torch.bfloat16), torch.randn(512), torch.arange(512), 3]
        def get_init_inputs():
            return []
        """,
    )
    f = task_facts(load_task(p))
    assert f.dtype == "mixed: bfloat16, float32"  # the int64 index is not a float input
    w = f.workload("default")
    assert w is not None
    assert [(t.name, t.dtype) for t in w.inputs[:3]] == [
        ("x", "bfloat16"),
        ("scale", "float32"),
        ("idx", "int64"),
    ]
    assert w.inputs[3].value == "3" and w.inputs[3].bytes == 0


@pytest.mark.slow
def test_attention_flops_are_counted_on_the_cpu_dispatch(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        import torch.nn.functional as F
        class Model(torch.nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v)
        def get_inputs():
            return [torch.randn(4, 16, 1024, 64, dtype=torch.float16) for _ in range(3)]
        def get_init_inputs():
            return []
        """,
    )
    w = task_facts(load_task(p)).workload("default")
    assert w is not None and w.flops == 4 * 4 * 16 * 1024 * 1024 * 64
    assert not w.uncounted_ops


@pytest.mark.slow
def test_fake_failure_falls_back_to_a_real_run_of_the_smallest_workload(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        WORKLOADS = [
            {"name": "big", "params": {"n": 8192}},
            {"name": "tiny", "params": {"n": 16}, "split": "smoke"},
        ]
        class Model(torch.nn.Module):
            def forward(self, x):
                return x / x.abs().max().item()
        def get_inputs(n):
            return [torch.randn(n, n)]
        def get_init_inputs(**params):
            return []
        """,
    )
    f = task_facts(load_task(p))
    big, tiny = f.workload("big"), f.workload("tiny")
    assert big is not None and tiny is not None
    assert big.method == "fake" and not big.outputs and "fake tensors" in (big.error or "")
    assert [t.shape for t in big.inputs] == [[8192, 8192]]  # inputs were still made under fake tensors
    assert tiny.method == "real" and [t.shape for t in tiny.outputs] == [[16, 16]]
    assert tiny.bytes == 2 * 4 * 16 * 16
    text = f.text()
    assert "(real CPU run)" in text and "workload tiny" in text  # shown although not a search workload


@pytest.mark.slow
def test_data_dependent_kernelbench_file_gets_real_facts_from_its_smoke() -> None:
    f = task_facts(load_task(KB / "data_dependent.py"))
    default, smoke = f.workload("default"), f.workload("smoke")
    assert default is not None and smoke is not None
    assert default.method == "fake" and default.bytes is None
    assert smoke.method == "real" and smoke.outputs[0].shape == smoke.inputs[0].shape
    assert smoke.inputs[0].shape[0] < 4096
    assert f.dtype == "float32"


@pytest.mark.slow
def test_a_task_that_fails_to_load_is_reported_not_raised(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        WORKLOADS = [{"name": "a", "params": {"n": 4}}, {"name": "s", "params": {"n": 2}, "split": "smoke"}]
        class Model(torch.nn.Module):
            def forward(self, x):
                return x
        def get_inputs(n):
            raise RuntimeError("no inputs today")
        def get_init_inputs(**params):
            return []
        """,
    )
    f = task_facts(load_task(p))
    w = f.workload("a")
    assert w is not None and w.method == "none"
    assert "no inputs today" in (w.error or "")
    assert f.dtype_source == "none" and f.bound == "unknown"
    assert "not run" in f.text()


def test_measured_ceilings_change_the_label_and_can_change_the_bound() -> None:
    task = load_task(KB / "l1_matmul_bf16.py")
    slow = {"bandwidth_Bps": 4.0e12, "matmul_flops": {"bfloat16": 4e12, "float32": 1e12}}
    f = task_facts(task, ceilings=slow)
    assert f.ceilings.source == "measured" and f.bound == "compute"
    fast = Ceilings(name="imaginary", bandwidth_Bps=1e9, matmul_flops={"bfloat16": 1e18})
    f2 = task_facts(task, ceilings=fast)
    assert f2.bound == "memory" and "imaginary" in f2.text()
    assert task_facts(task, ceilings={}).ceilings.name == "H200"  # nothing measured: the datasheet


@pytest.mark.slow
def test_facts_are_cached_per_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = """
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x.sum(dim=-1)
        def get_inputs():
            return [torch.randn(32, N)]
        def get_init_inputs():
            return []
        N = {n}
        """
    p = write(tmp_path, src.format(n=64))
    first = task_facts(load_task(p))
    assert first.workload("default").outputs[0].shape == [32]  # type: ignore[union-attr]
    key = first.key
    assert (Path(facts.cache_dir()) / f"{key}.json").is_file()

    def no_subprocess(*args: object, **kwargs: object) -> str:
        raise AssertionError("probed again")

    monkeypatch.setattr(facts, "run_probe", no_subprocess)
    monkeypatch.setattr(facts, "_probed", {})  # a new process: only the disk cache remains
    again = task_facts(load_task(p))
    assert again.key == key and again.workload("default").inputs[0].shape == [32, 64]  # type: ignore[union-attr]
    p.write_text(textwrap.dedent(src.format(n=96)))
    with pytest.raises(AssertionError, match="probed again"):
        task_facts(load_task(p))


def test_a_failed_probe_is_not_written_to_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, "import torch\nclass Model: pass\ndef get_inputs():\n    return []\n")
    task = load_task(p)

    def broken(*args: object, **kwargs: object) -> str:
        from ksearch.gpu.tasks.probe import ProbeFailed

        raise ProbeFailed("took over 180 s")

    monkeypatch.setattr(facts, "run_probe", broken)
    f = task_facts(task)
    assert f.error == "took over 180 s" and f.workloads[0].method == "none"
    assert not (Path(facts.cache_dir()) / f"{f.key}.json").exists()


def test_turned_off_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSEARCH_TASK_FACTS", "off")
    p = write(tmp_path, "import torch\nclass Model: pass\ndef get_inputs():\n    return [torch.randn(3)]\n")
    f = task_facts(load_task(p))
    assert "turned off" in (f.error or "") and f.workloads[0].method == "none"


@pytest.mark.slow
def test_apply_facts_fills_only_what_the_task_did_not_declare() -> None:
    task = load_task(KB / "l1_matmul_bf16.py")
    filled = facts.apply_facts(task, task_facts(task))
    assert (filled.dtype, filled.bound, filled.op) == ("bfloat16", "compute", "mm")
    assert task.dtype == "float32"  # the loaded task itself is untouched (its default)
    builtin = load_task("softmax")
    assert facts.apply_facts(builtin, task_facts(builtin)).op == "softmax"


def test_importing_facts_and_loading_tasks_needs_no_torch() -> None:
    code = (
        "import sys\n"
        "from ksearch.gpu.tasks import load_task\n"
        "from ksearch.gpu.tasks.facts import task_facts\n"
        f"task_facts(load_task({str(KB / 'l1_matmul_bf16.py')!r}))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_a_broken_cost_leaves_the_derived_numbers_and_says_so(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        import torch
        def COST(params):
            return {"flops": 1 / 0}
        class Model(torch.nn.Module):
            def forward(self, a, b):
                return a @ b
        def get_inputs():
            return [torch.randn(64, 32), torch.randn(32, 16)]
        def get_init_inputs():
            return []
        """,
    )
    w = task_facts(load_task(p)).workload("default")
    assert w is not None and w.flops == 2 * 64 * 32 * 16 and w.flops_source == "derived"
    assert "COST failed" in (w.error or "") and "division by zero" in (w.error or "")


@pytest.mark.slow
def test_a_background_probe_is_the_one_a_reader_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(tmp_path / "facts"))
    task = load_task(KB / "l1_row_scale.py")
    probes: list[float] = []
    real = facts._probe

    def counted(*args: object, **kw: object) -> facts.ProbeResult:
        probes.append(time.perf_counter())
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(facts, "_probe", counted)
    t = facts.probe_in_background(task)
    assert t is not None and t.daemon
    got = facts.probe_task(task)  # asked while the background probe runs: waits for it, probes nothing itself
    assert got.error is None and got.workloads, got.error
    t.join(60)
    assert len(probes) == 1
    assert facts.probe_in_background(task) is None  # derived now: nothing to start
    t0 = time.perf_counter()
    assert facts.task_facts(task).dtype
    assert time.perf_counter() - t0 < 1.0  # a prompt's reading of them is instant
    assert len(probes) == 1


@pytest.mark.slow
def test_an_output_buffer_the_reference_writes_in_place_is_named() -> None:
    """GPU MODE's `data` often carries the buffer the result goes into; the keep-inputs rule says "unless the
    reference does", so the facts say which input the reference writes (its version counter moved)."""
    task = load_task(Path(__file__).parent / "fixtures" / "gpumode" / "scaled_add")
    f = task_facts(task)
    w = next(w for w in f.workloads if w.inputs)  # its scalar is drawn as a Python float: a real run's facts
    assert [(t.name, t.written) for t in w.inputs] == [
        ("data[0]", False),
        ("data[1]", False),
        ("data[2]", False),
        ("data[3]", True),
    ]
    assert (
        "the reference writes data[3] in place: a candidate may write it too; every other input must be left"
        in f.text()
    )
