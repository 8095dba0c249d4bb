"""The offline tuner: intents from the seed's TUNABLES, code by rewriting settings, updates from a fitted
model of each parameter's effect; against a real store, updates that never repeat a setting the tree holds
under the same parent, and a retry that drops what the world model refused."""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.gpu.tasks.tunables import read_tunables
from ksearch.server.driver.policies.base import (
    AttemptOutcome,
    InitContext,
    IntentDeclined,
    PolicyError,
    UpdateContext,
    UpdateResult,
    WriteContext,
)
from ksearch.server.driver.policies.tuner import TunerPolicy
from ksearch.server.driver.policies.tuner_model import EffectModel, config_key
from ksearch.server.driver.policies.tuner_tree import (
    combine_title,
    init_title,
    move_title,
    read_title,
    setting_of,
)
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.tunables import set_tunables
from ksearch.tools.prompting import contexts
from ksearch.tools.prompting.contexts import TREE_BUDGET
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import (
    EditSpec,
    Evaluation,
    IntentSpec,
    Node,
    Search,
    WorkloadCorrectness,
    WorkloadTiming,
)
from tests.policies.policy_data import SEED, brief

pytestmark = pytest.mark.anyio

SEED_CFG = {"BLOCK_SIZE": 512, "NUM_WARPS": 4, "NUM_STAGES": 2}
SPACE = {"BLOCK_SIZE": [256, 512, 1024, 2048], "NUM_WARPS": [2, 4, 8], "NUM_STAGES": [1, 2, 3]}


def write_ctx(params: dict[str, object], attempt_index: int = 0, base: str = SEED) -> WriteContext:
    return WriteContext(
        task=brief(),
        intent_id=7,
        intent_title="tune",
        intent_params=params,
        base_source=base,
        attempt_index=attempt_index,
    )


