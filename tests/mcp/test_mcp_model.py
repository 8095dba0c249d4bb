"""profile_model and plug_back as a host calls them: a real `ksearch serve` over stdio and the real mcp client. The
small transformer of tests/fixtures/model_block.py profiled (its ranking in the text a host reads, the task files
written), two of its kernels plugged back from a folder and the plugged model checked; bad input refused with what is
accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.model_kernels import MODEL_BLOCK, kernel_folder
from tests.mcp.test_mcp import call, call_error, stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_host_profiles_a_model_and_plugs_kernels_back(tmp_path: Path) -> None:
    out = tmp_path / "ops"
    async with stdio_client(tmp_path / "k.db") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert {"profile_model", "plug_back"} <= set(tools)
        res = await c.call_tool(
            "profile_model", {"model": MODEL_BLOCK, "out": str(out), "top": 9, "facts": False}
        )
        assert not res.is_error, res.content[0].text
        prof = res.structured_content
        assert prof["timed"] == "cpu" and len(prof["written"]) == 9
        assert {r["label"] for r in prof["rows"]} >= {"add + RMSNorm", "Linear + GELU", "softmax"}
        text = "\n".join(b.text for b in res.content if hasattr(b, "text"))
        assert "ranked by CPU time: no GPU here" in text and "ksearch suite run" in text
        assert text.rstrip().splitlines()[-1].startswith("next: search the 9 written tasks as a suite")
        folder = kernel_folder(tmp_path / "kernels", "linear_gelu_2x16x64", "softmax_2x4x16x16")
        plugged = await call(
            c, "plug_back", {"model": MODEL_BLOCK, "out": str(out), "kernels": str(folder), "timing": False}
        )
        assert plugged["ok"] and plugged["check"]["ok"] and plugged["plugged_file"] == str(out / "plugged.py")
        done = {t["task"]: t["hits"] for t in plugged["tasks"] if t["status"] == "plugged"}
        assert done == {"linear_gelu_2x16x64": 2, "softmax_2x4x16x16": 2}
        # bad input: what was wrong and what is accepted, nothing written
        msg = await call_error(c, "profile_model", {"model": str(tmp_path / "gone.py")})
        assert "no such model file" in msg and "KernelBench style" in msg
        msg = await call_error(
            c, "plug_back", {"model": MODEL_BLOCK, "out": str(out), "kernels": "no-such-suite"}
        )
        assert "no suite named 'no-such-suite'" in msg and "ksearch suite export" in msg
