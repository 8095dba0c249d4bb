"""The UI's HTTP side without a browser: fragments, escaping, live fingerprint, steering endpoints, guards."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import uidata
from starlette.testclient import TestClient
from uihelp import with_store

from ksearch.server.web.app import build_app
from ksearch.worldmodel.edits import apply_edits
from ksearch.worldmodel.models import SearchConfig
from ksearch.worldmodel.store import Store

HOST = "testserver"  # the host name Starlette's test client sends


@pytest.fixture
def client(demo: tuple[Path, dict[str, int]]) -> Iterator[TestClient]:
    db, _ = demo
    with TestClient(build_app(db, host=HOST)) as c:
        yield c


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [k for k, _ in attrs if k.startswith("on")]


def _no_live_markup(html: str) -> None:
    """Parsed as a browser would: the hostile strings made no element and no event handler."""
    p = _Tags()
    p.feed(html)
    assert not {"script", "img", "iframe"} & set(p.tags)
    assert p.handlers == []


def test_index_and_page(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "softmax-demo" in r.text and 'href="/s/1"' in r.text
    page = client.get("/s/softmax-demo")
    assert page.status_code == 200
    assert 'data-search="1"' in page.text and "/static/app.js" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert client.get("/static/app.js").status_code == 200
    missing = client.get("/s/nosuch")
    assert missing.status_code == 404 and "no search named" in missing.text


def test_view_shows_tree_best_path_and_chart(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    _, ids = demo
    v = client.get("/api/s/1/view").json()
    assert v["search"]["best_attempt_id"] == ids["best_attempt"]
    assert v["search"]["best_speedup"] == pytest.approx(2.3)
    tree = v["tree_html"]
    for key in ("root", "rows", "warps", "exp2", "hostile", "vec", "online"):
        assert f'data-node="{ids[key]}"' in tree
    # The best path: root → rows → vec; nothing else highlighted.
    on_path = set(map(int, re.findall(r'class="node[^"]*on-best-path[^"]*" data-node="(\d+)"', tree)))
    assert on_path == {ids["root"], ids["rows"], ids["vec"]}
    assert "2.300x" in tree and "st-pruned" in tree and "st-failed" in tree
    _no_live_markup(tree)
    assert "&lt;script&gt;" in tree  # the hostile title is shown, as text
    chart = v["chart_html"]
    assert chart.startswith("<svg") and chart.count('class="pt ') == 5 + 2  # 5 timed attempts + legend dots
    assert chart.count('class="pt-fail"') == 2 + 1  # 2 failed attempts + legend
    assert "2.300x" in v["summary_html"]


def test_node_and_attempt_details_are_escaped(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    _, ids = demo
    node = client.get(f"/api/s/1/nodes/{ids['hostile']}").json()
    assert node["node"]["title"].startswith("hostile <script>")
    assert node["default_attempt"] == ids["hostile_attempt"]
    _no_live_markup(node["html"])
    att = client.get(f"/api/s/1/attempts/{ids['hostile_attempt']}").json()["html"]
    _no_live_markup(att)
    assert "&lt;/code&gt;&lt;/pre&gt;" in att  # the comment in the candidate code, shown literally
    bad = client.get(f"/api/s/1/attempts/{ids['bad_attempt']}").json()["html"]
    _no_live_markup(bad)
    assert "Compiler log" in bad and "unsupported tensor index" in bad
    assert 'class="ln diag" data-ln="9"' in bad  # the diagnostic's line is marked in the code
    wrong = client.get(f"/api/s/1/attempts/{ids['wrong_attempt']}").json()["html"]
    assert "wrong_values" in wrong and "last column not written" in wrong
    assert f"Diff to base attempt #{ids['bad_attempt']}" in wrong
    assert 'class="dl add">+    # forgot the last column' in wrong
    best = client.get(f"/api/s/1/attempts/{ids['best_attempt']}").json()["html"]
    assert "rows4096_cols1024" in best and "18.26" in best  # per-workload median, us
    assert client.get("/api/s/1/attempts/999").status_code == 404
    assert client.get("/api/s/1/nodes/999").status_code == 404


def test_the_served_page_holds_the_first_view(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    """Summary, chart, tree, the best attempt's node and the best attempt are in the HTML itself."""
    _, ids = demo
    page = client.get("/s/1").text
    version = client.get("/api/s/1/version").json()["version"]
    assert f'data-version="{version}"' in page
    assert f'data-node="{ids["vec"]}" data-attempt="{ids["best_attempt"]}"' in page
    tree = page[page.index('<div id="tree">') : page.index('<section class="panel detail-panel">')]
    assert tree.count('role="treeitem"') == 7
    assert f'class="node st-open selected on-best-path holds-best" data-node="{ids["vec"]}"' in tree
    assert '<span class="best-num" id="best-speedup">2.300x</span>' in page
    chart = page[page.index('<section id="chart"') :]
    assert chart.count('class="pt ') == 5 + 2  # the same chart the JSON view serves
    assert f'<div class="node-detail" data-node="{ids["vec"]}">' in page
    assert f'class="attempt-row selected" data-attempt="{ids["best_attempt"]}"' in page
    assert f'<div class="attempt-detail" data-attempt="{ids["best_attempt"]}">' in page
    assert "Timings per workload on NVIDIA H200" in page and "rows512_cols8192" in page
    _no_live_markup(page.replace('<script src="/static/app.js"></script>', ""))


