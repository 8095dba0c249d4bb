"""Where a CPU worker's time goes while Triton's interpreter runs: so a timeout can say "too slow", not "hangs".

Under TRITON_INTERPRET=1 a kernel runs program by program in NumPy, orders of magnitude slower than on a
GPU; a workload that takes microseconds there can take minutes here. When a call times out, the worker
is killed and cannot be asked what it was doing, so it keeps a small memory-mapped file in its scratch
directory up to date instead: when the call started, how long launches of interpreted kernels took,
and which kernel and program was running. The parent reads it after the kill (`read`).

The file is in the candidate's writable scratch, so a candidate could forge it; the most a forgery buys
is an inconclusive "interpreter_timeout" instead of a failure, never a result.
"""

from __future__ import annotations

import mmap
import struct
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

FILE = "interpreter-state.bin"
# call start, seconds in finished launches, current launch start (0: none), launches finished,
# programs started in the current launch, programs in its grid, kernel name
_LAYOUT = struct.Struct("<dddqqq64s")


class InterpreterState(BaseModel):
    """What the interpreter was doing when a call was cut off (wall-clock seconds)."""

    model_config = ConfigDict(extra="forbid")

    elapsed_s: float  # since the call started
    interpreting_s: float  # of that, inside launches of interpreted kernels
    in_kernel: bool
    launch_s: float  # in the launch that was running (0 when none was)
    kernel: str
    launches: int  # finished during the call
    program: int  # programs started in the current (or last) launch
    programs: int  # programs in that launch's grid

    @property
    def interpreter_bound(self) -> bool:
        """The interpreter, not the candidate's host code, is where the time went."""
        return self.in_kernel or self.interpreting_s >= 0.5 * max(self.elapsed_s, 1e-9)

    def progress(self) -> str:
        """Where the interpreter was, and what that launch would have needed in all."""
        if not self.in_kernel:
            return f"{self.launches} kernel launch(es) had finished; it was between launches"
        where = f"it was in `{self.kernel}`, at program {self.program} of {self.programs} of launch {self.launches + 1}"
        done = self.program - 1
        if done >= 1 and self.programs > 0:
            per = self.launch_s / done
            return (
                f"{where}, {per:.2f} s per program: about {per * self.programs:.0f} s for that launch alone"
            )
        return (
            f"{where}; no program of that grid had finished after {self.launch_s:.0f} s, and under the interpreter a "
            "very slow program and one that never ends look the same"
        )


class Watch:
    """Worker side: keeps FILE current. One per worker process; install() once."""

    def __init__(self, directory: Path) -> None:
        path = directory / FILE
        path.write_bytes(b"\0" * _LAYOUT.size)
        self._f = path.open("r+b")
        self._m = mmap.mmap(self._f.fileno(), _LAYOUT.size)
        self._call_start = time.time()
        self._done_s = 0.0
        self._launch_start = 0.0
        self._launches = 0
        self._program = 0
        self._programs = 0
        self._kernel = b""
        self._write()

    def _write(self) -> None:
        _LAYOUT.pack_into(
            self._m,
            0,
            self._call_start,
            self._done_s,
            self._launch_start,
            self._launches,
            self._program,
            self._programs,
            self._kernel[:64],
        )

    def begin_call(self) -> None:
        self._call_start = time.time()
        self._done_s = 0.0
        self._launch_start = 0.0
        self._launches = self._program = self._programs = 0
        self._write()

    def install(self) -> None:
        """Wrap the interpreter's launch and its per-program grid index (both stay wrapped: the worker's)."""
        from triton.runtime import interpreter

        watch = self
        original_run = interpreter.InterpretedFunction.run
        builder = interpreter.interpreter_builder
        set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if warmup:
                return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
            outer = watch._launch_start == 0.0  # a kernel calling another is one launch
            if outer:
                watch._kernel = str(getattr(self.fn, "__name__", "?")).encode()[:64]
                watch._launch_start = time.time()
                watch._program = watch._programs = 0
                watch._write()
            try:
                return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                if outer:
                    watch._done_s += time.time() - watch._launch_start
                    watch._launch_start = 0.0
                    watch._launches += 1
                    watch._write()

        def grid_dim(x: int, y: int, z: int) -> Any:
            watch._programs, watch._program = x * y * z, 0
            watch._write()
            return set_dim(x, y, z)

        def grid_idx(x: int, y: int, z: int) -> Any:
            watch._program += 1  # once per program: a few microseconds against milliseconds of NumPy
            watch._write()
            return set_idx(x, y, z)

        interpreter.InterpretedFunction.run = run
        builder.set_grid_dim = grid_dim
        builder.set_grid_idx = grid_idx


def read(directory: Path, now: float | None = None) -> InterpreterState | None:
    """Parent side: the state a (possibly killed) worker left in `directory`; None if there is none."""
    try:
        raw = (directory / FILE).read_bytes()[: _LAYOUT.size]
    except OSError:
        return None
    if len(raw) < _LAYOUT.size:
        return None
    start, done, launch_start, launches, program, programs, name = _LAYOUT.unpack(raw)
    if start <= 0:
        return None
    t = time.time() if now is None else now
    running = max(0.0, t - launch_start) if launch_start > 0 else 0.0
    return InterpreterState(
        elapsed_s=max(0.0, t - start),
        interpreting_s=done + running,
        in_kernel=launch_start > 0,
        launch_s=running,
        kernel=name.rstrip(b"\0").decode(errors="replace") or "?",
        launches=int(launches),
        program=int(program),
        programs=int(programs),
    )
