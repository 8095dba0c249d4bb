"""Data type names a task may use (pure strings: importing this needs no torch)."""

from __future__ import annotations

# Canonical names are torch's attribute names (torch.float32, torch.bfloat16, ...).
FLOAT_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
FP8_DTYPES: tuple[str, ...] = ("float8_e4m3fn", "float8_e5m2")
# Two 4-bit floats packed in each byte (torch.float4_e2m1fn_x2, in newer torch only): FlashInfer-Bench's
# `float4_e2m1`. torch has no arithmetic on it, only views: values are compared after decoding (gpu/checks/outputs.py).
FP4_DTYPES: tuple[str, ...] = ("float4_e2m1fn_x2",)
INT_DTYPES: tuple[str, ...] = ("int64", "int32", "int16", "int8", "uint8")
DTYPES: tuple[str, ...] = (*FLOAT_DTYPES, *FP8_DTYPES, *FP4_DTYPES, *INT_DTYPES, "bool")

_ALIASES = {
    "fp32": "float32",
    "float": "float32",
    "f32": "float32",
    "fp16": "float16",
    "half": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "double": "float64",
    "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "e5m2": "float8_e5m2",
    "float4_e2m1": "float4_e2m1fn_x2",  # FlashInfer-Bench's name; it maps it to the same torch dtype
    "long": "int64",
    "int": "int32",
}


def canonical_dtype(name: str) -> str | None:
    """The canonical name for a dtype spelling ('bf16' -> 'bfloat16'), or None if unknown."""
    key = str(name).strip().removeprefix("torch.").lower()
    key = _ALIASES.get(key, key)
    return key if key in DTYPES else None


def accepted_dtypes() -> str:
    return ", ".join(DTYPES)
