"""FlashInfer-Bench's own package (ksearch's optional `fib` extra), asked from ksearch's torch-free processes.

Where `flashinfer_bench` is installed, FlashInfer-Bench data is read and written by its own code: definitions
with its `Definition` model (`load_json_file`), workloads with its `Trace` and `Workload` models, gathered from a
dataset the way its `TraceSet` does (every JSONL under `workloads/`, by each line's definition), Solutions with
its `Solution` model (and written by its `save_json_file`), and a definition's judging and timing settings from
its configuration (`BenchmarkConfig`'s atol, rtol, warm-up, iterations and trials; the evaluator
`resolve_evaluator` picks; the integer ranges its input generator draws). Where it is not, or with
`KSEARCH_FIB=minimal`, ksearch's own minimal reader does (gpu/tasks/flashinfer/loader.py, gpu/tasks/flashinfer/solution.py).

Importing `flashinfer_bench` imports torch, which the processes that load tasks (the MCP server, the CLI) never
do: the questions go to a child process (`python -m ksearch.gpu.tasks.flashinfer.child`, started at the first one and
kept for the next) that answers in JSON. FlashInfer-Bench's loaders only parse data (no task code runs), so the
child is not jailed. Answers are kept per process, keyed by the files' sizes and modification times (a Solution
by its text).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel

from ksearch.about import IMPORT_ROOT
from ksearch.gpu.task import TaskError

ENV = "KSEARCH_FIB"
"""`auto` (the default): FlashInfer-Bench's package where it is installed, else ksearch's minimal reader;
`minimal`: ksearch's minimal reader even where the package is installed."""
_MODES = ("auto", "minimal")
CHILD_TIMEOUT_S = 300.0

_answers: dict[tuple[Any, ...], dict[str, Any]] = {}


class FibConfig(BaseModel):
    """How FlashInfer-Bench judges and times a definition, from its package or ksearch's constants."""

    reader: str
    """Who read the definition: `flashinfer-bench <version>` (its package) or `minimal` (ksearch's reader)"""
    atol: float
    """An element fails when it is off by more than atol and ..."""
    rtol: float
    """... by more than rtol relative to the reference"""
    matched_ratio: float
    """The fraction of each output's elements that must pass"""
    evaluator: str
    """The evaluator FlashInfer-Bench judges the definition with (`DefaultEvaluator` for its default rule)"""
    int_ranges: dict[str, tuple[int, int]]
    """Random integer inputs per dtype, [low, high)"""
    warmup: int
    """The runner's warm-up calls per input set"""
    iterations: int
    """The runner's timed calls per input set"""
    trials: int
    """The runner's input sets per workload"""


class FibRead(BaseModel):
    """A definition and its workloads as FlashInfer-Bench's package reads them (its models' JSON dumps)."""

    definition: dict[str, Any]
    """The `Definition`, every default filled in"""
    rows: list[tuple[str, int, dict[str, Any]]]
    """(file, line, the `Workload`) for each workload of the definition, in file and line order"""
    config: FibConfig
    """How FlashInfer-Bench judges and times this definition"""


def mode() -> str:
    """`auto` or `minimal`, from KSEARCH_FIB; another value is refused, saying what is accepted."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in _MODES:
        raise TaskError(
            f"{ENV}={value!r}: accepted: auto (FlashInfer-Bench's own package where it is installed, else "
            "ksearch's minimal reader) or minimal (ksearch's minimal reader)"
        )
    return value


def installed() -> bool:
    """Whether FlashInfer-Bench's package is importable here (found without importing it)."""
    try:
        return importlib.util.find_spec("flashinfer_bench") is not None
    except (ImportError, ValueError):
        return False


def version() -> str | None:
    try:
        return importlib.metadata.version("flashinfer-bench")
    except importlib.metadata.PackageNotFoundError:
        return None


def in_use() -> bool:
    """Whether FlashInfer-Bench data is read and written by its own package here."""
    return mode() == "auto" and installed()


def _stamp(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


class _Child:
    """One long-lived child process per process that asks (it imports torch once): a JSON request a line on its
    stdin, a JSON answer a line on its stdout; its stderr goes to a file, quoted when it fails."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            dict.fromkeys([str(IMPORT_ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
        )
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ksearch.gpu.tasks.flashinfer.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        return self.proc

    def _failed(self, why: str) -> TaskError:
        tail = ""
        if self.log is not None:
            self.log.seek(0)
            tail = self.log.read().strip()[-2000:]
        self.close()
        return TaskError(
            f"FlashInfer-Bench's package {why}{': ' + tail if tail else ''}; {ENV}=minimal uses ksearch's own "
            "reader instead"
        )

    def ask(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps({"op": op, "request": request}) + "\n")
                proc.stdin.flush()
            except OSError:
                raise self._failed(f"stopped ({op})") from None
            line = _readline(proc.stdout, CHILD_TIMEOUT_S)
            if line is None:
                raise self._failed(f"did not answer within {CHILD_TIMEOUT_S:.0f} s ({op})")
            if not line:
                raise self._failed(f"stopped ({op}, exit {proc.wait()})")
            answer: dict[str, Any] = json.loads(line)
            return answer

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


def _readline(stream: IO[str], timeout_s: float) -> str | None:
    """A line from `stream`, "" at its end, None when none came within `timeout_s`."""
    ready, _, _ = select.select([stream], [], [], timeout_s)
    return stream.readline() if ready else None


_child = _Child()
atexit.register(_child.close)


def _ask(op: str, request: dict[str, Any], key: tuple[Any, ...]) -> dict[str, Any]:
    """The child's answer to one question, kept per `key`."""
    if key not in _answers:
        _answers[key] = _child.ask(op, request)
    return _answers[key]


def read(definition: Path, workloads: Path | None, root: Path | None) -> FibRead:
    """The definition and its workloads through FlashInfer-Bench's models. `workloads`: one JSONL (named, or
    beside a loose definition); None in a dataset (`root`): every JSONL under its `workloads/`, as its TraceSet
    gathers them. A refusal is a TaskError with FlashInfer-Bench's own message."""
    if workloads is not None:
        files = [workloads]
    elif root is not None:
        files = sorted((root / "workloads").rglob("*.jsonl"))
    else:
        raise TaskError(f"{definition}: no workloads JSONL named, and no dataset around the definition")
    key = ("read", str(root), *(_stamp(p) for p in [definition, *files]))
    request = {
        "definition": str(definition),
        "workloads": str(workloads) if workloads is not None else None,
        "root": str(root) if root is not None else None,
    }
    answer = _ask("read", request, key)
    if "error" in answer:
        raise TaskError(answer["error"])
    return FibRead.model_validate(answer)


def check_solution(text: str) -> dict[str, Any] | str:
    """The Solution as FlashInfer-Bench's model reads it (every default filled in), or why it refuses it."""
    key = ("solution", hashlib.sha256(text.encode()).hexdigest())
    answer = _ask("check_solution", {"text": text}, key)
    return str(answer["error"]) if "error" in answer else dict(answer["solution"])


def write_solution(solution: dict[str, Any]) -> str:
    """The Solution JSON as FlashInfer-Bench's `save_json_file` writes it (after its model accepted it)."""
    text = json.dumps(solution, sort_keys=True)
    answer = _ask(
        "write_solution", {"solution": solution}, ("write", hashlib.sha256(text.encode()).hexdigest())
    )
    if "error" in answer:
        raise TaskError(f"FlashInfer-Bench's Solution model refuses the exported solution: {answer['error']}")
    return str(answer["text"])
