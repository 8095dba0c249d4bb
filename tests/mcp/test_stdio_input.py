"""Host lines over stdio: lone surrogate escapes become U+FFFD, everything else passes untouched."""

from __future__ import annotations

import json

import pytest

from server.mcp.stdio_input import decodable


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
