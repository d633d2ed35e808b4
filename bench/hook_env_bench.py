"""The pre-commit hook `kgate-lint` next to ruff's, in one run: its environment's size and a run on one changed file.

    python bench/hook_env_bench.py [--tree DIR] [--file REL] [--rounds 5]

pre-commit installs a `language: python` hook by creating a virtual environment and `pip install`ing the hook's
repository into it. This does the same, once for kgate (a git copy of this checkout, its `.pre-commit-hooks.yaml`
as it is) and once for ruff (a local hook as ruff's own pre-commit repository defines it: `ruff check
--force-exclude`, the ruff installed here), and prints both sizes on disk (the fresh environment itself, pip
included, is counted in both) and their ratio.

Then, in a git copy of `--tree` (default: the lint benchmark's generated kernel tree), it edits `--file` (default:
a kernel module) and times `pre-commit run kgate-lint --files FILE` against `pre-commit run ruff --files FILE`,
each through its own hook environment, in turn, `--rounds` times after a first run of each (the median counts;
target: kgate at most 1.5 x ruff). `--against DIR` adds another kgate's sources (a checkout of an earlier revision),
timed in the same rounds in a copy of its own of the project (each kgate keeps its own cache), so that a change is
measured side by side under the same load. Needs a package index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def size_mb(folder: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 2**20


def environment(requirement: str, scratch: Path, name: str) -> tuple[float, list[str]]:
    env = scratch / name
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run([str(env / "bin" / "pip"), "install", "--quiet", requirement], check=True,
                   stdout=subprocess.DEVNULL)
    listed = subprocess.run([str(env / "bin" / "pip"), "list", "--format", "freeze"], check=True,
                            capture_output=True, text=True).stdout.split()
    return size_mb(env), listed


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def ruff_version() -> str:
    found = subprocess.run([str(Path(sys.executable).parent / "ruff"), "--version"], capture_output=True, text=True)
    return found.stdout.split()[-1]


def hooks_config(checkout: Path, rev: str) -> str:
    return f"""repos:
- repo: {checkout}
  rev: {rev}
  hooks:
  - id: kgate-lint
- repo: local
  hooks:
  - id: ruff
    name: ruff
    entry: ruff check --force-exclude
    language: python
    additional_dependencies: [ruff=={ruff_version()}]
    types_or: [python, pyi]
    require_serial: true
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - started


def runs(scratch: Path, sources: list[Path], tree: Path | None, rel: str | None,
         rounds: int) -> tuple[str, list[float], float]:
    """The changed file, and the medians of the kgate hook of each of `sources` and of ruff's hook."""
    projects = []
    for number, source in enumerate(sources):
        rel, project = _project(scratch / f"{number}", source, tree, rel)
        projects.append(project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(scratch / "home"), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)
    pre_commit = [str(Path(sys.executable).parent / "pre-commit"), "run"]
    for project in projects:
        subprocess.run([*pre_commit[:-1], "install-hooks"], cwd=project, env=env, check=True, capture_output=True)
    kgate: list[list[float]] = [[] for _ in projects]
    ruff = []
    for round_ in range(rounds + 1):
        spent = []
        for project in projects:
            with open(project / rel, "a", encoding="utf-8") as handle:
                handle.write(f"\n_bench_round = {round_}\n")
            spent.append(timed([*pre_commit, "kgate-lint", "--files", rel], project, env))
        theirs = timed([*pre_commit, "ruff", "--files", rel], projects[0], env)
        if round_:  # the first run of each fills what a hook keeps (kgate's cache): a commit after the first
            for times, taken in zip(kgate, spent):
                times.append(taken)
            ruff.append(theirs)
    return rel, [statistics.median(times) for times in kgate], statistics.median(ruff)


def _project(scratch: Path, source: Path, tree: Path | None, rel: str | None) -> tuple[str, Path]:
    """A git copy of `source` for pre-commit to install, and a git copy of the project whose hooks name it."""
    checkout = scratch / "kgate-source"
    shutil.copytree(source, checkout, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__",
                                                                  ".kgate-cache", ".pytest_cache", "build"))
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "kgate")
    project = scratch / "project"
    if tree is None:
        import lint_bench

        project.mkdir()
        lint_bench.generate(project, 200, 40)
        rel = rel or "kernels/pkg1/ops_1.py"
    else:
        shutil.copytree(tree, project, symlinks=True, ignore=shutil.ignore_patterns(".git", ".kgate-cache"))
        rel = rel or next(str(p.relative_to(project)) for p in sorted(project.rglob("*.py"))
                          if b"triton" in p.read_bytes())
    (project / ".pre-commit-config.yaml").write_text(hooks_config(checkout, git(checkout, "rev-parse", "HEAD")))
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "project", "--no-verify")
    return rel, project


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="the project to commit in (default: a generated kernel tree)")
    parser.add_argument("--file", help="the file to change (project-relative)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes-only", action="store_true")
    parser.add_argument("--source", default=str(REPO), help="the kgate sources to install (default: this checkout)")
    parser.add_argument("--against", help="another kgate's sources, timed in the same rounds (an earlier revision)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        kgate, kgate_packages = environment(args.source, Path(scratch), "kgate")
        ruff, ruff_packages = environment("ruff", Path(scratch), "ruff")
        print(f"machine: Python {sys.version.split()[0]}, {os.uname().machine}, {os.cpu_count()} cores")
        print(f"{'kgate-lint hook environment':<32} {kgate:>8.1f} MB  ({', '.join(kgate_packages)})")
        print(f"{'ruff hook environment':<32} {ruff:>8.1f} MB  ({', '.join(ruff_packages)})")
        print(f"{'ratio':<32} {kgate / ruff:>8.2f}")
        if args.sizes_only:
            return 0
        sources = [Path(args.source), *([Path(args.against)] if args.against else [])]
        rel, medians, theirs = runs(Path(scratch), sources, Path(args.tree) if args.tree else None, args.file,
                                    args.rounds)
    ours = medians[0]
    ratio = ours / theirs
    load = os.getloadavg()
    print(f"pre-commit run on one changed file ({rel}), median of {args.rounds}, load {load[0]:.1f}:")
    print(f"{'  kgate-lint hook':<32} {ours:8.2f} s")
    if args.against:
        print(f"{'  kgate-lint hook (--against)':<32} {medians[1]:8.2f} s  ratio to ruff {medians[1] / theirs:.2f}")
    print(f"{'  ruff hook':<32} {theirs:8.2f} s")
    print(f"{'  ratio':<32} {ratio:8.2f}  target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'}")
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
