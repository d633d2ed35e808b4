"""A cold `kgate check` of a CUDA tree against the compiler's floor, side by side in one run.

    python bench/cuda_floor_bench.py                       # a generated serving-engine csrc (bench/serving_csrc.py)
    python bench/cuda_floor_bench.py --files 16 --heavy-tiles 40
    python bench/cuda_floor_bench.py --src fixtures/cuda   # a project with its own kgate configuration
    python bench/cuda_floor_bench.py --against OTHER/.venv/bin/python --rounds 2  # another revision's kgate, in turn

Printed from one run, each with its wall and CPU seconds:
- the floor: nvcc with kgate's own command line for every file and target (`-cubin -lineinfo -Xptxas -v
  --keep`, the project's flags, the architecture kgate picks), serially and `-j` at a time (longest first, by
  the serial run's times: the best a scheduler can do);
- `kgate check -j N --no-cache` and its ratio to the target, cold at most 1.15 x floor / cores + 2 s;
- `kgate check -j N` with an empty cache, and again with nothing changed;
and whether the three reports (`--format json`) are the same bytes; with `--against`, `--no-cache` by the other
kgate and this one in turn, and whether all their reports are the same bytes. Timings on a shared machine move with its
load; the ratios are taken within one run, the commands one after another.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_csrc


@dataclass(frozen=True)
class Command:
    rel: str
    target: str
    argv: list[str]  # with KEEP and CUBIN standing for the compile's private folder and output
    cwd: str


@dataclass(frozen=True)
class Timed:
    wall: float
    cpu: float  # user + system of the processes it waited for

    def __str__(self) -> str:
        return f"{self.wall:8.1f} s wall {self.cpu:8.1f} s CPU"


def kgate_commands(root: Path) -> list[Command]:
    """The nvcc command kgate runs for each configured file and target (`kgate.compile.cuda_backend.nvcc_argv`)."""
    from kgate.collect.cuda_flags import choose_arch
    from kgate.collect.cuda_sources import cuda_sources
    from kgate.compile.cuda_backend import nvcc_argv
    from kgate.compile.preflight import cuda_compilers
    from kgate.core.config import load_config

    config = load_config(start=root)
    toolchain, _compilers = cuda_compilers(config, config.cuda)
    out = []
    for source in cuda_sources(config):
        for target in config.targets:
            if not source.entry.builds_for(target):
                continue
            arch = choose_arch(source.archs, target)
            payload = {"nvcc": toolchain.nvcc.path, "flags": list(source.flags), "virtual": arch.virtual,
                       "real": arch.real, "source": str(config.root / source.rel), "cwd": str(source.cwd)}
            out.append(Command(source.rel, target, nvcc_argv(payload, Path("KEEP"), Path("KEEP/kernel.cubin")),
                               str(source.cwd)))
    return out


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compile_one(command: Command) -> float:
    """Wall seconds of one nvcc run, in a private folder as kgate's worker gives it (its CPU seconds, when the
    floor runs serially)."""
    keep = tempfile.mkdtemp(prefix="bench-floor-")
    argv = [keep if a == "KEEP" else str(Path(keep) / "kernel.cubin") if a == "KEEP/kernel.cubin" else a
            for a in command.argv]
    started, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(argv, cwd=command.cwd, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    CPU_OF[command.rel] = children_cpu() - cpu
    shutil.rmtree(keep, ignore_errors=True)
    if proc.returncode:
        print(f"  (nvcc failed on {command.rel}: {proc.stderr.decode(errors='replace').strip()[-300:]})")
    return seconds


CPU_OF: dict[str, float] = {}


def floor(commands: list[Command], jobs: int) -> tuple[Timed, list[float]]:
    cpu = children_cpu()
    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        each = list(pool.map(compile_one, commands))
    return Timed(time.perf_counter() - started, children_cpu() - cpu), each


def kgate_check(root: Path, jobs: int, *extra: str, python: str = sys.executable) -> tuple[Timed, bytes]:
    cpu = children_cpu()
    started = time.perf_counter()
    proc = subprocess.run([python, "-m", "kgate", "check", "--format", "json", "--no-baseline", "-j",
                           str(jobs), *extra], cwd=root, capture_output=True, check=False)
    timed = Timed(time.perf_counter() - started, children_cpu() - cpu)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kgate check {' '.join(extra)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return timed, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="a project with a kgate configuration, instead of a generated tree")
    parser.add_argument("--files", type=int, default=8, help="generated .cu files (one of them the heavy one)")
    parser.add_argument("--tiles", type=int, default=3, help="GEMM tiles of a light file (x3 dtypes)")
    parser.add_argument("--heavy-tiles", type=int, default=24, help="GEMM tiles of the heavy file (x3 dtypes)")
    parser.add_argument("-j", "--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--keep", type=Path, help="build the tree here and keep it")
    parser.add_argument("--against", metavar="PYTHON", help="an interpreter whose kgate (another revision's, in its "
                        "own environment) runs `--no-cache` in turn with this one, --rounds times")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the two kgates alternated (--against)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kgate-floor-bench-"))
    root = args.keep or work / "tree"
    try:
        if args.src:
            shutil.copytree(args.src, root, ignore=shutil.ignore_patterns(".kgate-cache"))
            counts = {"files": len(list(root.rglob("*.cu")))}
        else:
            counts = serving_csrc.generate(root, files=args.files, tiles=args.tiles, heavy_tiles=args.heavy_tiles)
        commands = kgate_commands(root)
        cores = args.jobs
        serial, each = floor(commands, 1)
        # -j at a time, longest first by the serial times: the floor a scheduler can reach.
        order = sorted(range(len(commands)), key=lambda i: -each[i])
        parallel, _each = floor([commands[i] for i in order], cores)
        nocache, report = kgate_check(root, cores, "--no-cache")
        shutil.rmtree(root / ".kgate-cache", ignore_errors=True)
        cold, cold_report = kgate_check(root, cores)
        warm, warm_report = kgate_check(root, cores)
        alternated = alternate(root, cores, args.against, args.rounds, report) if args.against else None
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    import json

    data = json.loads(report)
    heaviest = max(range(len(commands)), key=lambda i: each[i])
    target = 1.15 * serial.wall / cores + 2
    # On a loaded machine a serial run's wall time is mostly waiting: its CPU time is the compiler's own work.
    cpu_target = 1.15 * serial.cpu / cores + 2
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load {os.getloadavg()[0]:.1f}; -j {cores}")
    print(f"tree: {args.src or 'generated serving-engine csrc'}: {len(commands)} compile(s) of {counts['files']} "
          f"file(s), {len(data['kernels'])} kernels gated, {len(data['findings'])} findings")
    cpu_of = {c.rel: CPU_OF.get(c.rel, 0.0) for c in commands}
    print(f"heaviest file: {commands[heaviest].rel}, {each[heaviest] / sum(each):.0%} of the serial floor's wall time, "
          f"{cpu_of[commands[heaviest].rel] / max(sum(cpu_of.values()), 1e-9):.0%} of its CPU time")
    print(f"  floor, nvcc serially               {serial}")
    print(f"  floor, nvcc {cores} at a time (longest first){parallel}")
    print(f"  kgate check -j {cores} --no-cache        {nocache}")
    print(f"  kgate check -j {cores}, empty cache      {cold}")
    print(f"  kgate check -j {cores}, nothing changed  {warm}")
    print(f"  target: 1.15 x floor / cores + 2 s = {target:.1f} s; --no-cache / target = {nocache.wall / target:.2f}, "
          f"--no-cache / floor {cores} at a time = {nocache.wall / parallel.wall:.2f}, "
          f"CPU / floor CPU = {nocache.cpu / serial.cpu:.2f}")
    print(f"  target from the floor's CPU time: 1.15 x {serial.cpu:.1f} s / cores + 2 s = {cpu_target:.1f} s; "
          f"--no-cache / target = {nocache.wall / cpu_target:.2f}")
    same = report == cold_report == warm_report
    print(f"  reports of --no-cache, the empty cache and the unchanged run: {'the same bytes' if same else 'DIFFER'}")
    if alternated is not None:
        same = alternated and same
    return 0 if same else 1


def alternate(root: Path, cores: int, other: str, rounds: int, report: bytes) -> bool:
    """`kgate check --no-cache` by `other`'s kgate and by this one, in turn; each run's time, and whether every
    report is this kgate's first one, byte for byte."""
    same = True
    for number in range(rounds):
        for name, python in (("against", other), ("this", sys.executable)):
            timed, got = kgate_check(root, cores, "--no-cache", python=python)
            same = same and got == report
            print(f"  round {number + 1}, {name:7} kgate check -j {cores} --no-cache {timed}  load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    print(f"  reports of the two kgates: {'the same bytes' if same else 'DIFFER'}")
    return same


if __name__ == "__main__":
    sys.exit(main())
