"""Nsight Compute's CSV details page -> ProfileSummary, from a realistic sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.timing.ncu import ProfileError, import_command, ncu_command, parse_details, parse_raw_stalls

SAMPLE = (Path(__file__).parent / "fixtures" / "ncu_details.csv").read_text()
RAW = (Path(__file__).parent / "fixtures" / "ncu_raw.csv").read_text()


def test_main_kernel_numbers() -> None:
    p = parse_details(SAMPLE, "8192x32768", raw_text=RAW)
    assert p.kernel == "_softmax_rows"  # the longest kernel of the call, not the fill
    assert p.workload == "8192x32768"
    assert p.duration_us == pytest.approx(612.448)
    assert p.dram_throughput_pct == pytest.approx(87.41)
    assert p.sm_throughput_pct == pytest.approx(41.06)
    assert p.achieved_occupancy_pct == pytest.approx(89.57)
    assert p.registers_per_thread == 32
    assert p.shared_bytes_per_block == 1024
    assert p.l1_hit_rate_pct == pytest.approx(0.02)
    assert p.l2_hit_rate_pct == pytest.approx(33.51)
    assert [s for s, _ in p.top_stalls] == ["long_scoreboard", "barrier", "wait", "short_scoreboard"]
    assert p.top_stalls[0][1] == pytest.approx(17.58)


def test_stalls_come_from_the_raw_page_per_kernel() -> None:
    stalls = parse_raw_stalls(RAW)
    assert set(stalls) == {"0", "1"}
    assert stalls["0"]["long_scoreboard"] == pytest.approx(17.58)
    assert "math_pipe_throttle" in stalls["0"]  # zero values are kept here, dropped from the summary
    assert parse_details(SAMPLE, "w").top_stalls == []  # without the raw page there is no breakdown


def test_advice_is_ncus_own_rules_ranked_by_estimated_speedup() -> None:
    p = parse_details(SAMPLE, "w")
    assert p.advice[0].startswith("CPIStall: On average, each warp") and "(est. speedup 58%)" in p.advice[0]
    assert p.advice[1].startswith("AchievedOccupancy:")
    assert any(a.startswith("SOLBottleneck:") for a in p.advice)
    assert not any("UncoalescedGlobalAccess" in a for a in p.advice)  # INF rules are not advice
    assert "vectorized_elementwise_kernel" in p.metrics["other kernels in the call"]


def test_kernel_filter_picks_the_named_kernel() -> None:
    p = parse_details(SAMPLE, "w", kernel_regex="elementwise")
    assert "vectorized_elementwise_kernel" in p.kernel
    assert p.duration_us == pytest.approx(3.52)


def test_no_rows_explains_permissions() -> None:
    with pytest.raises(ProfileError, match="ERR_NVGPUCTRPERM"):
        parse_details("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n", "w")


def test_command_leaves_clocks_alone_and_filters_case_sensitively() -> None:
    cmd = ncu_command(
        "/usr/local/cuda/bin/ncu",
        ["python", "-m", "ksearch.gpu.worker.profile_driver", "s.json"],
        "r.ncu-rep",
        "softmax",
    )
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--export") + 1] == "r.ncu-rep"
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:softmax"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[-4:] == ["python", "-m", "ksearch.gpu.worker.profile_driver", "s.json"]
    imp = import_command("ncu", "r.ncu-rep", "raw")
    assert imp[imp.index("--page") + 1] == "raw" and "--csv" in imp


def _launch(new_id: str, duration_ns: str, registers: str) -> str:
    """The fixture's softmax launch (ID 0) again as launch `new_id`, with other numbers."""
    rows = [ln for ln in SAMPLE.splitlines() if ln.startswith('"0",')]
    out = []
    for ln in rows:
        ln = '"' + new_id + '"' + ln[3:]
        if '"Duration","ns"' in ln or '"gpu__time_duration.sum","ns"' in ln:
            ln = ln.replace('"612,448"', f'"{duration_ns}"')
        if '"Registers Per Thread"' in ln:
            ln = ln.replace('"32"', f'"{registers}"')
        out.append(ln)
    return "\n".join(out)


def test_several_profiled_calls_give_the_median_launch() -> None:
    # launches of 612.4 (ID 0), 700.0 and 590.0 us: the median is ID 0's; the fill kernel stays apart
    text = (
        SAMPLE.rstrip("\n")
        + "\n"
        + _launch("2", "700,000", "40")
        + "\n"
        + _launch("3", "590,000", "48")
        + "\n"
    )
    p = parse_details(text, "w")
    assert p.kernel == "_softmax_rows" and p.launches == 3
    assert p.duration_us == pytest.approx(612.448)
    assert p.duration_range_us == pytest.approx((590.0, 700.0))
    assert p.registers_per_thread == 32  # figures come from the median launch, not the slowest
    assert "(median of 1)" in p.metrics["other kernels in the call"]
    slow = (
        SAMPLE.rstrip("\n")
        + "\n"
        + _launch("2", "700,000", "40")
        + "\n"
        + _launch("3", "800,000", "48")
        + "\n"
    )
    q = parse_details(slow, "w")
    assert q.duration_us == pytest.approx(700.0) and q.registers_per_thread == 40
    assert parse_details(SAMPLE, "w").launches == 1 and parse_details(SAMPLE, "w").duration_range_us is None
