"""The jail on a GPU machine: what must work inside it works, and what a hostile candidate tries is caught.

    python bench/jail_gpu.py --out PATH [--budget-s 540] [--parts setup,triton,nvrtc,ext,ncu,hostile,gpus]

Writes a JSON summary to PATH (rewritten after every part, so a hang or the budget loses only what
remains), with "all_ok" at the top. Every evaluation runs jailed (isolation="namespaces": the run stops at
once where the jail cannot be built, saying why).

  setup    the jail's probe, the isolation reported, the GPUs and the device node each worker is shown;
  triton   a Triton candidate end to end on row_sum (JIT inside the jail), with both baselines (eager and
           torch.compile, measured in a fresh jailed process);
  nvrtc    a CUDA candidate through NVRTC (CuPy) on row_sum;
  ext      a CUDA C++ torch extension (nvcc and ninja inside the jail) on row_sum;
  ncu      Nsight Compute on the Triton and the NVRTC candidate (ncu and its target inside one jail,
           talking over the jail's own loopback);
  hostile  on the affine test task (a task file outside the package, bound into the jail): a probe looking
           for the parent's secrets, the host's processes, the host's 127.0.0.1 / ::1 listeners opened here,
           an external address, files in $HOME, /tmp and a search database, and other GPUs' nodes; then a
           fork bomb, a scratch filler, a /dev/shm filler and a host-memory hog, each a `crash` naming its
           resource_limit kind, each followed by a correct candidate;
  gpus     with two GPUs or more: a probe on every worker at once, each seeing one GPU, its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import socket
import sqlite3
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ksearch.gpu.jail import launch as jail  # noqa: E402
from ksearch.gpu.jail import view as jail_view  # noqa: E402
from ksearch.gpu.jail.limits import Limits  # noqa: E402
from ksearch.gpu.sandbox.local import LocalSandbox  # noqa: E402
from ksearch.gpu.tasks import load_task  # noqa: E402
from ksearch.worldmodel.models import Candidate, EvalSettings, Evaluation  # noqa: E402

CANDS = ROOT / "bench" / "sandbox_candidates"
FIXTURES = ROOT / "tests" / "sandbox" / "fixtures"
WL = "262144x1024"  # row_sum: ~100 us on an H200
TOKEN = uuid.uuid4().hex[:12]
SECRET = f"sk-jail-bench-{TOKEN}"

PROBE = r"""
import errno, glob, json, os, socket
import torch

T = json.loads(%r)


def _try(fn):
    try:
        return fn()
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)


