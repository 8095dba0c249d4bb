"""The text of an evaluation result, what the model reads after every attempt: its decisive lines (status,
errors with line numbers, where it is wrong, each workload's median and speedups) in well under 900 bytes
with the loop's next step; the whole record stays structured. GPU-shaped records are built here, since
CI has no GPU to produce them."""

from __future__ import annotations

from ksearch.server.mcp.text import text_of
from ksearch.tools.run_correctness import EvaluationOut
from ksearch.worldmodel.models import (
    CompileReport,
    Diagnostic,
    Evaluation,
    KernelResources,
    WorkloadCorrectness,
    WorkloadTiming,
)

# the longest `next` a GPU benchmark gives while refining (tools/benchmark.py), with a two-digit node id
NEXT = (
    "next: recorded as attempt 3 of at most 8 on intent #12; 1 in a row without a significant gain (window 5). "
    "Write another implementation of this intent (implement the same intent differently, or better) and "
    "benchmark it with node_id=12; the prompt implement_intent has the feedback."
)


def _timing(workload: str, median: float, eager: float, compiled: float) -> WorkloadTiming:
    return WorkloadTiming(
        workload=workload,
        device="NVIDIA H200",
        median_us=median,
        iqr_us=1.1,
        ci_low_us=median - 0.9,
        ci_high_us=median + 1.2,
        n=10,
        eager_us=eager,
        compile_us=compiled,
        speedup_vs_eager=eager / median,
        speedup_vs_compile=compiled / median,
        roofline_fraction=0.91,
    )


def _out(ev: Evaluation) -> EvaluationOut:
    return EvaluationOut(
        candidate_id="0123456789abcdef", summary="", evaluation=ev, attempt_id=14, base_attempt_id=9
    )


def test_a_gpu_benchmark_reads_as_medians_and_speedups_in_under_800_bytes() -> None:
    ev = Evaluation(
        status="ok",
        compile=CompileReport(
            ok=True,
            language="triton",
            seconds=0.01,
            kernels=[
                KernelResources(name="_rows", registers=128, spill_stores_bytes=120, spill_loads_bytes=0)
            ],
        ),
        correctness=[
            WorkloadCorrectness(workload=w, passed=True, kind="ok", trials=3, max_abs_err=0.0625)
            for w in ("32768x8192", "65536x4096")
        ],
        timings=[_timing("32768x8192", 259.4, 3444.5, 250.9), _timing("65536x4096", 261.2, 3409.6, 524.9)],
        speedup_vs_eager=13.17,
        speedup_vs_compile=1.39,
        flags=["note: the eager baseline was measured in a fresh process"],
    )
    text = text_of(_out(ev), None)
    lines = text.splitlines()
    assert lines[0] == (
        "recorded as attempt #14 (built on #9), candidate 0123456789abcdef; record: ksearch://attempts/14"
    )
    assert lines[1] == "status: ok"
    assert (
        "  32768x8192: 259.4 us (258.5-260.6), 13.28x vs eager, 0.97x vs torch.compile, 91% roofline" in lines
    )
    assert (
        "  65536x4096: 261.2 us (260.3-262.4), 13.05x vs eager, 2.01x vs torch.compile, 91% roofline" in lines
    )
    assert "geomean: 13.17x vs eager, 1.39x vs torch.compile" in lines
    # what the figure counts: ptxas's static bytes per thread (the compile report's note says it whole: not the
    # run-time spill requests a profiler counts)
    assert "spills: _rows 120 B/thread (ptxas)" in lines
    assert "note:" not in text  # notes stay in the structured record
    assert len((text + NEXT).encode()) < 800, len((text + NEXT).encode())


def test_a_compile_error_names_its_lines_and_a_long_error_is_cut() -> None:
    ev = Evaluation(
        status="compile_error",
        compile=CompileReport(
            ok=False,
            language="cuda",
            seconds=0.4,
            diagnostics=[
                Diagnostic(severity="error", message="identifier 'blockIdy' is undefined", line=17),
                Diagnostic(
                    severity="warning", message="variable 'k' was declared but never referenced", line=9
                ),
            ],
        ),
        error="nvcc failed: " + "x" * 10_000,
    )
    text = text_of(_out(ev), None)
    assert "compile error at line 17: identifier 'blockIdy' is undefined" in text
    assert "line 9" not in text  # warnings do not crowd out what failed
    assert len(text.encode()) < 600


