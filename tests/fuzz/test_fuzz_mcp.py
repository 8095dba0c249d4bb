"""Bad input through the MCP server: every refusal names what was wrong and leaves the database as it was.

The server runs in-process (`mcp.client.Client` on `build_server(db).mcp`), so hypothesis can send many
inputs quickly; a few cases also go over a real `ksearch serve` stdio pipe, where the arguments are JSON.
Each generated case starts from arguments that would be accepted and breaks exactly one field, so a
success would be a bug (and would show up as a changed database).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from ksearch.gpu.tasks import load_task
from ksearch.server.mcp.server import build_server
from tests.fuzz.fuzzkit import (
    TRAVERSALS,
    RawStdio,
    dump_db,
    impossible_ids,
    nasty_text,
    unstorable_text,
    wrong_types,
)

ROOT = Path(__file__).resolve().parents[2]
SEED = load_task("softmax").seeds["triton"]
pytestmark = pytest.mark.anyio

MISSING = object()  # a path set to MISSING is removed from the arguments
EXISTING = {"fz", "other", "1", "2"}
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class World:
    client: Client
    db: Path
    intent_id: int


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    db = tmp_path_factory.mktemp("fuzz-mcp") / "k.db"
    ks = build_server(db)
    try:
        async with Client(ks.mcp) as c:
            await _ok(c, "create_search", {"task": "softmax", "name": "fz", "seed": 3})
            await _ok(c, "create_search", {"task": "softmax", "name": "other", "seed": 4})
            nodes = await _ok(
                c,
                "propose_intents",
                {
                    "search": "fz",
                    "intents": [
                        {
                            "title": "one row per program",
                            "rationale": "fewer programs",
                            "priority": 0.8,
                            "difficulty": 1,
                        },
                        {"title": "online softmax", "priority": 0.4, "difficulty": 3},
                    ],
                },
            )
            yield World(c, db, nodes[0]["id"])
    finally:
        await ks.close()


async def _ok(c: Client, tool: str, args: dict[str, Any]) -> Any:
    res = await c.call_tool(tool, args)
    assert not res.is_error, res.content[0].text
    data = res.structured_content
    return data.get("result", data) if isinstance(data, dict) and set(data) == {"result"} else data


# --------------------------------------------------------------------------- the cases


_fresh = itertools.count(1)


def _base(tool: str, intent: int) -> dict[str, Any]:
    """Arguments each tool accepts (with a fresh title / name so that they would really be applied)."""
    cand = {"source": SEED}
    n = next(_fresh)
    return {
        "get_tree": {"search": "fz", "format": "text", "budget_chars": 6000},
        "select_action": {"search": "fz"},
        "propose_intents": {
            "search": "fz",
            "author": "human",
            "reason": "fuzz",
            "intents": [
                {
                    "title": f"split the row across {n} programs",
                    "priority": 0.5,
                    "difficulty": 2,
                    "rationale": "more parallelism",
                    "notes": "",
                }
            ],
        },
        "edit_tree": {
            "search": "fz",
            "edits": [
                {
                    "op": "update",
                    "node_id": intent,
                    "priority": 0.3,
                    "notes": "n",
                    "title": f"one row per program, {n} wide",
                }
            ],
        },
        "create_search": {"task": "softmax", "name": f"fresh-{n}", "rounds": 3, "stagnation": 2, "seed": 5},
        "compile_kernel": {"search": "fz", "candidate": cand},
        "run_correctness": {"search": "fz", "candidate": cand, "workloads": ["smoke"], "trials": 1},
        "benchmark": {"search": "fz", "node_id": intent, "candidate": cand, "trials": 1},
        "profile_ncu": {"search": "fz", "candidate": cand},
        "run_search": {"search": "fz", "rounds": 1, "wait_s": 0},
    }[tool]


@dataclass(frozen=True)
class Case:
    tool: str
    path: tuple[str | int, ...]
    values: st.SearchStrategy[Any]
    mention: str  # the field name the refusal must name (or the bad value itself, for unknown ids)
    also: tuple[tuple[tuple[str | int, ...], Any], ...] = field(default=())  # other paths to set first


def _text_longer_than(n: int) -> st.SearchStrategy[str]:
    return st.integers(min_value=n + 1, max_value=n * 3 + 10).map(lambda k: ("ab\u00e9 " * k)[:k])


TOOLS_WITH_SEARCH = (
    "get_tree",
    "select_action",
    "propose_intents",
    "edit_tree",
    "compile_kernel",
    "run_correctness",
    "benchmark",
    "profile_ncu",
    "run_search",
)
unknown_search = st.one_of(
    impossible_ids,
    st.integers(min_value=3, max_value=10**12),
    nasty_text,
    st.text(max_size=30),
    wrong_types,
    st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
).filter(lambda v: not (isinstance(v, str) and v.strip() in EXISTING))
unknown_ids = st.one_of(impossible_ids, st.integers(min_value=1000, max_value=10**15))
# NaN and infinities are left out: JSON cannot carry them (the client sends null, a valid "not given").
_finite = {"allow_nan": False, "allow_infinity": False}
out_of_unit = st.one_of(
    st.floats(max_value=-1e-9, **_finite), st.floats(min_value=1.000001, **_finite), wrong_types
)
bad_difficulty = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=6),
    wrong_types,
    st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
)
bad_speedup = st.one_of(
    st.floats(max_value=0, **_finite), st.floats(min_value=1000.001, **_finite), wrong_types
)
not_a_candidate_id = st.one_of(st.text(max_size=20), st.from_regex(r"c[0-9a-f]{15}", fullmatch=True))
result_keys = st.sampled_from(
    [
        "best_attempt_id",
        "speedup",
        "evaluation",
        "status",
        "visits",
        "timings",
        "evil",
        "__class__",
        "node_id\x00",
    ]
)

CASES: list[Case] = [
    *(Case(t, ("search",), unknown_search, "search") for t in TOOLS_WITH_SEARCH),
    *(Case(t, ("search",), st.just(MISSING), "search") for t in ("get_tree", "propose_intents", "edit_tree")),
    # ids that do not exist, or cannot exist
    Case("edit_tree", ("edits", 0, "node_id"), st.one_of(unknown_ids, wrong_types), "node_id"),
    Case("propose_intents", ("intents", 0, "parent_id"), st.one_of(unknown_ids, wrong_types), "parent_id"),
    Case("propose_intents", ("intents", 0, "base_attempt_id"), unknown_ids, "base_attempt_id"),
    Case("benchmark", ("node_id",), unknown_ids, "node"),
    Case("benchmark", ("base_attempt_id",), unknown_ids, "base_attempt_id"),
    Case(
        "benchmark",
        ("candidate", "candidate_id"),
        not_a_candidate_id,
        "candidate",
        ((("candidate", "source"), MISSING),),
    ),
    # numbers out of range, and values of the wrong type
    Case("propose_intents", ("intents", 0, "priority"), out_of_unit, "priority"),
    Case("propose_intents", ("intents", 0, "difficulty"), bad_difficulty, "difficulty"),
    Case("propose_intents", ("intents", 0, "expected_speedup"), bad_speedup, "expected_speedup"),
    Case(
        "propose_intents",
        ("intents", 0, "params"),
        st.one_of(wrong_types.filter(lambda v: not isinstance(v, dict)), st.integers()),
        "params",
    ),
    Case("edit_tree", ("edits", 0, "priority"), out_of_unit, "priority"),
    Case("edit_tree", ("edits", 0, "difficulty"), bad_difficulty, "difficulty"),
    Case(
        "edit_tree",
        ("edits", 0, "op"),
        st.one_of(st.text(max_size=10), wrong_types).filter(
            lambda v: v not in ("update", "prune", "reopen", "pin", "unpin", "veto", "unveto")
        ),
        "op",
    ),
    Case(
        "get_tree",
        ("budget_chars",),
        st.one_of(st.integers(max_value=499), st.integers(min_value=200_001), wrong_types),
        "budget_chars",
    ),
    Case(
        "get_tree",
        ("format",),
        st.text(max_size=10).filter(lambda v: v not in ("text", "json", "mermaid")),
        "format",
    ),
    Case(
        "create_search",
        ("rounds",),
        st.one_of(st.integers(max_value=0), st.integers(min_value=10_001)),
        "rounds",
    ),
    Case(
        "create_search",
        ("stagnation",),
        st.one_of(st.integers(max_value=0), st.integers(min_value=101)),
        "stagnation",
    ),
    Case(
        "create_search", ("seed",), st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31)), "seed"
    ),
    Case(
        "create_search",
        ("language",),
        st.text(max_size=10).filter(lambda v: v not in ("triton", "cuda", "cpp_ext")),
        "language",
    ),
    Case(
        "create_search",
        ("name",),
        st.one_of(
            nasty_text, st.just("../x"), st.just(""), _text_longer_than(80), st.just("a/b"), st.just("-x")
        ),
        "name",
    ),
    Case("benchmark", ("trials",), st.one_of(st.integers(max_value=0), st.integers(min_value=21)), "trials"),
    Case(
        "run_correctness",
        ("trials",),
        st.one_of(st.integers(max_value=0), st.integers(min_value=21)),
        "trials",
    ),
    Case(
        "run_search",
        ("wait_s",),
        st.one_of(st.floats(max_value=-0.001, **_finite), st.floats(min_value=3600.01, **_finite)),
        "wait_s",
    ),
    Case(
        "run_search",
        ("rounds",),
        st.one_of(st.integers(max_value=0), st.integers(min_value=10_001)),
        "rounds",
    ),
    # huge strings
    Case("propose_intents", ("intents", 0, "title"), _text_longer_than(200), "title"),
    Case("propose_intents", ("intents", 0, "rationale"), _text_longer_than(4000), "rationale"),
    Case("propose_intents", ("reason",), _text_longer_than(2000), "reason"),
    Case("propose_intents", ("author",), _text_longer_than(80), "author"),
    Case("create_search", ("task",), _text_longer_than(1000), "task"),
    Case(
        "compile_kernel",
        ("candidate", "source"),
        st.integers(200_001, 260_000).map(lambda k: "#" * k),
        "source",
    ),
    Case("profile_ncu", ("workload",), _text_longer_than(200), "workload"),
    # text that cannot be stored, or would garble every view of the tree
    *(
        Case("propose_intents", ("intents", 0, f), unstorable_text, f)
        for f in ("title", "rationale", "notes")
    ),
    Case("propose_intents", ("reason",), unstorable_text, "reason"),
    Case("propose_intents", ("author",), unstorable_text, "author"),
    Case(
        "propose_intents",
        ("intents", 0, "title"),
        st.sampled_from(["abc\ndef", "tab\there", "bell\x07x", "esc\x1b[31mred"]),
        "title",
    ),
    *(
        Case("edit_tree", ("edits", 0, f), unstorable_text, f)
        for f in ("title", "notes", "rationale", "reason")
    ),
    Case("compile_kernel", ("candidate", "source"), unstorable_text.map(lambda t: f"x = '{t}'\n"), "source"),
    # missing fields, wrong containers, unknown keys
    Case(
        "propose_intents",
        ("intents",),
        st.one_of(
            st.just(MISSING),
            st.just([]),
            st.just("one intent"),
            st.just({"title": "abc"}),
            st.just([5]),
            st.just([[]]),
        ),
        "intents",
    ),
    Case("propose_intents", ("intents", 0, "title"), st.just(MISSING), "title"),
    Case("propose_intents", ("intents", 0, "x"), st.integers(), "x", ((("intents", 0), {}),)),
    Case(
        "edit_tree",
        ("edits",),
        st.one_of(st.just(MISSING), st.just([]), st.just("pin 2"), st.just([None]), st.just([{}] * 101)),
        "edits",
    ),
    Case("edit_tree", ("edits", 0, "op"), st.just(MISSING), "op"),
    Case("edit_tree", ("edits", 0, "node_id"), st.just(MISSING), "node_id"),
    Case("create_search", ("task",), st.just(MISSING), "task"),
    *(
        Case(
            t,
            ("candidate",),
            st.one_of(st.just(MISSING), st.just("src"), st.just([]), st.just({}), st.integers()),
            "candidate",
        )
        for t in ("compile_kernel", "run_correctness", "benchmark", "profile_ncu")
    ),
    Case(
        "run_correctness",
        ("workloads",),
        st.one_of(
            st.just("smoke"),
            st.just([5]),
            st.lists(st.just("smoke"), min_size=65, max_size=70),
            st.lists(
                st.sampled_from(["../../etc/passwd", "nope", "smoke\x00", "\ud800"]), min_size=1, max_size=3
            ),
        ),
        "workload",
    ),
    Case(
        "profile_ncu",
        ("workload",),
        st.sampled_from(["../../etc/passwd", "nope", "\x00", "a" * 150]),
        "workload",
    ),
]
for _key in ("best_attempt_id", "speedup", "evaluation", "status", "visits", "timings", "evil"):
    CASES.append(Case("propose_intents", ("intents", 0, _key), st.integers(1, 5), _key))
    CASES.append(Case("edit_tree", ("edits", 0, _key), st.integers(1, 5), _key))
CASES.append(Case("benchmark", ("candidate", "evil"), st.integers(), "evil"))
# task arguments that walk out of the project (or name something that is not a task)
for _tool in ("create_search", "compile_kernel", "run_correctness", "benchmark", "profile_ncu"):
    _also = () if _tool == "create_search" else ((("search",), MISSING),)
    if _tool == "benchmark":
        _also += ((("node_id",), MISSING),)
    CASES.append(Case(_tool, ("task",), st.sampled_from(TRAVERSALS), "task", _also))


def _set(args: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    cur: Any = args
    for key in path[:-1]:
        cur = cur[key]
    if value is MISSING:
        if isinstance(cur, dict):
            cur.pop(path[-1], None)
    else:
        cur[path[-1]] = value


def build(case: Case, value: Any, intent: int) -> dict[str, Any]:
    args = copy.deepcopy(_base(case.tool, intent))
    for path, v in case.also:
        _set(args, path, v if v is MISSING else copy.deepcopy(v))
    _set(args, case.path, value)
    return args


cases = st.sampled_from(CASES).flatmap(lambda c: st.tuples(st.just(c), c.values))


def _mentions(text: str, case: Case, value: Any) -> bool:
    low = text.lower()
    if case.mention.lower() in low:
        return True
    # an unknown id or name may be named by its value instead ("no node #123", "no search named 'x'")
    return value is not MISSING and str(value).lower()[:60] in low


# --------------------------------------------------------------------------- the properties


@FUZZ
@given(case=cases)
@pytest.mark.slow
async def test_a_broken_field_is_refused_by_name_and_changes_nothing(
    world: World, case: tuple[Case, Any]
) -> None:
    c, value = case
    args = build(c, value, world.intent_id)
    before = dump_db(world.db)
    res = await world.client.call_tool(c.tool, args)
    text = res.content[0].text if res.content else ""
    shown = json.dumps(args, default=repr)[:300]
    assert res.is_error, f"{c.tool} accepted {shown}"
    assert _mentions(text, c, value), (
        f"{c.tool} {shown}: the refusal does not name {c.mention!r}: {text[:500]}"
    )
    assert "Traceback" not in text and "failed inside ksearch" not in text, text[:800]
    assert dump_db(world.db) == before, f"{c.tool} {shown} changed the database"


@FUZZ
@given(title=nasty_text, rationale=st.one_of(nasty_text, st.text(max_size=200)))
@pytest.mark.slow
async def test_odd_unicode_text_is_stored_exactly_or_refused_by_name(
    world: World, title: str, rationale: str
) -> None:
    """Text that is valid Unicode (emoji, right-to-left marks, combining marks) is kept byte for byte;
    text that is not (lone surrogates), or a title with control characters, is refused by field name."""
    title = f"{title} {len(title)}"  # keep some length so that short titles are not the only refusals
    before = dump_db(world.db)
    res = await world.client.call_tool(
        "propose_intents",
        {
            "search": "other",
            "intents": [{"title": title, "rationale": rationale, "priority": 0.5}],
        },
    )
    text = res.content[0].text if res.content else ""
    if res.is_error:
        assert "failed inside ksearch" not in text and "Traceback" not in text, text[:800]
        assert "title" in text or "rationale" in text, text[:500]
        assert dump_db(world.db) == before
        return
    node = res.structured_content["result"][0]
    # Titles lose outer whitespace (str.strip: NBSP and the like too); everything inside is kept exactly.
    assert node["title"] == title.strip() and node["rationale"] == rationale
    tree = await _ok(world.client, "get_tree", {"search": "other", "format": "json"})
    assert title.strip() in [n["title"] for n in tree["tree"]["nodes"]]


async def test_resources_and_prompts_refuse_with_the_reason(world: World) -> None:
    for uri, says in [
        ("ksearch://attempts/123456", "no attempt #123456"),
        ("ksearch://attempts/99999999999999999999999", "no attempt"),
        ("ksearch://attempts/abc", "attempt id must be a whole number"),
        ("ksearch://searches/nope/tree", "no search named 'nope'"),
        ("ksearch://searches/fz/nodes/424242", "no node #424242"),
        ("ksearch://searches/fz/nodes/x1", "node id must be a whole number"),
        (f"ksearch://searches/other/nodes/{world.intent_id}", "not in search 'other'"),
        ("ksearch://tasks/no-such-task", "unknown task"),
    ]:
        before = dump_db(world.db)
        with pytest.raises(Exception) as info:
            await world.client.read_resource(uri)
        assert says in str(info.value), (uri, str(info.value))
        assert dump_db(world.db) == before
    with pytest.raises(Exception) as info:
        await world.client.get_prompt(
            "implement_intent", {"search": "fz", "node_id": "99999999999999999999999"}
        )
    assert "no node" in str(info.value) or "99999999999999999999999" in str(info.value)


# --------------------------------------------------------------------------- over a real stdio pipe


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@asynccontextmanager
async def stdio(db: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ksearch.server.cli", "serve", "--db", str(db)],
        env=_env(),
        cwd=str(ROOT),
    )
    async with Client(params, read_timeout_seconds=120) as c:
        yield c


async def test_bad_arguments_over_stdio_are_refused_and_the_server_lives_on(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    async with stdio(db) as c:
        await _ok(c, "create_search", {"task": "softmax", "name": "fz", "seed": 3})
        nodes = await _ok(c, "propose_intents", {"search": "fz", "intents": [{"title": "vectorized loads"}]})
        before = dump_db(db)
        for tool, args, says in [
            ("get_tree", {"search": 2**70}, "no search with id"),
            ("get_tree", {"search": "x\x00y"}, "no search named"),
            ("propose_intents", {"search": "fz", "intents": [{"title": "nul \x00 inside"}]}, "title"),
            (
                "propose_intents",
                {"search": "fz", "intents": [{"title": "big", "priority": 1e308}]},
                "priority",
            ),
            ("propose_intents", {"search": "fz", "intents": [{"title": "x" * 100_000}]}, "title"),
            ("edit_tree", {"search": "fz", "edits": [{"op": "pin", "node_id": -(2**70)}]}, "node_id"),
            (
                "edit_tree",
                {
                    "search": "fz",
                    "edits": [{"op": "update", "node_id": nodes[0]["id"], "best_attempt_id": 1}],
                },
                "best_attempt_id",
            ),
            ("create_search", {"task": "../../../../etc/passwd"}, "not a task"),
            ("benchmark", {"task": "/etc/shadow", "candidate": {"source": SEED}}, "not a task"),
            ("compile_kernel", {"search": "fz", "candidate": "import os"}, "candidate"),
        ]:
            res = await c.call_tool(tool, args)
            text = res.content[0].text if res.content else ""
            assert res.is_error, (tool, args)
            assert says in text, (tool, text[:400])
            assert "root:x:" not in text and "failed inside ksearch" not in text, text[:400]
        assert dump_db(db) == before
        rows = await _ok(c, "list_searches", {})
        assert [r["name"] for r in rows] == ["fz"]


def _call_line(rid: int, tool: str, arguments_json: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"{tool}",'
        f'"arguments":{arguments_json}}}}}'
    ).encode()


@pytest.mark.slow
def test_broken_bytes_on_the_wire_do_not_kill_the_server_and_it_exits_when_the_host_hangs_up(
    tmp_path: Path,
) -> None:
    db = tmp_path / "k.db"
    raw = RawStdio(db, ROOT, _env())
    try:
        raw.initialize()
        made = raw.call("create_search", {"task": "softmax", "name": "fz", "seed": 3})
        assert made is not None and not made["result"].get("isError"), made
        before = dump_db(db)
        for junk in [
            b"hello",
            b"\xff\xfe\x00garbage",
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"na',
            b"[1,2,3]",
            b"{}",
            b"\x00" * 64,
            b'{"jsonrpc":"2.0","id":8,"method":"no/such/method"}',
            b"x" * 2_000_000,
        ]:
            raw.send(junk)
        # NUL escapes, an overflowing float, a huge integer: each gets an answer, as an error
        for rid, tool, args, says in [
            (21, "get_tree", '{"search":"a\\u0000b"}', "no search named"),
            (
                22,
                "propose_intents",
                '{"search":"fz","intents":[{"title":"overflow","priority":1e400}]}',
                "priority",
            ),
            (
                23,
                "edit_tree",
                '{"search":"fz","edits":[{"op":"pin","node_id":' + "9" * 400 + "}]}",
                "node_id",
            ),
            (24, "get_tree", '{"search":"fz","budget_chars":-0}', "budget_chars"),
        ]:
            res = raw.request_raw(rid, _call_line(rid, tool, args))
            assert res is not None, f"no answer to {tool} {args[:80]}"
            text = json.dumps(res)
            assert res.get("error") or res["result"]["isError"], text[:300]
            assert says in text, text[:400]
        answer = raw.call("list_searches", {})
        assert answer is not None and answer["result"]["structuredContent"]["result"][0]["name"] == "fz"
        assert dump_db(db) == before
    finally:
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()
        try:
            rc = raw.proc.wait(timeout=20)
        finally:
            raw.close()
    assert rc == 0, f"`ksearch serve` did not exit cleanly after the host hung up: {rc}"


@pytest.mark.slow
def test_a_lone_surrogate_escape_over_stdio_gets_an_answer(tmp_path: Path) -> None:
    raw = RawStdio(tmp_path / "k.db", ROOT, _env())
    try:
        raw.initialize()
        res = raw.request_raw(31, _call_line(31, "get_tree", '{"search":"\\ud800"}'), timeout=2)
        assert res is not None, "no answer at all: a host would wait for its own timeout"
        assert "search" in json.dumps(res)
        assert raw.call("list_searches", {}) is not None  # the server lives on either way
    finally:
        raw.close()
