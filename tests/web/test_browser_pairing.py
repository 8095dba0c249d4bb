"""Pairing with a search on the page, in a real headless Chromium against `ksearch ui` in its own process: a kernel
submitted from the page (uploaded or pasted, evaluated by the real sandbox, then opened), messages and the reason
cleared when they no longer apply, the pinned badge on a selected card, the banner's link to every search, the
loop's "now doing" line kept current, and the chart's legend.

Skipped, with the reason, without Debian's `chromium` or Playwright's Python package.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import uidata
from uihelp import CHROMIUM, REPO, TIMEOUT_MS, UiProcess, subprocess_env, with_store

from ksearch.worldmodel.edits import apply_edits

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import Page, Route, expect
except ImportError:
    pytest.skip(
        "Playwright's Python package is not installed (pip install playwright)", allow_module_level=True
    )

expect.set_options(timeout=TIMEOUT_MS)
pytestmark = pytest.mark.slow  # each starts `ksearch ui` and Chromium


def _attempts(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0])
    finally:
        con.close()


@pytest.mark.timeout(300)
def test_a_kernel_submitted_from_the_page_is_evaluated_and_opens(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    db, ids = demo
    root = ids["root"]
    page.goto(ui.url)
    page.click(f'#tree .node[data-node="{root}"]')
    expect(page.locator("#submit-kernel")).to_be_visible()
    expect(page.locator("#kernel-lang")).to_have_value("auto")  # detected from the source unless picked
    # An uploaded file that defines nothing the task needs: refused with the tools' words, nothing recorded.
    notes = tmp_path / "notes.txt"
    notes.write_text("try two rows per program\n")
    before = _attempts(db)
    page.set_input_files("#kernel-file", str(notes))
    expect(page.locator("#kernel-src")).to_have_value("try two rows per program\n")
    page.click("#submit-kernel-btn")
    msg = page.locator("#steer-msg.err")
    expect(msg).to_contain_text("notes.txt is no candidate for task 'softmax': it defines no `ModelNew`")
    expect(msg).to_contain_text("Nothing was recorded.")
    assert _attempts(db) == before
    # A pasted kernel: evaluated (progress shown meanwhile), recorded as a person's attempt, then opened.
    src = uidata.variant("pasted on the page")
    page.fill("#kernel-src", src)
    page.click("#submit-kernel-btn")
    expect(page.locator("#submit-progress")).to_be_visible()
    expect(page.locator("#submit-step")).to_contain_text(f"evaluating your kernel for #{root}")
    expect(page.locator("#submit-kernel-btn")).to_be_disabled()  # one submission at a time from a page
    done = page.locator("#steer-msg")
    expect(done).to_contain_text("your kernel is attempt #", timeout=240_000)
    expect(page.locator("#submit-progress")).to_be_hidden()
    new = max(a.id for a in with_store(db, lambda s: s.list_attempts(ids["search"])))
    a = with_store(db, lambda s: s.get_attempt(new))
    assert (a.author, a.node_id) == ("human", root)
    assert with_store(db, lambda s: s.get_candidate(a.candidate_id)).source == src
    status = a.evaluation.status if a.evaluation else "none"
    expect(done).to_contain_text(f"your kernel is attempt #{new} on #{root}: {status} (as triton)")
    expect(page.locator(f'#attempt .attempt-detail[data-attempt="{new}"]')).to_contain_text(
        "pasted on the page"
    )
    expect(page.locator(f'#node .attempt-row.selected[data-attempt="{new}"]')).to_contain_text("human")
    # a pruned intent takes no kernel: the form is not offered there
    page.click(f'#tree .node[data-node="{ids["exp2"]}"]')
    expect(page.locator("#submit-kernel")).to_be_hidden()


def test_messages_and_the_reason_are_cleared_when_they_no_longer_apply(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    _, ids = demo
    page.goto(ui.url)
    msg = page.locator("#steer-msg")

    def refusal() -> None:  # a near-duplicate of a sibling's title is refused
        page.fill("#intent-title", "one row per program, row kept in registers")
        page.click("#add-intent-btn")
        expect(page.locator("#steer-msg.err")).to_contain_text("near-duplicate")

    page.click(f'#tree .node[data-node="{ids["root"]}"]')
    refusal()
    page.click(f'#tree .node[data-node="{ids["warps"]}"]')  # another node
    expect(msg).to_have_text("")
    expect(page.locator("#steer-msg.err")).to_have_count(0)
    page.click(f'#tree .node[data-node="{ids["root"]}"]')
    refusal()
    page.click(f'#node .attempt-row[data-attempt="{ids["seed_attempt"]}"]')  # another attempt
    expect(msg).to_have_text("")

    page.click(f'#tree .node[data-node="{ids["warps"]}"]')
    for button, done, after in (
        ("#pin", "pinned", "Unpin"),
        ("#set-prio", "priority set", "Set"),
        ("#veto", "vetoed", "Unveto"),
        ("#veto", "unvetoed", "Veto"),
    ):
        page.fill("#reason", f"why: {button}")
        page.click(button)
        expect(msg).to_contain_text(done)
        expect(page.locator(button)).to_have_text(after)
        expect(page.locator("#reason")).to_have_value("")  # it went into the edit log with the change
    # a refused change keeps the reason, for the person to send it again
    page.click(f'#tree .node[data-node="{ids["root"]}"]')
    page.fill("#reason", "kept")
    page.fill("#intent-title", "one row per program, row kept in registers")
    page.click("#add-intent-btn")
    expect(page.locator("#steer-msg.err")).to_contain_text("near-duplicate")
    expect(page.locator("#reason")).to_have_value("kept")


def test_a_refusal_said_while_a_node_loads_is_not_cleared_by_its_default_attempt(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    """Clicking a node opens its default attempt once the node has loaded; a refusal said in between is about what
    the person just did and stays (it was cleared on CI when the node's data came back after the refusal)."""
    _, ids = demo
    page.goto(ui.url)
    page.click(f'#tree .node[data-node="{ids["root"]}"]')
    expect(page.locator("#steer-target")).to_contain_text(f"#{ids['root']} root")
    expect(page.locator("#attempt .attempt-detail")).to_be_visible()
    held: list[Route] = []

    def hold(route: Route) -> None:  # the node's data is held back until the refusal is on the page
        held.append(route)

    page.route(f"**/nodes/{ids['root']}", hold)
    page.click(f'#tree .node[data-node="{ids["root"]}"]')  # opened again: its data is asked for anew
    page.fill("#intent-title", "one row per program, row kept in registers")
    page.click("#add-intent-btn")
    expect(page.locator("#steer-msg.err")).to_contain_text("near-duplicate")
    assert held, "the node's data was not requested"
    # the default attempt is asked for once the node's data is in (and after the old code cleared the message)
    with page.expect_response(lambda r: "/attempts/" in r.url):
        for route in held:
            route.continue_()
    page.unroute(f"**/nodes/{ids['root']}")
    expect(page.locator("#steer-msg.err")).to_contain_text("near-duplicate")


# (badge background vs card background, badge text vs badge background): WCAG contrast ratios
CONTRAST = """(badge) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => { const [r, g, b] = rgb(c).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                       return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const card = badge.closest('.node');
  const bs = getComputedStyle(badge), cs = getComputedStyle(card);
  const b = badge.getBoundingClientRect(), c = card.getBoundingClientRect();
  return {
    against_card: ratio(bs.backgroundColor, cs.backgroundColor),
    text: ratio(bs.color, bs.backgroundColor),
    inside: b.width > 0 && b.height > 0 && b.left >= c.left && b.right <= c.right && b.top >= c.top && b.bottom <= c.bottom,
    shown: bs.display !== 'none' && bs.visibility === 'visible' && Number(bs.opacity) > 0.9,
  };
}"""


def test_the_pinned_badge_stands_out_on_a_selected_card(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo

    async def pin(store):  # type: ignore[no-untyped-def]
        await apply_edits(
            store, ids["search"], [{"op": "pin", "node_id": ids["warps"]}], author="human", round=3
        )

    with_store(db, pin)
    page.goto(ui.url)
    card = page.locator(f'#tree .node[data-node="{ids["warps"]}"]')
    card.click()
    expect(page.locator(f'#tree .node.selected.pinned[data-node="{ids["warps"]}"]')).to_have_count(1)
    badge = card.locator(".badge.flag-pin")
    expect(badge).to_be_visible()
    got = badge.evaluate(CONTRAST)
    assert got["inside"] and got["shown"], got
    assert got["against_card"] >= 3, got  # not a pale chip on the pale selected background
    assert got["text"] >= 4.5, got


def test_the_banner_links_to_every_search(page: Page, ui: UiProcess) -> None:
    page.goto(ui.url)  # `ksearch ui softmax-demo`: `/` opens that search
    page.click("header.topbar a.home")
    page.wait_for_url("**/searches")
    expect(page.locator("table.searches")).to_contain_text("softmax-demo")
    page.click('table.searches a[href="/s/1"]')
    page.wait_for_url("**/s/1")
    expect(page.locator("#tree .node")).to_have_count(7)


CLAIM = textwrap.dedent(
    """
    import asyncio, sys
    from ksearch.tools.select_action import SelectActionIn, select_action
    from ksearch.tools.workspace import Workspace

    async def main(db, node):
        async with await Workspace.open(db) as ws:
            await select_action(ws, SelectActionIn(search=1, node_id=node), budget_checked=True)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


def test_the_now_doing_line_follows_the_loop_without_a_reload(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo
    page.goto(ui.url)
    doing = page.locator("header #doing")
    expect(doing).to_contain_text("waiting: an intent to select for round 4")
    page.evaluate("window.__sameDocument = 'yes'")
    subprocess.run(
        [sys.executable, "-c", CLAIM, str(db), str(ids["warps"])],
        cwd=REPO,
        env=subprocess_env(),
        check=True,
        timeout=120,
    )
    expect(doing).to_have_text(
        f"refining intent #{ids['warps']} 'split long rows across warps': 0 of at most 8 attempts made; "
        "no run in progress"
    )
    assert page.evaluate("window.__sameDocument") == "yes"


# Every legend label and mark of the chart: its box on the screen
LEGEND = """() => [...document.querySelectorAll('#chart .legend text, #chart .legend g.key')].map((el) => {
  const b = el.getBoundingClientRect();
  return {what: el.textContent || el.getAttribute('class'), l: b.left, r: b.right, t: b.top, b: b.bottom};
})"""


def test_the_chart_legend_names_every_mark_without_overlap(page: Page, ui: UiProcess) -> None:
    page.goto(ui.url)
    legend = page.locator("#chart .legend")
    for label in ("GPU-timed", "human", "CPU interpreter: correct, not timed", "failed", "intent declined"):
        expect(legend.locator("text", has_text=label)).to_be_visible()
    boxes = page.evaluate(LEGEND)
    svg = page.locator("#chart svg.chart").bounding_box()
    assert svg is not None and len(boxes) == 18
    for i, p in enumerate(boxes):
        assert svg["x"] <= p["l"] and p["r"] <= svg["x"] + svg["width"], p
        for q in boxes[i + 1 :]:
            apart = p["r"] <= q["l"] + 0.5 or q["r"] <= p["l"] + 0.5 or p["b"] <= q["t"] or q["b"] <= p["t"]
            assert apart, (p, q)
