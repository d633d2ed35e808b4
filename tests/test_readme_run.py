"""The README's run of `kgate check --show-kernels` is this repository's as a fresh clone gives it.

docs/readme.py writes that part of README.md from a real run. Here the same run is made on a copy of this
checkout's tracked files (with the cache of the suite's check of this repository, so nothing compiles again) and
rendered as docs/readme.py renders it. Under the Triton the part names, the part must be what this run renders,
every number included (timings and the count of source files aside); under another Triton, the numbers are that
compiler's, so what is compared is what no compiler decides: the rows shown, the findings, how many variants.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import REPO, Run, copy_repository

sys.path.insert(0, str(REPO / "docs"))
import readme  # noqa: E402  (docs/readme.py)

TORCH = re.compile(r" \(torch [^)]*\)")
# How many of this repository's files are Python or CUDA sources follows every test added; the run's kernels,
# rows and findings are what the README shows, so the count is compared as a count, not as its number.
SOURCES = re.compile(r"\d+ source file\(s\)")


def comparable(part: str) -> str:
    return SOURCES.sub("N source file(s)", TORCH.sub("", readme.without_timings(part))).replace("\n", " ")


def structure(part: str) -> tuple[list[tuple[str, ...]], list[str], str]:
    output = re.search(r"\n```\n(kernel .*?)\n```", part, re.S)
    assert output, "the README's run shows no table"
    block = output.group(1)
    lines = block.splitlines()
    rows = [tuple(line.split()[:3]) for line in lines[1:] if line and line != "..." and ": KG" not in line
            and not line.startswith("kgate check:")]
    findings = [line.split(": ", 1)[0] + " " + " ".join(line.split(": ", 2)[1].split()[:3]) for line in lines
                if ": KG" in line]
    summary = re.search(r"(\d+ kernel variant\(s\)) and \d+ source file\(s\)", block)
    return rows, findings, summary.group(1) if summary else ""


def test_the_readme_shows_a_run_of_this_repository(tmp_path: Path, repository_checked: tuple[Path, Run]) -> None:
    folder = readme.tracked_copy(copy_repository(repository_checked, tmp_path))
    found = readme.run(folder)
    shown = readme.current((REPO / "README.md").read_text(encoding="utf-8"))
    ours = readme.render(found)
    named = readme.MADE.search(shown)
    assert named, "the README's run names no Triton"
    if named.group(1) == found.triton:
        assert comparable(shown) == comparable(ours), "README.md is not this run's: python docs/readme.py"
    else:
        assert structure(shown) == structure(ours), "README.md is not this run's: python docs/readme.py"
