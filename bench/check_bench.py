"""kgate check at repository scale, against the compiler's own floor, in one run on one machine.

    python bench/check_bench.py [--modules 10] [--cuda-files 4] [--keep DIR]

Builds a synthetic repository (bench/synth.py: Triton elementwise, reduction
and GEMM kernels in two variants each, and CUDA C++ files of five kernels
each) and measures, printing each figure and each ratio:

- the compile floor: the same variants compiled by calling triton.compile and
  nvcc directly, serially, with empty caches;
- `kgate check` cold (all caches empty), warm (nothing changed) and
  incremental (one kernel's source edited), and the edited kernel's own
  compile time;
- peak memory: the resident set of kgate and all its workers together;
- `python -c "import kgate"`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth  # noqa: E402

FLOOR = r'''
import json, os, subprocess, sys, time, warnings, importlib
warnings.filterwarnings("ignore")
root, kernels_json, cuda_json, only = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, root)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
started = time.perf_counter()
for job in json.loads(kernels_json):
    if only and job["kernel"] != only:
        continue
    module, _, name = job["kernel"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    sig = dict(job["signature"])
    for k in job["constexprs"]:
        sig[k] = "constexpr"
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a, t in job["signature"].items() if t.startswith("*")}
    triton.compile(ASTSource(fn, sig, job["constexprs"], attrs), target=GPUTarget("cuda", 120, 32),
                   options={"num_warps": job["num_warps"], "num_stages": job["num_stages"]})
for source in json.loads(cuda_json):
    subprocess.run(["nvcc", "-cubin", "-Xptxas", "-v", "--generate-code=arch=compute_120a,code=sm_120a",
                    source, "-o", os.devnull], check=True, capture_output=True)
print(time.perf_counter() - started)
'''


class PeakRss:
    """Samples the summed resident set of a process and all its descendants."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        out, stack = [], [self.pid]
        while stack:
            pid = stack.pop()
            out.append(pid)
            stack.extend(children.get(pid, []))
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._tree():
                try:
                    with open(f"/proc/{pid}/status") as handle:
                        for line in handle:
                            if line.startswith("VmRSS:"):
                                total += int(line.split()[1])
                except OSError:
                    pass
            self.peak_kb = max(self.peak_kb, total)
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kb


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None, rss: bool = False) -> tuple[float, int, int]:
    """(seconds, exit code, peak RSS in kB) of one command."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = PeakRss(proc.pid) if rss else None
    _out, err = proc.communicate()
    seconds = time.perf_counter() - started
    peak = sampler.stop() if sampler else 0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return seconds, proc.returncode, peak


def floor_jobs(root: Path) -> list[dict]:
    """Every Triton variant as kgate registers it (from the generated kgate.toml)."""
    import tomllib

    config = tomllib.loads((root / "kgate.toml").read_text())
    jobs = []
    for entry in config.get("triton", []):
        base = {"kernel": entry["kernel"], "signature": entry["signature"], "constexprs": entry["constexprs"],
                "num_warps": entry.get("num_warps", 4), "num_stages": entry.get("num_stages", 3)}
        jobs.append(base)
        for override in entry.get("variants", []):
            extra = {k: v for k, v in override.items() if k not in ("num_warps", "num_stages")}
            jobs.append({**base, "constexprs": {**base["constexprs"], **extra},
                         "num_warps": override.get("num_warps", base["num_warps"]),
                         "num_stages": override.get("num_stages", base["num_stages"])})
    return jobs


def run_floor(root: Path, only: str = "", cuda: bool = True) -> float:
    import json

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRITON_CACHE_DIR": cache, "TRITON_ALWAYS_COMPILE": "1"}
        env.pop("TRITON_INTERPRET", None)
        sources = sorted(str(p) for p in (root / "csrc").glob("*.cu")) if cuda else []
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR, str(root), json.dumps(floor_jobs(root)), json.dumps(sources),
                        only], check=True, env=env, capture_output=True)
        return time.perf_counter() - started


def kernel_compile_time(root: Path, module_prefix: str) -> float:
    """Serial triton.compile time of the kernels an edit of one kernel makes kgate recompile."""
    import json

    jobs = [j for j in floor_jobs(root) if j["kernel"].startswith(module_prefix)]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRITON_CACHE_DIR": cache, "TRITON_ALWAYS_COMPILE": "1"}
        out = subprocess.run([sys.executable, "-c", FLOOR, str(root), json.dumps(jobs), "[]", ""], check=True,
                             env=env, capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])


def median_time(argv: list[str], cwd: Path, runs: int) -> float:
    return statistics.median(timed(argv, cwd)[0] for _ in range(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", type=int, default=10, help="Python modules of 5 kernels x 2 variants each")
    parser.add_argument("--cuda-files", type=int, default=4, help="CUDA files of 5 kernels each")
    parser.add_argument("--keep", metavar="DIR", help="build the repository here and keep it")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    # An installed kgate has its bytecode compiled (pip does it); a checkout run with
    # PYTHONDONTWRITEBYTECODE would otherwise compile kgate's sources on every start.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    package = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package / "kgate"), str(package / "rules")],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kgate-bench-"))
    if workdir.exists() and args.keep:
        shutil.rmtree(workdir)
    counts = synth.generate(workdir, modules=args.modules, cuda_files=args.cuda_files)
    kgate = [sys.executable, "-m", "kgate", "check", "-q"]
    print(f"machine: {cores} cores, Python {sys.version.split()[0]}, {os.uname().machine}")
    print(f"synthetic repository: {counts['triton_variants']} Triton kernel variants in {counts['modules']} modules, "
          f"{counts['cuda_kernels']} CUDA kernels in {args.cuda_files} files, target sm_120a")
    try:
        floor = run_floor(workdir, cuda=args.cuda_files > 0)
        shutil.rmtree(workdir / ".kgate-cache", ignore_errors=True)
        cold, cold_code, peak_kb = timed(kgate, workdir, rss=True)
        warm = median_time(kgate, workdir, 5)
        import_time = median_time([sys.executable, "-c", "import kgate"], workdir, 10)
        (workdir / "NOTES.md").write_text("a file no kernel reads\n")
        warm_full, _code, _peak = timed(kgate, workdir)
        # An edit, then the check; three times (each a different edit), the median.
        rounds = []
        for round_ in (1, 2, 3):
            edited = synth.edit_one_kernel(workdir, round_)
            rounds.append(timed(kgate, workdir)[0])
        incremental = statistics.median(rounds)
        own = statistics.median(kernel_compile_time(workdir, "synth.k000:elementwise_000_0") for _ in range(3))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    cold_target = 1.15 * floor / cores + 2
    warm_target = min(1.0, 2 * import_time)
    incremental_target = warm + 1.15 * own
    rows = [
        ("compile floor (serial triton.compile + nvcc)", floor, None, None),
        ("kgate check cold", cold, cold_target, "1.15 x floor / cores + 2 s"),
        ("kgate check warm (nothing changed)", warm, warm_target, "min(1 s, 2 x import kgate)"),
        ('python -c "import kgate"', import_time, None, None),
        ("kgate check warm, full path (an unrelated file added)", warm_full, None, None),
        (f"kgate check incremental ({edited.name} edited, median of 3)", incremental, incremental_target,
         "warm + 1.15 x the edited kernel's compile"),
        ("the edited kernel's own compile time (median of 3)", own, None, None),
    ]
    print(f"{'measure':<52} {'seconds':>9} {'target':>9} {'ratio':>7}  target rule")
    for name, value, target, rule in rows:
        if target is None:
            print(f"{name:<52} {value:>9.3f}")
        else:
            print(f"{name:<52} {value:>9.3f} {target:>9.3f} {value / target:>7.2f}  {rule}")
    print(f"{'peak memory, kgate and workers (MB)':<52} {peak_kb / 1024:>9.0f} {2048:>9} "
          f"{peak_kb / 1024 / 2048:>7.2f}  at most 2 GB")
    print(f"cold run exit code {cold_code} (1 = findings, as expected for synthetic kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
