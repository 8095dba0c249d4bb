"""Fixtures for the policy tests: a task brief, a tunable seed, and contexts for each phase."""

from __future__ import annotations

import pytest

from ksearch.server.driver.policies.base import (
    AttemptOutcome,
    InitContext,
    TaskBrief,
    UpdateContext,
    WriteContext,
)
from tests.policies.policy_data import SEED, brief


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def task() -> TaskBrief:
    return brief()


@pytest.fixture
def init_ctx(task: TaskBrief) -> InitContext:
    return InitContext(task=task, seed_source=SEED, tree_view="#1 root: softmax")


@pytest.fixture
def write_ctx(task: TaskBrief) -> WriteContext:
    return WriteContext(
        task=task,
        intent_id=2,
        intent_title="fuse max and sum into one online pass",
        intent_rationale="halves the reads of x",
        base_source=SEED,
        base_summary="ok, 1.00x vs eager",
    )


@pytest.fixture
def update_ctx(task: TaskBrief) -> UpdateContext:
    return UpdateContext(
        task=task,
        round=1,
        intent_id=2,
        intent_title="fuse max and sum into one online pass",
        prediction=1.4,
        outcomes=[AttemptOutcome(attempt_id=5, node_id=2, status="ok", speedup_vs_eager=1.3, summary="ok")],
        tree_view="#1 root\n  #2 fuse (closed)\n  #3 vectorise loads (open)",
        open_intents=[{"id": 3, "title": "vectorise loads", "priority": 0.5, "difficulty": 2, "params": {}}],
        best_speedup=1.3,
    )
