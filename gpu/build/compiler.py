"""Compile a candidate without running it: Python/AST checks, and `nvcc -cubin -Xptxas -v` on its CUDA (for the
machine's architecture, or its `a` variant where the candidate's options ask for it); ptxas's warnings, with their
codes, become diagnostics on the kernel they concern.

This runs in the calling process (no torch): nvcc is a subprocess, so static compilation overlaps
with timing in the workers. Messages are mapped to lines of the candidate's own Python file.
Triton kernels compile only when launched with real arguments; the worker adds their resources
(registers, spills, shared memory) after a warm launch on a GPU.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sysconfig
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ksearch.gpu.build import cudasrc, occupancy
from ksearch.gpu.build.procs import communicate_or_kill
from ksearch.gpu.checks import tamper
from ksearch.gpu.jail import launch as jail
from ksearch.gpu.jail.scrub import scrubbed_env
from ksearch.gpu.tasks.flashinfer.solution import bundled_python
from ksearch.worldmodel.models import Candidate, CompileReport, Diagnostic, KernelResources

LOG_LIMIT = 20_000

# Options a candidate may pass to NVRTC that mean the same to nvcc.
_PASS_OPTS = (
    "-D",
    "--define-macro",
    "-U",
    "-std=",
    "--std=",
    "-use_fast_math",
    "--use_fast_math",
    "-lineinfo",
    "--generate-line-info",
    "-maxrregcount",
    "--maxrregcount",
    "--fmad",
    "-fmad",
    "--ftz",
    "-ftz",
    "--prec-div",
    "-prec-div",
    "--prec-sqrt",
    "-prec-sqrt",
    "--expt-relaxed-constexpr",
    "--extended-lambda",
    "-Xptxas",
    "-I",
    "--include-path",
    "-O",
)
_TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
]

_FRONTEND = re.compile(
    r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<sev>error|warning|remark|catastrophic error)(?: #[\w-]+)?: (?P<msg>.*)$"
)
# Triton bundles ptxas as `ptxas-blackwell` (for sm_90 too); its report reads the same as nvcc's
_PTXAS = r"ptxas(?:-[\w.]+)?"
_PTXAS_ENTRY = re.compile(_PTXAS + r" info\s*: Compiling entry function '(?P<name>[^']+)'")
_PTXAS_PROPS = re.compile(_PTXAS + r" info\s*: Function properties for (?P<name>\S+)")
_PTXAS_STACK = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_PTXAS_USED = re.compile(_PTXAS + r" info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
# ptxas's own messages: `ptxas warning : ...`, `ptxas /tmp/x.ptx, line 30; error   : ...`, and the coded ones it
# prints at info level in some versions and as warnings in others (`ptxas info    : (C7511) Potential Performance
# Loss: wgmma.mma_async instructions are serialized ... in the function 'k'`)
_PTXAS_MSG = re.compile(
    r"^" + _PTXAS + r"(?: [^\s,;]+, line \d+;)? (?P<sev>error|warning|fatal|info)\s*: (?P<msg>.*)$"
)
_PTXAS_CODE = re.compile(r"^\((?P<code>C\d{4})\)\s*")
_PTXAS_FUNCTION = re.compile(r"function '(?P<name>[^']+)'")
# a line of the generated PTX, which the candidate never sees
_PTX_LINE = re.compile(r"\s+(?:in\s+)?(?:around\s+)?line \d+")
_NOT_ON_TARGET = re.compile(r"not supported on \.target '(sm_\d+)'")
PTXAS_MESSAGES = 12  # distinct ptxas messages kept per unit; the rest are counted
PTXAS_MESSAGE_CHARS = 400
_NVCC_FATAL = re.compile(r"^nvcc (?:fatal|error)\s*: (?P<msg>.*)$")
# host compiler (gcc) messages: path:line:col: error: message
_HOST_MSG = re.compile(
    r"^(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$"
)
_MISSING_HEADER = re.compile(r"(?P<header>[\w./-]+): No such file or directory")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*(?P<n>\d+)\s*[,)]")


def kernel_definition(cuda_text: str, kernel: str) -> tuple[int | None, int | None]:
    """(1-based line of `kernel`'s `__global__` definition, the literal N of its `__launch_bounds__(N)`)."""
    base = kernel.split("::")[-1]
    for m in re.finditer(rf"\b{re.escape(base)}\s*\(", cuda_text):
        head = cuda_text[: m.start()]
        start = max(head.rfind(";"), head.rfind("}"), head.rfind("{"))
        decl = head[start + 1 :]
        if "__global__" in decl:
            lb = _LAUNCH_BOUNDS.search(decl)
            at = start + 1 + decl.index("__global__")
            return cuda_text.count("\n", 0, at) + 1, int(lb.group("n")) if lb else None
    return None, None


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "nvcc").is_file():
            return str(Path(home, "bin", "nvcc"))
    return None


