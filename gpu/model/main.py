"""`python -m ksearch.gpu.model`: one request (JSON on stdin) -> one JSON report (the last line on stdout).

Run by tools/model.py in a process of its own, so that the process that asks (the CLI, the MCP server) never imports
torch nor runs the model's code. Without a GPU, Triton kernels run in its interpreter (TRITON_INTERPRET=1 is set
before any kernel file is imported), and torch on the CPU uses one thread, which keeps
its timings of small operators steady. Exit status 0 with a report, 1 with a report whose `error` says what failed.
"""

from __future__ import annotations

import os
import sys
import traceback

from ksearch.gpu.model.report import PlugReport, ProfileReport, Request


def main(argv: list[str] | None = None) -> int:
    req = Request.model_validate_json(sys.stdin.read())
    import torch

    if not torch.cuda.is_available() or req.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
        torch.set_num_threads(1)  # CPU timings: one thread, no pool waking up between small ops
        from ksearch.gpu.tasks.rt import interp_bf16, interp_pace

        interp_bf16.install()  # a bf16 tl.dot is checked by its values, not its bits
        interp_pace.install()  # the interpreter's builtins listed once, not before every helper call
    from ksearch.gpu.task import TaskError

    report: ProfileReport | PlugReport
    try:
        if req.op == "profile":
            from ksearch.gpu.model.profile import run_profile

            report = run_profile(req)
        else:
            from ksearch.gpu.model.plug import run_plug

            report = run_plug(req)
    except TaskError as e:
        report = _failed(req, str(e))
    except Exception as e:
        traceback.print_exc()
        report = _failed(req, f"{type(e).__name__}: {e}")
    sys.stdout.write("\n" + report.model_dump_json() + "\n")
    sys.stdout.flush()
    return 1 if report.error else 0


def _failed(req: Request, error: str) -> ProfileReport | PlugReport:
    if req.op == "profile":
        return ProfileReport(model=req.model, device="", error=error)
    return PlugReport(model=req.model, error=error)


if __name__ == "__main__":
    raise SystemExit(main())
