"""ksearch as a host on the official TypeScript SDK client sees it (tests/ts, `@modelcontextprotocol/sdk` pinned
in its package-lock.json): over stdio and over streamable HTTP (two clients at once), the tools' schemas
compiled and every structured result validated by the SDK, the loop on softmax, the protocol's error answers,
and a cancelled benchmark followed by a fast call that is neither slow nor blamed. Over HTTP the server demands
a bearer token: the clients give it in the transport's requestInit headers, and one without it (or with a
wrong one) gets 401.

`npm ci` runs once per lock file (node_modules is kept, and git-ignored); without node or npm the tests skip."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import SOFTMAX

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "tests" / "ts"
STAMP = TS / "node_modules" / ".ksearch-lock-sha256"  # the lock file the installed modules came from
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def _lock_hash() -> str:
    return hashlib.sha256((TS / "package-lock.json").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the TypeScript SDK client tests need node and npm on PATH (Node 20 or later)")
    major = int(
        subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
        .stdout[1:]
        .split(".")[0]
    )
    assert major >= 20, f"tests/ts (its lock file) needs Node 20 or later; {node} is {major}"
    if not STAMP.is_file() or STAMP.read_text() != _lock_hash():
        r = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=TS, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, f"npm ci in {TS} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        STAMP.write_text(_lock_hash())
    return node


def _run(node: str, script: str, tmp_path: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["KSEARCH_SERVE"] = json.dumps([sys.executable, "-m", "ksearch.server.cli"])
    env["KSEARCH_TS_TMP"] = str(tmp_path)
    env["KSEARCH_TS_TASK"] = SOFTMAX
    r = subprocess.run([node, script], cwd=TS, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"node {script} failed:\n{r.stderr[-8000:]}\n{r.stdout[-2000:]}"
    result = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(result))  # the figures (text bytes, seconds after the cancellation) in the test log
    return result


def test_stdio(node: str, tmp_path: Path) -> None:
    out = _run(node, "stdio.mjs", tmp_path)
    assert (
        out["ok"] and out["tools"] == 20
    )  # the MCP tools, set_budgets, query_bank, export_kernel, list_tasks, benchmark_batch, profile_model and plug_back
    assert out["cancel"]["answers_to_the_cancelled_request"] == []  # stdio: the request is never answered
    assert all(n < 800 for n in out["benchmark_text_bytes"]), out["benchmark_text_bytes"]


def test_http_two_clients(node: str, tmp_path: Path) -> None:
    out = _run(node, "http.mjs", tmp_path)
    assert out["ok"] and out["cancel"]["next_call_s"] < 30
    assert out["strangers"] == [401, 401]  # no token, a wrong one: the SDK's client is turned away
