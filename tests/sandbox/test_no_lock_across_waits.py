"""The sandbox's rule, read from its code: no lock is held across a wait for a worker, a GPU or a subprocess.

A lock held across such a wait is how a one-GPU machine hung: one caller held a lock and waited for the only worker,
the worker's holder waited for the lock. In gpu/, one caller at a time is served by a queue (a pool of workers, a
pool of one for the dry run) or by a shared task that later callers join (the ceilings, a compile unit); a lock may
guard only quick bookkeeping. This test reads every `async with` / `with` on a lock in gpu/ and fails on an await
inside one that is not on the short list of quick ones (a cache file's read or write)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "gpu"

# awaits that may run under a lock: quick, and waiting for nothing another caller holds
QUICK = {"asyncio.sleep(0)"}


def _locks_made(tree: ast.AST) -> set[str]:
    """The names the module binds to a new lock (`self._started = asyncio.Lock()`, `lock = threading.Lock()`)."""
    made: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            called = ast.unparse(node.value.func)
            if called.split(".")[-1] in ("Lock", "RLock", "Semaphore", "BoundedSemaphore", "Condition"):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                made |= {ast.unparse(t) for t in targets}
    return made


def _is_lock(expr: ast.expr, made: set[str]) -> bool:
    """Whether a context manager expression is a lock: one the module made, or one named so (`self._lock`,
    `self._hw_lock`, `lock`, `locks.setdefault(...)`)."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    text = ast.unparse(expr)
    return text in made or "lock" in text.lower()


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    made = _locks_made(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.AsyncWith | ast.With):
            continue
        locks = [i.context_expr for i in node.items if _is_lock(i.context_expr, made)]
        if not locks:
            continue
        for inner in node.body:
            for sub in ast.walk(inner):
                if isinstance(sub, ast.Await) and ast.unparse(sub.value) not in QUICK:
                    where = f"{path.relative_to(ROOT)}:{sub.lineno}"
                    out.append(f"{where}: awaits {ast.unparse(sub.value)[:80]} under {ast.unparse(locks[0])}")
                if isinstance(sub, ast.AsyncWith | ast.AsyncFor):
                    out.append(
                        f"{path.relative_to(ROOT)}:{sub.lineno}: an async block under {ast.unparse(locks[0])}"
                    )
    return out


def test_no_lock_in_the_sandbox_is_held_across_a_wait() -> None:
    offences = [o for p in sorted(GPU.rglob("*.py")) for o in _offences(p)]
    assert offences == [], "\n".join(offences)


def test_the_reader_finds_a_lock_held_across_a_wait(tmp_path: Path) -> None:
    """The check can fail: the shape of the code that hung is found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "async def ceilings(self):\n"
        "    async with self._hw_lock:\n"
        "        async with self.pool.acquire() as w:\n"
        "            return await w.call('hardware', {}, 600.0)\n"
        "async def also(self):\n"
        "    self._started = asyncio.Lock()\n"
        "    async with self._started:\n"
        "        await self._join()\n"
        "async def fine(self):\n"
        "    async with self.pool.acquire() as w:\n"
        "        return await w.call('x', {}, 1.0)\n"
    )
    bad_rel = bad.relative_to(tmp_path)
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = _offences(bad)
    finally:
        ROOT = saved
    assert [f.split(": ", 1)[0] for f in found] == [f"{bad_rel}:3", f"{bad_rel}:4", f"{bad_rel}:8"], found
    assert "under self._hw_lock" in found[0] and "under self._started" in found[2], found
