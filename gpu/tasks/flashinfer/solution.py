"""FlashInfer-Bench Solution JSON -> ksearch candidate module. Importing this needs no torch.

A Solution (name, definition, author, spec {language, target_hardware, entry_point "file::symbol",
destination_passing_style (default true), binding, dependencies}, sources [{path, content}]) becomes
one candidate module defining the `run` a FlashInfer-Bench task's runtime calls by name. Where FlashInfer-Bench's
package is in use (gpu/tasks/flashinfer/pkg.py), its own Solution model reads the JSON first.

- **Python / Triton**, one Python file: the file itself is the candidate, so its kernels, its
  tracebacks and the sandbox's static checks are the candidate's own. A block is appended after it: the
  Solution's other fields (its name, author, spec and other files, for export) after SOLUTION_MARK when the
  file's `run` already takes the definition's names in order (FlashInfer-Bench calls it positionally,
  ksearch by name: the same call); otherwise after ADAPTER_MARK, with an adapter `run` that calls the entry
  point positionally (inputs, then outputs in destination-passing style).
- **Python / Triton**, several Python files (a package, e.g. `pkg/main.py::run` beside `pkg/kernels.py`): a
  module holding the files verbatim (`SOURCES`) that imports them as one package, as FlashInfer-Bench's
  PythonBuilder does (`ksearch.gpu.fib_build.load_python`), and calls the entry symbol positionally.
- **CUDA / C++**: a module holding the solution's files verbatim (`SOURCES`) that builds them as
  FlashInfer-Bench does (`ksearch.gpu.fib_build.build`: a torch extension, or TVM-FFI, its default binding)
  and calls the entry symbol positionally.

gpu/tasks/flashinfer/export.py goes back: a converted candidate gives its Solution again.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import keyword
import pprint
import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ksearch.gpu.task import Task
from ksearch.gpu.tasks.flashinfer import pkg as fib_pkg
from ksearch.worldmodel.errors import KsearchError

# The line that starts the block appended to a one-file Python/Triton solution (export cuts the file there): the
# Solution's other fields, and an adapter when its entry point is not a `run` taking the definition's names
ADAPTER_MARK = "# ---- ksearch: FlashInfer-Bench entry point (generated from the Solution JSON) ----"
SOLUTION_MARK = (
    "# ---- ksearch: the FlashInfer-Bench Solution this file is (for `ksearch export --solution`) ----"
)
ADAPTER_META = "_KSEARCH_FIB_SOLUTION"
_COMPILED_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")


class SolutionError(ValueError, KsearchError):
    """A Solution JSON that is malformed, or that ksearch cannot run for this task."""


# --------------------------------------------------------------------------- the format


class SourceFile(BaseModel):
    """One file of a solution; its path is relative, inside the solution's folder."""

    path: str = Field(min_length=1)
    content: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        p = PurePosixPath(v)
        if p.is_absolute() or ".." in p.parts or "\\" in v:
            raise ValueError(f"must be a relative path inside the solution, without '..', got {v!r}")
        return v


class BuildSpec(BaseModel):
    language: Literal["python", "triton", "cpp", "cuda", "tilelang"]
    target_hardware: list[str] = Field(min_length=1)
    entry_point: str = Field(description="<file path>::<function name>, e.g. main.py::run")
    dependencies: list[str] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Literal["tvm-ffi", "torch"] | None = None

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        file, sep, symbol = v.partition("::")
        if not sep or not file or not symbol or "::" in symbol:
            raise ValueError(f"must be '<file path>::<function name>' (e.g. 'main.py::run'), got {v!r}")
        return v


