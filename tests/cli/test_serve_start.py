"""`ksearch serve` refuses, before it says a word on the wire, what it could not serve: a --db path whose folder
does not exist (a placeholder left in), and with --http a port another process holds (the same check as
`ksearch ui`'s)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.fixtures.cli import ksearch_cli


def test_serve_refuses_a_db_in_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    db = tmp_path / "path" / "to" / "project" / "ksearch.db"
    r = ksearch_cli(tmp_path, "serve", "--db", str(db), timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    flat = " ".join(r.stderr.split())
    assert f"the folder {db.parent} does not exist" in flat, r.stderr
    assert r.stdout == ""  # nothing on the wire
    assert not (tmp_path / "path").exists()  # and nothing created


def test_serve_http_refuses_a_port_in_use_before_saying_it_listens(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = ksearch_cli(
            tmp_path, "serve", "--http", "--port", str(port), "--db", str(tmp_path / "k.db"), timeout=60
        )
    assert r.returncode == 2, (r.stdout, r.stderr)
    flat = " ".join(r.stderr.split())
    assert f"ksearch serve: cannot listen on 127.0.0.1:{port}" in flat and "pick another --port" in flat, (
        r.stderr
    )
    assert "listening on" not in r.stderr and "Traceback" not in r.stderr, r.stderr