def changed_lines(a: str, b: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


async def test_init_proposes_one_move_per_intent_covering_every_parameter() -> None:
    res = await TunerPolicy().init(InitContext(task=brief("compute"), seed_source=SEED))
    assert "Offline tuner" in res.analysis
    for line in ("BLOCK_SIZE: 256, [512], 1024, 2048", "NUM_WARPS: 2, [4], 8", "NUM_STAGES: 1, [2], 3"):
        assert line in res.analysis
    assert "36 settings" in res.analysis
    # 3 + 2 + 2 = 7 moves away from the seed, each changing exactly one value to an allowed one.
    assert len(res.intents) == 7
    keys = set()
    for intent in res.intents:
        diff = {k: v for k, v in intent.params.items() if SEED_CFG[k] != v}
        assert len(diff) == 1 and set(intent.params) == set(SEED_CFG)
        ((name, value),) = diff.items()
        assert value in SPACE[name] and name in intent.title and intent.difficulty == 1
        keys.add(config_key(intent.params))
    assert len(keys) == 7  # no duplicates
    # The first intents cover every parameter before any gets a second move.
    first = [next(k for k, v in i.params.items() if SEED_CFG[k] != v) for i in res.intents[:3]]
    assert sorted(first) == sorted(SPACE)
    # Compute-bound prior: larger tiles first, near moves before far ones.
    pri = {(k, v): i.priority for i in res.intents for k, v in i.params.items() if SEED_CFG[k] != v}
    assert pri[("BLOCK_SIZE", 1024)] > pri[("BLOCK_SIZE", 256)]
    assert pri[("BLOCK_SIZE", 1024)] > pri[("BLOCK_SIZE", 2048)]
    assert [i.priority for i in res.intents] == sorted((i.priority for i in res.intents), reverse=True)


async def test_init_is_deterministic_and_capped() -> None:
    a = await TunerPolicy(max_intents=4).init(InitContext(task=brief(), seed_source=SEED))
    b = await TunerPolicy(max_intents=4).init(InitContext(task=brief(), seed_source=SEED))
    assert len(a.intents) == 4 and a.model_dump() == b.model_dump()


async def test_init_without_tunables_says_what_is_needed() -> None:
    plain = SEED.split("TUNABLES =")[0] + "\nclass ModelNew: ...\n"
    with pytest.raises(PolicyError, match=r"TUNABLES.*declares none"):
        await TunerPolicy().init(InitContext(task=brief(), seed_source=plain))


async def test_write_code_rewrites_exactly_the_settings() -> None:
    code = await TunerPolicy().write_code(write_ctx({**SEED_CFG, "BLOCK_SIZE": 1024, "NUM_WARPS": 8}))
    ast.parse(code.source)
    assert changed_lines(SEED, code.source) == [
        "-BLOCK_SIZE = 512  # columns per program",
        "-NUM_WARPS = 4",
        "+BLOCK_SIZE = 1024  # columns per program",
        "+NUM_WARPS = 8",
    ]
    assert {n: t.current for n, t in read_tunables(code.source).items()} == {
        "BLOCK_SIZE": 1024,
        "NUM_WARPS": 8,
        "NUM_STAGES": 2,
    }
    assert code.params == {"BLOCK_SIZE": 1024, "NUM_WARPS": 8, "NUM_STAGES": 2}
    assert code.language == "triton" and "BLOCK_SIZE 512 -> 1024" in code.explanation


async def test_refine_attempts_move_one_other_parameter_deterministically() -> None:
    params = {**SEED_CFG, "BLOCK_SIZE": 1024}
    seen = []
    for i in range(1, 5):
        code = await TunerPolicy().write_code(write_ctx(params, attempt_index=i))
        again = await TunerPolicy().write_code(write_ctx(params, attempt_index=i))
        assert code.source == again.source
        ast.parse(code.source)
        assert code.params["BLOCK_SIZE"] == 1024  # the intent's own setting is kept
        moved = {k: v for k, v in code.params.items() if params[k] != v}
        assert len(moved) == 1
        ((name, value),) = moved.items()
        order = SPACE[name]
        assert abs(order.index(value) - order.index(params[name])) == 1  # a neighbouring value
        seen.append(config_key(code.params))
    assert len(set(seen)) == 4  # each refine attempt tries something new
    # The seed decides which parameter moves first.
    a = await TunerPolicy(seed=0).write_code(write_ctx(params, attempt_index=1))
    b = await TunerPolicy(seed=1).write_code(write_ctx(params, attempt_index=1))
    assert a.params != b.params


async def test_refine_runs_out_with_a_clear_decline() -> None:
    params = {**SEED_CFG, "BLOCK_SIZE": 1024}
    with pytest.raises(IntentDeclined, match="used up"):
        await TunerPolicy().write_code(write_ctx(params, attempt_index=50))


async def test_write_code_declines_what_it_cannot_implement() -> None:
    tuner = TunerPolicy()
    with pytest.raises(IntentDeclined, match="sets none"):
        await tuner.write_code(write_ctx({}))
    with pytest.raises(IntentDeclined, match=r"TILE_K.*does not declare"):
        await tuner.write_code(write_ctx({"TILE_K": 64}))
    with pytest.raises(IntentDeclined, match="not allowed"):
        await tuner.write_code(write_ctx({"BLOCK_SIZE": 4096}))
    with pytest.raises(IntentDeclined, match="already has these settings"):
        await tuner.write_code(write_ctx(dict(SEED_CFG)))


def outcome(aid: int, node: int, status: str, speedup: float | None, **params: object) -> AttemptOutcome:
    return AttemptOutcome(
        attempt_id=aid, node_id=node, params={**SEED_CFG, **params}, status=status, speedup_vs_eager=speedup
    )


def update_ctx() -> UpdateContext:
    history = [outcome(1, 1, "ok", 1.0)]
    outcomes = [
        outcome(2, 2, "ok", 1.3, BLOCK_SIZE=1024),
        outcome(3, 3, "ok", 1.1, NUM_WARPS=8),
        outcome(4, 4, "ok", 0.7, BLOCK_SIZE=256),
        outcome(5, 5, "compile_error", None, NUM_STAGES=3),
    ]
    open_intents = [
        {"id": 6, "title": "BLOCK_SIZE 2048", "priority": 0.5, "params": {**SEED_CFG, "BLOCK_SIZE": 2048}},
        {
            "id": 8,
            "title": "stages 3 + 1024",
            "priority": 0.5,
            "params": {**SEED_CFG, "NUM_STAGES": 3, "BLOCK_SIZE": 1024},
        },
        {
            "id": 9,
            "title": "256 with 8 warps",
            "priority": 0.5,
            "params": {**SEED_CFG, "BLOCK_SIZE": 256, "NUM_WARPS": 8},
        },
        {
            "id": 10,
            "title": "from best: stages 1",
            "priority": 0.5,
            "params": {**SEED_CFG, "BLOCK_SIZE": 1024, "NUM_STAGES": 1},
        },
        {"id": 11, "title": "use tensor cores", "priority": 0.9, "params": {}},
    ]
    return UpdateContext(
        task=brief(),
        round=3,
        intent_id=2,
        intent_title="tune",
        outcomes=outcomes,
        history=history,
        tree_view="",
        open_intents=open_intents,
        tunables=SPACE,
    )


async def test_update_reprioritises_prunes_and_combines() -> None:
    res = await TunerPolicy().update(update_ctx())
    edits = {e.node_id: e for e in res.edits}
    # A setting that only ever failed, and one predicted far below the best from measured effects, go.
    assert edits[8].op == "prune" and "NUM_STAGES=3" in edits[8].reason
    assert edits[9].op == "prune" and "of the best" in edits[9].reason
    # The measured trend (256 < 512 < 1024) makes the next larger block the best open bet.
    assert edits[6].op == "update" and edits[6].priority is not None and edits[6].priority > 0.75
    assert 11 not in edits  # intents that set no tunables are not the tuner's to judge
    # New intents: the combination of the best values first, then moves around the best setting.
    combo = res.new_intents[0]
    assert combo.params == {"BLOCK_SIZE": 1024, "NUM_WARPS": 8, "NUM_STAGES": 2}
    assert combo.expected_speedup is not None and 1.02 < combo.expected_speedup < 1.2  # ~1.1 = 1.3*1.1/1.3
    assert combo.parent_id == 2 and combo.base_attempt_id == 2  # builds on the best attempt
    taken = {config_key(i["params"]) for i in update_ctx().open_intents if i["params"]}
    measured = {config_key(o.params) for o in [*update_ctx().history, *update_ctx().outcomes]}
    new_keys = [config_key(i.params) for i in res.new_intents]
    assert len(set(new_keys)) == len(new_keys)
    assert not set(new_keys) & (taken | measured)  # never an open intent's or a measured setting again
    for i in res.new_intents:
        assert ("NUM_STAGES", "3") not in config_key(i.params)
    assert "Best: 1.300x" in res.reflection and "BLOCK_SIZE=1024 +" in res.reflection


async def test_update_is_deterministic() -> None:
    a = await TunerPolicy().update(update_ctx())
    b = await TunerPolicy().update(update_ctx())
    assert a.model_dump() == b.model_dump()


async def test_update_uses_the_intent_params_when_outcomes_lack_them() -> None:
    ctx = update_ctx()
    bare = [o.model_copy(update={"params": {}}) if o.attempt_id == 2 else o for o in ctx.outcomes]
    ctx = ctx.model_copy(update={"outcomes": bare, "intent_params": {**SEED_CFG, "BLOCK_SIZE": 1024}})
    res = await TunerPolicy().update(ctx)
    assert "Best: 1.300x" in res.reflection and "BLOCK_SIZE=1024" in res.reflection


async def test_update_blames_a_failure_only_on_an_unambiguous_value() -> None:
    opens = [
        {
            "id": 3,
            "title": "2048 + 8 warps",
            "priority": 0.5,
            "params": {**SEED_CFG, "BLOCK_SIZE": 2048, "NUM_WARPS": 8},
        },
        {"id": 4, "title": "8 warps", "priority": 0.5, "params": {**SEED_CFG, "NUM_WARPS": 8}},
        {"id": 5, "title": "1 stage", "priority": 0.5, "params": {**SEED_CFG, "NUM_STAGES": 1}},
    ]

    def ctx(outcomes: list[AttemptOutcome]) -> UpdateContext:
        return UpdateContext(
            task=brief(),
            round=1,
            intent_id=2,
            intent_title="tune",
            outcomes=outcomes,
            tree_view="",
            open_intents=opens,
            tunables=SPACE,
        )

    # Nothing ran correctly: there is no baseline, so no value can be blamed and nothing is pruned.
    res = await TunerPolicy().update(ctx([outcome(2, 2, "compile_error", None, BLOCK_SIZE=2048)]))
    assert res.edits == [] and res.new_intents == [] and "nothing to fit" in res.reflection
    # With the seed measured, the one new value of the failed setting is to blame.
    seed_ok = outcome(1, 1, "ok", 1.0)
    res = await TunerPolicy().update(ctx([seed_ok, outcome(2, 2, "compile_error", None, BLOCK_SIZE=2048)]))
    assert [(e.op, e.node_id) for e in res.edits if e.op == "prune"] == [("prune", 3)]
    assert all(i.params.get("BLOCK_SIZE") != 2048 for i in res.new_intents)
    # A failed setting with two new values blames neither.
    both = outcome(2, 2, "crash", None, BLOCK_SIZE=2048, NUM_STAGES=1)
    res = await TunerPolicy().update(ctx([seed_ok, both]))
    assert [e for e in res.edits if e.op == "prune"] == []


async def test_update_on_the_cpu_interpreter_counts_correct_settings_it_could_not_time() -> None:
    # Without a GPU every correct attempt has no speedup: it ran correctly, it is just not timed.
    cpu = [
        outcome(1, 1, "ok", None).model_copy(update={"cpu_interpreter": True}),
        outcome(2, 2, "ok", None, BLOCK_SIZE=2048).model_copy(update={"cpu_interpreter": True}),
        outcome(3, 2, "compile_error", None, BLOCK_SIZE=2048, NUM_STAGES=1),
    ]
    ctx = UpdateContext(
        task=brief(), round=1, intent_id=2, intent_title="tune", outcomes=cpu, tree_view="", tunables=SPACE
    )
    res = await TunerPolicy().update(ctx)
    assert "2 of 3 measured settings ran correctly (0 of them timed on a GPU)." in res.reflection
    assert "No setting timed on a GPU yet" in res.reflection
    # BLOCK_SIZE=2048 ran correctly on the interpreter: the compile error is blamed on NUM_STAGES=1 alone
    assert "Values that only ever failed: NUM_STAGES=1." in res.reflection


def test_effect_model_adds_independent_gains() -> None:
    obs = [
        ({"A": 1, "B": 1}, 0.0),
        ({"A": 2, "B": 1}, math.log(1.3)),
        ({"A": 1, "B": 2}, math.log(1.2)),
    ]
    model = EffectModel(obs, {"A": [1, 2], "B": [1, 2]}, ridge=1e-6)
    assert math.exp(model.predict({"A": 2, "B": 2})) == pytest.approx(1.3 * 1.2, rel=1e-3)
    assert model.knows({"A": 2, "B": 2}) and not model.knows({"A": 3, "B": 1})


BUILTIN_SEEDS = sorted(
    (Path(__file__).resolve().parents[2] / "gpu" / "tasks" / "builtin").glob("*/seed_triton.py")
)


@pytest.mark.skipif(not BUILTIN_SEEDS, reason="no built-in task seeds in this checkout")
@pytest.mark.slow
async def test_every_builtin_seed_can_be_tuned() -> None:
    for path in BUILTIN_SEEDS:
        seed = path.read_text()
        declared = read_tunables(seed)
        if not declared:
            continue
        tuner = TunerPolicy()
        res = await tuner.init(InitContext(task=brief("compute"), seed_source=seed))
        assert res.intents, path
        for intent in res.intents:
            for attempt in (0, 1):
                code = await tuner.write_code(write_ctx(intent.params, attempt_index=attempt, base=seed))
                ast.parse(code.source)
                now = {n: t.current for n, t in read_tunables(code.source).items()}
                assert now == code.params, path
                moved = {k for k in now if now[k] != intent.params[k]}
                assert len(moved) == attempt, (path, intent.title, attempt)
                assert all(now[n] in declared[n].values for n in now)


async def test_tuner_loop_finds_the_optimum_of_a_separable_landscape() -> None:
    """A miniature driver loop (select the top open intent, write, 'measure', update, apply the edits) on a
    synthetic landscape whose optimum needs a trend followed past the first moves and a combination."""
    effect = {
        "BLOCK_SIZE": {256: -0.3, 512: 0.0, 1024: 0.2, 2048: 0.3},
        "NUM_WARPS": {2: -0.1, 4: 0.0, 8: 0.1},
        "NUM_STAGES": {1: 0.05, 2: 0.0},  # 3 does not compile
    }

    def measure(cfg: dict[str, int]) -> tuple[str, float | None]:
        if cfg["NUM_STAGES"] == 3:
            return "compile_error", None
        return "ok", math.exp(sum(effect[k][v] for k, v in cfg.items()))

    tuner = TunerPolicy()
    init = await tuner.init(InitContext(task=brief(), seed_source=SEED))
    open_: dict[int, dict[str, object]] = {}
    next_id = 2
    for spec in init.intents:
        open_[next_id] = {
            "id": next_id,
            "title": spec.title,
            "priority": spec.priority,
            "params": spec.params,
        }
        next_id += 1
    history = [outcome(1, 1, "ok", 1.0)]
    best = 1.0
    for rnd in range(1, 16):
        if not open_:
            break
        nid = max(open_, key=lambda i: (open_[i]["priority"], -i))
        intent = open_.pop(nid)
        code = await tuner.write_code(write_ctx(dict(intent["params"])))  # type: ignore[arg-type]
        status, speedup = measure(code.params)
        best = max(best, speedup or 0.0)
        done = AttemptOutcome(
            attempt_id=rnd + 1, node_id=nid, params=code.params, status=status, speedup_vs_eager=speedup
        )
        ctx = UpdateContext(
            task=brief(),
            round=rnd,
            intent_id=nid,
            intent_title=str(intent["title"]),
            outcomes=[done],
            history=list(history),
            tree_view="",
            open_intents=list(open_.values()),
            tunables=SPACE,
        )
        history.append(done)
        res = await tuner.update(ctx)
        for e in res.edits:
            if e.op == "prune":
                open_.pop(e.node_id)
            elif e.priority is not None:
                open_[e.node_id]["priority"] = e.priority
        for spec in res.new_intents:
            open_[next_id] = {
                "id": next_id,
                "title": spec.title,
                "priority": spec.priority,
                "params": spec.params,
            }
            next_id += 1
    optimum = math.exp(0.3 + 0.1 + 0.05)
    assert best == pytest.approx(optimum), f"best {best:.3f} after 15 rounds, optimum {optimum:.3f}"


async def test_an_updated_expectation_is_over_the_code_the_intent_builds_on() -> None:
    """expected_speedup is over the intent's base (one definition everywhere), not over whatever is best
    now: an open intent based on the seed (1.0x) keeps its prediction over the seed after the best (1.3x)
    has moved on."""
    combo = {"id": 12, "title": "1024 with 8 warps", "priority": 0.5}
    combo["params"] = {**SEED_CFG, "BLOCK_SIZE": 1024, "NUM_WARPS": 8}

    async def expected(**extra: int) -> float | None:
        ctx = update_ctx()
        ctx.open_intents = [{**combo, **extra}]
        edits = {e.node_id: e for e in (await TunerPolicy().update(ctx)).edits}
        assert edits[12].op == "update"
        return edits[12].expected_speedup

    over_best, over_seed = await expected(), await expected(base_attempt_id=1)
    assert over_best is not None and over_seed is not None
    assert over_seed == pytest.approx(over_best * 1.3, rel=1e-3)  # the seed measured 1.0x, the best 1.3x


# ---------------------------------------------------------------------- the tree it updates: a real store

ROW_SUM_SEED = (Path(__file__).resolve().parents[2] / "gpu/tasks/builtin/row_sum/seed_triton.py").read_text()


def gpu_eval(speedup: float) -> Evaluation:
    """An evaluation as the evaluator writes it on a GPU (none here): correct, timed, ranking."""
    med = 50.0 / speedup
    return Evaluation(
        status="ok",
        correctness=[WorkloadCorrectness(workload="w", passed=True, kind="ok", trials=3)],
        timings=[
            WorkloadTiming(
                workload="w",
                device="NVIDIA H200",
                median_us=med,
                iqr_us=med * 0.02,
                ci_low_us=med * 0.99,
                ci_high_us=med * 1.01,
                n=100,
                eager_us=50.0,
                speedup_vs_eager=speedup,
            )
        ],
        speedup_vs_eager=speedup,
    )


@pytest.fixture
async def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Workspace]:
    """A workspace over a fresh database; nothing here starts its sandbox."""
    monkeypatch.setenv("KSEARCH_FACTS_CACHE", str(tmp_path / "facts"))
    async with await Workspace.open(tmp_path / "k.db") as w:
        yield w