class Solution(BaseModel):
    """FlashInfer-Bench's Solution: one implementation of one definition, with all its files."""

    model_config = ConfigDict(extra="ignore")  # FlashInfer-Bench ignores keys it does not know too

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    author: str = Field(min_length=1)
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None

    @model_validator(mode="after")
    def _files(self) -> Solution:
        paths = [s.path for s in self.sources]
        dup = next((p for p in paths if paths.count(p) > 1), None)
        if dup is not None:
            raise ValueError(f"sources: the path {dup!r} appears twice")
        if self.entry_file not in paths:
            raise ValueError(
                f"spec.entry_point: the file {self.entry_file!r} is not among the sources ({', '.join(paths)})"
            )
        return self

    @property
    def entry_file(self) -> str:
        return self.spec.entry_point.partition("::")[0]

    @property
    def entry_symbol(self) -> str:
        return self.spec.entry_point.partition("::")[2]

    def source(self, path: str) -> str:
        return next(s.content for s in self.sources if s.path == path)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, exclude_none=True) + "\n"


def looks_like_solution(text: str) -> bool:
    """Whether a file's text is a Solution JSON (an object with `spec` and `sources`), not Python."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        raw = json.loads(text)
    except ValueError:
        return False
    return isinstance(raw, dict) and "spec" in raw and "sources" in raw


_SHAPE = (
    "(a Solution has name, definition, author, spec {language, target_hardware, entry_point "
    '"<file>::<function>", destination_passing_style, binding}, sources [{path, content}])'
)


def parse_solution(text: str, where: str = "the Solution JSON") -> Solution:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise SolutionError(f"{where}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    if not isinstance(raw, dict):
        raise SolutionError(f"{where}: a FlashInfer-Bench Solution is a JSON object")
    if fib_pkg.in_use():  # FlashInfer-Bench's own model decides what a Solution is, and fills its defaults
        checked = fib_pkg.check_solution(text)
        if isinstance(checked, str):
            raise SolutionError(f"{where}: FlashInfer-Bench's Solution model refuses it: {checked} {_SHAPE}")
        raw = checked
    try:
        return Solution.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise SolutionError(f"{where}: {loc + ': ' if loc else ''}{msg} {_SHAPE}") from None


# --------------------------------------------------------------------------- Solution -> candidate


class Converted(BaseModel):
    """A Solution as a ksearch candidate."""

    source: str
    language: Literal["triton", "cpp_ext"]
    how: str  # one line saying what was done, for the person who submitted it


def arg_names(task: Task, dps: bool) -> list[str]:
    names = list(task.extras["inputs"])
    return [*names, *task.extras["outputs"]] if dps else names


def _check_task(sol: Solution, task: Task) -> None:
    if task.style != "flashinfer":
        raise SolutionError(
            f"a FlashInfer-Bench Solution needs a FlashInfer-Bench definition as its task; {task.name!r} is a "
            f"{task.style} task (give the definition's .json as the task)"
        )
    if sol.definition != task.name:
        raise SolutionError(
            f"the solution {sol.name!r} is for the definition {sol.definition!r}, not for this task's "
            f"{task.name!r}"
        )


def solution_to_candidate(sol: Solution, task: Task, *, check_env: bool = True) -> Converted:
    """The candidate module ksearch's sandbox runs for this Solution (refusing what it cannot run).

    `check_env`: refuse a binding this environment lacks (off when only the text is wanted)."""
    _check_task(sol, task)
    lang = sol.spec.language
    if lang in ("python", "triton"):
        return _python_candidate(sol, task)
    if lang in ("cuda", "cpp"):
        return _compiled_candidate(sol, task, check_env)
    raise SolutionError(
        f"the solution {sol.name!r} is written in {lang}; ksearch runs python, triton, cuda and cpp solutions"
    )


def sources_digest(sources: list[SourceFile]) -> str:
    return hashlib.sha256(json.dumps([[s.path, s.content] for s in sources]).encode()).hexdigest()


def _meta(sol: Solution, skip: str | None = None) -> dict[str, Any]:
    """The Solution's fields a candidate keeps, so that export gives them back; the digest of its files
    tells an unchanged submission from one edited since."""
    meta: dict[str, Any] = {
        "name": sol.name,
        "definition": sol.definition,
        "author": sol.author,
        "description": sol.description,
        "spec": sol.spec.model_dump(mode="json"),
        "sources_sha256": sources_digest(sol.sources),
    }
    if skip is not None:
        # the other files, and where the entry file sits among them (FlashInfer-Bench keeps their order)
        meta["entry_index"] = [s.path for s in sol.sources].index(skip)
        meta["entry_newline"] = sol.source(skip).endswith("\n")
        meta["other_sources"] = [s.model_dump() for s in sol.sources if s.path != skip]
    return meta


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def run_def(tree: ast.Module) -> ast.FunctionDef | None:
    """The last top-level `def run` (the one a module ends up with), if any."""
    found = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "run"]
    return found[-1] if found else None


def declared_dps(tree: ast.Module) -> bool | None:
    """A module-level `DESTINATION_PASSING = True/False`, as the runtime reads it."""
    value: bool | None = None
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "DESTINATION_PASSING" for t in stmt.targets)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, bool)
        ):
            value = stmt.value.value
    return value


def takes_exactly(fn: ast.FunctionDef, names: list[str]) -> bool:
    """`fn` takes exactly `names` as positional parameters, in that order (a positional call by
    FlashInfer-Bench and a call by name by ksearch then mean the same)."""
    a = fn.args
    params = [p.arg for p in [*a.posonlyargs, *a.args]]
    return params == names and not a.posonlyargs and a.vararg is None and not a.kwonlyargs


def _parse(path: str, content: str) -> ast.Module:
    try:
        return ast.parse(content)
    except SyntaxError as e:
        raise SolutionError(f"{path}: line {e.lineno}: does not parse as Python: {e.msg}") from None


def _ksearch_export(sol: Solution) -> bool:
    """Whether this is what `ksearch export --solution` writes for a kernel written for the task (one file,
    `main.py::run`, named and authored by ksearch)."""
    return (
        sol.spec.entry_point == "main.py::run"
        and len(sol.sources) == 1
        and sol.author.startswith("ksearch-")
        and f"{sol.definition}_ksearch_" in sol.name
    )


def _python_candidate(sol: Solution, task: Task) -> Converted:
    entry = sol.entry_file
    if not entry.endswith(".py"):
        raise SolutionError(
            f"spec.entry_point: a {sol.spec.language} solution's entry file is Python, got {entry!r}"
        )
    py = [s.path for s in sol.sources if s.path.endswith(".py")]
    if len(py) > 1:
        return _package_candidate(sol, task, py)
    content = sol.source(entry)
    tree = _parse(entry, content)
    symbol = sol.entry_symbol
    if symbol not in top_level_names(tree):
        raise SolutionError(f"spec.entry_point: {entry} defines no top-level {symbol!r}")
    if symbol != "run" and "run" in top_level_names(tree):
        raise SolutionError(
            f"spec.entry_point is {symbol!r}, but {entry} also defines its own `run`, the name ksearch "
            "calls; rename one of them"
        )
    dps = sol.spec.destination_passing_style
    names = arg_names(task, dps)
    language: Literal["triton", "cpp_ext"] = (
        "cpp_ext" if re.search(r"\bload_inline\b|\bcpp_extension\b", content) else "triton"
    )
    run = run_def(tree)
    declared = declared_dps(tree)
    meta = f"{ADAPTER_META} = {pprint.pformat(_meta(sol, skip=entry), width=100, sort_dicts=False)}"
    body = content if content.endswith("\n") else content + "\n"
    if symbol == "run" and run is not None and takes_exactly(run, names) and declared in (None, dps):
        # called by name or positionally, the same call. What ksearch exported for a kernel written for the task
        # is that kernel again (the same candidate); any other Solution gets its other fields added, so that the
        # unchanged file exports as the Solution it is (its name, author and entry path)
        own = _ksearch_export(sol)
        return Converted(
            source=content if own else body + "\n\n" + "\n".join([SOLUTION_MARK, meta, ""]),
            language=language,
            how=f"{sol.spec.language} solution {sol.name!r}: {entry} as it is (its run takes the definition's "
            "names in order)" + ("; a kernel ksearch exported, loaded as that kernel" if own else ""),
        )
    adapter = "\n".join(
        [
            ADAPTER_MARK,
            meta,
            f"_ksearch_fib_entry = {symbol}",
            f"_KSEARCH_FIB_ARGS = {tuple(names)!r}",
            f"DESTINATION_PASSING = {dps}",
            "",
            "",
            "def run(*args, **kwargs):",
            '    """FlashInfer-Bench calls the entry point positionally: inputs, then outputs (destination passing)."""',
            "    kwargs.update(zip(_KSEARCH_FIB_ARGS, args))",
            "    return _ksearch_fib_entry(*[kwargs[n] for n in _KSEARCH_FIB_ARGS])",
            "",
        ]
    )
    return Converted(
        source=body + "\n\n" + adapter,
        language=language,
        how=f"{sol.spec.language} solution {sol.name!r}: {entry}, with an adapter calling {symbol} positionally",
    )


_PACKAGE_TEMPLATE = '''"""A FlashInfer-Bench {language} solution of {count} Python files, as a ksearch candidate.

