"""The program Nsight Compute profiles: one workload of one candidate, a few profiled calls.

    python -m ksearch.gpu.worker.profile_driver SPEC.json

SPEC holds the task (as JSON), the candidate (id, language, source), the workload name and a seed.
Warm-up calls run first (Triton compiles, caches fill); only the `calls` calls between
cudaProfilerStart/Stop are profiled (ncu runs with --profile-from-start off). Exit status 0 on
success, 3 when the candidate raised (the message is on stderr).
"""

from __future__ import annotations

import json
import os
import sys


def main(spec_path: str) -> int:
    os.dup2(2, 1)  # keep ncu's CSV on stdout free of the candidate's prints
    spec = json.loads(open(spec_path).read())
    import torch

    from ksearch.gpu.task import Task
    from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module

    task = Task.model_validate(spec["task"])
    rt = TaskRuntime(task)
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    wl = task.workload(spec["workload"])
    cand = spec["candidate"]
    try:
        module = load_candidate_module(cand["source"], f"ksearch_{cand['id']}")
        with torch.no_grad():
            fn = rt.build_candidate(module, wl, str(device))
            inputs = rt.make_inputs(wl, int(spec.get("seed", 0)), str(device))
            for _ in range(int(spec.get("warmup", 3))):
                fn(inputs)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            for _ in range(int(spec.get("calls", 1))):  # several calls: the summary takes the median
                fn(inputs)
                torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
    except Exception as e:  # reported to the sandbox through stderr and the exit status
        print(f"candidate failed under the profiler: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