async def record(
    ws: Workspace, s: Search, node: Node | None, settings: dict[str, int], speedup: float
) -> int:
    """An attempt with these tunable values, as the evaluator records it."""
    source = set_tunables(ROW_SUM_SEED, settings).source if settings else ROW_SUM_SEED
    cand = await ws.store.put_candidate(source, "triton")
    root = await ws.store.root(s.id)
    att = await ws.store.record_attempt(
        s.id, node.id if node else root.id, cand.id, gpu_eval(speedup), round=s.round, author="tuner"
    )
    return att.id


async def context_of(ws: Workspace, s: Search, node: Node, *, budget: int = TREE_BUDGET) -> UpdateContext:
    """The update context as tools/contexts.update_context builds it (its parts are the same functions),
    with the task brief from the test data: the real brief measures the machine through the sandbox."""
    nodes = await ws.store.list_nodes(s.id)
    mine = [a for a in await ws.store.list_attempts(s.id) if a.node_id == node.id]
    return UpdateContext(
        task=brief(),
        round=(await ws.search(s.id)).round,
        intent_id=node.id,
        intent_title=node.title,
        intent_status=node.status.value,
        intent_params=node.params,
        outcomes=[await contexts.outcome_of(ws, a, None) for a in mine],
        history=await contexts.history(ws, s.id),
        tree_view=await contexts.tree_view(ws, s.id, budget),
        open_intents=contexts.open_intents(nodes),
        tunables=contexts.tunables_of(ROW_SUM_SEED),
    )


