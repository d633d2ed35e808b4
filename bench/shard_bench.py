"""`kgate check --shard I/N` as N CI runners would run it, against the unsharded run, in one run on one machine.

    python bench/shard_bench.py [--modules 6] [--cuda-files 3] [--shards 3] [--repeat 2] [--keep DIR]

Builds a synthetic repository (bench/synth.py: Triton elementwise, reduction
and GEMM kernels in two variants each, and CUDA C++ files of five kernels
each) and measures, printing each figure and each ratio:

- the unsharded `kgate check`, cold (empty cache); it records the timings file;
- N shards, each cold in a copy of its own (a runner with an empty compile
  cache), one after another: first without a timings file (a first CI run:
  units split by count), then with the unsharded run's timings file (what a
  runner restores): each shard's wall time, the slowest (the CI critical
  path on runners like this machine) and its ratio to the unsharded run, and
  the recorded seconds of each slice;
- `kgate merge` of the shards, and whether its JSON equals the unsharded run's.

The shards run one at a time, each with every core, as separate runners would.
Every wall time is the best of `--repeat` cold runs, each in a fresh copy;
the rounds interleave the commands, so load from elsewhere falls on all of them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth

TIMINGS = Path(".kgate-cache") / "shard-timings.json"


def kgate(*args: str, cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kgate", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kgate {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, proc


def fresh_copy(source: Path, dest: Path, timings: Path | None) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".kgate-cache", "__pycache__", "*.json"))
    if timings is not None:
        (dest / TIMINGS).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(timings, dest / TIMINGS)
    return dest


class Commands:
    """Every command of the bench, run cold in a fresh copy once per round; rounds interleave the commands."""

    def __init__(self, project: Path, work: Path) -> None:
        self.project, self.work = project, work
        self.walls: dict[str, list[float]] = {}

    def run(self, name: str, timings: Path | None, *args: str) -> Path:
        attempt = len(self.walls.get(name, []))
        folder = fresh_copy(self.project, self.work / f"{name}-{attempt}", timings)
        wall, _proc = kgate(*args, cwd=folder)
        self.walls.setdefault(name, []).append(wall)
        return folder

    def best(self, name: str) -> float:
        return min(self.walls[name])


def shard_round(commands: Commands, count: int, timings: Path | None, label: str) -> list[Path]:
    outputs = []
    for index in range(1, count + 1):
        out = commands.work / f"{label}-shard-{index}.json"
        commands.run(f"{label}-{index}", timings, "check", "--shard", f"{index}/{count}", "--format", "json",
                     "-o", str(out))
        outputs.append(out)
    return outputs


def report(commands: Commands, outputs: list[Path], label: str, reference: Path) -> float:
    """Print each shard's best wall time and its slice's compile seconds; return the slowest shard's."""
    recorded = json.loads(reference.read_text())["seconds"]
    walls = []
    for index, out in enumerate(outputs, 1):
        meta = json.loads(out.read_text())["shard"]
        wall = commands.best(f"{label}-{index}")
        weight = sum(recorded.get(a, 0.0) for a in atoms(meta["slice"]))
        print(f"  shard {index}/{len(outputs)}: {wall:6.1f} s wall, {len(meta['slice']):3d} unit(s), "
              f"{weight:6.1f} s of compiling in the unsharded run")
        walls.append(wall)
    print(f"  slowest shard: {max(walls):.1f} s; all shards together: {sum(walls):.1f} s")
    return max(walls)


def atoms(units: list[str]) -> list[str]:
    out = []
    for unit in units:
        kind, _sep, name = unit.partition(":")
        out += [f"cuda:{f}" for f in name.split("+")] if kind == "cuda" else [unit]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", type=int, default=6, help="Triton modules of 5 kernels x 2 variants")
    parser.add_argument("--cuda-files", type=int, default=3, help="CUDA files of 5 kernels")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="cold runs of each command; the fastest counts")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kgate-shard-bench-"))
    try:
        project = work / "repo"
        counts = synth.generate(project, modules=args.modules, cuda_files=args.cuda_files)
        print(f"repository: {counts['triton_variants']} Triton variants, {counts['cuda_kernels']} CUDA kernels")
        commands = Commands(project, work)
        whole = commands.run("whole", None, "check", "--format", "json", "-o", str(work / "whole.json"))
        timings = whole / TIMINGS
        for round_ in range(args.repeat):
            if round_:
                commands.run("whole", None, "check", "--format", "json", "-o", str(work / "whole.json"))
            first = shard_round(commands, args.shards, None, "first")
            balanced = shard_round(commands, args.shards, timings, "timed")
        unsharded = commands.best("whole")
        print(f"unsharded, cold: {unsharded:.1f} s")
        print("shards, cold, no timings recorded (a first run):")
        untimed = report(commands, first, "first", timings)
        print("shards, cold, with the unsharded run's timings:")
        slowest = report(commands, balanced, "timed", timings)
        print(f"slowest shard / unsharded: {untimed / unsharded:.2f}x without timings, {slowest / unsharded:.2f}x "
              f"with them (1/{args.shards} = {1 / args.shards:.2f}x would be perfect)")
        merged, proc = kgate("merge", *map(str, balanced), "--format", "json", cwd=whole)
        same = proc.stdout == (work / "whole.json").read_text()
        print(f"kgate merge: {merged:.2f} s; JSON equal to the unsharded run's: {'yes' if same else 'NO'}")
        return 0 if same else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