def test_ptxas_warnings_are_read_with_their_codes_once_each_and_bounded() -> None:
    """A host never read ptxas's C7515 "wgmma ... serialized" in a benchmark's text: ptxas's warnings are its compile
    line now, each once, three at most with a count of the rest; a build whose spills nobody counted (Triton's after
    a launch on a GPU) says its local memory per thread for what it is."""
    serialized = (
        "ptxas C7515: Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma "
        "instructions defining input registers of a wgmma between start and end of the pipeline stage in the "
        "function '_mm'"
    )
    ptxas = [
        Diagnostic(severity="warning", message=serialized, line=7, kernel="_mm"),
        Diagnostic(severity="warning", message=serialized, line=7, kernel="_mm"),  # two builds said it
        *(
            Diagnostic(severity="warning", message=f"ptxas C751{i}: other {i}", kernel="_mm")
            for i in range(3)
        ),
        Diagnostic(severity="warning", message="variable 'k' was declared but never referenced", line=9),
        Diagnostic(severity="note", message="_mm: 255 registers/thread; ptxas said nothing here"),
    ]
    ev = Evaluation(
        status="ok",
        compile=CompileReport(
            ok=True,
            language="triton",
            seconds=0.01,
            diagnostics=ptxas,
            kernels=[KernelResources(name="_mm", registers=255, stack_bytes=8)],
        ),
        correctness=[WorkloadCorrectness(workload="smoke", passed=True, kind="ok", trials=3)],
    )
    lines = text_of(_out(ev), None).splitlines()
    warned = [ln for ln in lines if ln.startswith("compiler warning: ")]
    assert warned[0].startswith("compiler warning: ptxas C7515: Potential Performance Loss: wgmma.mma_async")
    assert len(warned) == 3 and all(len(ln) <= len("compiler warning: ") + 240 for ln in warned)
    assert "  +1 more compiler warning(s) in the compile report" in lines
    assert not any("line 9" in ln or "declared but never referenced" in ln for ln in lines)
    assert not any(ln.startswith("spills:") for ln in lines)  # nobody counted them: no figure is made up
    assert (
        "local memory: _mm 8 B per thread (spilled registers or local arrays; static; run-time traffic is "
        "profile_ncu's)"
    ) in lines


def test_a_wrong_answer_says_where_and_cpu_timings_state_no_speedup() -> None:
    ev = Evaluation(
        status="incorrect",
        correctness=[
            WorkloadCorrectness(
                workload="smoke",
                passed=False,
                kind="wrong_values",
                trials=3,
                first_mismatch_index=[0, 3],
                expected_at_first=0.000357362,
                got_at_first=0.000178681,
                mismatches=280129,
                numel=287700,
                message="280129 of 287700 elements differ beyond atol=1e-07",
            )
        ],
        timings=[
            WorkloadTiming(
                workload="smoke",
                device="cpu-interpreter",
                median_us=81234.5,
                iqr_us=9.0,
                ci_low_us=80000.0,
                ci_high_us=90000.0,
                n=3,
                speedup_vs_eager=0.1,
            )
        ],
    )
    text = text_of(_out(ev), None)
    assert "INCORRECT on smoke: wrong_values: 280129 of 287700 elements differ beyond atol=1e-07" in text
    assert (
        "first mismatch at [0, 3]: expected 0.000357362, got 0.000178681; 280129/287700 elements off" in text
    )
    assert "smoke: median 81234 us in the CPU interpreter (not a speed)" in text
    assert "vs eager" not in text
    # a protocol that reports a mean names the mean, as its summary does
    ev.timings[0] = ev.timings[0].model_copy(update={"statistic": "mean", "mean_us": 88790.4})
    assert "smoke: mean 88790 us in the CPU interpreter (not a speed)" in text_of(_out(ev), None)


def test_a_base_the_caller_did_not_name_is_said_to_be_assumed() -> None:
    """A live host read "recorded as attempt #3 (built on #1)" and could not tell that #1 was guessed."""
    ev = Evaluation(status="ok", compile=CompileReport(ok=True, language="triton", seconds=0.01))
    out = _out(ev)
    out.base_assumed = "#9 assumed (no base_attempt_id was given): …"
    assert (
        text_of(out, None)
        .splitlines()[0]
        .startswith("recorded as attempt #14 (built on #9, assumed: no base_attempt_id was given), candidate")
    )


def test_a_large_relative_error_that_passed_is_said_in_the_hosts_text() -> None:
    """A live host's 16%-off softmax read "correct on smoke (3 trials, max abs err 8.61e-05)" in benchmark's text."""
    ev = Evaluation(
        status="ok",
        compile=CompileReport(ok=True, language="triton", seconds=0.01),
        correctness=[
            WorkloadCorrectness(
                workload="smoke", passed=True, kind="ok", trials=3, max_abs_err=8.61e-5, max_rel_err=0.1646
            )
        ],
    )
    line = next(ln for ln in text_of(_out(ev), None).splitlines() if ln.startswith("correct on"))
    assert line.startswith(
        "correct on smoke (3 trials, max abs err 8.61e-05, max rel err 16.5% on elements above"
    )
    assert "by its absolute tolerance alone" in line


def test_a_phase_prompt_in_a_result_reads_as_text_not_as_an_escaped_json_string() -> None:
    """finish_intent's result carries the reflect prompt: read as one JSON string, its newlines were `\\n`."""
    import json

    prompt = (
        "# Reflect\n\nThe tree:\n#1 [closed] online softmax\n  #2 [open] vectorize loads\n\nEdit the tree."
    )
    structured = {
        "node": {"id": 2, "title": "vectorize loads"},
        "reflect_prompt": prompt,
        "next": "call edit_tree",
    }
    text = text_of(object(), structured)
    head = text.split("\n\n", 1)[0]
    assert json.loads(head) == {
        "node": {"id": 2, "title": "vectorize loads"}
    }  # the rest of the record as JSON
    assert "reflect_prompt:\n# Reflect\n\nThe tree:\n#1 [closed] online softmax\n  #2 [open]" in text
    # the loop's next step is the server's own last block (tests/mcp/test_mcp_finish.py), never said here too
    assert "\\n" not in text and "next:" not in text and text.endswith("Edit the tree.")
    # a short one-line field stays in the JSON; a result that is not an object is its JSON
    assert json.loads(text_of(object(), {"a": "short", "next": ""})) == {"a": "short"}
    assert json.loads(text_of(object(), [1, 2])) == [1, 2]
