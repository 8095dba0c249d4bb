"""A GPU MODE generator's fills from torch's global CPU generator are made on the GPU, seeded by the trial's seed
(gpu/tasks/draws/gpu_fills.py): TriMul's Cauchy inputs took ~17 s per draw on the CPU, and GPU MODE's evaluator draws them
from an unseeded generator, so their values were never a function of the seed there.

The mechanism runs on any device; here it is run on the CPU (`redirected_fills`), and the GPU tests run the policy
(`gpu_fills`) and a whole evaluation on a task shaped like TriMul's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from ksearch.gpu.tasks.draws import gpu_fills
from ksearch.gpu.tasks.draws.gpu_fills import fill_seed, redirected_fills

CPU = torch.device("cpu")
FIX = Path(__file__).parent / "fixtures" / "gpumode" / "cpu_cauchy"


def _cauchy(n: int = 100_000) -> torch.Tensor:
    return torch.distributions.Cauchy(0, 2).sample((n,))


def test_the_values_follow_the_seed_not_the_global_generators_state() -> None:
    torch.manual_seed(5)
    with redirected_fills(CPU, 7) as made:
        a = _cauchy()
    torch.manual_seed(99)
    _cauchy(10)  # the global generator moved on
    with redirected_fills(CPU, 7):
        b = _cauchy()
    with redirected_fills(CPU, 8):
        c = _cauchy()
    assert made == {"cauchy_": 1}
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(5)
    assert not torch.equal(a, _cauchy()), "the fill was not redirected: it is the global generator's draw"
    # the distribution is Cauchy(0, 2): median 0, half of the mass within the scale
    assert abs(float(a.median())) < 0.05
    assert abs(float((a.abs() < 2).float().mean()) - 0.5) < 0.01


def test_the_fills_generator_is_not_the_global_cuda_one_seeded_alike() -> None:
    # the global generators are seeded with the trial's seed; a fills generator seeded alike would draw the same
    # stream as a weight drawn from the global CUDA generator
    assert fill_seed(7) != 7 and fill_seed(7) != fill_seed(8)
    assert 0 <= fill_seed(2**62) < 2**63


def test_a_generator_that_seeds_the_global_generator_itself_draws_as_its_code_does() -> None:
    before = (torch.manual_seed, torch.random.manual_seed, torch.set_rng_state)
    with redirected_fills(CPU, 7) as made:
        assert torch.manual_seed is not before[0]
        torch.manual_seed(1234)  # the owner's values are now a function of its seed: not redirected
        a = _cauchy()
    torch.manual_seed(1234)
    assert torch.equal(a, _cauchy()) and made == {}
    # the seeding functions are restored on the way out
    assert (torch.manual_seed, torch.random.manual_seed, torch.set_rng_state) == before


def test_a_generator_seeded_through_another_path_is_noticed_by_its_initial_seed() -> None:
    with redirected_fills(CPU, 7) as made:
        torch.default_generator.manual_seed(4321)  # not through the patched functions
        a = _cauchy()
    torch.default_generator.manual_seed(4321)
    assert torch.equal(a, _cauchy()) and made == {}


def test_a_fill_with_its_own_generator_is_left_alone() -> None:
    g = torch.Generator().manual_seed(3)
    with redirected_fills(CPU, 7) as made:
        a = torch.empty(1000).normal_(generator=g)
    assert (
        torch.equal(a, torch.empty(1000).normal_(generator=torch.Generator().manual_seed(3))) and made == {}
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_every_op_fills_the_very_tensor_in_its_dtype_chunk_by_chunk(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_fills, "CHUNK", 1000)  # several chunks
    x = torch.full((50, 70), float("nan"), dtype=dtype).t()  # not contiguous
    with redirected_fills(CPU, 1) as made:
        y = x.uniform_(2.0, 3.0)
        z = torch.full((2500,), float("nan"), dtype=dtype).exponential_(2.0)
        w = torch.full((2500,), float("nan"), dtype=dtype).log_normal_(0.0, 0.5)
        v = torch.full((2500,), float("nan"), dtype=dtype).normal_(10.0, 1.0)
    assert y is x and x.dtype == dtype and not x.isnan().any()
    assert bool(((x >= 2.0) & (x <= 3.0)).all())
    assert float(x.float().std()) > 0.2  # values differ across chunks, not one chunk repeated
    assert len(set(x.float().flatten().tolist())) > 1000 or dtype in (torch.float16, torch.bfloat16)
    assert bool((z > 0).all()) and abs(float(z.float().mean()) - 0.5) < 0.05
    assert bool((w > 0).all()) and abs(float(v.float().mean()) - 10.0) < 0.1
    assert made == {"uniform_": 1, "exponential_": 1, "log_normal_": 1, "normal_": 1}


def test_integer_tensors_and_fake_tensors_are_left_alone() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with redirected_fills(CPU, 7) as made:
        i = torch.zeros(10, dtype=torch.int64).random_(0, 5)
        with FakeTensorMode():
            f = torch.empty(10).cauchy_()
    assert i.dtype == torch.int64 and f.shape == (10,) and made == {}


def test_without_a_gpu_nothing_changes() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with gpu_fills.gpu_fills("cuda", 7) as made:
        torch.manual_seed(3)
        a = _cauchy(1000)
    torch.manual_seed(3)
    assert made is None and torch.equal(a, _cauchy(1000))
    with gpu_fills.gpu_fills("cpu", 7) as made:
        pass
    assert made is None


# ---------------------------------------------------------------- what keeping values on the device must not change
# (each of these read unwritten memory, raised, or lost a graph before lazy_fills covered its case)

N = 4096


def _eager_n(seed: int = 3, n: int = N) -> torch.Tensor:
    """The reference: the same fill of a tensor the fills did not see allocated (written eagerly)."""
    e = torch.zeros(n)
    with redirected_fills(CPU, seed):
        e.cauchy_()
    return e


# ---- ALLOC ops that alias existing memory: Tensor.new(tensor|storage), torch.empty(out=)


def test_tensor_new_of_a_kept_tensor_aliases_its_unwritten_memory() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        alias = t.new(t)  # legacy constructor: an alias of t, through the ALLOC branch (nothing written)
        got = alias.clone()
    assert torch.equal(got, _eager_n())


def test_tensor_new_of_an_existing_tensor_is_taken_for_fresh_memory() -> None:
    z = torch.zeros(N)
    with redirected_fills(CPU, 3):
        torch.zeros(1).new(z).cauchy_()  # fills z's memory in eager torch
        got = z.clone()
    assert torch.equal(got, _eager_n())


def test_tensor_new_of_a_storage_is_taken_for_fresh_memory() -> None:
    z = torch.zeros(N)
    with redirected_fills(CPU, 3):
        torch.zeros(1).new(z.untyped_storage()).cauchy_()
        got = z.clone()
    assert torch.equal(got, _eager_n())


def test_empty_out_returns_an_existing_tensor_whose_views_miss_the_fill() -> None:
    z = torch.zeros(N)
    view = z[:10]
    with redirected_fills(CPU, 3):
        torch.empty(N, out=z).cauchy_()
        got = view.clone()
    assert torch.equal(got, _eager_n()[:10])


def test_empty_out_resizing_a_kept_tensor_keeps_values_of_the_old_shape() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        torch.empty(N // 2, out=t)  # eager: t keeps its first N/2 values
        got = t.clone()  # here: RuntimeError from copy_ of the (N,) shadow into (N/2,)
    assert torch.equal(got, _eager_n()[: N // 2])


# ---- C entry points that alias or read a tensor without __torch_function__


def test_a_parameter_made_of_a_sample_holds_its_values() -> None:
    with redirected_fills(CPU, 3):
        p = torch.nn.Parameter(
            torch.distributions.Cauchy(0, 2).sample((N,))
        )  # _make_subclass: no torch function
        inside = p.detach().clone()
    after = p.detach().clone()  # the sample itself died: its shadow went with it, never written
    want = _eager_n() * 2.0
    assert torch.equal(inside, want) and torch.equal(after, want)


def test_a_parameter_made_of_fresh_memory_before_its_fill_sees_the_fill() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N)
        p = torch.nn.Parameter(t, requires_grad=False)  # shares t's memory, unseen: t stays "fresh"
        t.cauchy_()
        got = p.clone()
    assert torch.equal(got, _eager_n())


def test_as_subclass_of_a_kept_tensor() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        got = t.as_subclass(torch.Tensor).clone()
    assert torch.equal(got, _eager_n())


def test_the_legacy_tensor_constructor_of_a_kept_tensor() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        got = torch.Tensor(t).clone()
    assert torch.equal(got, _eager_n())


def test_to_dlpack_of_a_kept_tensor() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        got = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t)).clone()
    assert torch.equal(got, _eager_n())


def test_a_nested_tensor_of_a_kept_tensor() -> None:
    with redirected_fills(CPU, 3):
        t = torch.empty(N).cauchy_()
        got = torch.nested.nested_tensor([t], layout=torch.jagged).unbind()[0].clone()
    assert torch.equal(got, _eager_n())


# ---- inference mode: a kept inference tensor cannot be written (copy_) outside inference mode


def test_a_sample_drawn_in_inference_mode_can_be_read_after_it() -> None:
    with redirected_fills(CPU, 3):
        with torch.inference_mode():
            t = torch.empty(N).cauchy_()
        s = t.sum()  # eager: fine; here copy_ into an inference tensor outside inference mode raises
    assert torch.equal(s, _eager_n().sum())


def test_leaving_the_context_with_a_kept_inference_tensor_restores_the_seeders() -> None:
    before = torch.manual_seed
    try:
        with redirected_fills(CPU, 3):
            with torch.inference_mode():
                t = torch.empty(N).cauchy_()
        assert torch.equal(t, _eager_n())
    finally:
        patched = torch.manual_seed is not before
        torch.manual_seed = before  # undo the leak for the other tests
    assert not patched, "write_all raised in the finally: torch.manual_seed stays patched for the process"


# ---- autograd: a shadowed result of an op with a requires-grad 0-dim operand


def test_rsample_with_a_learnable_scale_requires_grad() -> None:
    scale = torch.tensor(2.0, requires_grad=True)
    with redirected_fills(CPU, 3):
        s = torch.distributions.Cauchy(torch.tensor(0.0), scale).rsample((N,))
        rg = s.requires_grad  # metadata read passes: the stand-in was made with no graph
    assert rg


def test_rsample_read_under_no_grad_still_has_its_graph() -> None:
    scale = torch.tensor(2.0, requires_grad=True)
    with redirected_fills(CPU, 3):
        s = torch.distributions.Cauchy(torch.tensor(0.0), scale).rsample((N,))
        with torch.no_grad():
            s.max()  # materialises s by copy_ under no_grad: the graph to `scale` is lost
        s.sum().backward()  # eager: fine
    assert scale.grad is not None


# ---- the weak references themselves


def test_swap_tensors_of_a_tensor_allocated_in_the_context() -> None:
    with redirected_fills(CPU, 3):
        a, b = torch.empty(N), torch.zeros(N)
        torch.utils.swap_tensors(a, b)  # raised "Cannot swap t1 because it has weakref" (fresh ones had one)
        a.cauchy_()
    assert torch.equal(a, _eager_n()) and a.shape == (N,)


@pytest.mark.gpu
def test_on_the_gpu_a_large_cauchy_draw_takes_a_fraction_of_the_cpus_time() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    n = 50_000_000
    t0 = time.perf_counter()
    torch.manual_seed(1)
    _cauchy(n)
    cpu_s = time.perf_counter() - t0
    with gpu_fills.gpu_fills("cuda", 1):
        _cauchy(1000)  # the CUDA generator's first use
    t0 = time.perf_counter()
    with gpu_fills.gpu_fills("cuda", 1) as made:
        a = _cauchy(n)
    gpu_s = time.perf_counter() - t0
    assert made == {"cauchy_": 1} and a.device.type == "cpu" and a.dtype == torch.float32
    assert abs(float((a.abs() < 2).float().mean()) - 0.5) < 0.001
    print(f"50M Cauchy values: CPU {cpu_s:.2f} s, GPU fills {gpu_s:.2f} s")
    assert gpu_s < cpu_s / 3, (cpu_s, gpu_s)


@pytest.mark.gpu
def test_on_the_gpu_a_sample_moved_to_it_never_crosses_to_the_host_and_has_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from ksearch.gpu.tasks.draws.lazy_fills import LazyFills

    def trimul_like() -> torch.Tensor:  # TriMul's bench4 input, drawn as its generate_input draws it
        return (
            torch.distributions.Cauchy(0, 2)
            .sample((1, 1024, 1024, 128))
            .to(device="cuda", dtype=torch.float32)
        )

    def timed() -> tuple[torch.Tensor, float]:
        with gpu_fills.gpu_fills("cuda", 5):
            trimul_like()  # warm: the allocator's blocks, the generator
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with gpu_fills.gpu_fills("cuda", 5):
            x = trimul_like()
        torch.cuda.synchronize()
        return x, time.perf_counter() - t0

    kept, kept_s = timed()
    monkeypatch.setattr(LazyFills, "can_keep", lambda self, t: False)
    written, written_s = timed()
    assert kept.device.type == "cuda" and torch.equal(kept, written)
    print(
        f"134M Cauchy values moved to the GPU: kept there {kept_s:.3f} s, through the host {written_s:.3f} s"
    )
    assert kept_s < written_s / 3, (kept_s, written_s)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.gpu
@pytest.mark.anyio
async def test_an_evaluation_says_its_inputs_were_drawn_on_the_gpu(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.gpu.tasks import load_task
    from ksearch.worldmodel.models import Candidate, EvalSettings

    task = load_task(str(FIX))
    src = "import torch\n\ndef custom_kernel(data):\n    x, w = data\n    return torch.tanh(x) * w\n"
    cand = Candidate.of(src, "triton")
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=120.0, n_workers=1)
    try:
        ev = await sb.evaluate(cand, task, EvalSettings(seed=5, timing_protocol="gpumode"))
    finally:
        await sb.close()
    assert ev.status == "ok", ev.error
    (note,) = [f for f in ev.flags if "drawn on the GPU" in f]
    assert "cauchy_" in note, note


# ---------------------------------------------------------------- values kept on the device (gpu/tasks/draws/lazy_fills.py)


def _eager_cauchy(seed: int, n: int) -> torch.Tensor:
    """The same draw made without keeping anything on the device: a tensor the fills did not see allocated."""
    eps = torch.zeros(n)
    with redirected_fills(CPU, seed):
        eps.cauchy_()
    return torch.tensor(0.0) + eps * torch.tensor(2.0)


def test_a_sample_cast_away_is_written_on_the_host_only_as_its_cast_and_has_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpu_fills, "CHUNK", 3000)
    modes: list[object] = []
    real = gpu_fills._GpuFills.__init__

    def spy(self: object, *a: object, **k: object) -> None:
        real(self, *a, **k)  # type: ignore[arg-type]
        modes.append(self)

    monkeypatch.setattr(gpu_fills._GpuFills, "__init__", spy)
    with redirected_fills(CPU, 11) as made:
        moved = _cauchy(10_000).to(dtype=torch.float64)  # the sample itself is dropped on the way
    lazy = modes[0].lazy  # type: ignore[attr-defined]
    assert made == {"cauchy_": 1}
    # kept: eps, eps * scale, loc + that, the cast; written: only the cast, which outlives the context (on a GPU a
    # move to it is a copy of the shadow: nothing is written)
    assert lazy.kept == 4 and lazy.written == 1, (lazy.kept, lazy.written)
    assert torch.equal(moved, _eager_cauchy(11, 10_000).to(torch.float64))


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t[3:7].clone(),  # a view made after the fill
        lambda t: torch.from_numpy(t.numpy().copy()),
        lambda t: t.add_(0.0).clone(),  # in place
        lambda t: torch.exp(t).log(),  # an op not run on the shadow
        lambda t: t.to(torch.float64, copy=True).float(),
        lambda t: t * torch.ones(10_000),  # a tensor operand that is not a number
    ],
)
def test_anything_else_that_reads_a_kept_tensor_reads_its_values(read: object) -> None:
    want = _eager_cauchy(4, 10_000)
    with redirected_fills(CPU, 4):
        t = _cauchy(10_000)
        got = read(t)  # type: ignore[operator]
    expected = read(want.clone())  # type: ignore[operator]
    assert torch.equal(got, expected) or torch.allclose(got, expected, equal_nan=True)
    assert torch.equal(t, want)


def test_a_kept_tensor_that_outlives_the_context_holds_its_values() -> None:
    with redirected_fills(CPU, 9):
        t = torch.empty(5000).normal_(1.0, 2.0)
        s = t * 3.0 - 1
        shape, dtype, n = t.shape, t.dtype, t.numel()  # metadata alone leaves it kept
    eager = torch.zeros(5000)
    with redirected_fills(CPU, 9):
        eager.normal_(1.0, 2.0)
    assert (shape, dtype, n) == ((5000,), torch.float32, 5000)
    assert torch.equal(t, eager) and torch.equal(s, eager * 3.0 - 1)


def test_a_tensor_used_before_its_fill_is_filled_in_place() -> None:
    # a view made before the fill shares the memory: the values must be in it
    with redirected_fills(CPU, 2):
        base = torch.empty(100)
        view = base[10:20]
        base.uniform_(5.0, 6.0)
        assert bool(((view >= 5.0) & (view <= 6.0)).all())
    with redirected_fills(CPU, 2):
        half = torch.empty(100, dtype=torch.float16).uniform_(5.0, 6.0)  # not kept: float16
    assert half.dtype == torch.float16 and bool(((half >= 5.0) & (half <= 6.0)).all())


def test_a_scaled_add_runs_on_the_host_as_written() -> None:
    # add(alpha=) may be fused on the CPU: it is not run on the shadow
    want = _eager_cauchy(3, 1000)
    with redirected_fills(CPU, 3):
        t = _cauchy(1000)
        got = torch.add(t, t, alpha=0.5)
    assert torch.equal(got, torch.add(want, want, alpha=0.5))
