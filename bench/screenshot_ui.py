"""Screenshots of `ksearch ui` for a search: the overview and one node's details, as PNG files.

    python bench/screenshot_ui.py DB SEARCH OUTDIR [--node ID] [--width 1440 --height 900]

Starts the UI on DB in a subprocess (any free port, 127.0.0.1), opens it in headless Chromium
(/usr/bin/chromium through Playwright's Python package; no browser download), and writes
OUTDIR/ui-overview.png (tree, chart, summary; the best attempt's node selected),
OUTDIR/ui-node.png (the detail column of a node: rationale, attempts, timings, diff, code) and
OUTDIR/ui-full.png (the whole page). The node is the one the page opens on (the one holding the
search's best attempt) unless --node is given.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CHROMIUM = os.environ.get("KSEARCH_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parents[1]


def start_ui(db: Path, search: str, timeout_s: float = 30.0) -> tuple[subprocess.Popen[str], str]:
    """Run `ksearch ui` on a free port; returns the process and the page URL it printed."""
    cmd = [
        sys.executable,
        "-c",
        "from ksearch.server.cli import main; main()",
        "ui",
        search,
        "--db",
        str(db),
        "--port",
        "0",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"(http://\S+)", line)
        if m:
            return proc, m.group(1)
    proc.kill()
    raise SystemExit("ksearch ui did not start:\n" + "".join(seen))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("search")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--node", type=int, default=None, help="node to show in ui-node.png")
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=900)
    a = ap.parse_args()
    if not a.db.is_file():
        raise SystemExit(f"no database file at {a.db}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise SystemExit(
            "needs Playwright's Python package: pip install playwright (no browser download: "
            f"it drives {CHROMIUM})"
        ) from e
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set KSEARCH_CHROMIUM)")
    a.outdir.mkdir(parents=True, exist_ok=True)
    proc, url = start_ui(a.db, a.search)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": a.width, "height": a.height}, device_scale_factor=1)
            # The served page already shows the best attempt's node and the best attempt; another node
            # is opened through the address, as a link to it would.
            page.goto(url if a.node is None else f"{url}#node={a.node}")
            if a.node is not None:
                page.wait_for_selector(f'#node .node-detail[data-node="{a.node}"]')
                page.wait_for_selector("#attempt .attempt-detail", timeout=10_000)
            page.wait_for_selector("#live:not(:has-text('connecting'))")  # the script has taken over
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_timeout(300)
            page.screenshot(path=str(a.outdir / "ui-overview.png"))
            page.locator(".detail-panel").screenshot(path=str(a.outdir / "ui-node.png"))
            page.screenshot(path=str(a.outdir / "ui-full.png"), full_page=True)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    for f in ("ui-overview.png", "ui-node.png", "ui-full.png"):
        print(a.outdir / f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
