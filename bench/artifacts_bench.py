"""A cold `kgate check` of the fixture projects with another revision's kgate and with this one, in one run.

    python bench/artifacts_bench.py                         # against main, the fixture projects, best of 2
    python bench/artifacts_bench.py --base HEAD~3 --rounds 3 --project compiled --project cuda

What a run compiles and disassembles follows the rules it selects (`kgate.evaluate.plan`), so a selection
that adds a rule reading SASS costs disassembly where that rule reads it and nowhere else. This bench times,
per fixture project and in total, `kgate check --no-cache` (every compile, every disassembly):

- `base`: the kgate of `--base` (a git revision of this repository, unpacked into a temporary folder: no
  worktree is made), with the project's own selection;
- `new`: this kgate with the same selection (`--ignore` of the codes `--base` does not know, so both run the
  same rules);
- `new+CODES`: this kgate with those codes selected as well (`--extend-select`).

Each command runs in its own fresh copy of the project, in turns (base, new, new+CODES, then again), and the
best wall time of `--rounds` is kept (CPU, the user and system time of the processes it waited for, from the
same run). The ratios to `base` are printed per project and in total; whether the base and new runs reported
the same findings (the `--format json` findings, not the SASS they read) is printed beside them. Timings on a
shared machine move with its load: the ratios are taken within one run, the commands one after another.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The fixture projects that compile as they are (no capture to record, no build to configure first).
PROJECTS = ("autotune", "callgraph", "ci", "compiled", "cuda", "cuda_nvrtc", "mixed", "ratchet")
NEW_CODES = ("KG110",)


@dataclass(frozen=True)
class Timed:
    wall: float
    cpu: float
    findings: str  # the report's findings, as JSON text


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def unpack(revision: str, into: Path) -> Path:
    """`revision`'s kgate as an importable tree: its sources unpacked, `rules` and `kernels` placed in the package."""
    source = into / "source"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    tree = into / "tree"
    shutil.copytree(source / "kgate", tree / "kgate", symlinks=True)
    for name in ("rules", "kernels"):
        shutil.copytree(source / name, tree / "kgate" / name, symlinks=True)
    return tree


def this_tree(into: Path) -> Path:
    """This checkout's kgate as the same kind of tree (so that both sides import alike)."""
    tree = into / "tree"
    (tree / "kgate").mkdir(parents=True)
    for item in (REPO / "kgate").iterdir():
        if item.name != "__pycache__":
            (tree / "kgate" / item.name).symlink_to(item)
    for name in ("rules", "kernels"):
        (tree / "kgate" / name).symlink_to(REPO / name)
    return tree


def check(tree: Path, project: str, scratch: Path, argv: list[str], jobs: int) -> Timed:
    """One cold `kgate check` of a fresh copy of a fixture project with the kgate of `tree`."""
    work = scratch / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(REPO / "fixtures" / project, work, symlinks=True)
    report = scratch / "report.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "kgate", "check", "--no-cache", "--exit-zero", "--no-baseline", "-j", str(jobs),
               "--format", "json", "-o", str(report), *argv]
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
    wall, used = time.perf_counter() - started, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{project}: {' '.join(command[2:])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    findings = json.dumps(json.loads(report.read_text(encoding="utf-8"))["findings"], sort_keys=True)
    return Timed(wall, used, findings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="main", help="the git revision to compare with (default: main)")
    parser.add_argument("--project", action="append", help=f"a folder of fixtures/ (default: {', '.join(PROJECTS)})")
    parser.add_argument("--codes", default=",".join(NEW_CODES), help="the codes the base does not know, selected in "
                        "the last configuration (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each command, the best kept (default: 2)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="compile workers (default: 2)")
    args = parser.parse_args(argv)
    projects = args.project or list(PROJECTS)
    codes = [c for c in args.codes.split(",") if c]
    configurations = {"base": [], "new": [f"--ignore={','.join(codes)}"] if codes else [],
                      f"new+{'+'.join(codes)}": [f"--extend-select={','.join(codes)}"] if codes else []}
    with tempfile.TemporaryDirectory(prefix="kgate-artifacts-bench-") as folder:
        scratch = Path(folder)
        (scratch / "base").mkdir()
        trees = {"base": unpack(args.base, scratch / "base"), "new": this_tree(scratch / "new")}
        best: dict[tuple[str, str], Timed] = {}
        for project in projects:
            for _round in range(args.rounds):
                for name, extra in configurations.items():
                    timed = check(trees["base" if name == "base" else "new"], project, scratch, extra, args.jobs)
                    if (project, name) not in best or timed.wall < best[project, name].wall:
                        best[project, name] = timed
        print(f"cold `kgate check --no-cache -j {args.jobs}`, best of {args.rounds}, base {args.base}: wall s "
              f"(CPU s), ratio to base")
        print(f"{'project':<12}" + "".join(f"{name:>28}" for name in configurations) + "  same findings")
        totals = {name: [0.0, 0.0] for name in configurations}
        for project in projects:
            base = best[project, "base"]
            cells = []
            for name in configurations:
                timed = best[project, name]
                totals[name][0] += timed.wall
                totals[name][1] += timed.cpu
                cells.append(f"{timed.wall:7.1f} ({timed.cpu:6.1f}) {timed.wall / base.wall:5.2f}x")
            same = best[project, "new"].findings == base.findings
            print(f"{project:<12}" + "".join(f"{cell:>28}" for cell in cells) + f"  {'yes' if same else 'NO'}")
        base_wall = totals["base"][0]
        print(f"{'total':<12}" + "".join(f"{wall:7.1f} ({cpu:6.1f}) {wall / base_wall:5.2f}x".rjust(28)
                                         for wall, cpu in totals.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
