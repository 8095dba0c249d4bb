"""Validation of the task extras (WORKLOADS, TOLERANCE, META) into the Task model, with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ksearch.gpu.dtypes import FLOAT_DTYPES, FP8_DTYPES, accepted_dtypes, canonical_dtype
from ksearch.gpu.task import Bound, Split, TaskError, Tolerance, Workload


def task_error(path: Path | str, field: str, message: str) -> TaskError:
    """One error format everywhere: '<file>: <field>: <what is wrong; what is accepted>'."""
    return TaskError(f"{path}: {field}: {message}")


def _first_error(exc: ValidationError, field: str) -> tuple[str, str]:
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{field}{loc}", "unknown key"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] != "value_error":
        msg += f", got {err['input']!r}"
    return f"{field}{loc}", msg


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    split: Split = "search"


def parse_workloads(raw: Any, path: Path | str, field: str = "WORKLOADS") -> list[Workload]:
    if not isinstance(raw, list | tuple) or not raw:
        raise task_error(
            path, field, 'must be a non-empty list of {"name": ..., "params": {...}, "split": ...} mappings'
        )
    out: list[Workload] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise task_error(path, f"{field}[{i}]", f"must be a mapping, got {type(item).__name__}")
        try:
            spec = WorkloadSpec(**item)
        except ValidationError as exc:
            where, msg = _first_error(exc, f"{field}[{i}]")
            raise task_error(
                path, where, f"{msg} (accepted keys: name, params, split in search|heldout|smoke)"
            ) from None
        out.append(Workload(name=spec.name, params=spec.params, split=spec.split))
    names = [w.name for w in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise task_error(path, field, f"workload names must be unique; repeated: {', '.join(dupes)}")
    if not any(w.split == "search" for w in out):
        raise task_error(path, field, "needs at least one workload with split 'search'")
    return out


_FLOATS = (*FLOAT_DTYPES, *FP8_DTYPES)


def parse_tolerance(raw: Any, path: Path | str, field: str = "TOLERANCE") -> Tolerance:
    """TOLERANCE = {"atol": float | {dtype: float}, "rtol": ..., "mismatch_ratio": float}.

    A dict merges over the defaults per dtype; a bare number applies to every float dtype.
    """
    if raw is None:
        return Tolerance()
    if not isinstance(raw, dict):
        raise task_error(path, field, "must be a mapping with keys atol, rtol, mismatch_ratio")
    unknown = set(raw) - {"atol", "rtol", "mismatch_ratio"}
    if unknown:
        raise task_error(
            path, f"{field}.{sorted(unknown)[0]}", "unknown key; accepted: atol, rtol, mismatch_ratio"
        )
    base = Tolerance()
    merged: dict[str, Any] = {}
    for key in ("atol", "rtol"):
        table = dict(getattr(base, key))
        value = raw.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            table.update({d: float(value) for d in _FLOATS})
        elif isinstance(value, dict):
            for dname, v in value.items():
                canon = canonical_dtype(dname)
                if canon is None:
                    raise task_error(
                        path, f"{field}.{key}.{dname}", f"unknown dtype; accepted: {accepted_dtypes()}"
                    )
                if not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
                    raise task_error(path, f"{field}.{key}.{dname}", f"must be a number >= 0, got {v!r}")
                table[canon] = float(v)
        elif value is not None:
            raise task_error(
                path, f"{field}.{key}", f"must be a number or a {{dtype: number}} mapping, got {value!r}"
            )
        merged[key] = table
    if "mismatch_ratio" in raw:
        merged["mismatch_ratio"] = raw["mismatch_ratio"]
    try:
        return Tolerance(**merged)
    except ValidationError as exc:
        where, msg = _first_error(exc, field)
        raise task_error(path, where, msg) from None


class MetaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: str = ""
    dtype: str = "float32"
    bound: Bound = "unknown"
    title: str = ""

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, v: str) -> str:
        canon = canonical_dtype(v)
        if canon is None:
            raise ValueError(f"unknown dtype {v!r}; accepted: {accepted_dtypes()}")
        return canon


def parse_meta(raw: Any, path: Path | str, field: str = "META") -> MetaSpec:
    if raw is None:
        return MetaSpec()
    if not isinstance(raw, dict):
        raise task_error(path, field, "must be a mapping with keys op, dtype, bound, title")
    try:
        return MetaSpec(**raw)
    except ValidationError as exc:
        where, msg = _first_error(exc, field)
        raise task_error(path, where, f"{msg} (accepted keys: op, dtype, bound, title)") from None
