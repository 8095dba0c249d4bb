"""A sandbox whose workers are Ray actors: one per GPU of a Ray cluster (`ksearch ... --ray auto|ADDRESS`).

`RayPool` connects to the cluster and places one `SandboxActor` per GPU (`num_gpus=1`); each holds a warm, jailed
local sandbox on its node. `RaySandbox` is the `Sandbox` a search uses: it sends each operation (the candidate,
and the task's files the first time an actor sees the task) to one of its actors and brings the JSON result back
to the head, which alone writes the store. An actor or node that dies mid-operation has the operation re-run once
on another live actor, and the event is reported (`on_event`, the log); a cancelled call (Ctrl-C) cancels the
actor's work. Ray is an optional dependency (`pip install 'ksearch[ray]'`); importing this module does not import it.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import socket
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ksearch.gpu.jail import view as jail_view
from ksearch.gpu.sandbox.api import HardwareFacts, Progress, Sandbox, SandboxError
from ksearch.gpu.sandbox.ray_actor import SandboxActor, TaskShipment
from ksearch.gpu.task import Task
from ksearch.worldmodel.models import Candidate, CompileReport, EvalSettings, Evaluation, ProfileSummary

log = logging.getLogger(__name__)
OnEvent = Callable[[str], None]
RAY_MISSING = "Ray is not installed here: `pip install 'ksearch[ray]'` (or `pip install ray`) adds it"


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SandboxError(RAY_MISSING) from None
    return ray


def connect(address: str, *, timeout_s: float = 30.0) -> None:
    """Join the Ray cluster at `address` ("auto": the one this machine's `ray start` runs) as a driver."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address != "auto" and ":" not in address and not address.startswith("ray://"):
        raise SandboxError(
            f"--ray {address!r}: give `auto` (the cluster `ray start --head` runs on this machine) or a head's "
            "address HOST:PORT (e.g. 10.0.0.5:6379)"
        )
    if address == "auto":  # as Ray resolves it: $RAY_ADDRESS, else the cluster `ray start` last started here
        found = os.environ.get("RAY_ADDRESS") or _read(
            Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        )
        if not found:
            raise SandboxError(
                "--ray auto: no Ray cluster was started on this machine; start one with `ray start --head --num-gpus N`, "
                "or name a running head as HOST:PORT"
            )
        address = found
    if not address.startswith("ray://"):
        _reachable(address, timeout_s)  # Ray itself retries an absent head for minutes before it says so
    try:
        ray.init(address=address, namespace="ksearch", log_to_driver=False, logging_level="ERROR")
    except (
        Exception
    ) as e:  # Ray raises ConnectionError, RuntimeError or its own kinds for an unreachable head
        raise SandboxError(
            f"cannot join the Ray cluster at {address!r}: {str(e).splitlines()[0][:300]}. Start one with "
            "`ray start --head --num-gpus N` (then `--ray auto`), or name a running head as HOST:PORT"
        ) from None


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _reachable(address: str, timeout_s: float) -> None:
    host, _, port = address.rpartition(":")
    if not port.isdecimal():
        raise SandboxError(f"--ray {address!r}: the port must be a number (HOST:PORT, e.g. 10.0.0.5:6379)")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=min(timeout_s, 10.0)).close()
    except OSError as e:
        raise SandboxError(
            f"cannot join the Ray cluster at {address!r}: nothing answers there ({e.strerror or e}). Start one with "
            "`ray start --head --num-gpus N` (then `--ray auto`), or name a running head as HOST:PORT"
        ) from None


def _tar(path: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=Path(path).name)
    return buf.getvalue()


def ship(task: Task) -> TaskShipment:
    """The task and its files, ready to travel to an actor on any node."""
    files = {p: _tar(p) for p in jail_view.task_paths(task)}
    body = task.model_dump(mode="json")
    h = hashlib.sha256(repr(sorted(body.items())).encode())
    for p, blob in sorted(files.items()):
        h.update(p.encode())
        h.update(blob)
    return TaskShipment(key=h.hexdigest(), task=body, files=files)


class Actor:
    """One actor as the head knows it: its handle, where it runs, and whether it is still alive."""

    def __init__(self, index: int, handle: Any, where: dict[str, Any]) -> None:
        self.index = index
        self.handle = handle
        self.where = where
        self.alive = True
        self.busy = 0
        self.shipped: set[str] = set()

    def label(self) -> str:
        gpus = ",".join(self.where.get("gpus") or []) or "?"
        return f"Ray actor {self.index} (node {str(self.where.get('node', '?'))[:8]}, GPU {gpus})"


