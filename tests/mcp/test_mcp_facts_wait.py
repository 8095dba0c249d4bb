"""An assistant's prompt reading never waits long for the task's facts: over the real MCP transport, a search on a
task whose facts take seconds to derive answers analyse_kernel at once, saying they are being derived, and a later
reading has them."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.test_mcp import stdio_client

pytestmark = [pytest.mark.timeout(300)]
SLOW_S = 10.0  # each call of the task's get_inputs (the facts probe calls it once per workload at least)

TASK = '''"""A KernelBench-format task whose inputs take {slow} s to make: its facts take seconds to derive. {tag}"""

import time

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


def get_inputs() -> list[torch.Tensor]:
    time.sleep({slow})
    return [torch.randn(64, 256)]


def get_init_inputs() -> list[object]:
    return []
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_prompt_reading_says_the_facts_are_being_derived_rather_than_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSEARCH_ANALYSE_WAIT_S", "3")  # the server's bound, below one call of get_inputs
    task = tmp_path / "slow_facts.py"
    task.write_text(TASK.format(slow=SLOW_S, tag=f"(test run {time.time_ns()})"))  # never in the facts cache
    async with stdio_client(tmp_path / "k.db") as c:
        made = await c.call_tool("create_search", {"task": str(task), "name": "slow"})
        assert not made.is_error, made.content[0].text
        t0 = time.monotonic()
        first = (await c.get_prompt("analyse_kernel", {"search": "slow"})).messages[0].content.text
        took = time.monotonic() - t0
        assert "being derived from the reference in the background" in first, first[:3000]
        assert "unspecified" not in first
        assert took < SLOW_S, took  # it did not wait for even one call of the task's get_inputs
        deadline = time.monotonic() + 180
        later = first
        while "being derived" in later and time.monotonic() < deadline:
            await anyio.sleep(2.0)
            later = (await c.get_prompt("analyse_kernel", {"search": "slow"})).messages[0].content.text
        assert "being derived" not in later, "the facts never arrived"
        assert "float32" in later and "64" in later  # the input's dtype and shape, derived meanwhile


def test_the_mcp_docs_state_the_wait_as_it_is_set() -> None:
    from ksearch.tools.prompting.facts_wait import ANALYSE_WAIT_S, PROMPT_WAIT_S

    text = " ".join((Path(__file__).parents[2] / "docs" / "mcp.md").read_text().split())
    assert f"waits at most {PROMPT_WAIT_S:g} s" in text
    assert (
        f"prompt, a search's first, whose facts the first intents are planned from, at most {ANALYSE_WAIT_S:g} s"
        in text
    )
