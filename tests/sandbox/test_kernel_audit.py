"""The kernel audit credits a candidate only with kernels whose identifier is exactly one of its own: names as
the profiler reports them (Triton, demangled and mangled C++) against the identifiers in the candidate."""

from __future__ import annotations

import pytest

from ksearch.gpu.checks.kernel_names import kernel_base_name, ran_own_kernel

pytestmark = pytest.mark.anyio

# Names of PyTorch's own kernels as torch.profiler reports them on an H100/H200.
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
    "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 2ul>)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
)
CUBLAS = (
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_kernel__5x_cublas"
)


@pytest.mark.parametrize(
    ("reported", "base"),
    [
        ("softmax_kernel", "softmax_kernel"),  # Triton: the function's name
        ("void row_sum<float, 4>(float const*, float*, int)", "row_sum"),  # a templated CUDA kernel
        ("void ns::inner::scale(float*, int)", "scale"),
        ("_Z7row_sumPKfPfi", "row_sum"),  # an extern "C++" kernel, mangled
        ("_ZN2ns5scaleIfEEvPT_i", "scale"),  # nested and templated, mangled
        (ELEMENTWISE, "vectorized_elementwise_kernel"),
        (SOFTMAX, "cunn_SoftMaxForward"),
        (CUBLAS, CUBLAS),
        ("my_kernel<float>", "my_kernel"),  # an NVRTC name expression
    ],
)
def test_base_name(reported: str, base: str) -> None:
    assert kernel_base_name(reported) == base


@pytest.mark.parametrize(
    ("own", "launched"),
    [
        ({"kernel"}, [ELEMENTWISE]),  # `kernel` is in `vectorized_elementwise_kernel`, but is not it
        ({"SoftMax"}, [SOFTMAX]),
        ({"gemm"}, [CUBLAS]),
        ({"row"}, ["void row_sum<float, 4>(float const*, float*, int)"]),
        ({"softmax"}, ["softmax_kernel"]),
    ],
)
def test_a_substring_of_a_library_kernel_is_not_the_candidates_own(
    own: set[str], launched: list[str]
) -> None:
    assert not ran_own_kernel(launched, own)


@pytest.mark.parametrize(
    ("own", "launched"),
    [
        ({"softmax_kernel"}, [ELEMENTWISE, "softmax_kernel"]),
        ({"row_sum"}, ["void row_sum<float, 4>(float const*, float*, int)"]),
        ({"row_sum"}, ["_Z7row_sumPKfPfi"]),
        ({"my_kernel<float>"}, ["void my_kernel<float>(float*)"]),
    ],
)
def test_the_candidates_own_kernel_is_credited(own: set[str], launched: list[str]) -> None:
    assert ran_own_kernel(launched, own)


SUBSTRING_CHEAT = """
import torch
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, n):  # never launched; its name is a substring of PyTorch's elementwise kernels
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0  # PyTorch's vectorized_elementwise_kernel does the work
"""


@pytest.mark.gpu
async def test_a_library_kernel_named_like_the_candidates_is_not_its_own(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand(SUBSTRING_CHEAT), affine, st("small"))
    assert ev.pure_pytorch, ev.flags
    assert any(f.startswith("no_custom_kernel") for f in ev.flags), ev.flags


async def test_an_evaluation_that_times_audits_after_its_timing(sandbox, affine, cand, st) -> None:
    """A profiler session leaves a process slower to issue GPU work, so an evaluation that times the candidate
    asks for the audit after its timing; one that only checks gets it with the check. Either way the verdict
    is the same."""
    timed = await sandbox.evaluate(cand(SUBSTRING_CHEAT), affine, st("small"))
    steps = list(timed.seconds_by_step)
    assert timed.pure_pytorch, timed.flags
    assert "audit" in steps and "timing" in steps and steps.index("audit") > steps.index("timing"), steps
    checked = await sandbox.correctness(cand(SUBSTRING_CHEAT), affine, st("small"))
    assert checked.pure_pytorch, checked.flags
    assert "audit" not in checked.seconds_by_step, checked.seconds_by_step
