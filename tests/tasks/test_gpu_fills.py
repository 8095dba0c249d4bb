"""A GPU MODE generator's fills from torch's global CPU generator are made on the GPU, seeded by the trial's seed
(gpu/tasks/gpu_fills.py): TriMul's Cauchy inputs took ~17 s per draw on the CPU, and GPU MODE's evaluator draws them
from an unseeded generator, so their values were never a function of the seed there.

The mechanism runs on any device; here it is run on the CPU (`redirected_fills`), and the GPU tests run the policy
(`gpu_fills`) and a whole evaluation on a task shaped like TriMul's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from ksearch.gpu.tasks import gpu_fills
from ksearch.gpu.tasks.gpu_fills import fill_seed, redirected_fills

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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.gpu
@pytest.mark.anyio
async def test_an_evaluation_says_its_inputs_were_drawn_on_the_gpu(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from ksearch.gpu.sandbox import LocalSandbox
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