def torch_include_dirs() -> list[str]:
    """The headers a torch extension is built with, located without importing torch: torch's C++ headers and
    Python's own (torch's headers include Python.h), as torch.utils.cpp_extension passes them."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations))) / "include"
    if not root.is_dir():
        return []
    dirs = [str(root), str(root / "torch" / "csrc" / "api" / "include")]
    python = sysconfig.get_paths().get("include")
    return [*dirs, python] if python and Path(python).is_dir() else dirs


def demangle(name: str) -> str:
    """Readable base name of an Itanium-mangled kernel (`_Z6kernelPfi` -> `kernel`); else unchanged."""
    if not name.startswith("_Z"):
        return name
    s = name[2:]
    if s.startswith("N"):  # nested: _ZN3ns6kernelE...
        parts, s = [], s[1:]
        while s and s[0].isdigit():
            m = re.match(r"(\d+)", s)
            assert m is not None
            n = int(m.group(1))
            s = s[m.end() :]
            parts.append(s[:n])
            s = s[n:]
        return "::".join(parts) if parts else name
    m = re.match(r"(\d+)", s)
    if not m:
        return name
    n = int(m.group(1))
    return s[m.end() : m.end() + n] or name


_ARCH_FLAG = re.compile(r"^(?:-arch|--gpu-architecture|-gencode|--generate-code)(?:=|$)")
_ARCH_NAME = re.compile(r"\b(?:sm|compute)_(?P<n>\d+)(?P<v>[af]?)\b")
# what this check's results are: a result parsed by an older rule (without ptxas's coded warnings) is not reused
PARSE_VERSION = 2


def target_arch(options: list[str], arch: str) -> tuple[str, set[str]]:
    """The architecture a unit is compiled for: `arch` ("sm_90"), or its architecture-specific variant ("sm_90a",
    "sm_100f") where the candidate's own options ask for it (`-arch=sm_90a`, `--gpu-architecture=compute_90a`,
    `-gencode arch=compute_90a,code=sm_90a`): the wgmma and TMA instructions exist only there. Also the options
    that said so (honoured, so not reported as dropped); an option naming another architecture stays dropped."""
    base = re.sub(r"\D", "", arch)
    chosen, honoured = arch, set()
    for i, o in enumerate(options):
        before = options[i - 1] if i else ""
        flag = o if _ARCH_FLAG.match(o) else before if _ARCH_FLAG.match(before) else None
        if flag is None or (flag is not o and "=" in flag):
            continue
        for m in _ARCH_NAME.finditer(o):
            if m.group("n") == base and m.group("v"):
                chosen = f"sm_{base}{m.group('v')}"
                honoured.update({o, flag})
    return chosen, honoured


def _filter_options(opts: list[str]) -> tuple[list[str], list[str]]:
    keep, dropped = [], []
    for o in opts:
        o2 = "-std=" + o.split("=", 1)[1] if o.startswith("--std=") else o
        if o2.startswith(_PASS_OPTS):
            keep.append(o2)
        else:
            dropped.append(o)
    return keep, dropped


@dataclass
class UnitResult:
    ok: bool
    log: str
    diagnostics: list[dict]  # severity, message, unit_line (or None), file
    kernels: list[dict]
    seconds: float


def _ptxas_message(sev: str, msg: str) -> tuple[str, str, str | None] | None:
    """(severity, message, kernel) of one ptxas message, None for its plain reports (`0 bytes gmem`, compile
    time): a coded message (`(C7511) Potential Performance Loss: ...`) is a warning whatever level ptxas gave it,
    the kernel it names is demangled, and the PTX line it cites (of code the candidate never sees) is left out."""
    msg = msg.strip()
    code = _PTXAS_CODE.match(msg)
    if sev == "info" and code is None:
        return None
    severity = "error" if sev in ("error", "fatal") else "warning"
    kernel = None
    fn = _PTXAS_FUNCTION.search(msg)
    if fn is not None:
        kernel = demangle(fn.group("name"))
        msg = msg.replace(f"'{fn.group('name')}'", f"'{kernel}'")
    msg = _PTX_LINE.sub("", msg)
    target = _NOT_ON_TARGET.search(msg)
    if target is not None:  # wgmma, setmaxnreg, ...: they exist only on the architecture-specific target
        msg += f" (compile for {target.group(1)}a for it: options=['-arch={target.group(1)}a'])"
    if code is not None:  # `ptxas C7511: Potential Performance Loss: ...`
        msg = f"ptxas {code.group('code')}: {msg[code.end() :]}"
    else:
        msg = f"ptxas: {msg}"
    if len(msg) > PTXAS_MESSAGE_CHARS:
        msg = msg[: PTXAS_MESSAGE_CHARS - 1] + "…"
    return severity, msg, kernel


def _ptxas_diagnostics(said: dict[tuple[str, str, str | None], int]) -> list[dict]:
    """ptxas's messages, each once with how often it was said, errors first; beyond PTXAS_MESSAGES, a count."""
    ordered = sorted(said.items(), key=lambda kv: kv[0][0] != "error")
    diags = [
        {
            "severity": sev,
            "message": msg + (f" ({n} places)" if n > 1 else ""),
            "unit_line": None,
            "file": None,
            "kernel": kernel,
        }
        for (sev, msg, kernel), n in ordered[:PTXAS_MESSAGES]
    ]
    rest = ordered[PTXAS_MESSAGES:]
    if rest:
        diags.append(
            {
                "severity": "warning",
                "message": f"ptxas: {len(rest)} more distinct message(s) not shown (see the compile log)",
                "unit_line": None,
                "file": None,
            }
        )
    return diags


