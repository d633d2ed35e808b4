"""`kgate check --shard I/N` as N CI runners would run it, against the unsharded run, in one run on one machine.

    python bench/shard_bench.py [--modules 6] [--cuda-files 3] [--shards 3] [--keep DIR]

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


def shards(project: Path, work: Path, count: int, timings: Path | None, label: str,
           reference: Path) -> tuple[list[Path], float]:
    """Each shard cold in a copy of its own (given `timings`); its output files and the slowest shard's wall time.

    Each slice is weighed with the unsharded run's timings (`reference`), with timings or without.
    """
    recorded = json.loads(reference.read_text())["seconds"]
    outputs, walls = [], []
    for index in range(1, count + 1):
        runner = fresh_copy(project, work / f"{label}-{index}", timings)
        out = work / f"{label}-shard-{index}.json"
        wall, _proc = kgate("check", "--shard", f"{index}/{count}", "--format", "json", "-o", str(out), cwd=runner)
        meta = json.loads(out.read_text())["shard"]
        weight = sum(recorded.get(a, 0.0) for a in atoms(meta["slice"]))
        print(f"  shard {index}/{count}: {wall:6.1f} s wall, {len(meta['slice']):3d} unit(s), "
              f"{weight:6.1f} s of compiling in the unsharded run")
        outputs.append(out)
        walls.append(wall)
    print(f"  slowest shard: {max(walls):.1f} s; all shards together: {sum(walls):.1f} s")
    return outputs, max(walls)


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
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kgate-shard-bench-"))
    try:
        project = work / "repo"
        counts = synth.generate(project, modules=args.modules, cuda_files=args.cuda_files)
        print(f"repository: {counts['triton_variants']} Triton variants, {counts['cuda_kernels']} CUDA kernels")
        whole = fresh_copy(project, work / "whole", None)
        unsharded, _proc = kgate("check", "--format", "json", "-o", str(work / "whole.json"), cwd=whole)
        print(f"unsharded, cold: {unsharded:.1f} s")
        print("shards, cold, no timings recorded (a first run):")
        _outputs, first = shards(project, work, args.shards, None, "first", whole / TIMINGS)
        print("shards, cold, with the recorded timings:")
        balanced, slowest = shards(project, work, args.shards, whole / TIMINGS, "timed", whole / TIMINGS)
        print(f"slowest shard / unsharded: {first / unsharded:.2f}x without timings, {slowest / unsharded:.2f}x "
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