async def apply(ws: Workspace, s: Search, res: UpdateResult) -> None:
    """What the driver does with an update (server/driver/loop.py): the edits, then the new intents."""
    if res.edits:
        await edit_tree(ws, EditTreeIn(search=s.id, edits=res.edits, author="tuner"))
    if res.new_intents:
        await propose_intents(ws, ProposeIntentsIn(search=s.id, intents=res.new_intents, author="tuner"))


async def seeded_tree(ws: Workspace) -> tuple[Search, dict[str, Node]]:
    """A row_sum search in round 1: the seed measured (1.0x) on the root, the tuner's first three moves
    open. Returns the search and its nodes by title."""
    s = await create_search(ws, CreateSearchIn(task="row_sum", name="t"))
    await record(ws, s, None, {}, 1.0)
    init = await TunerPolicy(max_intents=3).init(InitContext(task=brief(), seed_source=ROW_SUM_SEED))
    await propose_intents(ws, ProposeIntentsIn(search=s.id, intents=init.intents, author="tuner"))
    await ws.store.bump_round(s.id)
    return await ws.search(s.id), {n.title: n for n in await ws.store.list_nodes(s.id)}


async def tuned_tree(ws: Workspace) -> tuple[Search, Node, int]:
    """The seeded tree after one round: 'set BLOCK_N = 2048' measured best (1.3x) and closed. Returns the
    search, that node and its attempt."""
    s, nodes = await seeded_tree(ws)
    node = nodes[init_title("BLOCK_N", 2048, 1024)]
    best = await record(ws, s, node, {"BLOCK_N": 2048}, 1.3)
    return s, await ws.store.close_node(node.id, "closed"), best


