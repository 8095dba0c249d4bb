"""A resumed run keeps the options of the runs before it: the command `ksearch run --resume NAME` (what a stopped
run prints) finds the replay file, the record file, the policy, the model and the loop's settings the search was
run with; an option given again replaces the kept one and is kept in turn."""

from __future__ import annotations

from pathlib import Path

from ksearch.server.driver.policies import make_policy
from ksearch.server.driver.policies.replay import RecordingPolicy, ReplayPolicy
from ksearch.server.driver.run_main import RunArgs, remembered
from ksearch.worldmodel.models import Search, SearchConfig


def _search(tmp_path: Path) -> Search:
    replay = tmp_path / "host.jsonl"
    replay.write_text('{"phase": "init", "result": {"analysis": "a", "intents": []}}\n')
    config = SearchConfig(
        policy="replay",
        replay=str(replay),
        record=str(tmp_path / "again.jsonl"),
        stagnation=2,
        max_attempts_per_intent=3,
        branching=2,
    )
    return Search(id=1, name="rmsnorm-2", task="rmsnorm", config=config)


def test_a_resume_without_options_uses_what_the_search_kept(tmp_path: Path) -> None:
    found = _search(tmp_path)
    a, changes = remembered(RunArgs(resume="rmsnorm-2", db=tmp_path / "k.db"), found)
    assert changes == {}
    assert (a.policy, a.replay, a.record) == (
        "replay",
        Path(found.config.replay or ""),
        tmp_path / "again.jsonl",
    )
    policy = make_policy(a.policy or "", model=a.model, base_url=a.base_url, replay=a.replay, record=a.record)
    assert isinstance(policy, RecordingPolicy) and isinstance(policy.inner, ReplayPolicy)


def test_options_given_again_replace_the_kept_ones(tmp_path: Path) -> None:
    found = _search(tmp_path)
    other = tmp_path / "other.jsonl"
    a, changes = remembered(
        RunArgs(resume="rmsnorm-2", replay=other, stagnation=4, branching=2, db=tmp_path / "k.db"), found
    )
    assert a.replay == other
    # branching 2 is what the search has: not a change
    assert changes == {"replay": str(other.resolve()), "stagnation": 4}
    fresh, none = remembered(RunArgs(task="rmsnorm", db=tmp_path / "k.db"), None)
    assert none == {} and fresh.replay is None and fresh.stagnation is None


def test_another_policy_on_resume_does_not_inherit_the_old_ones_model(tmp_path: Path) -> None:
    found = _search(tmp_path).model_copy(update={"config": SearchConfig(policy="openai", model="gpt-x")})
    a, changes = remembered(RunArgs(resume="rmsnorm-2", policy="tuner", db=tmp_path / "k.db"), found)
    assert (a.policy, a.model, a.base_url, a.replay) == ("tuner", None, None, None)
    assert changes["policy"] == "tuner" and changes["model"] is None
    make_policy(
        a.policy or "", model=a.model, base_url=a.base_url, replay=a.replay, record=a.record
    )  # accepted