def test_a_search_without_a_best_opens_on_its_root(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"

    async def create(store: Store) -> int:
        return (await store.create_search("fresh", "softmax", SearchConfig(policy="tuner"))).id

    sid = with_store(db, create)
    with TestClient(build_app(db, host=HOST)) as c:
        page = c.get(f"/s/{sid}").text
    root = with_store(db, lambda s: s.root(sid))
    body = page[page.index("<body") :].split(">", 1)[0]
    assert f'data-node="{root.id}"' in body and "data-attempt=" not in body
    assert "No attempts yet." in page and '<div class="node-detail"' in page


def test_notes_are_credited_to_whoever_wrote_them(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    """A tuner search's root analysis is the tuner's, not a model's."""
    db, ids = demo

    async def tuner_notes(store: Store) -> None:
        await apply_edits(
            store,
            1,
            [{"op": "update", "node_id": ids["root"], "notes": "Offline tuner (no language model): ..."}],
            author="tuner",
            round=0,
        )

    with_store(db, tuner_notes)
    root = client.get(f"/api/s/1/nodes/{ids['root']}").json()["html"]
    assert "Tuner&#x27;s notes" in root and "Model&#x27;s notes" not in root
    hostile = client.get(f"/api/s/1/nodes/{ids['hostile']}").json()["html"]  # inserted by llm:demo
    assert "Notes by demo" in hostile  # credited to the model that wrote them


def test_version_changes_only_when_the_database_does(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo
    v1 = client.get("/api/s/1/version").json()["version"]
    assert client.get("/api/s/1/version").json()["version"] == v1

    async def write(store: Store) -> None:  # another connection, as another process would
        cand = await store.put_candidate(uidata.variant("later"), "triton")
        await store.record_attempt(1, ids["warps"], cand.id, uidata.ok_eval(3.1), round=3, author="tuner")

    with_store(db, write)
    v2 = client.get("/api/s/1/version").json()["version"]
    assert v2 != v1
    view = client.get("/api/s/1/view").json()
    assert view["version"] == v2 and view["search"]["best_speedup"] == pytest.approx(3.1)


def test_add_intent_goes_through_the_tools(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    r = client.post(
        "/api/s/1/intents",
        json={
            "parent_id": ids["rows"],
            "title": "two rows per program",
            "rationale": "halve the launch count",
            "priority": 0.65,
            "difficulty": 2,
            "reason": "from the page",
        },
    )
    assert r.status_code == 200, r.text
    new = r.json()["nodes"][0]
    nodes = with_store(db, lambda s: s.list_nodes(1))
    got = next(n for n in nodes if n.id == new["id"])
    assert (got.parent_id, got.title, got.author, got.priority) == (
        ids["rows"],
        "two rows per program",
        "human",
        0.65,
    )
    edits = with_store(db, lambda s: s.list_edits(1))
    assert any(e.op == "insert" and e.node_id == got.id and e.reason == "from the page" for e in edits)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"parent_id": 2, "title": "x"}, "title"),
        ({"parent_id": 1, "title": "One row per program, row kept in registers"}, "near-duplicate"),
        ({"parent_id": 4, "title": "grow under a pruned node"}, "pruned"),
        ({"parent_id": 2, "title": "a fine title", "priority": 3}, "priority"),
        ({"parent_id": 2, "title": "a fine title", "best_attempt_id": 4}, "best_attempt_id"),
    ],
)
def test_bad_intents_are_refused_and_nothing_written(
    client: TestClient, demo: tuple[Path, dict[str, int]], body: dict[str, object], needle: str
) -> None:
    db, _ = demo
    before = len(with_store(db, lambda s: s.list_nodes(1)))
    r = client.post("/api/s/1/intents", json=body)
    assert r.status_code == 400
    err = r.json()
    assert needle in (err["error"] + " ".join(err["problems"]))
    assert len(with_store(db, lambda s: s.list_nodes(1))) == before