async def hold(ws: Workspace, s: Search, spec: IntentSpec, status: str) -> Node:
    """The tuner's own proposal, already in the tree with `status` (its setting never measured)."""
    [held] = await propose_intents(ws, ProposeIntentsIn(search=s.id, intents=[spec], author="tuner"))
    if status == "pruned":
        await edit_tree(
            ws,
            EditTreeIn(
                search=s.id,
                edits=[EditSpec(op="prune", node_id=held.id, reason="predicted below the best")],
                author="tuner",
            ),
        )
    elif status == "failed":  # e.g. declined before any attempt
        await ws.store.close_node(held.id, "failed")
    return await ws.store.get_node(held.id)


@pytest.mark.parametrize("status", ["pruned", "failed"])
async def test_update_never_proposes_a_setting_the_tree_holds_under_the_same_parent(
    ws: Workspace, status: str
) -> None:
    s, node, best = await tuned_tree(ws)
    first = await TunerPolicy().update(await context_of(ws, s, node))
    move = {"BLOCK_N": 4096, "num_warps": 4}
    [spec] = [i for i in first.new_intents if i.params == move]
    assert (spec.title, spec.parent_id) == (f"BLOCK_N 2048 -> 4096 (on attempt {best})", node.id)
    held = await hold(ws, s, spec, status)
    assert (
        held.status.value == status and f"#{held.id} [{status}]" in (await context_of(ws, s, node)).tree_view
    )

    res = await TunerPolicy().update(await context_of(ws, s, node))
    assert [i for i in res.new_intents if i.params == move] == []
    assert [i for i in res.new_intents if i.title == spec.title] == []
    # the rest is still proposed, and the world model takes the whole update
    assert [i.title for i in res.new_intents] == [i.title for i in first.new_intents if i.params != move]
    assert res.new_intents and "1 left out: the tree holds them under" in res.reflection
    await apply(ws, s, res)
    under = [n for n in await ws.store.list_nodes(s.id) if n.parent_id == node.id]
    assert [n.id for n in under if n.params == move] == [held.id]
    assert len(under) == 1 + len(res.new_intents)