def parse_nvcc_output(text: str, unit_file: str) -> tuple[list[dict], list[dict]]:
    """(diagnostics, kernels) from nvcc/ptxas output. Diagnostic lines are in the unit's numbering."""
    diags: list[dict] = []
    props: dict[str, dict] = {}
    entries: list[str] = []
    current: str | None = None
    ptxas: dict[tuple[str, str, str | None], int] = {}  # (severity, message, kernel) -> how often it was said
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _FRONTEND.match(line.strip())
        if m:
            sev = (
                "error"
                if "error" in m.group("sev")
                else ("note" if m.group("sev") == "remark" else "warning")
            )
            same = Path(m.group("file")).name == Path(unit_file).name
            if sev != "error" and not same:
                continue  # a warning inside torch's or the toolkit's own headers is not the candidate's
            diags.append(
                {
                    "severity": sev,
                    "message": m.group("msg").strip(),
                    "unit_line": int(m.group("line")) if same else None,
                    "file": None if same else f"{m.group('file')}({m.group('line')})",
                }
            )
            continue
        m = _PTXAS_ENTRY.search(line)
        if m:
            entries.append(m.group("name"))
            current = m.group("name")
            props.setdefault(current, {})
            continue
        m = _PTXAS_PROPS.search(line)
        if m:
            current = m.group("name")
            props.setdefault(current, {})
            continue
        m = _PTXAS_STACK.search(line)
        if m and current is not None:
            props[current].update(
                stack=int(m.group("stack")), spill_st=int(m.group("st")), spill_ld=int(m.group("ld"))
            )
            continue
        m = _PTXAS_USED.search(line)
        if m and current is not None:
            props[current]["regs"] = int(m.group("regs"))
            sm = re.search(r"(\d+) bytes smem", m.group("rest"))
            props[current]["smem"] = int(sm.group(1)) if sm else 0
            continue
        m = _PTXAS_MSG.match(line.strip())
        if m:
            said = _ptxas_message(m.group("sev"), m.group("msg"))
            if said is not None:
                ptxas[said[:3]] = ptxas.get(said[:3], 0) + 1
            continue
        m = _HOST_MSG.match(line.strip())
        if m:
            same = Path(m.group("file")).name == Path(unit_file).name
            missing = _MISSING_HEADER.search(m.group("msg"))
            if missing and not same:
                # a header that torch's own headers need is not installed here: the environment's gap,
                # not the candidate's error
                diags.append(
                    {
                        "severity": "note",
                        "unit_line": None,
                        "file": None,
                        "incomplete": True,
                        "message": f"static check incomplete: {missing.group('header')} (needed by "
                        f"{Path(m.group('file')).name}) is not installed on this machine; the "
                        "sources compile for real when the candidate runs on a GPU",
                    }
                )
                continue
            sev = "warning" if m.group("sev") == "warning" else "error"
            diags.append(
                {
                    "severity": sev,
                    "message": m.group("msg").strip(),
                    "unit_line": int(m.group("line")) if same else None,
                    "file": None if same else f"{m.group('file')}:{m.group('line')}",
                }
            )
            continue
        m = _NVCC_FATAL.match(line.strip())
        if m:
            diags.append(
                {"severity": "error", "message": "nvcc: " + m.group("msg"), "unit_line": None, "file": None}
            )
    diags += _ptxas_diagnostics(ptxas)
    kernels = []
    for name in entries:
        p = props.get(name, {})
        kernels.append(
            {
                "name": demangle(name),
                "mangled": name,
                "registers": p.get("regs"),
                "spill_stores_bytes": p.get("spill_st"),
                "spill_loads_bytes": p.get("spill_ld"),
                "shared_bytes": p.get("smem"),
                "stack_bytes": p.get("stack"),
            }
        )
    return diags, kernels