Generated from the Solution JSON. SOURCES are the solution's files, unchanged; ksearch.gpu.fib_build imports
them as one package, as FlashInfer-Bench's PythonBuilder does (through that builder itself, given
FLASHINFER_DEFINITION, where FlashInfer-Bench's package is installed), and `run` calls the entry point
FLASHINFER_SOLUTION["spec"]["entry_point"] positionally (inputs, then outputs in destination-passing style).
`ksearch export --solution` writes the files back.
"""

from ksearch.gpu import fib_build

FLASHINFER_SOLUTION = {meta}

FLASHINFER_DEFINITION = {definition}

SOURCES = {{
{sources}
}}

DESTINATION_PASSING = {dps}
_ARGS = {args}
_entry = fib_build.load_python(FLASHINFER_SOLUTION, SOURCES, FLASHINFER_DEFINITION)


def run(*args, **kwargs):
    kwargs.update(zip(_ARGS, args))
    return _entry(*[kwargs[n] for n in _ARGS])
'''


def _package_candidate(sol: Solution, task: Task, py: list[str]) -> Converted:
    """Several Python files: a package, its entry module imported by its dotted path (`pkg/main.py` ->
    `<package>.pkg.main`), as FlashInfer-Bench's PythonBuilder imports it."""
    trees = {path: _parse(path, sol.source(path)) for path in py}
    entry = sol.entry_file
    parts = PurePosixPath(entry).with_suffix("").parts
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        raise SolutionError(
            f"spec.entry_point: {entry!r}: FlashInfer-Bench imports the entry file as the module "
            f"{'.'.join(parts)!r}, so each part of its path must be a Python name"
        )
    if sol.entry_symbol not in top_level_names(trees[entry]):
        raise SolutionError(f"spec.entry_point: {entry} defines no top-level {sol.entry_symbol!r}")
    dps = sol.spec.destination_passing_style
    text = _PACKAGE_TEMPLATE.format(
        language=sol.spec.language,
        count=len(py),
        meta=pprint.pformat(_meta(sol), width=100, sort_dicts=False),
        definition=pprint.pformat(task.extras["definition"], width=100, sort_dicts=False),
        sources="\n".join(f"    {s.path!r}: {_literal(s.content)}," for s in sol.sources),
        dps=dps,
        args=repr(tuple(arg_names(task, dps))),
    )
    compiled = any(re.search(r"\bload_inline\b|\bcpp_extension\b", sol.source(p)) for p in py)
    return Converted(
        source=text,
        language="cpp_ext" if compiled else "triton",
        how=f"{sol.spec.language} solution {sol.name!r}: {len(py)} Python files imported as a package, entry "
        f"{sol.spec.entry_point}",
    )


