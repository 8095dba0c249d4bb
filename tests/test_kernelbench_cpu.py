"""bench/kernelbench_cpu.py --redo: only the files an earlier result failed are checked again, and the written
result keeps the passed rows, in order, with both commands recorded."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_kernelbench_cpu", ROOT / "bench" / "kernelbench_cpu.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_kernelbench_cpu"] = mod  # pydantic looks the module up while the classes are built
    spec.loader.exec_module(mod)
    return mod


kb = _load()


def _row(file: str, ok: bool, seconds: float, cause: str | None = None) -> Any:
    return kb.Row(
        file=file, ok=ok, seconds=seconds, peak_rss_mb=400.0, error=None if ok else "it failed", cause=cause
    )


def _earlier(folder: Path, rows: list[Any]) -> Any:
    limits = kb.Limits(
        virtual_memory_kb=kb.MEM_KB, timeout_s=kb.TIMEOUT_S, cores=[0, 1], facts_cache="fresh per run"
    )
    run = kb.Run(command="python bench/kernelbench_cpu.py FIRST", machine={"cpus": 2}, checked=len(rows))
    return kb.build_report(rows, [run], limits, str(folder), None)


def test_merged_replaces_only_the_redone_rows_and_records_both_runs(tmp_path: Path) -> None:
    earlier = _earlier(
        tmp_path,
        [
            _row("l1/a.py", True, 5.0),
            _row("l1/b.py", False, 30.1, "timeout"),
            _row("l3/c.py", False, 2.0, "reference"),
        ],
    )
    # a file written before runs existed: its own command is run 0
    earlier = kb.Report.model_validate({**earlier.model_dump(), "runs": []})
    assert kb.to_redo(earlier) == ["l1/b.py", "l3/c.py"]
    second = kb.Run(command="python bench/kernelbench_cpu.py SECOND", machine={"cpus": 2}, checked=1)
    out = kb.merged(earlier, [_row("l1/b.py", True, 12.0)], second)
    assert [r.file for r in out.rows] == ["l1/a.py", "l1/b.py", "l3/c.py"]
    assert [(r.ok, r.run) for r in out.rows] == [(True, 0), (True, 1), (False, 0)]
    assert out.rows[0] == earlier.rows[0]  # a passed row is kept as it was
    assert out.passed == 2 and out.files == 3 and out.failed_by_cause == {"reference": 1}
    assert out.seconds_max == 12.0 and out.seconds_total == 19.0
    assert [r.command for r in out.runs] == ["python bench/kernelbench_cpu.py FIRST", second.command]
    assert out.command == second.command and out.limits == earlier.limits
    with pytest.raises(ValueError, match=r"l9/new\.py"):
        kb.merged(earlier, [_row("l9/new.py", True, 1.0)], second)


def test_redo_checks_only_failed_files_under_the_levels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "kb"
    for name in ("level1/a.py", "level1/b.py", "level3/c.py"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("# a task file\n")
    rows = [
        _row("level1/a.py", True, 5.0),
        _row("level1/b.py", False, 30.1, "timeout"),
        _row("level3/c.py", False, 30.2, "timeout"),
    ]
    first = tmp_path / "first.json"
    first.write_text(_earlier(folder, rows).model_dump_json())
    checked: list[Path] = []

    def fake_check(path: Path, env: dict[str, str], mem_kb: int, cores: list[int], timeout_s: float) -> Any:
        checked.append(path)
        return _row(str(path), True, 9.0)

    monkeypatch.setattr(kb, "check_one", fake_check)
    out = tmp_path / "merged.json"
    args = [str(folder), "--levels", "level1", "--redo", str(first), "--out", str(out)]
    assert kb.main(args) == 0
    assert checked == [folder / "level1/b.py"]  # level3/c.py failed too, but is not under --levels
    data = json.loads(out.read_text())
    assert [(r["file"], r["ok"], r["run"]) for r in data["rows"]] == [
        ("level1/a.py", True, 0),
        ("level1/b.py", True, 1),
        ("level3/c.py", False, 0),
    ]
    assert data["passed"] == 2 and len(data["runs"]) == 2
    assert (
        data["runs"][1]["command"].endswith(f"--redo {first} --out {out}") and data["runs"][1]["checked"] == 1
    )

    # other limits than the earlier run's would mix rows measured differently
    with pytest.raises(SystemExit):
        kb.main([str(folder), "--timeout", "60", "--redo", str(first), "--out", str(out)])
    assert checked == [folder / "level1/b.py"]