async def test_a_setting_held_under_another_title_is_not_proposed_again(ws: Workspace) -> None:
    """The tree holds the setting under a different title of the tuner's (a combination that moved one
    value): the world model would take the new title, but the setting is the same, so it is left out."""
    s, node, best = await tuned_tree(ws)
    combo = IntentSpec(
        title=f"combine the best measured values: BLOCK_N=4096 (on attempt {best})",
        params={"BLOCK_N": 4096, "num_warps": 4},
        parent_id=node.id,
    )
    await hold(ws, s, combo, "pruned")
    res = await TunerPolicy().update(await context_of(ws, s, node))
    assert res.new_intents and all(i.params != combo.params for i in res.new_intents)


async def test_a_first_move_pruned_under_the_root_is_not_proposed_again_from_the_seed(ws: Workspace) -> None:
    """The seed is still the best, so new moves go under the root, where the tuner's first moves are: one
    pruned there ('set BLOCK_N = 2048 (seed: 1024)') is the setting of 'BLOCK_N 1024 -> 2048 (on attempt
    1)', which the world model would take under that other title."""
    s, nodes = await seeded_tree(ws)
    first_move = nodes[init_title("BLOCK_N", 2048, 1024)]
    prune = EditSpec(op="prune", node_id=first_move.id, reason="not this one")
    await edit_tree(ws, EditTreeIn(search=s.id, edits=[prune], author="human"))
    warps = nodes[init_title("num_warps", 8, 4)]
    await record(ws, s, warps, {"num_warps": 8}, 0.9)
    warps = await ws.store.close_node(warps.id, "closed")
    res = await TunerPolicy().update(await context_of(ws, s, warps))
    assert "Best: 1.000x" in res.reflection  # the seed's, on the root
    assert res.new_intents and all(i.parent_id == nodes["root"].id for i in res.new_intents)
    assert all(i.params != first_move.params for i in res.new_intents)
    await apply(ws, s, res)