class StaticCompiler:
    """Compiles CUDA units with nvcc (cached by content) and checks Python/Triton sources."""

    def __init__(
        self,
        scratch: Path,
        arch: str = "sm_90",
        timeout_s: float = 240.0,
        cache_size: int = 256,
        *,
        jailed: bool = False,
    ) -> None:
        self.scratch = scratch
        # candidate sources are hostile even at compile time (`#include "/proc/self/environ"`): nvcc
        # runs with a scrubbed environment, and inside ksearch.gpu.jail.launch where the machine allows it
        self.jailed = jailed
        self.arch = arch
        self.timeout_s = timeout_s
        self.nvcc = find_nvcc()
        self._cache: OrderedDict[str, UnitResult] = OrderedDict()
        self._cache_size = cache_size
        self._inflight: dict[str, tuple[asyncio.Task[tuple[UnitResult, bool]], list[int]]] = {}
        self._disk = scratch / "compile-cache"

    # ------------------------------------------------------------------ nvcc
    def _cmd(self, unit: cudasrc.CudaUnit, path: Path) -> tuple[list[str], list[str]]:
        assert self.nvcc is not None
        arch, honoured = target_arch(unit.options, self.arch)
        opts, dropped = _filter_options(unit.options)
        dropped = [o for o in dropped if o not in honoured]
        cmd = [
            self.nvcc,
            f"-arch={arch}",
            "-cubin",
            "-Xptxas",
            "-v",
            "-o",
            str(path.with_suffix(".cubin")),
        ]
        if not any(o.startswith("-std=") for o in opts):
            # torch builds its extensions as C++20 (torch.utils.cpp_extension), and its headers need it
            cmd.append("-std=c++20" if unit.kind == "cpp_ext" else "-std=c++17")
        if unit.kind == "cpp_ext":
            cmd += [f"-I{d}" for d in torch_include_dirs()] + _TORCH_NVCC_FLAGS
        cmd += [*opts, str(path)]
        return cmd, dropped

    async def _compile_unit(self, unit: cudasrc.CudaUnit, idx: int) -> tuple[UnitResult, bool]:
        """The unit's result, and whether it came from the cache."""
        # the include directories are part of what was checked: a result from before Python's headers were
        # passed is not this check's result
        incs = torch_include_dirs() if unit.kind == "cpp_ext" else []
        key_src = json.dumps(
            [unit.kind, unit.text, unit.options, self.arch, self.nvcc, incs, unit.files, PARSE_VERSION]
        )
        key = hashlib.sha256(key_src.encode()).hexdigest()[:32]
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key], True
        # one compile per unit at a time: later callers join it (a shared task, not a lock held across nvcc's run);
        # it is cancelled, killing nvcc, only when every caller waiting for it was
        job = self._inflight.get(key)
        if job is None:
            job = self._inflight[key] = (asyncio.create_task(self._run_unit(unit, idx, key)), [0])
            job[0].add_done_callback(partial(self._done_unit, key))
        task, waiting = job
        waiting[0] += 1
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done() and waiting[0] == 1:
                task.cancel()
            raise
        finally:
            waiting[0] -= 1

    def _done_unit(self, key: str, _task: asyncio.Task[tuple[UnitResult, bool]]) -> None:
        self._inflight.pop(key, None)

    async def _run_unit(self, unit: cudasrc.CudaUnit, idx: int, key: str) -> tuple[UnitResult, bool]:
        """Compile the unit (or read its result from the disk cache); see `_compile_unit`."""
        if key in self._cache:
            return self._cache[key], True
        disk = self._disk / f"{key}.json"
        if disk.is_file():
            try:
                res = UnitResult(**json.loads(disk.read_text()))
                self._remember(key, res)
                return res, True
            except (ValueError, TypeError):
                disk.unlink(missing_ok=True)  # corrupt entry: recompile
        work = self.scratch / "nvcc" / key
        work.mkdir(parents=True, exist_ok=True)
        path = work / f"unit{idx}.cu"
        path.write_text(unit.text)
        for name, text in unit.files.items():  # the files it includes by name, beside it
            dest = work / name
            if dest.resolve().is_relative_to(work.resolve()) and dest != path:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
        cmd, dropped = self._cmd(unit, path)
        t0 = time.perf_counter()
        if self.jailed:  # no GPU, no network, the toolkit and its own folder: the pool's limits
            cmd = jail.wrap(cmd, [work])
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=work,
            env=scrubbed_env(home=work),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            # a cancelled compile (Ctrl-C, an abandoned attempt) kills nvcc and its ptxas too
            out = await communicate_or_kill(proc, self.timeout_s)
        except TimeoutError:
            return UnitResult(
                False,
                "",
                [
                    {
                        "severity": "error",
                        "unit_line": None,
                        "file": None,
                        "message": f"nvcc did not finish within {self.timeout_s:.0f} s",
                    }
                ],
                [],
                time.perf_counter() - t0,
            ), False
        text = out.decode(errors="replace")
        diags, kernels = parse_nvcc_output(text, path.name)
        for d in dropped:
            diags.append(
                {
                    "severity": "note",
                    "unit_line": None,
                    "file": None,
                    "message": f"option {d!r} is NVRTC-only or unknown to this check; compiled without it",
                }
            )
        incomplete = any(d.get("incomplete") for d in diags)
        ok = (proc.returncode == 0 or incomplete) and not any(d["severity"] == "error" for d in diags)
        if proc.returncode != 0 and not incomplete and not any(d["severity"] == "error" for d in diags):
            diags.append(
                {
                    "severity": "error",
                    "unit_line": None,
                    "file": None,
                    "message": f"nvcc failed (exit {proc.returncode}): {text.strip()[-500:]}",
                }
            )
        res = UnitResult(ok, text[-LOG_LIMIT:], diags, kernels, time.perf_counter() - t0)
        self._disk.mkdir(parents=True, exist_ok=True)
        disk.write_text(json.dumps(res.__dict__))
        shutil.rmtree(work, ignore_errors=True)
        self._remember(key, res)
        return res, False

    def _remember(self, key: str, res: UnitResult) -> None:
        self._cache[key] = res
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    # ------------------------------------------------------------------ entry point
    async def compile(
        self,
        candidate: Candidate,
        entry_names: tuple[str, ...] = ("ModelNew", "custom_kernel"),
        entry_help: str = "a candidate must define `class ModelNew(nn.Module)` with the reference's constructor "
        "arguments",
    ) -> CompileReport:
        t0 = time.perf_counter()
        src = candidate.source
        try:
            extraction = cudasrc.extract_cuda(src)
        except SyntaxError as e:
            return CompileReport(
                ok=False,
                language=candidate.language,
                seconds=time.perf_counter() - t0,
                diagnostics=[
                    Diagnostic(
                        severity="error",
                        message=f"Python syntax error: {e.msg}",
                        line=e.lineno,
                        column=e.offset,
                    )
                ],
                mode="python syntax check",
            )
        diags: list[Diagnostic] = []
        unchecked = ""
        kernels: list[KernelResources] = []
        logs: list[str] = []
        cached = True
        if not tamper.defines_any(src, entry_names):
            diags.append(
                Diagnostic(
                    severity="error",
                    message=f"the module defines none of {', '.join(entry_names)}; {entry_help}",
                )
            )
        for line, msg in tamper.scan(src):
            diags.append(Diagnostic(severity="warning", message=f"suspicious: {msg}", line=line))
        # a Solution of several Python files: its files are the candidate's Python too (SOURCES, imported as a
        # package when it loads)
        bundled: dict[str, str] = {}
        for path, text in bundled_python(src).items():
            try:
                found = tamper.scan(text)
                bundled[path] = text
            except SyntaxError as e:
                diags.append(Diagnostic(severity="error", message=f"{path}: line {e.lineno}: {e.msg}"))
                continue
            for line, msg in found:
                diags.append(
                    Diagnostic(severity="warning", message=f"suspicious in {path} line {line}: {msg}")
                )
        modes = []
        if candidate.language == "triton":
            names = tamper.triton_kernels(src) + [
                k for t in bundled.values() for k in tamper.triton_kernels(t)
            ]
            if not names:
                diags.append(
                    Diagnostic(
                        severity="warning",
                        message="no @triton.jit function found: the candidate "
                        "would run no Triton kernel of its own",
                    )
                )
            else:
                diags.append(
                    Diagnostic(
                        severity="note",
                        message=f"Triton kernels: {', '.join(names)} (registers, "
                        "spills and shared memory are known after their first launch on a GPU; compile_kernel "
                        "compiles them for sm_90 without one)",
                    )
                )
            modes.append("python/AST checks (Triton kernels compile at first launch)")
        if candidate.language in ("cuda", "cpp_ext") or extraction.units:
            for line, msg in extraction.notes:
                diags.append(Diagnostic(severity="note", message=msg, line=line))
            if not extraction.units and candidate.language in ("cuda", "cpp_ext"):
                diags.append(
                    Diagnostic(
                        severity="warning",
                        message="no CUDA source found statically (no "
                        "nvrtc.compile / load_inline call with a constant source, no module-level "
                        "string with __global__)",
                    )
                )
            if self.nvcc is None and extraction.units:
                unchecked = (
                    "nvcc is not installed here: CUDA sources were not compiled statically; they compile "
                    "when the candidate runs"
                )
                diags.append(Diagnostic(severity="note", message=unchecked))
            elif extraction.units:
                arches = sorted({target_arch(u.options, self.arch)[0] for u in extraction.units})
                modes.append(f"nvcc -arch={'/'.join(arches)} -cubin -Xptxas -v (compile only)")
                results = await asyncio.gather(
                    *(self._compile_unit(u, i) for i, u in enumerate(extraction.units))
                )
                for unit, (res, hit) in zip(extraction.units, results, strict=True):
                    cached = cached and hit
                    logs.append(res.log)
                    for d in res.diagnostics:
                        if d.get("incomplete"):
                            unchecked = unchecked or d["message"]
                        unit_line = d["unit_line"]
                        if unit_line is None and d.get("kernel"):  # ptxas on a kernel: at its definition
                            unit_line = kernel_definition(unit.text, d["kernel"])[0]
                        line = cudasrc.map_line(unit, unit_line, src) if unit_line else None
                        where = f" (in {d['file']})" if d.get("file") else ""
                        if d["unit_line"] and unit.file_name:
                            where = f" ({unit.file_name} line {d['unit_line']})"
                        elif d["unit_line"] and line is None:
                            where = f" (CUDA line {d['unit_line']})"
                        diags.append(
                            Diagnostic(
                                severity=d["severity"],
                                message=d["message"] + where,
                                line=line,
                                kernel=d.get("kernel"),
                            )
                        )
                    for k in res.kernels:
                        def_line, bound = kernel_definition(unit.text, k["name"])
                        kr, notes = occupancy.annotate(
                            KernelResources(
                                name=k["name"],
                                registers=k["registers"],
                                spill_stores_bytes=k["spill_stores_bytes"],
                                spill_loads_bytes=k["spill_loads_bytes"],
                                shared_bytes=k["shared_bytes"],
                                stack_bytes=k["stack_bytes"],
                                threads_per_block=bound,
                                config=f"__launch_bounds__({bound})" if bound else None,
                            ),
                            self.arch,
                        )
                        kernels.append(kr)
                        at = cudasrc.map_line(unit, def_line, src) if def_line else None
                        diags += [d.model_copy(update={"line": at}) for d in notes]
        ok = not any(d.severity == "error" for d in diags)
        return CompileReport(
            ok=ok,
            language=candidate.language,
            seconds=time.perf_counter() - t0,
            diagnostics=diags,
            kernels=kernels,
            log="\n".join(logs)[-LOG_LIMIT:],
            cached=bool(extraction.units) and cached,
            mode="; ".join(modes) or "python/AST checks",
            unchecked=unchecked,
        )
