"""A sandbox worker process: loads candidates, checks and times them on one GPU (or the CPU).

Started by `ksearch.gpu.sandbox.pool` as `python -m ksearch.gpu.worker.main` with a scrubbed environment, its scratch
directory as cwd, CUDA_VISIBLE_DEVICES pinned to one GPU. Protocol: one JSON object per line;
requests on stdin ({"id", "op", "args"}), replies on the original stdout ({"id", "ok", "result"} or
{"id", "ok": false, "error"}), a {"id": 0, "hello": {...}} line at start. The candidate's own prints
go to stderr, so they cannot corrupt the protocol by accident.

A reply with "fatal": true means the CUDA context is lost (illegal address, ...): the worker exits
right after sending it and the pool starts a fresh one.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from typing import Any, TextIO


def _open_protocol() -> TextIO:
    fd = os.dup(1)
    os.dup2(2, 1)  # fd 1 (print, C printf) now goes to stderr
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


_PROTO: TextIO | None = None


def send(msg: dict[str, Any]) -> None:
    assert _PROTO is not None
    _PROTO.write(json.dumps(msg, default=str) + "\n")
    _PROTO.flush()


def main() -> None:
    global _PROTO
    _PROTO = _open_protocol()
    cfg = json.loads(os.environ.get("KSEARCH_WORKER", "{}"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate leaves no core file
    t_imports = time.perf_counter()
    import torch  # after the fd juggling: CUDA/triton banners go to stderr

    from ksearch.gpu.build import baton as build_baton
    from ksearch.gpu.tasks.draws import gpu_fills, input_cache
    from ksearch.gpu.worker.state import WorkerState

    build_baton.install()  # a build killed in another worker must not hang this one's (the cache is shared)

    if cfg.get("memory_bytes"):
        input_cache.BUDGET_BYTES = input_cache.budget_for(int(cfg["memory_bytes"]))
    draws = cfg.get("draws")
    if draws:  # slow input draws shared by the machine's workers (gpu/tasks/draws/store.py)
        from pathlib import Path

        from ksearch.gpu.tasks.draws.store import DrawStore

        input_cache.STORE = DrawStore(Path(draws["dir"]), writable=bool(draws.get("writable")))

    cpu_mode = bool(cfg.get("cpu_mode")) or not torch.cuda.is_available()
    device = torch.device("cpu" if cpu_mode else "cuda:0")
    t_context = time.perf_counter()
    imports_s = t_context - t_imports  # ~0 in a process forked from the zygote, which made them
    if not cpu_mode:
        torch.cuda.set_device(device)
        frac = float(cfg.get("gpu_mem_fraction", 0.9))
        torch.cuda.set_per_process_memory_fraction(frac, device)
        torch.zeros(1, device=device)  # create the context now, not inside the first timed call
    if cfg.get(
        "simulate"
    ):  # a simulated GPU's start (gpu/worker/simulated.py): its context's creation takes a while
        time.sleep(float(cfg["simulate"].get("start_s", 0.0)))
    context_s = time.perf_counter() - t_context  # the CUDA context's creation (0 on the CPU)
    state = WorkerState(device, cfg)
    send({"id": 0, "hello": {**state.hello(), "imports_s": imports_s, "context_s": context_s}})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError:
            send({"id": -1, "ok": False, "error": f"bad request line: {line[:200]!r}"})
            continue
        rid, op, args = req.get("id"), req.get("op"), req.get("args") or {}
        if op == "exit":
            send({"id": rid, "ok": True, "result": {}})
            break
        t0 = time.perf_counter()
        drawn, built, referenced = state.inputs_s, build_baton.seconds(), state.reference_s
        filled = dict(gpu_fills.MADE)
        try:
            result = state.handle(op, args)
            reply: dict[str, Any] = {"id": rid, "ok": True, "result": result}
        except Exception as e:  # a harness-side failure: report it, the worker stays usable
            reply = {
                "id": rid,
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-4000:],
            }
        reply["seconds"] = time.perf_counter() - t0
        reply["inputs_s"] = state.inputs_s - drawn
        reply["reference_s"] = state.reference_s - referenced
        reply["build_s"] = build_baton.seconds() - built
        made = {op: n - filled.get(op, 0) for op, n in gpu_fills.MADE.items() if n != filled.get(op, 0)}
        if made:
            reply["gpu_fills"] = made
        stray = state.stray_threads()
        if stray:
            reply["stray_threads"] = stray
        fatal = state.fatal
        if fatal:
            reply["fatal"] = fatal
        send(reply)
        if fatal:
            # the CUDA context is unusable; leave without running destructors that would touch it
            os._exit(3)
    os._exit(0)


if __name__ == "__main__":
    main()
