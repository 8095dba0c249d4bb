"""What a host sees while a long call runs, and what the server log says of it: progress notifications with the
call's phase and its seconds at least every couple of seconds, one log line per start, phase and end (on stderr or
in the `--log` file, never on stdout), and a took line whose parts add up to the seconds the host waited (real
server, real client, real worker processes)."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import pytest
from mcp.client import Client

from ksearch.server.mcp.calls import CALL_LOG, args_summary, configure_log
from ksearch.server.mcp.server import KsearchServer
from ksearch.tools.benchmark import BenchmarkIn
from ksearch.tools.loop.call_clock import CallClock, took_text
from tests.fixtures import SOFTMAX
from tests.mcp.serve_proc import spawn_serve

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]
SEED = (Path(SOFTMAX).parent / "seed_triton.py").read_text()
SLEEP_S = 0.6
# the seed with host code that sleeps in every call: each of the evaluation's calls takes SLEEP_S
SLOW = SEED.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "    def forward(self, x):\n", f"    def forward(self, x):\n        time.sleep({SLEEP_S})\n", 1
)
PHASE_SECONDS = re.compile(r"^(?P<phase>.+) \((?P<s>\d+) s\)$")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def took_parts(text: str) -> tuple[float, dict[str, float]]:
    """ "took 7.2 s: correctness 3.1, timing 2.0, other 0.3 (drawing inputs 0.1 of them)" -> (7.2, parts)."""
    m = re.search(r"took (\d+\.\d) s(?:: ([^(\n]*))?", text)
    assert m, f"no took line in {text!r}"
    parts = {}
    for item in (m.group(2) or "").split(","):
        if item.strip():
            name, value = item.strip().rsplit(" ", 1)
            parts[name] = float(value)
    return float(m.group(1)), parts


def test_took_text_names_the_waits_beside_the_evaluations_steps() -> None:
    clock = CallClock()
    clock.parts = {"task_facts": 2.0, "evaluation": 7.5, "loading_task": 0.001}
    clock.t0 -= 10.0
    clock.stop()
    total, parts = took_parts(took_text(clock, {"wait_for_baselines": 4.0, "correctness": 3.0}))
    assert total == pytest.approx(10.0, abs=0.1)
    # the evaluation's 0.5 s its steps do not cover and the call's 0.5 s outside every part: "other"
    assert parts == {"wait for baselines": 4.0, "correctness": 3.0, "task facts": 2.0, "other": 1.0}


def test_the_log_never_says_a_source() -> None:
    inp = BenchmarkIn(search="s1", node_id=3, candidate={"source": SLOW}, workloads=["smoke"])
    said = args_summary(inp)
    assert "def forward" not in said and "time.sleep" not in said
    assert f"source=<{len(SLOW)} chars>" in said and "node_id=3" in said and "workloads=[1 items]" in said


@pytest.mark.slow
async def test_a_long_benchmark_sends_heartbeats_and_its_took_line_adds_up(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    configure_log(None)  # stderr, as `ksearch serve` without --log
    ks = KsearchServer(tmp_path / "k.db")
    notes: list[tuple[float, float, str]] = []
    try:
        async with Client(ks.mcp) as c:
            created = await c.call_tool("create_search", {"task": SOFTMAX, "name": "s1", "seed": 5})
            assert not created.is_error, created.content[0].text
            took = [b.text for b in created.content if b.type == "text" and b.text.startswith("took ")]
            assert len(took) == 1, created.content  # create_search says how long it took too

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                notes.append((time.monotonic(), progress, message or ""))

            t0 = time.monotonic()
            res = await c.call_tool(
                "benchmark",
                {"search": "s1", "candidate": {"source": SLOW}, "trials": 1},
                progress_callback=on_progress,
            )
            wall = time.monotonic() - t0
    finally:
        await ks.close()
        CALL_LOG.handlers.clear()
    assert not res.is_error, res.content[0].text
    assert res.structured_content["evaluation"]["status"] == "ok", res.content[0].text
    assert wall >= 3 * SLEEP_S, f"the call took {wall:.1f} s: too quick to need heartbeats"
    # the host heard of it throughout: no gap much over the heartbeat, each message a phase and its seconds
    assert len(notes) >= 2, notes
    times = [t0, *(t for t, _, _ in notes)]
    assert max(b - a for a, b in itertools.pairwise(times)) < 2.5, notes
    phases = [PHASE_SECONDS.match(m) for _, _, m in notes]
    assert all(phases), [m for _, _, m in notes]
    said = [(p["phase"], int(p["s"])) for p in phases if p]
    assert any(ph.startswith("correctness: smoke") for ph, _ in said), said
    repeated = [(a, b) for a, b in itertools.pairwise(said) if a[0] == b[0]]
    assert repeated, f"no heartbeat re-said a phase with its seconds: {said}"
    assert said[-1][1] >= int(wall) - 2
    values = [p for _, p, _ in notes]
    assert all(b > a for a, b in itertools.pairwise(values)), values  # progress grows
    # the took line accounts for the call as the host waited for it
    text = res.content[0].text
    total, parts = took_parts(text)
    assert total == pytest.approx(wall, rel=0.1), (text, wall)
    assert sum(parts.values()) == pytest.approx(wall, rel=0.1), (text, wall)
    assert took_parts(res.structured_content["summary"]) == (
        total,
        parts,
    )  # the structured summary says the same
    err = capfd.readouterr().err
    assert re.search(r"call#\d+ benchmark start search=s1 candidate=\{source=<\d+ chars>\}", err), err
    assert re.search(r'call#\d+ benchmark search=s1 phase="correctness: smoke" t=\d+\.\ds', err), err
    assert re.search(r"call#\d+ benchmark end search=s1 t=\d+\.\ds outcome=ok status=ok took=\"took ", err), (
        err
    )


@pytest.mark.slow
async def test_a_served_benchmark_is_logged_to_the_log_file_and_stdout_holds_only_the_protocol(
    tmp_path: Path,
) -> None:
    log = tmp_path / "serve.log"
    s = await spawn_serve(tmp_path / "k.db", log)
    proc = s.proc
    try:
        await s.initialize()
        args = {"task": SOFTMAX, "candidate": {"source": SLOW}, "trials": 1}
        t0 = time.monotonic()
        res = await s.request(
            "tools/call", {"name": "run_correctness", "arguments": args, "_meta": {"progressToken": "p1"}}
        )
        wall = time.monotonic() - t0
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert not res["result"].get("isError"), res
    notes = [m["params"] for m in s.stdout if m.get("method") == "notifications/progress"]
    assert len(notes) >= 2 and all(n["progressToken"] == "p1" for n in notes), notes
    assert all(PHASE_SECONDS.match(n["message"]) for n in notes), notes
    text = res["result"]["content"][0]["text"]
    total, parts = took_parts(text)
    assert sum(parts.values()) == pytest.approx(wall, rel=0.1) and total == pytest.approx(wall, rel=0.1), (
        text,
        wall,
    )
    lines = log.read_text().splitlines()
    mine = [ln for ln in lines if " run_correctness " in ln]
    stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d call#1 run_correctness"
    assert re.match(
        stamp + rf" start task={re.escape(SOFTMAX)} candidate=\{{source=<\d+ chars>\}}", mine[0]
    ), mine
    assert any(re.match(stamp + r' task=\S+ phase="correctness: smoke" t=\d+\.\ds$', ln) for ln in mine), mine
    assert re.match(stamp + r" end task=\S+ t=\d+\.\ds outcome=ok status=ok took=\"took ", mine[-1]), mine
    assert "def forward" not in log.read_text()
    assert proc.stderr is not None
    assert "call#1" not in (await proc.stderr.read()).decode()  # the log went to its file alone
