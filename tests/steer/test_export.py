"""`ksearch export`: the whole search as JSON, and a self-contained HTML report."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest
import uidata
from click.testing import Result

from ksearch.server.cli.export import EXPORT_FORMAT, SearchExport

Ks = Callable[..., Result]  # the `ks` fixture: run a ksearch command


class _Scan(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k.startswith("on"):
                self.handlers.append(k)
            if k in ("src", "href") and v and not v.startswith(("#", "data:")):
                self.urls.append(v)


def test_json_holds_the_whole_search(ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, ids = demo
    out = tmp_path / "search.json"
    r = ks("export", "softmax-demo", "-o", out, "--db", db)
    assert r.exit_code == 0, r.stderr
    data = SearchExport.model_validate_json(out.read_text())
    assert data.format == EXPORT_FORMAT
    assert data.search.best_attempt_id == ids["best_attempt"]
    assert {n.id for n in data.nodes} == {
        ids[k] for k in ("root", "rows", "warps", "exp2", "hostile", "vec", "online")
    }
    assert [a.id for a in data.attempts] == list(range(1, 8))
    assert all(a.candidate_id in data.candidates for a in data.attempts)
    best = next(a for a in data.attempts if a.id == ids["best_attempt"])
    assert data.candidates[best.candidate_id].source == uidata.variant(
        "vectorized", "    # loads widened to 128 bits\n"
    )
    assert any(e.op == "prune" and e.node_id == ids["exp2"] for e in data.edits)
    assert data.llm_totals.calls == 2 and data.llm_totals.tokens_in == 12600
    assert data.llm_calls[0].request == "analyse the kernel"
    # Without the prompt texts, on stdout.
    r = ks("export", "softmax-demo", "--json", "--no-llm-text", "--db", db)
    slim = json.loads(r.stdout)
    assert [c["request"] for c in slim["llm_calls"]] == ["", ""] and slim["llm_calls"][1][
        "tokens_out"
    ] == 1300


@pytest.mark.slow
def test_html_report_is_self_contained_and_escaped(
    ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    db, ids = demo
    out = tmp_path / "report.html"
    r = ks("export", "softmax-demo", "--html", "-o", out, "--db", db)
    assert r.exit_code == 0, r.stderr
    html = out.read_text()
    scan = _Scan()
    scan.feed(html)
    assert "script" not in scan.tags and "img" not in scan.tags and scan.handlers == []
    assert scan.urls == []  # no external resource: styles inline, chart inline SVG
    assert "style" in scan.tags and "svg" in scan.tags
    assert "Best kernel" in html and f"Attempt #{ids['best_attempt']}" in html
    assert "# loads widened to 128 bits" in html and "rows512_cols8192" in html
    assert "&lt;script&gt;window.__pwned" in html  # hostile titles and notes, as text
    assert "demo-model" in html and "$0.08" in html  # spend per phase
    # -o with .html implies --html.
    out2 = tmp_path / "r2.html"
    assert ks("export", "softmax-demo", "-o", out2, "--db", db).exit_code == 0
    assert out2.read_text().startswith("<!doctype html>")


def test_export_refusals(ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    db, _ = demo
    for args, needle in [
        (("--json", "--html"), "give one of --json, --html, --solution, --submission or --kernelbench"),
        (("-o", tmp_path), "is a directory"),
        (("-o", tmp_path / "no" / "such" / "x.json"), "does not exist"),
    ]:
        r = ks("export", "softmax-demo", *args, "--db", db)
        assert r.exit_code == 2, args
        assert needle in " ".join(r.stderr.split()), (args, r.stderr)
    r = ks("export", "nosuch", "--db", db)
    assert r.exit_code == 2 and "no search named" in r.stderr


def test_an_html_report_without_a_best_kernel_says_why(ks: Ks, tmp_path: Path) -> None:
    """A search whose attempts were correct on the CPU only: its report's best-kernel section says why it is
    empty (interpreter timings never rank) and how to read an attempt's code."""
    from uihelp import with_store

    from ksearch.worldmodel.models import Evaluation, SearchConfig, WorkloadTiming

    db = tmp_path / "cpu.db"

    async def build(store):  # type: ignore[no-untyped-def]
        s = await store.create_search("cpu", "softmax", SearchConfig())
        root = await store.root(s.id)
        cand = await store.put_candidate("x = 1\n", "triton")
        timing = WorkloadTiming(
            workload="smoke",
            median_us=1.0,
            iqr_us=0.0,
            ci_low_us=1.0,
            ci_high_us=1.0,
            n=2,
            device="cpu-interpreter",
        )
        await store.record_attempt(s.id, root.id, cand.id, Evaluation(status="ok", timings=[timing]))

    with_store(db, build)
    out = tmp_path / "r.html"
    r = ks("export", "cpu", "--html", "-o", out, "--db", db)
    assert r.exit_code == 0, r.stderr
    text = " ".join(out.read_text().split())
    assert (
        "No best kernel: 1 correct, none timed on a GPU (the CPU interpreter&#x27;s timings never rank"
        in text
    )


def test_an_attempt_picked_by_id_in_every_format(
    ks: Ks, demo: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """--attempt N: the JSON is that attempt's record, the report shows it as its kernel, and the kernel formats
    write it out (the task's own: softmax is a KernelBench-format task), marked with what was measured of it."""
    from ksearch.server.cli.export import ATTEMPT_FORMAT, AttemptExport

    db, ids = demo
    best = ids["best_attempt"]
    other = next(i for i in range(1, 8) if i != best)
    r = ks("export", "softmax-demo", "--json", "--attempt", other, "--db", db)
    assert r.exit_code == 0, r.stderr
    doc = AttemptExport.model_validate_json(r.stdout)
    assert (
        doc.format == ATTEMPT_FORMAT
        and doc.attempt.id == other
        and doc.candidate.id == doc.attempt.candidate_id
    )
    out = tmp_path / "r.html"
    assert ks("export", "softmax-demo", "--html", "--attempt", best, "-o", out, "--db", db).exit_code == 0
    assert f"Attempt #{best} (the best kernel)</h2>" in out.read_text()
    kb = tmp_path / "model_new.py"
    r = ks("export", "softmax-demo", "--kernelbench", "-o", kb, "--db", db)
    assert r.exit_code == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert f"attempt #{best} (triton): correct; timed on" in said and "backend='triton'" in said
    text = kb.read_text()
    assert text.startswith(
        f"# softmax: a KernelBench ModelNew file written by ksearch from search 'softmax-demo', attempt #{best}"
    )
    assert "class ModelNew" in text and "ksearch" not in "".join(
        ln for ln in text.splitlines() if not ln.startswith("#")
    )
    for args, needle, code in [
        (("--attempt", 999), "search 'softmax-demo' has no attempt #999: its attempts are #1–#7", 2),
        (("--submission",), "'softmax', a kernelbench task; a GPU MODE submission.py is written for a search on a GPU "
         "MODE folder; this one exports as format 'kernelbench' (`ksearch export --kernelbench`", 1),
        (("--submission", "--kernelbench"), "give one of --json, --html, --solution, --submission or --kernelbench", 2),
    ]:  # fmt: skip
        r = ks("export", "softmax-demo", *args, "--db", db)
        assert r.exit_code == code, (args, r.stderr)
        assert needle in " ".join(r.stderr.split()), (args, r.stderr)
