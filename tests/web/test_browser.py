"""The page in a real headless Chromium, against `ksearch ui` running in its own process.

Needs Debian's `chromium` (/usr/bin/chromium) and Playwright's Python package (no browser download:
Playwright drives the system Chromium). Skipped, with the reason, when either is missing.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from uihelp import CHROMIUM, REPO, TIMEOUT_MS, UiProcess, subprocess_env, with_store

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:
    pytest.skip(
        "Playwright's Python package is not installed (pip install playwright)", allow_module_level=True
    )

# expect() keeps its own 5 s default, too short for a page fetching from a server on a loaded 2-core CI machine
expect.set_options(timeout=TIMEOUT_MS)
# the `browser` and `page` fixtures are in conftest.py


@pytest.mark.slow
def test_tree_and_attempt_code(page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]) -> None:
    _, ids = demo
    page.goto(ui.url)
    tree = page.locator("#tree")
    expect(tree.locator(".node")).to_have_count(7)
    expect(tree.locator(f'.node[data-node="{ids["vec"]}"]')).to_contain_text("128-bit vectorized loads")
    expect(tree.locator(".node.on-best-path")).to_have_count(3)
    expect(page.locator("#best-speedup")).to_have_text("2.300x")
    expect(page.locator("#chart svg.chart")).to_be_visible()

    page.click(f'#tree .node[data-node="{ids["vec"]}"]')
    expect(page.locator("#node .node-title")).to_contain_text("128-bit vectorized loads")
    detail = page.locator(f'#attempt .attempt-detail[data-attempt="{ids["best_attempt"]}"]')
    expect(detail.locator("pre.code").last).to_contain_text("# loads widened to 128 bits")
    expect(detail.locator(".dl.add").first).to_contain_text("+")
    expect(detail.locator("table.timings")).to_contain_text("rows512_cols8192")

    # A failed attempt: its compile log and the marked line are shown.
    page.click(f'#tree .node[data-node="{ids["online"]}"]')
    page.click(f'#node .attempt-row[data-attempt="{ids["bad_attempt"]}"]')
    bad = page.locator(f'#attempt .attempt-detail[data-attempt="{ids["bad_attempt"]}"]')
    expect(bad).to_contain_text("Compiler log")
    expect(bad.locator(".ln.diag")).to_have_count(1)

    # Hostile strings render as text and run nothing.
    page.click(f'#tree .node[data-node="{ids["hostile"]}"]')
    expect(page.locator("#node .node-title")).to_contain_text("<script>window.__pwned = 1</script>")
    expect(
        page.locator(f'#attempt .attempt-detail[data-attempt="{ids["hostile_attempt"]}"]')
    ).to_contain_text("</code></pre><script>")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#node script, #attempt script, #tree script, #node img, #attempt img").count() == 0


@pytest.mark.slow
def test_add_intent_through_the_page(page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    page.goto(ui.url)
    page.click(f'#tree .node[data-node="{ids["rows"]}"]')
    expect(page.locator("#steer-target")).to_contain_text(f"#{ids['rows']}")
    page.fill("#intent-title", "two rows per program for short rows")
    page.fill("#intent-why", "rows of 1024 leave most lanes idle")
    page.fill("#intent-prio", "0.85")
    page.select_option("#intent-diff", "2")
    page.click("#add-intent-btn")
    expect(page.locator("#steer-msg")).to_contain_text("added intent #")
    nodes = with_store(db, lambda s: s.list_nodes(ids["search"]))
    new = [n for n in nodes if n.title == "two rows per program for short rows"]
    assert len(new) == 1
    n = new[0]
    assert (n.parent_id, n.author, n.rationale, n.priority, n.difficulty) == (
        ids["rows"],
        "human",
        "rows of 1024 leave most lanes idle",
        0.85,
        2,
    )
    # It appears in the tree without a reload.
    expect(page.locator(f'#tree .node[data-node="{n.id}"]')).to_contain_text("two rows per program")

    # A refused intent (a near-duplicate sibling) shows the tools' reason and writes nothing.
    page.fill("#intent-title", "two rows per program for short rows")
    page.click("#add-intent-btn")
    expect(page.locator("#steer-msg.err")).to_contain_text("near-duplicate")
    assert len(with_store(db, lambda s: s.list_nodes(ids["search"]))) == len(nodes)


@pytest.mark.slow
def test_steering_buttons(page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    page.goto(ui.url)
    w = ids["warps"]
    page.click(f'#tree .node[data-node="{w}"]')
    expect(page.locator("#pin")).to_have_text("Pin")
    page.fill("#reason", "worth a look before anything else")
    page.click("#pin")
    expect(page.locator(f'#tree .node[data-node="{w}"] .flag-pin')).to_be_visible()
    expect(page.locator("#pin")).to_have_text("Unpin")
    page.fill("#prio", "0.9")
    page.click("#set-prio")
    expect(page.locator(f'#tree .node[data-node="{w}"] .prio')).to_have_text("p0.90")
    node = with_store(db, lambda s: s.get_node(w))
    assert node.pinned and node.priority == pytest.approx(0.9)
    edits = with_store(db, lambda s: s.list_edits(ids["search"]))
    assert any(
        e.op == "pin" and e.node_id == w and e.author == "human" and e.reason.startswith("worth")
        for e in edits
    )
    page.click("#prune")
    expect(page.locator(f'#tree .node.st-pruned[data-node="{w}"]')).to_have_count(1)
    assert with_store(db, lambda s: s.get_node(w)).status.value == "pruned"


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    import uidata
    from ksearch.worldmodel.store import Store

    async def main(db, node):
        store = await Store.open(db)
        cand = await store.put_candidate(uidata.variant("from another process"), "triton")
        a = await store.record_attempt(1, node, cand.id, uidata.ok_eval(3.1), round=4, author="tuner")
        await store.close()
        print(a.id)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


@pytest.mark.slow
def test_attempt_from_another_process_appears_without_reload(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo
    page.goto(ui.url)
    w = ids["warps"]
    page.click(f'#tree .node[data-node="{w}"]')
    expect(page.locator("#node")).to_contain_text("No attempts yet.")
    page.evaluate("window.__sameDocument = 'yes'")  # survives only if the page is never reloaded
    out = subprocess.run(
        [sys.executable, "-c", WRITER, str(db), str(w)],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    new_id = int(out.stdout.strip())
    expect(page.locator("#best-speedup")).to_have_text("3.100x")
    expect(page.locator(f'#tree .node[data-node="{w}"] .spd')).to_have_text("3.100x")
    expect(page.locator(f'#tree .node.on-best-path[data-node="{w}"]')).to_have_count(1)
    expect(page.locator(f'#node .attempt-row[data-attempt="{new_id}"]')).to_be_visible()
    expect(page.locator(f'#chart [data-attempt="{new_id}"]')).to_have_count(1)
    assert page.evaluate("window.__sameDocument") == "yes"


@pytest.mark.slow
def test_chart_opens_an_attempt_and_the_address_keeps_it(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    _, ids = demo
    page.goto(ui.url)
    page.locator(f'#chart [data-attempt="{ids["wrong_attempt"]}"]').click()
    expect(page.locator(f'#node .node-detail[data-node="{ids["online"]}"]')).to_be_visible()
    expect(page.locator(f'#attempt .attempt-detail[data-attempt="{ids["wrong_attempt"]}"]')).to_contain_text(
        "last column not written"
    )
    expect(page.locator(f'#node .attempt-row.selected[data-attempt="{ids["wrong_attempt"]}"]')).to_have_count(
        1
    )
    assert page.evaluate("location.hash") == f"#node={ids['online']}&attempt={ids['wrong_attempt']}"
    page.reload()
    expect(page.locator(f'#attempt .attempt-detail[data-attempt="{ids["wrong_attempt"]}"]')).to_be_visible()
    expect(page.locator(f'#tree .node.selected[data-node="{ids["online"]}"]')).to_have_count(1)


@pytest.mark.slow
def test_the_first_view_needs_no_waiting(
    browser: Browser, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    """The served HTML is the first view: present at DOMContentLoaded, and without any script at all."""
    _, ids = demo
    best = ids["best_attempt"]
    with_script = browser.new_context(viewport={"width": 1280, "height": 900})
    without = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    try:
        for ctx in (with_script, without):
            pg = ctx.new_page()
            pg.goto(ui.url, wait_until="domcontentloaded")
            # counted at once, no expect(): nothing may depend on a fetch having finished
            assert pg.locator("#tree .node").count() == 7
            assert pg.locator("#best-speedup").inner_text() == "2.300x"
            assert pg.locator("#chart svg.chart [data-attempt]").count() >= 7
            assert pg.locator(f'#tree .node.selected[data-node="{ids["vec"]}"]').count() == 1
            assert pg.locator(f'#attempt .attempt-detail[data-attempt="{best}"] table.timings').count() == 1
            pg.close()
    finally:
        with_script.close()
        without.close()


@pytest.mark.slow
def test_an_attempt_link_alone_opens_the_attempt(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    _, ids = demo
    page.goto(f"{ui.url}#attempt={ids['wrong_attempt']}")
    expect(page.locator(f'#attempt .attempt-detail[data-attempt="{ids["wrong_attempt"]}"]')).to_contain_text(
        "last column not written"
    )
    expect(page.locator(f'#node .node-detail[data-node="{ids["online"]}"]')).to_be_visible()
    expect(page.locator(f'#tree .node.selected[data-node="{ids["online"]}"]')).to_have_count(1)
    # A link followed on the page changes only the fragment: it opens too.
    page.evaluate(f"location.hash = '#attempt={ids['rows_attempt']}'")
    expect(page.locator(f'#attempt .attempt-detail[data-attempt="{ids["rows_attempt"]}"]')).to_be_visible()
    expect(page.locator(f'#tree .node.selected[data-node="{ids["rows"]}"]')).to_have_count(1)


# Elements whose content is wider than their box and is neither scrollable nor wrapped: text cut off.
CLIPPED = """() => {
  const out = [];
  for (const el of document.querySelectorAll('#summary *, #tree *, #node *, #attempt *')) {
    const cs = getComputedStyle(el);
    if (cs.textOverflow === 'ellipsis' && el.scrollWidth > el.clientWidth) out.push(`ellipsis: ${el.className}`);
    const scrolls = ['auto', 'scroll'].includes(cs.overflowX);
    if (!scrolls && cs.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1)
      out.push(`clipped: ${el.tagName}.${el.className} ${el.scrollWidth}>${el.clientWidth}`);
  }
  for (const t of document.querySelectorAll('#node table, #attempt table')) {
    const box = t.closest('.table-scroll');
    const panel = t.closest('.panel').getBoundingClientRect();
    if (box === null) out.push(`table outside a scroll box: ${t.className}`);
    else if (box.getBoundingClientRect().right > panel.right + 1) out.push(`box past its panel: ${t.className}`);
  }
  return out;
}"""


def _fits(page: Page, selector: str) -> tuple[int, int]:
    return page.evaluate(
        "(sel) => { const t = document.querySelector(sel); "
        "return [t.scrollWidth, t.closest('.table-scroll').clientWidth]; }",
        selector,
    )


@pytest.mark.slow
def test_nothing_is_cut_off_at_1280_px(
    browser: Browser, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    _, ids = demo
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = ctx.new_page()
        for node, attempt in (
            (ids["vec"], ids["best_attempt"]),
            (ids["online"], ids["bad_attempt"]),
            (ids["hostile"], ids["hostile_attempt"]),
        ):
            page.goto(f"{ui.url}#node={node}&attempt={attempt}")
            expect(page.locator(f'#attempt .attempt-detail[data-attempt="{attempt}"]')).to_be_visible()
            assert page.evaluate(CLIPPED) == []
        # The timings table fits its panel outright: every column is in view without scrolling.
        page.goto(f"{ui.url}#attempt={ids['best_attempt']}")
        expect(page.locator("#attempt table.timings")).to_contain_text("roofline")
        width, box = _fits(page, "#attempt table.timings")
        assert width <= box, f"timings table {width}px in a {box}px panel"
        # A long title is wrapped, whole, inside its card.
        title = page.locator(f'#tree .node[data-node="{ids["hostile"]}"] .ntitle')
        assert page.evaluate("(el) => el.scrollWidth <= el.clientWidth", title.element_handle())
        assert title.inner_text().endswith('onerror="window.__pwned=2">')
    finally:
        ctx.close()


@pytest.mark.slow
def test_the_chart_fits_its_scale_to_the_data(
    page: Page, ui: UiProcess, demo: tuple[Path, dict[str, int]]
) -> None:
    """A log axis: equal ratios are equal distances, and the timed attempts spread over the plot."""
    _, ids = demo
    page.goto(ui.url)
    svg = page.locator("#chart svg.chart")
    expect(svg).to_be_visible()
    raw: dict[str, float] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#chart svg.chart text')]
             .filter(t => /^[\\d.]+x$/.test(t.textContent))
             .map(t => { const b = t.getBoundingClientRect(); return [parseFloat(t.textContent), b.y + b.height / 2]; }))"""
    )
    ticks = {float(k): y for k, y in raw.items()}  # tick value -> its height on the screen
    vals = sorted(ticks)
    assert len(vals) >= 3 and 1.0 in ticks
    per_log = [(ticks[a] - ticks[b]) / math.log(b / a) for a, b in itertools.pairwise(vals)]
    assert max(per_log) - min(per_log) < 1.5, f"tick spacing is not logarithmic: {ticks}"
    # every timed attempt inside the plot, the slowest and fastest far apart (the scale fits the data)
    dots: dict[int, float] = {
        int(k): v
        for k, v in page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('#chart svg.chart circle.pt[data-attempt]')]
                 .map(c => { const b = c.getBoundingClientRect(); return [c.dataset.attempt, b.y + b.height / 2]; }))"""
        ).items()
    }
    assert set(dots) >= {ids["best_attempt"], ids["hostile_attempt"]}
    top, bottom = min(ticks.values()), max(ticks.values())
    plot = svg.bounding_box()
    assert plot is not None
    assert all(plot["y"] <= y <= plot["y"] + plot["height"] for y in dots.values())
    spread = dots[ids["hostile_attempt"]] - dots[ids["best_attempt"]]  # 0.7x below 2.3x
    expected = math.log(2.3 / 0.7) * (sum(per_log) / len(per_log))
    assert abs(spread - expected) < 3, (spread, expected)
    assert spread > 0.4 * (bottom - top)
