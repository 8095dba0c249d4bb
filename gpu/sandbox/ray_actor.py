"""The Ray side of a sandbox on a cluster: one actor per GPU, holding a warm `LocalSandbox` on that GPU.

The actor runs on whichever node Ray placed it (`num_gpus=1`: Ray sets its CUDA_VISIBLE_DEVICES to that one GPU,
which the local sandbox respects), with the same worker processes, jail and checks as on the head's own machine.
Nothing here touches a database: requests and results travel as JSON, and the head alone writes the store.
A task's files are shipped with its first request (`TaskShipment`) and unpacked into the actor's own folder,
so a node needs no copy of the user's files.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.worldmodel.models import Candidate, EvalSettings


class TaskShipment(BaseModel):
    """A task as the head loaded it, and the bytes of the files its runtime reads (a tar of each path)."""

    key: str  # content hash of the task and its files: the actor unpacks each shipment once
    task: dict[str, Any]
    files: dict[str, bytes]  # original absolute path -> tar.gz of that file or folder


def _swap(value: Any, moves: dict[str, str]) -> Any:
    """`value` with every original path (a whole string, or one starting with it) replaced by its new place."""
    if isinstance(value, str):
        for old, new in moves.items():
            if value == old or value.startswith(old + os.sep):
                return new + value[len(old) :]
        return value
    if isinstance(value, dict):
        return {k: _swap(v, moves) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, moves) for v in value]
    return value


def unpack(ship: TaskShipment, into: Path) -> Task:
    """The shipped task, its files written under `into` and its paths pointing there."""
    into.mkdir(parents=True, exist_ok=True)
    moves: dict[str, str] = {}
    for i, (old, blob) in enumerate(ship.files.items()):
        dest = into / str(i)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(dest, filter="data")  # refuses links and paths that leave `dest`
        moves[old] = str(dest / Path(old).name)
    return Task.model_validate(_swap(ship.task, moves))


class SandboxActor:
    """Held by Ray as an async actor (`ray.remote(SandboxActor)`); every method is called by the head."""

    def __init__(self, n_workers: int | None = None, isolation: str | None = None) -> None:
        self._n_workers = n_workers
        self._isolation = isolation
        self._sb: LocalSandbox | None = None
        self._tasks: dict[str, Task] = {}
        self._dir = Path(tempfile.mkdtemp(prefix="ksearch-ray-tasks-"))

    def _sandbox(self) -> LocalSandbox:
        if self._sb is None:
            self._sb = LocalSandbox(n_workers=self._n_workers, isolation=self._isolation)
        return self._sb

    async def where(self) -> dict[str, Any]:
        """Which node, process and GPU this actor holds, and whether its sandbox runs on the CPU."""
        import ray

        ctx = ray.get_runtime_context()
        sb = self._sandbox()
        return {
            "node": ctx.get_node_id(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "gpus": [str(g) for g in ray.get_gpu_ids()],
            "cpu_mode": sb.cpu_mode,
            "jailed": sb.jailed,
        }

    def _task(self, key: str, ship: TaskShipment | None) -> Task:
        if key not in self._tasks:
            if ship is None:
                raise KeyError(key)  # the head re-sends with the files
            task = unpack(ship, self._dir / key[:16])
            self._sandbox().show(task)
            self._tasks[key] = task
        return self._tasks[key]

    async def run(
        self, op: str, task_key: str, ship: TaskShipment | None, args: dict[str, Any]
    ) -> dict[str, Any]:
        """One sandbox operation; its result as JSON (a SandboxError travels back as itself)."""
        task = self._task(task_key, ship)
        sb = self._sandbox()
        cand = Candidate.model_validate(args["candidate"]) if "candidate" in args else None
        settings = EvalSettings.model_validate(args["settings"]) if "settings" in args else None
        if op == "compile":
            assert cand is not None
            return (await sb.compile(cand, task)).model_dump(mode="json")
        if op == "correctness":
            assert cand is not None and settings is not None
            return (await sb.correctness(cand, task, settings)).model_dump(mode="json")
        if op == "evaluate":
            assert cand is not None and settings is not None
            got = await sb.evaluate(
                cand,
                task,
                settings,
                timing=args["timing"],
                profile_workload=args.get("profile_workload"),
                audit_unless_slower_than=args.get("audit_unless_slower_than"),
            )
            return got.model_dump(mode="json")
        if op == "profile":
            assert cand is not None
            return (await sb.profile(cand, task, args["workload"], args.get("kernel"))).model_dump(
                mode="json"
            )
        if op == "reference_times":
            assert settings is not None
            return {"times": await sb.reference_times(task, settings, wait=args.get("wait", True))}
        raise ValueError(f"unknown sandbox operation {op!r}")

    async def hardware(self) -> dict[str, Any]:
        return (await self._sandbox().hardware()).model_dump(mode="json")

    async def close(self) -> None:
        if self._sb is not None:
            await self._sb.close()
            self._sb = None
