"""`kgate diff` against the checks it stands for, measured side by side in one run on one machine.

    python bench/diff_bench.py [--modules 3] [--cuda-files 1] [--runs 3] [--keep DIR]

Builds a synthetic repository (bench/synth.py) as a git repository and measures, printing each figure and
each ratio:

- a diff where no kernel changed (the last commit edits a text file) against one warm `kgate check` per
  side: a warm check that reads every cached record (its configuration touched, so it is not replayed),
  and the replayed re-run a developer usually sees;
- a diff where one kernel's source changed but not its code (the last commit renames a local variable in
  it): the kernel compiles again on one side, and its machine code settles that it is identical;
- a diff where one kernel changed (the last commit edits one kernel's source, a new edit each run) against
  that kernel's own compile (`triton.compile`, serial, empty cache, in a warm Python) plus the unchanged
  diff, and against `kgate check` after the same kind of edit (which pays the same compile through the
  same worker pool).

The targets are the issue's: an unchanged diff costs about two warm checks; a changed kernel adds about
its compile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth
from check_bench import kernel_compile_time, timed

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def rename_local(root: Path, round_: int) -> None:
    """Rename the first kernel's `offs` (a new name each round): its source changes, its machine code not."""
    import re

    path = root / "synth" / "k000.py"
    text = path.read_text()
    start = text.index("def ")
    end = text.find("@triton.jit", start)
    end = len(text) if end < 0 else end
    body = re.sub(r"\boffs(?:_\d+)?\b", f"offs_{round_ + 1}", text[start:end])
    path.write_text(text[:start] + body + text[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", type=int, default=3)
    parser.add_argument("--cuda-files", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="build the repository here and keep it")
    args = parser.parse_args()
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kgate-diff-bench-"))
    kgate = [sys.executable, "-m", "kgate"]
    try:
        counts = synth.generate(workdir, modules=args.modules, cuda_files=args.cuda_files)
        (workdir / ".gitignore").write_text(".kgate-cache/\n")
        (workdir / "NOTES.txt").write_text("0\n")
        git(workdir, "init", "-q", "-b", "main")
        commit(workdir, "synthetic kernels")
        cold, _, _ = timed([*kgate, "check"], workdir)  # fills the cache

        def warm_check() -> float:
            os.utime(workdir / "kgate.toml")  # not replayed: every record read, as a diff's side does
            return timed([*kgate, "check"], workdir)[0]

        warm = statistics.median(warm_check() for _ in range(args.runs))
        timed([*kgate, "check"], workdir)
        replayed = statistics.median(timed([*kgate, "check"], workdir)[0] for _ in range(args.runs))

        unchanged = []
        for round_ in range(args.runs):
            (workdir / "NOTES.txt").write_text(f"{round_ + 1}\n")
            commit(workdir, "notes only")
            unchanged.append(timed([*kgate, "diff", "HEAD~1", "--require-identical"], workdir)[0])
        same = statistics.median(unchanged)

        renamed = []
        for round_ in range(args.runs):
            rename_local(workdir, round_)
            commit(workdir, "a local variable renamed")
            seconds, code, _ = timed([*kgate, "diff", "HEAD~1", "--require-identical"], workdir)
            if code != 0:
                raise SystemExit("renaming a local variable changed the SASS: the bench measures nothing")
            renamed.append(seconds)
        rename = statistics.median(renamed)

        changed = []
        for round_ in range(args.runs):
            synth.edit_one_kernel(workdir, round_ + 1)
            commit(workdir, "one kernel edited")
            seconds, code, _ = timed([*kgate, "diff", "HEAD~1", "--require-identical"], workdir)
            if code != 1:
                raise SystemExit("the edited kernel's SASS did not change: the bench measures nothing")
            changed.append(seconds)
        one = statistics.median(changed)
        incremental = []
        for round_ in range(args.runs):
            synth.edit_one_kernel(workdir, 100 + round_)
            incremental.append(timed([*kgate, "check"], workdir)[0])
        check_one = statistics.median(incremental)
        own = statistics.median(kernel_compile_time(workdir, "synth.k000:elementwise_000_0") for _ in range(args.runs))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"synthetic repository: {counts['triton_variants']} Triton variant(s), {counts['cuda_kernels']} CUDA "
          f"kernel(s); {os.cpu_count()} core(s); medians of {args.runs}")
    rows = [
        ("kgate check, cold (fills the cache)", cold),
        ("kgate check, warm (every record read, not replayed)", warm),
        ("kgate check, replayed (unchanged re-run)", replayed),
        ("kgate diff HEAD~1, no kernel changed", same),
        ("kgate diff HEAD~1, a local variable renamed in one kernel", rename),
        ("kgate diff HEAD~1, one kernel edited", one),
        ("kgate check, one kernel edited", check_one),
        ("that kernel's own compile (triton.compile, empty cache)", own),
    ]
    for label, seconds in rows:
        print(f"  {label:<58} {seconds:7.2f} s")
    print(f"ratio: unchanged diff / (2 x warm check)               {same / (2 * warm):5.2f}  (target: about 1)")
    print(f"ratio: unchanged diff / (2 x replayed check)           {same / (2 * replayed):5.2f}")
    print(f"ratio: (renamed diff - unchanged diff) / own compile   {(rename - same) / own:5.2f}")
    print(f"ratio: (changed diff - unchanged diff) / own compile   {(one - same) / own:5.2f}  (target: about 1)")
    print(f"ratio: changed diff / kgate check after the same edit  {one / check_one:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
