"""What the run-time compiler built is what a kernel's resources say: nvcc's static figures for a kernel that
NVRTC or Triton built at run time (other registers, other spills) are replaced, never shown beside them."""

from __future__ import annotations

from ksearch.gpu.build.occupancy import annotate
from ksearch.gpu.sandbox.run import Run, merge_compile
from ksearch.worldmodel.models import Candidate, CompileReport, EvalSettings, KernelResources


def test_the_run_time_build_replaces_nvccs_static_figures_for_the_same_kernel() -> None:
    static_k, static_notes = annotate(
        KernelResources(
            name="scale", registers=50, spill_stores_bytes=0, spill_loads_bytes=0, shared_bytes=0
        ),
        "sm_90",
    )
    other_k, other_notes = annotate(KernelResources(name="helper", registers=40, shared_bytes=0), "sm_90")
    static = CompileReport(
        ok=True,
        language="cuda",
        seconds=0.1,
        kernels=[static_k, other_k],
        diagnostics=static_notes + other_notes,
    )
    run = Run(Candidate.of("# cuda\n", "cuda"), EvalSettings(seed=1))
    run.ran = True
    run.runtime_kernels = [{"name": "scale", "registers": 48, "shared_bytes": 0, "spill_stores_bytes": 0}]
    merged = merge_compile(static, run, "sm_90")
    by_name = {k.name: k for k in merged.kernels}
    assert (
        by_name["scale"].registers == 48 and by_name["helper"].registers == 40
    )  # not rebuilt: nvcc's stands
    scale_notes = [d.message for d in merged.diagnostics if d.kernel == "scale"]
    assert len(scale_notes) == 1 and "48 registers/thread" in scale_notes[0], scale_notes
    assert not any("50 registers" in d.message for d in merged.diagnostics)
    assert any("40 registers/thread" in d.message for d in merged.diagnostics if d.kernel == "helper")