class RayPool:
    """One sandbox actor per GPU of the cluster; shared by every search of this process."""

    def __init__(
        self,
        address: str,
        *,
        n_actors: int | None = None,
        isolation: str | None = None,
        on_event: OnEvent | None = None,
    ) -> None:
        self.address = address
        self._n = n_actors
        self._isolation = isolation
        self.on_event = on_event
        self.actors: list[Actor] = []
        self.events: list[str] = []
        self._starting: asyncio.Task[list[Actor]] | None = None  # the start under way or done (see start)

    def event(self, msg: str) -> None:
        self.events.append(msg)
        log.warning("%s", msg)
        if self.on_event is not None:
            self.on_event(msg)

    async def start(self) -> list[Actor]:
        """Connect and place the actors (once); each answers where it runs before it counts. Callers meanwhile
        join the one start under way (a shared task: no lock is held while the cluster answers)."""
        if self.actors:
            return self.actors
        job = self._starting
        if job is None or (job.done() and (job.cancelled() or job.exception() is not None)):
            job = self._starting = asyncio.create_task(self._start())
        return await asyncio.shield(job)

    async def _start(self) -> list[Actor]:
        ray = _ray()
        await asyncio.to_thread(connect, self.address)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < 1:
            raise SandboxError(
                f"the Ray cluster at {self.address!r} has no GPU resources: start its nodes with "
                "`ray start ... --num-gpus N`"
            )
        n = gpus if self._n is None else self._n
        if not 1 <= n <= gpus:
            raise SandboxError(f"{n} sandbox actors asked for; the cluster has {gpus} GPUs (1 to {gpus})")
        cls = ray.remote(SandboxActor)
        handles = [
            cls.options(num_gpus=1, num_cpus=0, max_restarts=0, max_concurrency=64).remote(1, self._isolation)
            for _ in range(n)
        ]
        wheres = await asyncio.gather(*(h.where.remote() for h in handles))
        self.actors = [Actor(i, h, w) for i, (h, w) in enumerate(zip(handles, wheres, strict=True))]
        return self.actors

    def live(self) -> list[Actor]:
        return [a for a in self.actors if a.alive]

    def died(self, a: Actor, op: str, err: BaseException) -> None:
        if a.alive:
            a.alive = False
            why = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            self.event(f"{a.label()} died during {op} ({why})")

    async def close(self) -> None:
        if not self.actors:
            return
        ray = _ray()
        for a in self.live():
            try:
                await asyncio.wait_for(a.handle.close.remote(), timeout=30)
            except Exception as e:  # closing a dying actor: kill it below either way
                log.info("closing %s: %s", a.label(), e)
            ray.kill(a.handle)
        self.actors = []