async def test_a_refused_item_is_dropped_on_the_retry_and_the_rest_kept(ws: Workspace) -> None:
    """The tree view's budget left the pruned node out (pruned nodes go first): the first answer repeats it,
    the world model refuses the batch, and the answer to the retry (the driver's loop: the same context with
    the refusal) has everything but the refused item, which the world model accepts."""
    s, node, _ = await tuned_tree(ws)
    tuner = TunerPolicy()
    first = await tuner.update(await context_of(ws, s, node))
    [spec] = [i for i in first.new_intents if i.params == {"BLOCK_N": 4096, "num_warps": 4}]
    held = await hold(ws, s, spec, "pruned")
    ctx = await context_of(ws, s, node, budget=400)
    assert f"#{held.id} " not in ctx.tree_view and "not shown" in ctx.tree_view

    again = await tuner.update(ctx)
    assert spec.title in [i.title for i in again.new_intents]
    with pytest.raises(ToolFailure) as refused:
        await apply(ws, s, again)
    problems = refused.value.problems
    assert any("near-duplicate" in p and f"#{held.id}" in p for p in problems)

    retry = await tuner.update(ctx.model_copy(update={"rejected": problems}))
    assert [i.title for i in retry.new_intents] == [
        i.title for i in again.new_intents if i.title != spec.title
    ]
    assert retry.edits == again.edits
    assert f"Left out after the world model refused them: intent {spec.title!r}" in retry.reflection
    await apply(ws, s, retry)
    # a fresh update (no refusal) starts from a clean slate
    assert spec.title in [i.title for i in (await tuner.update(ctx)).new_intents]


