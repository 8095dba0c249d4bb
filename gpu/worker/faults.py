"""Turn an exception raised by candidate code into a message a model can act on (worker side).

Compile errors (NVRTC, a torch extension build, Triton) become diagnostics mapped to lines of the
candidate's Python file; other exceptions keep only the candidate's own traceback frames.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from typing import Any

from ksearch.gpu.build.cudasrc import CPP_EXT_PRELUDE, locate_line

_CUDA_MSG = re.compile(
    r"\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error)(?: #[\w-]+)?: (?P<msg>.*)"
)
_GCC_MSG = re.compile(r"main\.cpp:(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): (?P<msg>.*)")
_CUDA_FATAL = re.compile(
    r"illegal memory access|illegal address|misaligned address|unspecified launch failure|illegal instruction|"
    r"device-side assert|an illegal|CUDA error: launch failure|uncorrectable ECC|hardware stack error|"
    r"CUDA_ERROR_(?:ILLEGAL|LAUNCH|MISALIGNED|HARDWARE)",
    re.I,
)


@dataclass
class Fault:
    kind: str  # "compile" | "oom" | "cuda" | "exception"
    message: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)  # severity, message, line
    interpreter: bool = (
        False  # a "compile" fault of the Triton interpreter alone: a GPU compile may not share it
    )

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "message": self.message, "diagnostics": self.diagnostics}
        return {**out, "interpreter": True} if self.interpreter else out


def candidate_frames(exc: BaseException, files: set[str]) -> list[str]:
    """'line N in fn: code' for traceback frames inside the candidate's file(s)."""
    out = []
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename in files:
            code = (fr.line or "").strip()
            out.append(f"line {fr.lineno} in {fr.name}: {code}" if code else f"line {fr.lineno} in {fr.name}")
    return out


def _map_cuda_log(log: str, cuda_text: str, py_source: str, prelude: int = 0) -> list[dict[str, Any]]:
    diags = []
    for raw in log.splitlines():
        m = _CUDA_MSG.search(raw)
        if not m:
            continue
        cu_line = int(m.group("line")) - prelude
        line = locate_line(py_source, cuda_text, cu_line - 1) if cu_line >= 1 else None
        sev = "error" if "error" in m.group("sev") else "warning"
        diags.append({"severity": sev, "message": m.group("msg").strip(), "line": line})
    return diags


def _triton_line(message: str, py_source: str) -> int | None:
    """Triton's CompilationError quotes the offending source line above a caret: find it in the file."""
    lines = message.splitlines()
    for i, ln in enumerate(lines):
        if ln.strip().startswith("^") and i > 0:
            snippet = lines[i - 1].strip()
            hits = [
                n for n, src in enumerate(py_source.splitlines(), 1) if src.strip() == snippet and snippet
            ]
            if len(hits) >= 1:
                return hits[0]
    return None


# The hedge of an interpreter failure, until the GPU compile (the sandbox's dry run) settles it: dropped where that
# compile fails too, so a message never says both "it may run" and "it fails".
MAY_RUN_ON_GPU = "; compiled for a GPU it may run (a compile_kernel dry run checks that), but this machine can only interpret it"


def _interpreter_fault(cause: BaseException, files: set[str], where: str) -> Fault:
    """The Triton interpreter (the CPU) failed inside a kernel's body: the kernel's own line, not the launch's, and
    said as the interpreter's failure, which a GPU compile may not share (it runs the body as Python: a loop
    variable of `range` is a Python int there, for one)."""
    inner = candidate_frames(cause, files)
    own = [fr.lineno for fr in traceback.extract_tb(cause.__traceback__) if fr.filename in files]
    line = own[-1] if own else None
    what = f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}"
    at = f" at {inner[-1]}" if inner else ""
    message = f"the Triton interpreter (CPU) could not run the kernel: {what}{at}{MAY_RUN_ON_GPU}"
    return Fault(
        "compile",
        f"Triton interpreter error: {message}{where}",
        [{"severity": "error", "message": message, "line": line}],
        interpreter=True,
    )


def describe(exc: BaseException, py_source: str, files: set[str]) -> Fault:
    name = type(exc).__name__
    text = str(exc)
    frames = candidate_frames(exc, files)
    where = ("\n  " + "\n  ".join(frames[-4:])) if frames else ""
    if name == "NvrtcError":
        diags = _map_cuda_log(getattr(exc, "log", text), getattr(exc, "source", ""), py_source)
        return Fault(
            "compile",
            f"NVRTC compile error in {getattr(exc, 'kernel_name', '?')!r}:\n"
            f"{getattr(exc, 'log', text)[-3000:]}",
            diags,
        )
    if name == "ExtensionBuildError":
        cuda = getattr(exc, "cuda_sources", []) or []
        cpp = getattr(exc, "cpp_sources", []) or []
        log = getattr(exc, "log", text)
        diags = _map_cuda_log(log, "\n".join(cuda), py_source, prelude=len(CPP_EXT_PRELUDE))
        cpp_text = "\n".join(["#include <torch/extension.h>", *cpp])
        for raw in log.splitlines():
            m = _GCC_MSG.search(raw)
            if m:
                line = locate_line(py_source, cpp_text, int(m.group("line")) - 1)
                diags.append({"severity": m.group("sev"), "message": m.group("msg").strip(), "line": line})
        return Fault("compile", f"torch extension build failed:\n{log[-3000:]}", diags)
    if name == "InterpreterError" and exc.__cause__ is not None:
        return _interpreter_fault(exc.__cause__, files, where)
    if name in ("CompilationError", "CompileTimeAssertionFailure") or type(exc).__module__.startswith(
        "triton"
    ):
        line = _triton_line(text, py_source)
        diags = [
            {
                "severity": "error",
                "message": text.strip().splitlines()[-1] if text.strip() else name,
                "line": line,
            }
        ]
        return Fault("compile", f"Triton compile error: {text[-3000:]}{where}", diags)
    if name == "CandidateError":  # the module lacks what the task needs (e.g. no ModelNew)
        return Fault("compile", text, [{"severity": "error", "message": text, "line": None}])
    if isinstance(exc, SyntaxError):
        return Fault(
            "compile",
            f"Python syntax error: {exc.msg} (line {exc.lineno})",
            [{"severity": "error", "message": exc.msg, "line": exc.lineno}],
        )
    if name == "OutOfMemoryError" or "out of memory" in text.lower():
        return Fault("oom", f"GPU out of memory: {text.splitlines()[0] if text else name}{where}")
    if "can't allocate memory" in text or isinstance(exc, MemoryError):
        return Fault("oom", f"host out of memory: {text.splitlines()[0] if text else name}{where}")
    if _CUDA_FATAL.search(text):
        return Fault("cuda", f"CUDA error: {text.strip().splitlines()[0]}{where}")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return Fault("exception", f"{name}: {first[:1500]}{where}")
