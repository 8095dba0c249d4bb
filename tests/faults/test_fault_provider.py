"""The LLM provider answers with garbage: HTML error pages (with status 200 and with 5xx), cut-off and
non-JSON bodies, JSON of the wrong shape, empty content, unparsable answers. The driver retries, goes
on when the provider recovers, and when it keeps failing stops cleanly with exit code 3 and a message
saying why. Committed work is never lost: the search resumes afterwards with another policy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.faults.faultkit import SEED, committed, integrity, ksearch, ksearch_env, node_statuses, result_json
from tests.fixtures import SOFTMAX
from tests.stubs import Reply, StubAnthropic, StubOpenAI

FASTER = SEED.replace("BLOCK_N = 2048", "BLOCK_N = 4096")
HTML = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>502</h1>nginx</body></html>"
NOW = {"retry-after": "0"}  # answers a client may retry at once (keeps the test fast)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with a search that has a seed attempt, intents and one tuner round committed (on the built-in
    softmax with a 9-row smoke workload: each evaluation of the resumed runs takes a second)."""
    base = tmp_path_factory.mktemp("provider")
    db = base / "k.db"
    p = ksearch(
        "run",
        SOFTMAX,
        "--name",
        "g",
        "--rounds",
        "1",
        "--max-attempts",
        "1",
        "--no-final",
        "--plain",
        "--db",
        str(db),
        env=ksearch_env(base / "scratch"),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return db


@pytest.fixture
def searched(template: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "k.db"
    for suffix in ("", "-wal"):  # the driver has exited: the file (and any WAL left) is the whole state
        src = template.with_name(template.name + suffix)
        if src.exists():
            shutil.copyfile(src, db.with_name(db.name + suffix))
    return db, ksearch_env(tmp_path / "scratch")


def _resume(db: Path, env: dict[str, str], *policy: str, rounds: int = 1) -> Any:
    return ksearch(
        "run",
        "--resume",
        "g",
        *policy,
        "--rounds",
        str(rounds),
        "--max-attempts",
        "1",
        "--stagnation",
        "1",
        "--no-final",
        "--plain",
        "--json",
        "--db",
        str(db),
        env=env,
        timeout=600,
    )


def _unchanged(before: dict[str, dict[int, Any]], db: Path) -> None:
    after = committed(db)
    for table, rows in before.items():
        assert {k: after[table].get(k) for k in rows} == rows, f"committed {table} rows changed"
    assert integrity(db) == "ok"


def _llm_errors(db: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT error FROM llm_calls WHERE error IS NOT NULL ORDER BY id")]
    finally:
        con.close()


@pytest.mark.slow
def test_openai_garbage_is_retried_and_the_round_completes(searched: tuple[Path, dict[str, str]]) -> None:
    db, env = searched
    before = committed(db)
    script = [
        # write_code: transport-level garbage first (no retry-after: the policy's own short backoff) ...
        Reply(200, HTML),
        Reply(200, {"choices": [], "usage": {"prompt_tokens": "many"}}),
        Reply(502, HTML, NOW),
        Reply(503, {"error": {"message": "overloaded"}}, NOW),
        # ... then an answer with nothing in it (a corrective turn follows), then a good one
        StubOpenAI.chat(""),
        StubOpenAI.chat(json.dumps({"source": FASTER, "explanation": "wider blocks"})),
        # update: prose around the JSON and a wrong-typed usage block are tolerated
        StubOpenAI.chat('Here you go:\n```json\n{"reflection": "ok", "edits": []}\n```'),
    ]
    with StubOpenAI(script) as stub:
        p = _resume(db, env, "--policy", "openai", "--model", "stub", "--base-url", stub.base_url)
        assert stub.remaining == 0, f"{stub.remaining} scripted replies were not asked for"
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = result_json(p.stdout)
    assert res["rounds_run"] == 1 and res["attempts"] == len(before["attempts"]) + 1
    _unchanged(before, db)
    errors = _llm_errors(db)
    assert len(errors) >= 5, errors  # every failed try is accounted for, with what went wrong
    assert any("not a chat completion" in e for e in errors) and any("502" in e for e in errors)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.slow
def test_a_provider_that_keeps_failing_stops_the_run_cleanly_with_exit_code_3(
    searched: tuple[Path, dict[str, str]], provider: str
) -> None:
    db, env = searched
    before = committed(db)
    if provider == "openai":
        stub: Any = StubOpenAI(
            [
                # the two first and the last without retry-after (backoff 0.5-1 s, then 1-2 s; none after the last)
                Reply(200, HTML),
                Reply(200, '{"choices": [{"mess'),
                Reply(502, HTML, NOW),
                Reply(500, "", NOW),
                Reply(529, {"error": "overloaded"}, NOW),
                Reply(200, b"\x00\xff garbage"),
            ]
        )
        args = ["--policy", "openai", "--model", "stub"]
        env = {**env, "OPENAI_API_KEY": "k"}
    else:
        stub = StubAnthropic(
            [
                Reply(200, HTML),
                Reply(200, '{"id": "msg_1", "type": "message", "content": [{"type": "tool_u'),
                Reply(502, HTML, NOW),
                Reply(529, "", NOW),
                Reply(500, HTML, NOW),
                Reply(200, {"type": "message", "content": None}),
            ]
        )
        args = ["--policy", "anthropic"]
        env = {**env, "ANTHROPIC_API_KEY": "k"}
    with stub:
        p = _resume(db, env, *args, "--base-url", stub.base_url if provider == "openai" else stub.root_url)
        assert stub.remaining == 0
    text = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == 3, text[-3000:]
    assert "Traceback" not in text
    assert "kept failing: 6 tries, all failed" in text, text[-2000:]
    _unchanged(before, db)
    assert len(_llm_errors(db)) == 6

    # the search goes on afterwards (the interrupted intent is reopened), with nothing lost
    again = _resume(db, env, "--policy", "tuner")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    _unchanged(before, db)
    assert "active" not in node_statuses(db)


@pytest.mark.slow
def test_answers_that_stay_unusable_stop_the_run_cleanly(searched: tuple[Path, dict[str, str]]) -> None:
    db, env = searched
    before = committed(db)
    script = [StubOpenAI.chat(""), StubOpenAI.chat("<html>I am not JSON</html>")]
    with StubOpenAI(script) as stub:
        p = _resume(db, env, "--policy", "openai", "--model", "stub", "--base-url", stub.base_url)
        assert stub.remaining == 0
    text = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == 3, text[-3000:]
    assert "Traceback" not in text and "unusable write_code answer twice" in text, text[-2000:]
    _unchanged(before, db)
    assert "active" not in node_statuses(db)  # the stopped run released the intent it had claimed
