"""What a person pairing with a search uses on the page, over HTTP without a browser: a kernel submitted and
evaluated (the real sandbox: the Triton interpreter on a CPU) through ksearch.tools.submit_kernel, its refusals
before anything is recorded, the loop's "now doing" line, declined intents on the chart, and the list of
searches reachable from a page opened on one search."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uidata
from starlette.testclient import TestClient
from uihelp import arun, with_store

from ksearch.server.web.app import build_app
from ksearch.server.web.submissions import MAX_BODY
from ksearch.tools.loop.declines import decline_intent
from ksearch.tools.now_doing import now_doing
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.submit_kernel import MAX_SOURCE_BYTES
from ksearch.tools.workspace import Workspace

HOST = "testserver"


@pytest.fixture
def client(demo: tuple[Path, dict[str, int]]) -> Iterator[TestClient]:
    db, _ = demo
    with TestClient(build_app(db, default_search=1, host=HOST)) as c:
        yield c


def _attempts(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0])
    finally:
        con.close()


def test_the_searches_list_is_reachable_from_a_page_opened_on_one(client: TestClient) -> None:
    home = client.get("/", follow_redirects=False)
    assert home.status_code == 307 and home.headers["location"] == "/s/1"  # the search the UI was started on
    page = client.get("/s/1").text
    assert '<a href="/searches" class="home"' in page  # the banner's home link
    listing = client.get("/searches")
    assert listing.status_code == 200 and 'href="/s/1"' in listing.text and "softmax-demo" in listing.text
    assert '<a href="/searches" class="home">ksearch</a>' in listing.text
    assert 'href="/searches"' in client.get("/s/nosuch").text  # a 404 links to the list too


def test_the_banner_says_what_the_loop_is_doing(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo

    async def doing() -> str:
        async with await Workspace.open(db) as ws:
            return (await now_doing(ws, 1)).text

    before = arun(doing())
    assert before.startswith("waiting: an intent to select for round 4")  # nobody runs the demo search
    assert (
        f'<span id="doing" class="doing" title="what the search&#x27;s loop is doing now">{before}</span>'
        in (client.get("/s/1").text)
    )
    assert client.get("/api/s/1/view").json()["doing"] == before

    async def claim() -> None:  # another process claims an intent: the loop is in a refine phase now
        async with await Workspace.open(db) as ws:
            await select_action(ws, SelectActionIn(search=1, node_id=ids["warps"]), budget_checked=True)

    arun(claim())
    after = client.get("/api/s/1/view").json()["doing"]
    assert after == arun(doing()) and after.startswith(f"refining intent #{ids['warps']} 'split long rows")


def test_a_declined_intent_is_on_the_chart(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo

    async def decline() -> None:  # what the driver records when its policy cannot implement an intent
        async with await Workspace.open(db) as ws:
            s = await ws.search(1)
            node = await ws.records.get_node(ids["warps"])
            await select_action(ws, SelectActionIn(search=1, node_id=node.id), budget_checked=True)
            await decline_intent(
                ws, s, node, "it names no parameters to set", by="tuner", attempts=0, author="tuner"
            )

    arun(decline())
    chart = client.get("/api/s/1/view").json()["chart_html"]
    assert chart.count('class="declined-mark"') == 1 and f'data-node="{ids["warps"]}"' in chart
    assert (
        f"round 4: intent #{ids['warps']} &#x27;split long rows across warps&#x27; declined by the tuner policy "
        "before any attempt (its round was given back): it names no parameters to set" in chart
    )
    assert with_store(db, lambda s: s.get_search(1)).round == 3  # given back
    for label in (
        "GPU-timed",
        "human",
        "CPU interpreter: correct, not timed",
        "intent declined",
        "search best",
    ):
        assert f">{label}</text>" in chart


def test_refused_submissions_record_nothing(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    before = _attempts(db)
    cases: list[tuple[dict[str, object], int, str]] = [
        (
            {"source": "try two rows per program\n", "name": "notes.txt"},
            400,
            "notes.txt is no candidate for task",
        ),
        (
            {"source": "x = 1\n"},
            400,
            "the pasted source is no candidate for task 'softmax': it defines no `ModelNew`",
        ),
        ({"source": uidata.SEED_SRC, "node_id": ids["exp2"]}, 400, f"intent #{ids['exp2']} is pruned"),
        ({"source": uidata.SEED_SRC, "node_id": 999}, 400, "no node #999"),
        ({"source": uidata.SEED_SRC, "language": "fortran"}, 400, "language"),
        ({"source": "x" * (MAX_SOURCE_BYTES + 1)}, 400, f"at most {MAX_SOURCE_BYTES} bytes"),
        ({"source": uidata.SEED_SRC, "trials": 2}, 400, "trials"),  # the page sends what its form has
    ]
    for body, status, needle in cases:
        r = client.post("/api/s/1/submissions", json={"node_id": ids["root"], **body})
        assert r.status_code == status, (body, r.text[:300])
        err = r.json()
        assert needle in err["error"] + " ".join(err["problems"]), (needle, err)
    huge = client.post(
        "/api/s/1/submissions",
        content=b'{"source": "' + b"x" * MAX_BODY + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert huge.status_code == 413
    form = client.post("/api/s/1/submissions", data={"source": uidata.SEED_SRC})
    assert form.status_code == 415
    evil = client.post(
        "/api/s/1/submissions", json={"source": uidata.SEED_SRC}, headers={"Origin": "http://evil.example"}
    )
    assert evil.status_code == 403
    assert client.get("/api/s/1/submissions/0123456789abcdef").status_code == 404
    assert _attempts(db) == before


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_kernel_submitted_on_the_root_is_evaluated_and_recorded(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo
    src = uidata.variant("from the page")
    r = client.post("/api/s/1/submissions", json={"node_id": ids["root"], "source": src, "name": "mine.py"})
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["state"] == "running" and job["node_id"] == ids["root"]
    deadline = time.monotonic() + 240
    seen: set[str] = set()
    while job["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        job = client.get(f"/api/s/1/submissions/{job['id']}").json()
        seen.update(job["steps"])
    assert job["state"] == "done", job
    assert "compiling" in seen and job["fraction"] == 1.0 and job["language"] == "triton"
    a = with_store(db, lambda s: s.get_attempt(job["attempt_id"]))
    assert (a.author, a.node_id, a.evaluation is not None and a.evaluation.status) == (
        "human",
        ids["root"],
        job["status"],
    )
    assert with_store(db, lambda s: s.get_candidate(a.candidate_id)).source == src
    # the page's view of it: the attempt opens like any other
    att = client.get(f"/api/s/1/attempts/{a.id}").json()
    assert (
        att["node_id"] == ids["root"]
        and "human" in client.get(f"/api/s/1/nodes/{ids['root']}").json()["html"]
    )
