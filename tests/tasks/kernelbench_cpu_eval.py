"""KernelBench's correctness check of a ModelNew file, as far as a CPU runs it (a script the export tests start).

    python kernelbench_cpu_eval.py PROBLEM.py MODELNEW.py PRECISION [KERNELBENCH_SRC]

KernelBench's `eval_kernel_against_ref` asserts CUDA before anything else, so this follows its steps on the CPU:
load the problem (`load_original_model_and_inputs`) and the ModelNew file (for Triton, `load_custom_model_with_tempfile`:
an import from a file of its own), seed, cast the init inputs and both models to the precision (`_process_input_tensor`,
`.to(dtype=...)`), then `run_and_check_correctness`'s trials: inputs from a seed, cast, both models called,
`torch.allclose` at `get_tolerance_for_precision`. With KERNELBENCH_SRC (KernelBench's `src/kernelbench` folder) those
functions are KernelBench's own and its static checker (`validate_kernel_static`, backend triton) runs first; without
it, the same steps written here. Prints one JSON line: {"static": ..., "trials": [...], "ok": bool}. Run it with
TRITON_INTERPRET=1 and without ksearch on the path: the file must stand alone.
"""

import importlib
import json
import sys
import types

import torch

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}  # KernelBench's get_tolerance_for_precision
DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _own_load_problem(src):
    context = {}
    exec(src, context)
    return context["Model"], context["get_init_inputs"], context["get_inputs"]


def _own_load_new(src):
    import importlib.util
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("temp_module", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ModelNew


def main():
    problem, new, precision = sys.argv[1:4]
    ref_src, new_src = open(problem).read(), open(new).read()
    out = {"static": None, "trials": []}
    dtype, tol = DTYPE[precision], TOLERANCE[precision]

    def cast(x):
        return x.to(dtype=dtype) if isinstance(x, torch.Tensor) else x

    if len(sys.argv) > 4:  # KernelBench's own functions (its package __init__ imports an LLM client: skipped)
        pkg = types.ModuleType("kernelbench")
        pkg.__path__ = [sys.argv[4]]
        sys.modules["kernelbench"] = pkg
        kb = importlib.import_module("kernelbench.eval")
        checker = importlib.import_module("kernelbench.kernel_static_checker")
        valid, errors, warnings = checker.validate_kernel_static(
            new_src, backend="triton", precision=precision
        )
        out["static"] = {"valid": valid, "errors": errors, "warnings": warnings}
        model_cls, get_init_inputs, get_inputs = kb.load_original_model_and_inputs(ref_src, {})
        new_cls, _ = kb.load_custom_model_with_tempfile(new_src, entry_point="ModelNew")
        dtype, tol = kb.get_torch_dtype_from_string(precision), kb.get_tolerance_for_precision(precision)

        def cast(x):  # KernelBench's own, when it is there
            return kb._process_input_tensor(x, "cpu", "triton", dtype)

    else:
        model_cls, get_init_inputs, get_inputs = _own_load_problem(ref_src)
        new_cls = _own_load_new(new_src)
    seed = 42
    torch.manual_seed(seed)
    init = [cast(x) for x in get_init_inputs()]
    with torch.no_grad():
        torch.manual_seed(seed)
        reference = model_cls(*init).to(device="cpu", dtype=dtype)
        torch.manual_seed(seed)
        candidate = new_cls(*init).to(device="cpu", dtype=dtype)
        torch.manual_seed(seed)
        trial_seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(3)]
        for trial_seed in trial_seeds:
            torch.manual_seed(trial_seed)
            inputs = [cast(x) for x in get_inputs()]
            expected, got = reference(*inputs), candidate(*inputs)
            out["trials"].append(
                {
                    "dtype": str(got.dtype),
                    "shape_ok": expected.shape == got.shape,
                    "allclose": bool(torch.allclose(expected, got, atol=tol, rtol=tol)),
                }
            )
    out["ok"] = all(t["shape_ok"] and t["allclose"] for t in out["trials"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