class RaySandbox(Sandbox):
    """A search's sandbox on the pool: its operations go to its own actors (a suite slot), else to any live one."""

    def __init__(self, pool: RayPool, slots: Sequence[int] | None = None) -> None:
        self.pool = pool
        self.slots = list(slots) if slots is not None else None
        self._ships: dict[str, TaskShipment] = {}
        self._where: dict[str, Any] | None = None

    @property
    def cpu_mode(self) -> bool:
        """True when the actors' sandboxes run in the CPU interpreter (a cluster of logical GPUs, as in tests)."""
        return bool(self._where is None or self._where.get("cpu_mode"))

    async def start(self) -> None:
        actors = await self.pool.start()
        if self.slots is not None:
            bad = [s for s in self.slots if not 0 <= s < len(actors)]
            if bad:
                raise SandboxError(
                    f"Ray slot {bad[0]} does not exist: the pool has actors 0 to {len(actors) - 1}"
                )
        self._where = (self._mine() or actors)[0].where

    def _mine(self) -> list[Actor]:
        live = self.pool.live()
        if self.slots is None:
            return live
        return [a for a in live if a.index in self.slots]

    def _pick(self, avoid: set[int]) -> Actor:
        mine = [a for a in self._mine() if a.index not in avoid]
        others = [a for a in self.pool.live() if a.index not in avoid]
        choice = mine or others
        if not choice:
            raise SandboxError("no live Ray sandbox actor is left: every actor of the pool has died")
        return min(choice, key=lambda a: a.busy)

    def _ship(self, task: Task) -> TaskShipment:
        key = f"{task.name}:{task.source_path}"
        if key not in self._ships:
            self._ships[key] = ship(task)
        return self._ships[key]

    async def _run(self, op: str, task: Task, args: dict[str, Any]) -> dict[str, Any]:
        ray = _ray()
        if self._where is None:
            await self.start()
        shipment = self._ship(task)
        tried: set[int] = set()
        while True:
            a = self._pick(tried)
            tried.add(a.index)
            payload = None if shipment.key in a.shipped else shipment
            a.busy += 1
            ref = a.handle.run.remote(op, shipment.key, payload, args)
            try:
                got: dict[str, Any] = await ref
                a.shipped.add(shipment.key)
                return got
            except asyncio.CancelledError:
                ray.cancel(ref)  # Ctrl-C or a cancelled tool call: the actor stops this work too
                raise
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as e:
                self.pool.died(a, op, e)
                if len(tried) >= 2:
                    raise SandboxError(
                        f"{op} was lost twice: {a.label()} died, as did the actor it was re-run on"
                    ) from None
                nxt = self._pick(tried)
                self.pool.event(f"{op} of {task.name} re-run on {nxt.label()}")
            except ray.exceptions.RayTaskError as e:
                cause = e.cause if getattr(e, "cause", None) is not None else e
                if isinstance(cause, SandboxError):
                    raise SandboxError(str(cause)) from None
                raise SandboxError(
                    f"{op} failed on {a.label()}: {str(cause).splitlines()[-1][:500]}"
                ) from None
            finally:
                a.busy -= 1

    async def compile(self, candidate: Candidate, task: Task) -> CompileReport:
        got = await self._run("compile", task, {"candidate": candidate.model_dump(mode="json")})
        return CompileReport.model_validate(got)

    async def correctness(self, candidate: Candidate, task: Task, settings: EvalSettings) -> Evaluation:
        args = {"candidate": candidate.model_dump(mode="json"), "settings": settings.model_dump(mode="json")}
        return Evaluation.model_validate(await self._run("correctness", task, args))

    async def evaluate(
        self,
        candidate: Candidate,
        task: Task,
        settings: EvalSettings,
        *,
        timing: bool = True,
        profile_workload: str | None = None,
        progress: Progress | None = None,  # not forwarded: the actor's steps are not streamed back
        audit_unless_slower_than: dict[str, float] | None = None,
    ) -> Evaluation:
        args = {
            "candidate": candidate.model_dump(mode="json"),
            "settings": settings.model_dump(mode="json"),
            "timing": timing,
            "profile_workload": profile_workload,
            "audit_unless_slower_than": audit_unless_slower_than,
        }
        return Evaluation.model_validate(await self._run("evaluate", task, args))

    async def profile(
        self, candidate: Candidate, task: Task, workload: str, kernel: str | None = None
    ) -> ProfileSummary:
        args = {"candidate": candidate.model_dump(mode="json"), "workload": workload, "kernel": kernel}
        return ProfileSummary.model_validate(await self._run("profile", task, args))

    def start_reference_times(self, task: Task, settings: EvalSettings) -> bool:
        return False  # measured on the actor at the first evaluation that needs them

    async def reference_times(
        self, task: Task, settings: EvalSettings, *, wait: bool = True
    ) -> dict[str, dict[str, float | None]] | None:
        args = {"settings": settings.model_dump(mode="json"), "wait": wait}
        got = await self._run("reference_times", task, args)
        times: dict[str, dict[str, float | None]] | None = got["times"]
        return times

    async def hardware(self) -> HardwareFacts:
        if self._where is None:
            await self.start()
        a = self._pick(set())
        return HardwareFacts.model_validate(await a.handle.hardware.remote())

    async def close(self) -> None:
        """The pool outlives a search's sandbox (a suite's searches share it); `RayPool.close` ends it."""


_POOLS: dict[str, RayPool] = {}


def shared_pool(address: str, on_event: OnEvent | None = None) -> RayPool:
    """This process's pool for `address`: every search, suite slot and MCP call of the process shares its actors."""
    pool = _POOLS.get(address)
    if pool is None:
        pool = _POOLS[address] = RayPool(address, on_event=on_event)
    elif on_event is not None:
        pool.on_event = on_event
    return pool


async def close_pools() -> None:
    for pool in list(_POOLS.values()):
        await pool.close()
    _POOLS.clear()
