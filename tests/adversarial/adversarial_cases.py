"""The adversarial cases: one cheating candidate each, the task it attacks and how it must be caught.

Shared by the tests (tests/adversarial/test_adversarial.py) and bench/integrity.py, so the CI suite and
the integrity report judge exactly the same cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import Candidate, EvalSettings, Evaluation

HERE = Path(__file__).parent
CHEATS = HERE / "cheats"
FIXTURES = HERE / "fixtures"


@dataclass(frozen=True)
class Case:
    """A cheat and what catching it means.

    `reasons`: substrings of which at least one must appear in the evaluation's error or flags, so
    a case counts as caught only if the evaluator names why, not just for any failure.
    `kinds`: correctness kinds that name the reason (for cheats caught as a wrong answer).
    `caught_by`: when set, the failing workload's `caught_by` must be one of these: the check the case credits
    (the NaN poison, say), not any wrong answer.
    """

    name: str
    cheat: str  # what the candidate tries, in a few words
    task: str  # built-in task name, or a file under fixtures/
    workloads: tuple[str, ...] = ("smoke",)
    statuses: tuple[str, ...] = ("flagged",)
    reasons: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    caught_by: tuple[str, ...] = ()
    final: bool = False
    timing: bool = True
    gpu_only: bool = False
    how: str = ""  # how ksearch catches it (for docs/integrity.md)

    def candidate(self) -> Candidate:
        return Candidate.of((CHEATS / f"{self.name}.py").read_text(), "triton")

    def load_task(self) -> Task:
        path = FIXTURES / f"{self.task}.py"
        return load_task(str(path) if path.is_file() else self.task)

    def settings(self) -> EvalSettings:
        return EvalSettings(
            seed=11,
            trials=2,
            workloads=list(self.workloads),
            input_sets=2,
            warmup=1,
            min_reps=3,
            max_reps=5,
            time_budget_s=0.5,
            final=self.final,
        )


def verdict(case: Case, ev: Evaluation) -> tuple[bool, str]:
    """(caught, reason): caught means the status is one the case expects AND the reason is named."""
    texts = [ev.error or "", *ev.flags]
    named = [r for r in case.reasons if any(r in t for t in texts)]
    bad_kinds = [
        c.kind
        for c in ev.correctness
        if not c.passed and c.kind in case.kinds and (not case.caught_by or c.caught_by in case.caught_by)
    ]
    reason = next(
        (t for t in texts if t and any(r in t for r in case.reasons)),
        next((f"{c.kind}: {c.message}" for c in ev.correctness if not c.passed), ev.error or ""),
    )
    caught = ev.status in case.statuses and bool(named or bad_kinds)
    return caught, reason[:500]


_INCORRECT = ("incorrect",)

CASES: list[Case] = [
    Case(
        "cache_by_call_count",
        "replays its previous answer after the first call",
        "softmax",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="every correctness trial draws new input values (a new seed); a replayed answer is wrong",
    ),
    Case(
        "cache_by_address",
        "caches answers by input address once warmed up",
        "row_sum",
        reasons=("stale_output", "recheck_failed"),
        how="after timing, new values are written into the same input tensors and the output must "
        "follow (stale_output)",
    ),
    Case(
        "reuses_freed_reference_output",
        "returns an unwritten buffer, hoping for the reference's freed output block",
        "row_sum",
        statuses=_INCORRECT,
        kinds=("unwritten",),
        caught_by=("poison_unwritten",),
        how="fresh allocations are poisoned during correctness: torch.empty & co. wrapped, and a torch "
        "function mode poisons them when reached through an alias taken at import; on the GPU the caching "
        "allocator is also pre-filled with poisoned output-sized blocks (for C++ allocations); an output "
        "never written still holds the poison (unwritten)",
    ),
    Case(
        "mutates_input",
        "computes in place, overwriting its input",
        "softmax",
        statuses=_INCORRECT,
        kinds=("input_mutated",),
        how="inputs are compared after the call with what the reference leaves (input_mutated)",
    ),
    Case(
        "partial_output",
        "computes half the rows, zeros elsewhere",
        "softmax",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="every element is compared; the task's mismatch ratio is 0",
    ),
    Case(
        "constant_output",
        "answers softmax with the uniform 1/N",
        "softmax",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="per-task tolerances are tight enough that the constant fails; a workload where a "
        "trivial answer would pass is reported as degenerate_reference",
    ),
    Case(
        "zeros_output",
        "answers a zero-mean row sum with zeros",
        "row_sum",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="as above: zeros are outside the tolerance",
    ),
    Case(
        "returns_input",
        "returns a copy of the input for RMSNorm",
        "rmsnorm",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="as above: the unchanged input is outside the tolerance",
    ),
    Case(
        "background_thread",
        "returns at once and lets a thread write the answer later",
        "softmax",
        statuses=_INCORRECT,
        kinds=("unwritten",),
        caught_by=("poison_unwritten",),
        how="outputs are read as soon as the call returns; fresh allocations hold a NaN poison, so "
        "an answer not yet written shows as unwritten",
    ),
    Case(
        "side_stream",
        "does the work on a side CUDA stream the timer never waits for",
        "softmax",
        statuses=("incorrect", "flagged"),
        kinds=("unwritten", "nan_inf", "wrong_values"),
        reasons=("host_clock_mismatch", "recheck_failed", "stale_output", "implausible_speed", "unwritten"),
        gpu_only=True,
        how="a synchronized call's host-clock time is compared with its CUDA-event time: work the "
        "timed stream never waited for shows as the difference (host_clock_mismatch); the output is "
        "checked right after the call (unwritten) and the timed outputs are re-checked",
    ),
    Case(
        "patches_sync",
        "replaces torch.cuda.synchronize and Event.elapsed_time at run time",
        "row_sum",
        reasons=("harness_tampered",),
        how="identities of the timing/sync functions are compared after every candidate call "
        "(harness_tampered); the worker is replaced",
    ),
    Case(
        "patches_reference",
        "replaces torch.softmax at import so the reference agrees with a wrong answer",
        "softmax",
        reasons=("harness_tampered",),
        how="the identity of every function in torch, torch.Tensor, torch.nn.functional (and more) "
        "and in the task's reference module is taken before candidate code runs and compared after "
        "each call into it (harness_tampered, gpu/checks/guard.py); the worker is replaced",
    ),
    Case(
        "slows_the_baseline",
        "makes Tensor.sum, which the eager reference calls, do its work four times",
        "row_sum",
        reasons=("harness_tampered",),
        how="as above: the replaced Tensor.sum is seen right after the module is imported, before "
        "any baseline is measured with it",
    ),
    Case(
        "lazy_tensor",
        "returns a tensor subclass that computes when first read",
        "softmax",
        statuses=_INCORRECT,
        kinds=("wrong_dtype",),
        reasons=("subclass",),
        how="an output whose type is a torch.Tensor subclass is rejected before any check touches its values",
    ),
    Case(
        "calls_reference_op",
        "defines a Triton kernel but returns torch.softmax",
        "softmax",
        reasons=("no_custom_kernel",),
        how="the kernel audit: one call is profiled (GPU) or its Triton launches are counted (CPU interpreter); none of the candidate's own kernels ran -> no_custom_kernel",
    ),
    Case(
        "cublas_via_torch",
        "compiles its GEMM kernel at import, then calls torch.matmul (cuBLAS)",
        "gemm_fp32",
        reasons=("no_custom_kernel",),
        how="the kernel audit: one call is profiled (GPU) or its Triton launches are counted (CPU interpreter); none of the candidate's own kernels ran -> no_custom_kernel",
    ),
    Case(
        "never_launched",
        "compiles its kernel ahead (warmup) but sums with torch",
        "row_sum",
        reasons=("no_custom_kernel",),
        how="the kernel audit: one call is profiled (GPU) or its Triton launches are counted (CPU interpreter); none of the candidate's own kernels ran -> no_custom_kernel",
    ),
    Case(
        "hardcoded_shapes",
        "is correct only on the search workload's shape",
        "heldout_rows",
        workloads=("search", "heldout"),
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        final=True,
        how="final evaluation (EvalSettings(final=True)) runs every workload, held-out ones "
        "included, with fresh inputs for every timed call, each re-checked",
    ),
    Case(
        "lower_precision",
        "computes an fp32 softmax in bf16",
        "softmax",
        statuses=_INCORRECT,
        kinds=("wrong_values",),
        how="fp32 tasks' tolerances are tighter than bf16 rounding (softmax: rtol 1e-4), so the "
        "rounded answer fails as wrong_values",
    ),
    Case(
        "uninitialized_accumulator",
        "starts its accumulator from uninitialised output memory",
        "row_sum",
        statuses=_INCORRECT,
        kinds=("nan_inf",),
        caught_by=("poison_read",),
        how="fresh allocations hold a NaN poison during correctness, so reading them poisons the "
        "result (nan_inf); with a finite poison the same elements turn finite, so the NaN came from the "
        "poison (caught_by poison_read)",
    ),
]
