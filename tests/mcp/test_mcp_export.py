"""export_kernel over stdio to a real `ksearch serve`: an MCP-only host gets its search's kernel out in the task
owner's format without the command line, and a format the task is not written for is refused with the one it is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.mcp.test_mcp import call, call_error, stdio_client
from tests.tools.toolkit import ROW_SUM_SEED, TINY_TASK

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow  # a server process and one sandbox evaluation in the interpreter
async def test_an_attempt_exports_as_a_kernelbench_file_and_a_wrong_format_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "tiny_rows.py"
    task.write_text(TINY_TASK)
    async with stdio_client(tmp_path / "k.db") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["export_kernel"].input_schema["properties"]["format"]["enum"] == [
            "submission",
            "kernelbench",
            "solution",
        ]
        await call(c, "create_search", {"task": str(task), "name": "x"})
        ev = await call(
            c, "benchmark", {"search": "x", "candidate": {"source": ROW_SUM_SEED, "language": "triton"}}
        )
        assert ev["evaluation"]["status"] == "ok", ev
        attempt = ev["attempt_id"]
        # without a GPU nothing is timed, so there is no best: the refusal names the correct attempt to ask for
        assert f"#{attempt}" in await call_error(c, "export_kernel", {"search": "x", "format": "kernelbench"})
        out = await call(c, "export_kernel", {"search": "x", "format": "kernelbench", "attempt": attempt})
        assert (out["attempt_id"], out["format"], out["language"]) == (attempt, "kernelbench", "triton")
        assert out["status"] == "correct on the CPU interpreter, never timed on a GPU"
        tree = ast.parse(
            out["text"]
        )  # a module KernelBench loads: ModelNew defined, nothing of ksearch imported
        assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert "ksearch" not in "".join(ln for ln in out["text"].splitlines() if not ln.startswith("#"))
        msg = await call_error(
            c, "export_kernel", {"search": "x", "format": "submission", "attempt": attempt}
        )
        assert (
            "a kernelbench task; a GPU MODE submission.py is written for a search on a GPU MODE folder" in msg
        )
        assert "this one exports as format 'kernelbench'" in msg