def _connect(host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(5)
    try:
        s.connect((host, port))
        return "connected"
    finally:
        s.close()


def _read(path):
    with open(path, "rb") as f:
        return "read" + (" SECRET" if T["secret"].encode() in f.read() else "")


def probe():
    seen = {"env": [k for k, v in os.environ.items() if T["secret"] in v]}
    pids = [d for d in os.listdir("/proc") if d.isdigit()]
    seen["pids"] = len(pids)
    seen["environ_secret"] = [p for p in pids + [str(T["host_pid"])]
                              if _try(lambda p=p: _read(f"/proc/{p}/environ")) == "read SECRET"]
    seen["net"] = {name: _try(lambda hp=hp: _connect(*hp)) for name, hp in T["net"].items()}
    seen["interfaces"] = [n for _, n in socket.if_nameindex()]
    seen["files"] = {name: _try(lambda p=p: _read(p)) for name, p in T["files"].items()}
    seen["nodes"] = sorted(glob.glob("/dev/nvidia*"))
    seen["others"] = {f"/dev/nvidia{n}": _try(lambda n=n: os.close(os.open(f"/dev/nvidia{n}", os.O_RDWR)) or "opened")
                      for n in range(16) if f"/dev/nvidia{n}" not in seen["nodes"]}
    seen["cuda_count"] = torch.cuda.device_count()
    seen["cuda_uuid"] = str(torch.cuda.get_device_properties(0).uuid) if torch.cuda.is_available() else None
    seen["visible"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return seen


class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("PROBE" + json.dumps(probe(), separators=(",", ":")) + "END")
"""


def summary(ev: Evaluation) -> dict[str, Any]:
    t = ev.timings[0] if ev.timings else None
    return {
        "status": ev.status,
        "seconds": round(ev.seconds, 2),
        "median_us": round(t.median_us, 2) if t else None,
        "eager_us": t.eager_us if t else None,
        "compile_us": t.compile_us if t else None,
        "error": (ev.error or "")[:600] or None,
        "flags": [f[:200] for f in ev.flags][:6],
    }


def probed(ev: Evaluation) -> dict[str, Any] | None:
    m = re.search(r"PROBE(\{.*?\})END", ev.error or "")
    return json.loads(m.group(1)) if m else None


class Report:
    def __init__(self, out: Path, budget_s: float) -> None:
        self.out = out
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.data: dict[str, Any] = {
            "what": "the candidate jail on a GPU machine (bench/jail_gpu.py)",
            "host": {"kernel": platform.release(), "python": platform.python_version()},
            "parts": {},
        }

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def save(self) -> None:
        parts = self.data["parts"].values()
        self.data["all_ok"] = bool(self.data["parts"]) and all(p.get("ok") is True for p in parts)
        self.data["seconds"] = round(time.monotonic() - self.t0, 1)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.data, indent=1, default=str))

    async def part(self, name: str, fn: Callable[[], Awaitable[dict[str, Any]]], need_s: float = 30) -> None:
        if self.left() < need_s:
            self.data["parts"][name] = {"ok": None, "skipped": f"budget: {self.left():.0f} s left"}
            self.save()
            return
        t = time.monotonic()
        try:
            self.data["parts"][name] = await asyncio.wait_for(fn(), max(10.0, self.left() - 5))
        except BaseException as e:  # a part's failure is its result; the next part still runs
            if isinstance(e, KeyboardInterrupt):
                raise
            self.data["parts"][name] = {"ok": False, "error": traceback.format_exc()[-3000:]}
        self.data["parts"][name]["part_seconds"] = round(time.monotonic() - t, 1)
        self.save()
        print(f"{name}: ok={self.data['parts'][name].get('ok')}", flush=True)


def st(seed: int, wl: str = WL, trials: int = 2) -> EvalSettings:
    return EvalSettings(seed=seed, trials=trials, workloads=[wl])


async def run(args: argparse.Namespace) -> None:
    rep = Report(Path(args.out), args.budget_s)
    parts = args.parts.split(",")
    reason = jail.unavailable_reason()
    rep.data["jail"] = reason or "available"
    if reason is not None:
        rep.data["parts"]["setup"] = {"ok": False, "error": f"no jail on this machine: {reason}"}
        rep.save()
        return
    row_sum = load_task("row_sum")
    affine = load_task(str(FIXTURES / "affine.py"))
    scratch = Path(tempfile.mkdtemp(prefix="ksearch-jail-bench-"))
    sb = LocalSandbox(scratch_dir=scratch / "main", n_workers=1, isolation="namespaces", call_timeout_s=120.0)
    triton_seed = Candidate.of(row_sum.seeds["triton"], "triton")
    nvrtc = Candidate.of((CANDS / "row_sum_nvrtc.py").read_text(), "cuda")
    try:

        async def setup() -> dict[str, Any]:
            await sb.start()
            w = sb.pool.workers[0]
            nodes, visible = w.gpu_view()
            return {
                "ok": sb.jailed and sb.isolation == jail.ISOLATED and len(nodes) == 1,
                "isolation": sb.isolation,
                "gpus": {k: vars(v) for k, v in jail_view.gpu_devices().items()},
                "worker_nodes": nodes,
                "worker_cuda_visible_devices": visible,
                "hello": w.hello,
            }

        async def triton() -> dict[str, Any]:
            ev = await sb.evaluate(triton_seed, row_sum, st(11))
            s = summary(ev)
            ok = ev.status == "ok" and bool(s["median_us"]) and bool(s["eager_us"])
            return {"ok": ok and bool(s["compile_us"]), **s}

        async def nvrtc_part() -> dict[str, Any]:
            ev = await sb.evaluate(nvrtc, row_sum, st(12))
            return {"ok": ev.status == "ok", **summary(ev)}

        async def ext() -> dict[str, Any]:
            cand = Candidate.of((CANDS / "row_sum_ext.py").read_text(), "cpp_ext")
            ev = await sb.evaluate(cand, row_sum, st(13))
            return {"ok": ev.status == "ok", **summary(ev)}

        async def ncu() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, cand in (("triton", triton_seed), ("nvrtc", nvrtc)):
                try:
                    prof = await sb.profile(cand, row_sum, WL)
                    out[name] = {"duration_us": prof.duration_us, "kernel": prof.kernel}
                except Exception as e:
                    out[name] = {"error": f"{type(e).__name__}: {e}"[:1500]}
            out["ok"] = all(bool(v.get("duration_us")) for v in out.values() if isinstance(v, dict))
            return out

        async def hostile() -> dict[str, Any]:
            return await hostile_part(scratch / "hostile", affine)

        async def gpus() -> dict[str, Any]:
            return await gpus_part(scratch / "gpus", affine)

        table = {"setup": setup, "triton": triton, "nvrtc": nvrtc_part, "ext": ext, "ncu": ncu}
        table |= {"hostile": hostile, "gpus": gpus}
        for name in parts:
            if name == "hostile" or name == "gpus":
                await sb.close()  # one GPU worker at a time
            await rep.part(name, table[name], need_s=60 if name in ("hostile", "ext") else 20)
    finally:
        await sb.close()
        rep.save()
    print(json.dumps(rep.data, indent=1, default=str)[:20000])


@contextlib.contextmanager
def planted(base: Path) -> Any:
    """Listeners on the host's loopback and files a candidate must not reach; what the probe is given."""
    socks = []
    net: dict[str, list[Any]] = {"external": ["1.1.1.1", 443]}
    for name, fam, host in (("v4", socket.AF_INET, "127.0.0.1"), ("v6", socket.AF_INET6, "::1")):
        with contextlib.suppress(OSError):
            s = socket.create_server((host, 0), family=fam)
            socks.append(s)
            net[name] = [host, s.getsockname()[1]]
    home = Path.home() / f".ksearch-jail-bench-{TOKEN}"
    tmp = Path(f"/tmp/ksearch-jail-bench-{TOKEN}")
    db = base / ".ksearch" / "ksearch.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE secret (v TEXT)")
    con.execute("INSERT INTO secret VALUES (?)", (SECRET,))
    con.commit()
    con.close()
    home.write_text(SECRET)
    tmp.write_text(SECRET)
    files = {"home": str(home), "tmp": str(tmp), "db": str(db), "repo": str(ROOT / "README.md")}
    try:
        yield {"secret": SECRET, "host_pid": os.getpid(), "net": net, "files": files}
    finally:
        home.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
        for s in socks:
            s.close()


def _probe_ok(seen: dict[str, Any] | None) -> dict[str, bool]:
    if seen is None:
        return {"reported": False}
    gpu_nodes = [n for n in seen["nodes"] if re.fullmatch(r"/dev/nvidia\d+", n)]
    return {
        "no_secret": not seen["env"] and not seen["environ_secret"],
        "own_processes_only": seen["pids"] <= 8,
        "only_loopback": seen["interfaces"] == ["lo"],
        "host_loopback_refused": all(
            seen["net"].get(k) == "ECONNREFUSED" for k in ("v4", "v6") if k in seen["net"]
        ),
        "external_unreachable": seen["net"]["external"] == "ENETUNREACH",
        "files_unreachable": all(v in ("ENOENT", "EACCES") for v in seen["files"].values()),
        "one_gpu_node": len(gpu_nodes) == 1 and seen["cuda_count"] == 1,
        "other_gpus_absent": all(v == "ENOENT" for v in seen["others"].values()),
    }


async def hostile_part(scratch: Path, affine: Any) -> dict[str, Any]:
    limits = Limits(processes=64, disk_bytes=64 << 20, cache_growth_bytes=1 << 30)
    os.environ["KSEARCH_JAIL_BENCH"] = SECRET
    sb = LocalSandbox(
        scratch_dir=scratch, n_workers=1, isolation="namespaces", memory_limit_gb=8.0, limits=limits
    )
    good = Candidate.of((FIXTURES / "candidates" / "good_triton.py").read_text(), "triton")
    smoke = EvalSettings(seed=3, trials=1, workloads=["small"])
    out: dict[str, Any] = {}
    try:
        with planted(scratch) as given:
            ev = await sb.correctness(Candidate.of(PROBE % json.dumps(given), "triton"), affine, smoke)
            seen = probed(ev)
            checks = _probe_ok(seen)
            after = await sb.evaluate(good, affine, smoke)
            out["probe"] = {"seen": seen, "checks": checks, "error": None if seen else (ev.error or "")[:800]}
            out["probe"]["ok"] = all(checks.values()) and after.status == "ok"
            out["probe"]["next_candidate"] = after.status
        for name, kind in (
            ("fork_bomb", "process count"),
            ("scratch_filler", "scratch disk"),
            ("shm_filler", "scratch disk"),
            ("host_hog", "host memory"),
        ):
            src = (FIXTURES / "candidates" / f"{name}.py").read_text()
            ev = await sb.correctness(Candidate.of(src, "triton"), affine, smoke)
            after = await sb.evaluate(good, affine, smoke)
            caught = ev.status == "crash" and f"resource_limit: {kind}" in (ev.error or "")
            out[name] = {
                "ok": caught and after.status == "ok",
                "status": ev.status,
                "error": (ev.error or "")[:400],
                "next_candidate": after.status,
                "seconds": round(ev.seconds, 1),
            }
    finally:
        await sb.close()
        os.environ.pop("KSEARCH_JAIL_BENCH", None)
    out["ok"] = all(v.get("ok") is True for v in out.values() if isinstance(v, dict))
    return out


async def gpus_part(scratch: Path, affine: Any) -> dict[str, Any]:
    devices = jail_view.gpu_devices()
    if len(devices) < 2:
        return {"ok": True, "skipped": f"{len(devices)} GPU: nothing else to hide"}
    sb = LocalSandbox(scratch_dir=scratch, isolation="namespaces", call_timeout_s=120.0)
    smoke = EvalSettings(seed=3, trials=1, workloads=["small"])
    try:
        with planted(scratch) as given:
            src = PROBE % json.dumps(given)
            evs = await asyncio.gather(
                *(
                    sb.correctness(Candidate.of(src + f"\n# worker {i}\n", "triton"), affine, smoke)
                    for i in range(len(sb.pool.workers))
                )
            )
        seen = [probed(ev) for ev in evs]
        uuids = [s["cuda_uuid"] if s else None for s in seen]
        nodes = [
            tuple(n for n in s["nodes"] if re.fullmatch(r"/dev/nvidia\d+", n)) if s else () for s in seen
        ]
        ok = all(s is not None and s["cuda_count"] == 1 for s in seen)
        ok = ok and len(set(uuids)) == len(seen) and len(set(nodes)) == len(seen)
        return {"ok": ok, "workers": len(seen), "uuids": uuids, "nodes": nodes}
    finally:
        await sb.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the JSON summary to write")
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--parts", default="setup,triton,nvrtc,ext,ncu,hostile,gpus")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