def test_edits_pin_priority_veto_prune(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    db, ids = demo
    w = ids["warps"]
    for edit in ({"op": "pin"}, {"op": "update", "priority": 0.95}):
        r = client.post("/api/s/1/edits", json={"edits": [{"node_id": w, "reason": "human call", **edit}]})
        assert r.status_code == 200, r.text
    n = with_store(db, lambda s: s.get_node(w))
    assert n.pinned and n.priority == pytest.approx(0.95)
    assert client.post("/api/s/1/edits", json={"op": "veto", "node_id": ids["hostile"]}).status_code == 200
    assert client.post("/api/s/1/edits", json={"op": "prune", "node_id": ids["rows"]}).status_code == 200
    nodes = {n.id: n for n in with_store(db, lambda s: s.list_nodes(1))}
    assert nodes[ids["hostile"]].vetoed
    assert {nodes[k].status.value for k in (ids["rows"], ids["vec"], ids["online"])} == {"pruned"}
    # The root cannot be pruned: refused with the store's explanation.
    r = client.post("/api/s/1/edits", json={"op": "prune", "node_id": ids["root"]})
    assert r.status_code == 400 and "root" in " ".join(r.json()["problems"])


def test_writes_refuse_cross_site_requests(client: TestClient, demo: tuple[Path, dict[str, int]]) -> None:
    _, ids = demo
    form = client.post("/api/s/1/edits", data={"op": "pin", "node_id": str(ids["warps"])})
    assert form.status_code == 415
    evil = client.post(
        "/api/s/1/edits",
        json={"op": "pin", "node_id": ids["warps"]},
        headers={"Origin": "http://evil.example"},
    )
    assert evil.status_code == 403
    rebound = client.get("/api/s/1/view", headers={"Host": "evil.example"})
    assert rebound.status_code == 400
    same = client.post(
        "/api/s/1/edits", json={"op": "pin", "node_id": ids["warps"]}, headers={"Origin": f"http://{HOST}"}
    )
    assert same.status_code == 200


def test_the_round_budget_is_raised_from_the_page_and_bad_input_refused(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, _ = demo
    s = with_store(db, lambda st: st.get_search(1))
    page = client.get("/s/1").text
    assert 'id="more-rounds"' in page and 'id="intent-params"' in page
    assert f"{s.round} of {s.config.budgets.rounds}" in page
    for body, needle in [
        ({}, "nothing to change"),
        ({"more_rounds": 0}, "more_rounds"),
        ([1], "nothing to change"),
    ]:
        r = client.post("/api/s/1/budgets", json=body)
        assert r.status_code == 400 and needle in r.text, (body, r.text)
    assert with_store(db, lambda st: st.get_search(1)).config.budgets == s.config.budgets  # nothing written
    r = client.post("/api/s/1/budgets", json={"more_rounds": 2, "search": 99})  # the address names the search
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["after"]["rounds"] == s.round + 2 and d["before"]["rounds"] == s.config.budgets.rounds
    assert "ksearch" in d["next"] and "select_action" not in d["next"]
    assert with_store(db, lambda st: st.get_search(1)).config.budgets.rounds == s.round + 2


def test_an_intent_added_from_the_page_keeps_its_params(
    client: TestClient, demo: tuple[Path, dict[str, int]]
) -> None:
    db, ids = demo
    body = {"parent_id": ids["rows"], "title": "rows of 512", "params": {"BLOCK_N": 512, "layout": "rows"}}
    r = client.post("/api/s/1/intents", json=body)
    assert r.status_code == 200, r.text
    got = with_store(db, lambda s: s.get_node(r.json()["nodes"][0]["id"]))
    assert got.params == {"BLOCK_N": 512, "layout": "rows"}


def test_notes_are_credited_to_whoever_wrote_them_last() -> None:
    from ksearch.server.web.parts import notes_label
    from ksearch.worldmodel.models import Edit, Node

    n = Node(id=2, search_id=1, parent_id=1, kind="intent", title="wider blocks", author="tuner", notes="n")

    def edit(author: str) -> Edit:
        return Edit(
            id=1,
            search_id=1,
            op="update",
            node_id=2,
            payload={"changes": {"notes": "x"}},
            author=author,
            round=1,
        )

    assert notes_label(n, []) == "Tuner's notes"
    assert notes_label(n, [edit("llm:replay:host.jsonl")]) == "Notes (replayed from host.jsonl)"
    assert notes_label(n, [edit("llm:claude-sonnet-4-5")]) == "Notes by claude-sonnet-4-5"
    assert notes_label(n, [edit("llm:m"), edit("human")]) == "Notes (by a person)"