def _literal(text: str) -> str:
    """A Python literal for `text`, readable (a raw triple-quoted string) where that is exact."""
    if "'''" not in text and not text.endswith(("\\", "'")) and "\r" not in text:
        lit = "r'''" + text + "'''"
        try:
            if ast.literal_eval(lit) == text:
                return lit
        except (SyntaxError, ValueError):
            pass  # e.g. a lone backslash before a quote: the escaped form below is exact
    return repr(text)


_COMPILED_TEMPLATE = '''"""A FlashInfer-Bench {language} solution ({binding} binding), as a ksearch candidate.

Generated from the Solution JSON. SOURCES are the solution's files, unchanged; ksearch.gpu.fib_build builds
them as FlashInfer-Bench does, and `run` calls the entry point FLASHINFER_SOLUTION["spec"]["entry_point"]
positionally (inputs, then outputs in destination-passing style). `ksearch export --solution` writes
the files back.
"""

from ksearch.gpu import fib_build

FLASHINFER_SOLUTION = {meta}

SOURCES = {{
{sources}
}}

DESTINATION_PASSING = {dps}
_ARGS = {args}
_entry = fib_build.build(FLASHINFER_SOLUTION, SOURCES)


def run(*args, **kwargs):
    kwargs.update(zip(_ARGS, args))
    return _entry(*[kwargs[n] for n in _ARGS])
'''