async def test_refusals_accumulate_over_the_retries_of_one_update() -> None:
    """The driver passes only the latest refusal: an item refused on the first try stays out when the second
    try is refused for another (here an edit, named by its node)."""
    tuner = TunerPolicy()
    ctx = update_ctx()
    first = await tuner.update(ctx)
    title = first.new_intents[1].title
    prune = next(e for e in first.edits if e.op == "prune")
    dup = (
        f"item 1 field 'title': title {title!r} is a near-duplicate of node #20 {title!r} (pruned) under the "
        "same parent; accepted: a distinct idea, or reopen #20 instead"
    )
    second = await tuner.update(ctx.model_copy(update={"rejected": [dup]}))
    assert [i.title for i in second.new_intents] == [i.title for i in first.new_intents if i.title != title]
    assert second.edits == first.edits
    n = prune.node_id
    gone = f"item 0 (node #{n}): node #{n} is pruned; op 'prune' does not apply; accepted: op 'reopen' first"
    third = await tuner.update(ctx.model_copy(update={"rejected": [gone]}))
    assert third.new_intents == second.new_intents
    assert third.edits == [e for e in first.edits if e.node_id != prune.node_id]
    # another update's answer is its own
    other = ctx.model_copy(update={"round": ctx.round + 1})
    fresh = await tuner.update(other)
    assert (fresh.new_intents, fresh.edits) == (first.new_intents, first.edits)


def test_the_tuners_titles_read_back_into_their_settings() -> None:
    bases = {4: {"BLOCK_SIZE": 1024, "NUM_WARPS": 4, "NUM_STAGES": 2}}
    seed = dict(SEED_CFG)
    cases = [
        (move_title("NUM_WARPS", 4, 8, 4), {"BLOCK_SIZE": 1024, "NUM_WARPS": 8, "NUM_STAGES": 2}),
        (
            combine_title({"NUM_WARPS": 8, "NUM_STAGES": 1}, 4),
            {"BLOCK_SIZE": 1024, "NUM_WARPS": 8, "NUM_STAGES": 1},
        ),
        (init_title("BLOCK_SIZE", 2048, 512), {**SEED_CFG, "BLOCK_SIZE": 2048}),
    ]
    for title, setting in cases:
        move = read_title(title, SPACE)
        assert move is not None and setting_of(move, bases, seed) == setting, title
    # what it cannot tell: another title, an unnamed base, a value outside the space, a base that disagrees
    for title in ("vectorise loads", move_title("NUM_WARPS", 4, 8, None), move_title("NUM_WARPS", 4, 32, 4)):
        assert read_title(title, SPACE) is None, title
    for title in (move_title("NUM_WARPS", 2, 8, 4), move_title("NUM_WARPS", 4, 8, 9)):
        move = read_title(title, SPACE)  # a base whose value is not the one named, or an unknown base
        assert move is not None and setting_of(move, bases, seed) is None, title
