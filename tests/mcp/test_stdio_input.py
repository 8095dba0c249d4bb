"""Host lines over stdio: lone surrogate escapes become U+FFFD; a line the SDK cannot read (not JSON, a
batch, no JSON-RPC message) gets its JSON-RPC error, in a unit test and over a real `ksearch serve`."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mcp.types import INVALID_REQUEST, PARSE_ERROR

from ksearch.server.mcp.stdio_input import decodable, refusals

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n',
        '{"a":"\\ud83d\\ude00"}\n',  # a valid pair (an emoji) is left as the host wrote it
        '{"a":"\\\\ud800"}\n',  # an escaped backslash followed by text, not an escape
        "not json \\ud800\n",  # not JSON: the SDK answers that itself
    ],
)
def test_lines_that_decode_pass_unchanged(line: str) -> None:
    assert decodable(line) == line


@pytest.mark.parametrize(
    ("escaped", "expect"),
    [("\\ud800", "\ufffd"), ("\\uDFFF", "\ufffd"), ("x\\udc00y\\ud83d\\ude00", "x\ufffdy\U0001f600")],
)
def test_lone_surrogates_become_the_replacement_character(escaped: str, expect: str) -> None:
    line = '{"jsonrpc":"2.0","id":7,"params":{"k\\ud800":["' + escaped + '"]}}\n'
    out = decodable(line)
    assert out.endswith("\n")
    assert json.loads(out) == {"jsonrpc": "2.0", "id": 7, "params": {"k\ufffd": [expect]}}
    out.encode("utf-8")  # now valid Unicode throughout


@pytest.mark.parametrize(
    ("line", "code", "ids"),
    [
        ("hello\n", PARSE_ERROR, [None]),
        ('{"jsonrpc":"2.0","id":1,"method":\n', PARSE_ERROR, [None]),
        ("[" * 100_000 + "\n", PARSE_ERROR, [None]),  # nested past the parser's limit: refused, no crash
        ("[]\n", INVALID_REQUEST, [None]),
        (
            '[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},'
            '{"jsonrpc":"2.0","id":"b","method":"tools/list"}]\n',
            INVALID_REQUEST,
            [2, "b"],  # each request of the batch gets its refusal; the notification none
        ),
        ('[{"jsonrpc":"2.0","method":"notifications/x"}]\n', INVALID_REQUEST, [None]),
        ("42\n", INVALID_REQUEST, [None]),
        ('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}\n', INVALID_REQUEST, [5]),
        # a request whose id is null (or no string or integer): the SDK reads a notification and never answers
        ('{"jsonrpc":"2.0","id":null,"method":"ping"}\n', INVALID_REQUEST, [None]),
        ('{"jsonrpc":"2.0","id":true,"method":"tools/list"}\n', INVALID_REQUEST, [None]),
        # a malformed response keeps its id out of the answer: that id numbers one of the server's requests
        ('{"jsonrpc":"2.0","id":5,"result":"x","error":{}}\n', INVALID_REQUEST, [None]),
    ],
)
def test_lines_the_sdk_cannot_read_get_a_jsonrpc_error(line: str, code: int, ids: list[object]) -> None:
    answers = refusals(line)
    assert answers is not None
    assert [a["id"] for a in answers] == ids
    for a in answers:
        assert a["jsonrpc"] == "2.0" and a["error"]["code"] == code
        assert len(json.dumps(a)) < 1000  # quotes an excerpt of the line, never all of it
        if code == INVALID_REQUEST and line.startswith("["):
            assert "batches are not accepted" in a["error"]["message"]


def test_messages_and_blank_lines_get_no_answer_here() -> None:
    assert refusals('{"jsonrpc":"2.0","id":1,"method":"ping"}\n') is None
    assert refusals('{"jsonrpc":"2.0","method":"notifications/initialized"}\n') is None
    assert refusals('{"jsonrpc":"2.0","id":1,"result":{}}\n') is None
    assert refusals("\n") == [] and refusals("  \r\n") == []


@pytest.mark.slow
def test_a_real_server_answers_what_it_cannot_read_and_goes_on(tmp_path: Path) -> None:
    """Over a real `ksearch serve`: a non-JSON line, a batch, a malformed request and one whose id is null each
    get their JSON-RPC error, in order, and the requests around them are answered as usual."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ksearch.server.cli", "serve", "--db", str(tmp_path / "k.db")],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [replies.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def send(line: str) -> None:
        proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def reply() -> dict:  # type: ignore[type-arg]
        return json.loads(replies.get(timeout=30))

    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert reply()["result"]["serverInfo"]["name"] == "ksearch"
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send("this is not json")
        send("")  # a blank line: no message, no answer
        send('[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]')
        send('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"get_tree"}')
        send('{"jsonrpc":"2.0","id":null,"method":"ping"}')
        send('{"jsonrpc":"2.0","id":5,"method":"ping"}')
        got = [reply() for _ in range(6)]
        assert got[0]["id"] is None and got[0]["error"]["code"] == PARSE_ERROR
        assert "'this is not json'" in got[0]["error"]["message"]
        assert [(g["id"], g["error"]["code"]) for g in got[1:3]] == [
            (2, INVALID_REQUEST),
            (3, INVALID_REQUEST),
        ]
        assert "batches are not accepted" in got[1]["error"]["message"]
        assert got[3]["id"] == 4 and got[3]["error"]["code"] == INVALID_REQUEST
        assert got[4]["id"] is None and got[4]["error"]["code"] == INVALID_REQUEST
        assert "is null: a request's id is a string or an integer" in got[4]["error"]["message"]
        assert got[5] == {"jsonrpc": "2.0", "id": 5, "result": {}}  # and the server goes on as usual
        assert replies.empty()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == 0, err
    assert "answered a host line the MCP SDK cannot read" in err  # the host's log says what happened
