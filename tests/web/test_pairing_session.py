"""A person pairing with a model's search, end to end: real `ksearch` processes on one database, `ksearch ui` in
its own process and a real headless Chromium, the sandbox's Triton interpreter measuring every kernel.

A replayed model search (tests/web/pairing_replay.jsonl: one intent implemented, one declined before any attempt,
one more attempt declined) runs while the page watches; then the person raises the round budget, adds an intent
with a param, pins it and vetoes another on the page, submits a kernel from the command line and one from the
page, reads an attempt's code and exports the HTML report. Each step is checked where a person would look.

Skipped, with the reason, without Debian's `chromium` or Playwright's Python package.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from uihelp import CHROMIUM, HERE, REPO, TIMEOUT_MS, UiProcess, subprocess_env, with_store

from ksearch.server.cli.words import TOOL_NAMES
from tests.tools.toolkit import ROW_SUM_SEED, TINY_TASK

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import Page, expect
except ImportError:
    pytest.skip(
        "Playwright's Python package is not installed (pip install playwright)", allow_module_level=True
    )

expect.set_options(timeout=TIMEOUT_MS)
REPLAY = HERE / "pairing_replay.jsonl"
LIVE = (
    "measuring",
    "analysing",
    "selecting the next intent",
    "refining intent",
    "reflecting on",
    "final evaluation",
)
# Every text the banner's "now doing" line shows, kept by the page itself as it changes
WATCH_DOING = """() => {
  window.__doing = [document.querySelector('#doing').textContent];
  new MutationObserver(() => window.__doing.push(document.querySelector('#doing').textContent))
    .observe(document.querySelector('#doing'), {childList: true, characterData: true, subtree: true});
}"""


def _ks(db: Path, *args: object, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`ksearch ARGS --db DB` in its own process, as a person would type it."""
    return subprocess.run(
        [sys.executable, "-m", "ksearch.server.cli", *map(str, args), "--db", str(db)],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _said(r: subprocess.CompletedProcess[str]) -> str:
    return " ".join((r.stdout + r.stderr).split())


def _search_exists(db: Path, name: str) -> bool:
    if not db.exists():
        return False
    try:
        con = sqlite3.connect(db, timeout=1)
        try:
            return con.execute("SELECT 1 FROM searches WHERE name = ?", (name,)).fetchone() is not None
        finally:
            con.close()
    except sqlite3.OperationalError:  # created but not yet initialised
        return False


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_person_pairs_with_a_replayed_search(page: Page, tmp_path: Path) -> None:
    db, task = tmp_path / "pair.db", tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    replayed = ["--policy", "replay", "--replay", str(REPLAY), "--rounds", "1", "--max-attempts", "2"]
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ksearch.server.cli",
            "run",
            str(task),
            "--name",
            "pair",
            *replayed,
            "--db",
            str(db),
        ],
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ui: UiProcess | None = None
    try:
        # The page opens on the search as soon as the run has created it, and watches the run live.
        deadline = time.monotonic() + 60
        while not _search_exists(db, "pair") and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _search_exists(db, "pair"), "the replayed run did not create its search"
        # held while the page comes up (a loaded machine starts the page slower than the run goes on): the page is
        # watching before the run's next step
        run.send_signal(signal.SIGSTOP)
        try:
            ui = UiProcess(db, "pair")
            page.goto(ui.url)
            page.evaluate(WATCH_DOING)
        finally:
            run.send_signal(signal.SIGCONT)
        out, _ = run.communicate(timeout=240)
        assert run.returncode == 0, out
        assert "declined: the recording holds no further attempt for intent 'two rows per program'" in out
        doing = page.locator("header #doing")
        expect(doing).to_have_text("done (stopped; its final evaluation is recorded)", timeout=30_000)
        seen = page.evaluate("window.__doing")
        assert any(t.startswith(LIVE) for t in seen), seen  # it said what the run was doing, as it did it
        nodes = {n.title: n.id for n in with_store(db, lambda s: s.list_nodes(1))}
        two_rows, smaller, wider = (
            nodes[t] for t in ("two rows per program", "smaller column blocks", "wider column blocks")
        )
        # the two declines on the chart: before any attempt (its round given back), and after one attempt
        declined = page.locator("#chart .declined-mark")
        expect(declined).to_have_count(2)
        expect(page.locator(f'#chart .declined-mark[data-node="{two_rows}"] title')).to_contain_text(
            "declined by the replay policy before any attempt (its round was given back)"
        )
        expect(page.locator(f'#chart .declined-mark[data-node="{smaller}"] title')).to_contain_text(
            "after 1 attempts"
        )
        expect(page.locator("#chart circle.pt-cpu[data-attempt]")).to_have_count(
            1
        )  # correct, not timed (CPU)

        # The person raises the round budget from the command line: the page says the loop waits for them.
        r = _ks(db, "budget", "pair", "--more-rounds", "2")
        assert r.returncode == 0, _said(r)
        assert "pair: budgets changed rounds: 1 -> 3" in _said(r), _said(r)
        assert "`ksearch select pair`" in _said(r) and not [n for n in TOOL_NAMES if n in r.stdout], _said(r)
        expect(page.locator("#summary")).to_contain_text("1 of 3")
        expect(doing).to_have_text(
            f"waiting: the reflection on #{smaller} 'smaller column blocks', then an intent to select for round 2 "
            "of at most 3; no run in progress"
        )

        # ... adds an intent with a param ...
        r = _ks(
            db,
            "intent",
            "add",
            "pair",
            "column blocks of 256",
            "--param",
            "BLOCK_N=256",
            "--why",
            "fewer live values",
        )
        assert r.returncode == 0, _said(r)
        mine = int(re.search(r"added #(\d+) 'column blocks of 256'", _said(r)).group(1))  # type: ignore[union-attr]
        card = page.locator(f'#tree .node[data-node="{mine}"]')
        expect(card).to_contain_text("column blocks of 256")  # without a reload
        card.click()
        expect(page.locator("#node .node-detail")).to_contain_text('"BLOCK_N": 256')

        # ... pins it and vetoes another on the page ...
        page.fill("#reason", "try the param first")
        page.click("#pin")
        expect(card.locator(".badge.flag-pin")).to_be_visible()
        expect(page.locator("#reason")).to_have_value("")
        page.click(f'#tree .node[data-node="{wider}"]')
        expect(page.locator("#steer-msg")).to_have_text("")  # the pin's message was about the other node
        page.click("#veto")
        expect(page.locator(f'#tree .node[data-node="{wider}"] .badge.flag-veto')).to_be_visible()
        edits = with_store(db, lambda s: s.list_edits(1))
        assert [(e.op, e.node_id, e.author, e.reason) for e in edits if e.op in ("pin", "veto")] == [
            ("pin", mine, "human", "try the param first"),
            ("veto", wider, "human", ""),
        ]

        # ... submits a kernel from the command line (it claims the pinned intent: round 2) ...
        cli_file = tmp_path / "mine.py"
        cli_file.write_text(ROW_SUM_SEED.replace("BLOCK_N = 1024", "BLOCK_N = 256"))
        r = _ks(db, "submit", "pair", cli_file, "--node", mine)
        assert r.returncode == 0, _said(r)
        assert (
            f"claimed intent #{mine}: round 2 started; `ksearch finish pair --node {mine}` ends its refine phase"
            in _said(r)
        )
        cli_attempt = int(re.search(rf"recorded as attempt #(\d+) on node #{mine}", _said(r)).group(1))  # type: ignore[union-attr]
        expect(doing).to_have_text(
            f"refining intent #{mine} 'column blocks of 256': 1 of at most 2 attempts made; no run in progress"
        )

        # ... and one from the page, on the same intent: it is evaluated, then its attempt opens.
        card.click()
        expect(page.locator("#submit-kernel")).to_be_visible()
        page_src = ROW_SUM_SEED.replace("BLOCK_N = 1024", "BLOCK_N = 128")
        page.fill("#kernel-src", page_src)
        page.click("#submit-kernel-btn")
        msg = page.locator("#steer-msg")
        expect(msg).to_contain_text(f"on #{mine}: ok (as triton)", timeout=180_000)
        page_attempt = int(re.search(r"your kernel is attempt #(\d+)", msg.inner_text()).group(1))  # type: ignore[union-attr]
        expect(page.locator(f'#attempt .attempt-detail[data-attempt="{page_attempt}"]')).to_contain_text(
            "BLOCK_N = 128"
        )
        expect(page.locator("#chart circle.pt-cpu.human")).to_have_count(
            2
        )  # both of the person's, in their colour
        expect(doing).to_contain_text(
            f"the end of the refine phase of intent #{mine}"
        )  # its 2 attempts are made
        atts = {a.id: a for a in with_store(db, lambda s: s.list_attempts(1, mine))}
        assert {i: (a.author, a.round) for i, a in atts.items()} == {
            cli_attempt: ("human", 2),
            page_attempt: ("human", 2),
        }

        # The person reads the page's attempt from the command line, then exports the report.
        r = _ks(db, "attempt", "pair", page_attempt, "--source-only")
        assert r.returncode == 0 and r.stdout == page_src, _said(r)
        report = tmp_path / "report.html"
        r = _ks(db, "export", "pair", "--html", "-o", report)
        assert r.returncode == 0, _said(r)
        html = report.read_text()
        assert html.count('class="declined-mark"') == 2 and html.count('class="pt-cpu human"') == 2
        assert "column blocks of 256" in html and "badge flag-pin" in html and "badge flag-veto" in html
        assert "<script" not in html.lower()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if ui is not None:
            ui.stop()