def _compiled_candidate(sol: Solution, task: Task, check_env: bool) -> Converted:
    entry = sol.entry_file
    if not entry.endswith(_COMPILED_SUFFIXES):
        raise SolutionError(
            f"spec.entry_point: a {sol.spec.language} solution's entry file is C/C++/CUDA "
            f"({', '.join(_COMPILED_SUFFIXES)}), got {entry!r}"
        )
    binding = sol.spec.binding or "tvm-ffi"
    if check_env and binding == "tvm-ffi" and importlib.util.find_spec("tvm_ffi") is None:
        raise SolutionError(
            f"the solution {sol.name!r} uses the tvm-ffi binding (FlashInfer-Bench's default for C++/CUDA), "
            "which needs the apache-tvm-ffi package in ksearch's environment (pip install apache-tvm-ffi); "
            'a solution written as a torch extension can say "binding": "torch" instead'
        )
    dps = sol.spec.destination_passing_style
    sources = "\n".join(f"    {s.path!r}: {_literal(s.content)}," for s in sol.sources)
    text = _COMPILED_TEMPLATE.format(
        language=sol.spec.language,
        binding=binding,
        meta=pprint.pformat(_meta(sol), width=100, sort_dicts=False),
        sources=sources,
        dps=dps,
        args=repr(tuple(arg_names(task, dps))),
    )
    return Converted(
        source=text,
        language="cpp_ext",
        how=f"{sol.spec.language} solution {sol.name!r}: {len(sol.sources)} file(s) built with the {binding} "
        f"binding, entry {sol.spec.entry_point}",
    )


def bundled_python(source: str) -> dict[str, str]:
    """The Python files a candidate converted from a Solution of several Python files holds in its module-level
    `SOURCES` (path -> text), for the static checks that read a candidate's Python; empty for any other."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SOURCES" for t in stmt.targets
        ):
            try:
                files = ast.literal_eval(stmt.value)
            except ValueError:
                return {}
            if isinstance(files, dict):
                return {str(k): v for k, v in files.items() if str(k).endswith(".py") and isinstance(v, str)}
    return {}


def candidate_from_solution_text(text: str, task: Task, where: str = "the Solution JSON") -> Converted:
    return solution_to_candidate(parse_solution(text, where), task)
