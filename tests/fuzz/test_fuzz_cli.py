"""Bad input through the `ksearch` command line: exit code 2 with a message, never a traceback, and the
database left as it was.

Commands run in-process through typer's CliRunner (`ksearch.server.cli.app` after `_register()`), a few over a
real subprocess (where argv really carries undecodable bytes). Each generated command line is valid
except for one argument, so that only that argument can be the reason for the refusal.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ksearch.server.cli.main import _register, app
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from tests.fuzz.fuzzkit import TRAVERSALS, dump_db, unstorable_text

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
_register()


class World:
    def __init__(self, db: Path, files: dict[str, Path], intent: int) -> None:
        self.db = db
        self.files = files
        self.intent = intent


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("fuzz-cli")
    db = base / "k.db"

    async def setup() -> int:
        async with await Workspace.open(db) as ws:
            await create_search(ws, CreateSearchIn(task="softmax", name="fz", seed=3))
            nodes = await propose_intents(
                ws,
                ProposeIntentsIn(
                    search="fz", intents=[IntentSpec(title="one row per program", priority=0.8, difficulty=1)]
                ),
            )
            return nodes[0].id

    intent = asyncio.run(setup())
    files = {
        "missing": base / "no-such-file.py",
        "dir": base,
        "empty": base / "empty.py",
        "binary": base / "binary.py",
        "latin1": base / "latin1.py",
        "huge": base / "huge.py",
        "syntax": base / "syntax.py",
        "fifo": base / "fifo.py",
        "nul": base / "nul.py",
    }
    files["empty"].write_text("")
    files["binary"].write_bytes(bytes(range(256)) * 4)
    files["latin1"].write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))
    files["huge"].write_text("# padding\n" * 30_000)
    files["syntax"].write_text("class ModelNew(torch.nn.Module:\n    pass\n")
    files["nul"].write_bytes(b"import torch\x00\n")
    os.mkfifo(files["fifo"])
    yield World(db, files, intent)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "KSEARCH_DB", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)


def invoke(args: list[str]):  # -> click.testing.Result
    return CliRunner().invoke(app, args, catch_exceptions=True)


def assert_refused(world: World, args: list[str], code: int = 2) -> str:
    before = dump_db(world.db)
    r = invoke(args)
    out = r.output + (r.stderr if r.stderr_bytes is not None else "")
    shown = [a[:60] for a in args]
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{shown}: {type(r.exception).__name__}: {r.exception}"
    )
    assert r.exit_code == code, f"{shown}: exit {r.exit_code}: {out[-600:]}"
    assert "Traceback" not in out, out[-1500:]
    assert out.strip(), f"{shown}: refused without a word"
    assert dump_db(world.db) == before, f"{shown} changed the database"
    return out


# --------------------------------------------------------------------------- strategies

unknown_search = st.one_of(
    st.text(max_size=30),
    unstorable_text,
    st.sampled_from(
        ["[/red]", "[bold]x", "nope", "0", "-1", "²", "99999999999999999999999", "9223372036854775808"]
    ),
    st.integers(min_value=2).map(str),
).filter(lambda s: s.strip() not in ("fz", "1") and not s.startswith("-"))
bad_node = st.one_of(
    st.integers(min_value=10**6, max_value=2**80).map(str), st.sampled_from(["0", "abc", "1.5", ""])
)
bad_text = st.one_of(unstorable_text, st.just("x" * 5000))
bad_prob = (
    st.one_of(
        st.floats(max_value=-1e-6, allow_nan=False),
        st.floats(min_value=1.001),
        st.just(float("nan")),
        st.just(float("inf")),
    )
    .map(repr)
    .map(lambda s: s.replace("nan", "nan").replace("inf", "inf"))
)
bad_difficulty = st.one_of(st.integers(max_value=0), st.integers(min_value=6)).map(str)


@st.composite
def intent_add_args(draw: st.DrawFn, world: World) -> list[str]:
    args = {"search": "fz", "title": f"fuzzed idea {draw(st.integers(0, 10**9))}"}
    opts: dict[str, str] = {}
    slot = draw(
        st.sampled_from(
            ["search", "title", "priority", "difficulty", "expected", "parent", "why", "notes", "reason"]
        )
    )
    if slot == "search":
        args["search"] = draw(unknown_search)
    elif slot == "title":
        args["title"] = draw(
            st.one_of(
                unstorable_text,
                st.just("ab"),
                st.just("   "),
                st.just("x" * 201),
                st.sampled_from(["tab\tin title", "line\nbreak", "esc\x1b[2J"]),
            )
        )
    elif slot == "priority":
        opts["--priority"] = draw(bad_prob)
    elif slot == "difficulty":
        opts["--difficulty"] = draw(bad_difficulty)
    elif slot == "expected":
        opts["--expected"] = draw(
            st.one_of(st.floats(max_value=0, allow_nan=False), st.floats(min_value=1000.001)).map(repr)
        )
    elif slot == "parent":
        opts["--parent"] = draw(bad_node.filter(lambda s: s not in ("0", "")))
    else:
        opts[f"--{slot}"] = draw(bad_text)
    flat = [a for kv in opts.items() for a in kv]
    return ["intent", "add", args["search"], args["title"], *flat, "--db", str(world.db)]


@st.composite
def pin_args(draw: st.DrawFn, world: World) -> list[str]:
    cmd = draw(st.sampled_from(["pin", "unpin", "veto", "unveto", "prune", "reopen"]))
    slot = draw(st.sampled_from(["search", "node", "reason"]))
    search, node, extra = "fz", str(world.intent), []
    if slot == "search":
        search = draw(unknown_search)
    elif slot == "node":
        node = draw(bad_node)
    else:
        extra = ["--reason", draw(st.one_of(unstorable_text, st.just("r" * 2001)))]
    return [cmd, search, node, *extra, "--db", str(world.db)]


@st.composite
def tree_args(draw: st.DrawFn, world: World) -> list[str]:
    slot = draw(st.sampled_from(["search", "budget", "both"]))
    if slot == "search":
        return ["tree", draw(unknown_search), "--db", str(world.db)]
    if slot == "budget":
        return [
            "tree",
            "fz",
            "--budget",
            draw(st.one_of(st.integers(max_value=400).map(str), st.just("abc"))),
            "--db",
            str(world.db),
        ]
    return ["tree", "fz", "--json", "--mermaid", "--db", str(world.db)]


@st.composite
def submit_args(draw: st.DrawFn, world: World) -> list[str]:
    slot = draw(st.sampled_from(["search", "file", "node", "base", "language", "trials", "traversal"]))
    search, file, extra = "fz", str(world.files["syntax"]), []
    if slot == "search":
        search = draw(unknown_search)
    elif slot == "file":
        file = str(world.files[draw(st.sampled_from(sorted(world.files)))])
    elif slot == "traversal":
        file = draw(
            st.sampled_from(
                [
                    "../../etc/passwd",
                    "/etc/shadow",
                    "/dev/zero",
                    "/dev/urandom",
                    "/proc/self/mem",
                    "/",
                    "~/.bashrc",
                    "/etc/passwd\x00.py",
                ]
            )
        )
    elif slot == "node":
        extra = ["--node", draw(bad_node.filter(lambda s: s not in ("0", "")))]
    elif slot == "base":
        extra = ["--base", draw(bad_node.filter(lambda s: s not in ("0", "")))]
    elif slot == "language":
        extra = [
            "--language",
            draw(
                st.text(min_size=1, max_size=8).filter(
                    lambda s: s not in ("triton", "cuda", "cpp_ext") and not s.startswith("-")
                )
            ),
        ]
    else:
        extra = ["--trials", draw(st.one_of(st.integers(max_value=0), st.integers(min_value=21)).map(str))]
    if slot in ("node", "base", "language", "trials", "search"):
        file = str(world.files["syntax"])  # refused for its argument before the file's own problem
    return ["submit", search, file, *extra, "--db", str(world.db)]


@st.composite
def run_args(draw: st.DrawFn, world: World) -> list[str]:
    # the budget options only bound the damage if a case were wrongly accepted and started a run
    db = ["--db", str(world.db), "--plain", "--no-final", "--rounds", "1", "--max-attempts", "1"]
    slot = draw(
        st.sampled_from(
            [
                "resume",
                "task",
                "policy",
                "model",
                "openai",
                "base_url",
                "replay",
                "language",
                "name",
                "numbers",
                "both",
            ]
        )
    )
    if slot == "resume":
        return ["run", "--resume", draw(unknown_search), *db]
    if slot == "task":
        return [
            "run",
            draw(
                st.one_of(
                    st.sampled_from(TRAVERSALS),
                    st.text(min_size=1, max_size=20).filter(
                        lambda s: s.strip() and not s.startswith("-") and s not in ("softmax",)
                    ),
                )
            ),
            "--new",
            *db,
        ]
    if slot == "policy":
        return [
            "run",
            "softmax",
            "--policy",
            draw(st.sampled_from(["bogus", "Anthropic!", "anthropic", "tuner!"])),
            *db,
        ]
    if slot == "model":
        return ["run", "softmax", "--policy", "tuner", "--model", "some-model", *db]
    if slot == "openai":
        return ["run", "softmax", "--policy", "openai", *db]
    if slot == "base_url":
        return [
            "run",
            "softmax",
            "--policy",
            "openai",
            "--model",
            "m",
            "--base-url",
            draw(st.sampled_from(["ftp://x", "localhost:8000", "file:///etc/passwd", "x"])),
            *db,
        ]
    if slot == "replay":
        policy = draw(st.sampled_from(["replay", "tuner"]))
        where = draw(
            st.sampled_from(
                [
                    "",
                    "/dev/zero",
                    str(world.files["dir"]),
                    str(world.files["binary"]),
                    str(world.files["missing"]),
                    str(world.files["syntax"]),
                ]
            )
        )
        if policy == "tuner":
            where = where or str(world.files["empty"])
        return ["run", "softmax", "--policy", policy, *(["--replay", where] if where else []), "--new", *db]
    if slot == "language":
        return ["run", "softmax", "--language", draw(st.sampled_from(["fortran", "TRITON", "", "c++"])), *db]
    if slot == "name":
        return [
            "run",
            "softmax",
            "--new",
            "--name",
            draw(st.sampled_from(["../x", "a b!", "x" * 81, "-", "fz", "\x00", "[/red]"])),
            *db,
        ]
    if slot == "numbers":
        opt, bad = draw(
            st.sampled_from(
                [
                    ("--rounds", "0"),
                    ("--branching", "17"),
                    ("--stagnation", "0"),
                    ("--seed", "-1"),
                    ("--seed", str(2**40)),
                    ("--max-attempts", "0"),
                    ("--usd", "-1"),
                    ("--wall", "0"),
                ]
            )
        )
        return ["run", "softmax", "--new", *db, opt, bad]
    return ["run", "softmax", "--resume", "fz", *db]


# --------------------------------------------------------------------------- properties


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_intent_add_refuses_bad_input(world: World, data: st.DataObject) -> None:
    assert_refused(world, data.draw(intent_add_args(world)))


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_node_commands_refuse_bad_input(world: World, data: st.DataObject) -> None:
    assert_refused(world, data.draw(pin_args(world)))


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_tree_refuses_bad_input(world: World, data: st.DataObject) -> None:
    assert_refused(world, data.draw(tree_args(world)))


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_submit_refuses_bad_input(world: World, data: st.DataObject) -> None:
    args = data.draw(submit_args(world))
    out = assert_refused(world, args)
    assert "root:x:0:0" not in out  # never echo the contents of a file it was pointed at


@FUZZ
@given(data=st.data())
@pytest.mark.slow
def test_run_refuses_bad_input_before_writing_anything(world: World, data: st.DataObject) -> None:
    assert_refused(world, data.draw(run_args(world)))


@FUZZ
@given(
    ref=st.one_of(
        st.sampled_from(TRAVERSALS),
        st.text(min_size=1, max_size=40),
        unstorable_text,
        st.sampled_from(["[/red]", "/dev/zero", "/proc/self/environ", ".", ".."]),
    )
)
@pytest.mark.slow
def test_task_show_refuses_what_is_not_a_task(world: World, ref: str) -> None:
    from ksearch.gpu.tasks import builtin_names

    if ref.strip() in builtin_names() or ref.startswith("-") or not ref.strip():
        return
    out = assert_refused(world, ["task", "show", ref])
    assert "root:x:0:0" not in out


# --------------------------------------------------------------------------- real argv


@pytest.mark.slow
def test_undecodable_argv_bytes_are_refused_without_a_traceback(world: World) -> None:
    """A file name or argument with bytes that are not UTF-8 reaches Python as lone surrogates."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    before = dump_db(world.db)
    for argv in (
        [b"tree", b"caf\xe9", b"--db", os.fsencode(world.db)],
        [b"intent", b"add", b"fz", b"title \xff\xfe bytes", b"--db", os.fsencode(world.db)],
        [b"pin", b"fz", str(world.intent).encode(), b"--reason", b"\xc3", b"--db", os.fsencode(world.db)],
        [b"submit", b"fz", b"/tmp/no-such-\xff.py", b"--db", os.fsencode(world.db)],
        [b"task", b"show", b"\xff\xfe"],
    ):
        p = subprocess.run(
            [os.fsencode(sys.executable), b"-m", b"ksearch.server.cli", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=120,
        )
        err = p.stderr.decode(errors="replace")
        assert p.returncode == 2, (argv, p.returncode, err[-800:])
        assert "Traceback" not in err and "error:" in err, err[-800:]
    assert dump_db(world.db) == before
