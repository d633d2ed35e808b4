"""Writes the part of README.md that shows a real run: `kgate check --show-kernels` on this repository.

    python docs/readme.py           # run kgate on a copy of this checkout's tracked files, rewrite the part
    python docs/readme.py --check   # exit 1 when the part differs from a run now (timings aside)

The part sits between `<!-- run: kgate check -->` and `<!-- end: kgate check -->`. Everything in it comes
from the run: the rows of the table (those whose kernel, specialisation tag and target ROWS names), the
findings and the summary line, the numbers the text quotes, the Triton and torch it ran with, and how long a
cold and an unchanged run took. Numbers a compiler decides are the run's: tests/test_readme_run.py compares
them only when its Triton is the one this part names, and everything else always.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BEGIN, END = "<!-- run: kgate check -->", "<!-- end: kgate check -->"

# The table's rows the README shows: (kernel, tag of the specialisation, target). A tag names what was launched
# (the specialisation), not what a compiler made of it, so it stays when Triton changes.
GEMM_ALIGNED = ("kernels.gemm:matmul_kernel", "57a00c6b", "sm_120a")  # launched at 4096: every size divisible by 16
GEMM_ODD = ("kernels.gemm:matmul_kernel", "9bb7be83", "sm_120a")  # launched at its tests' odd sizes
ROWS = [
    GEMM_ALIGNED,
    GEMM_ODD,
    ("kernels.mxfp8:mxfp8_matmul_kernel", "beac4b03", "sm_120a"),
    ("kernels.mxfp8:mxfp8_matmul_kernel", "beac4b03", "sm_90a"),
    ("kernels.rmsnorm:rmsnorm_fwd_kernel", "81adadf2", "sm_120a"),
    ("rmsnorm_fwd_bf16", "kernels/rmsnorm.cu", "sm_120a"),
]


@dataclass
class Run:
    """What one cold and one unchanged `kgate check --show-kernels` printed and reported."""

    table: str  # stdout of the cold run
    kernels: list[dict]  # the JSON report's kernels
    triton: str
    torch: str | None
    cores: int
    cold_s: float
    warm_s: float


def tracked_copy(dest: Path) -> Path:
    """This checkout's tracked files, as a fresh clone has them."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in names.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def kgate(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    # Whole lines, as a log keeps them (COLUMNS would cut the table to a screen's width).
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kgate", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=1800)
    return done, time.perf_counter() - started


def run(folder: Path) -> Run:
    """A cold check of `folder` (its own empty cache), then the same command unchanged, then its JSON report."""
    cold, cold_s = kgate(folder, "check", "--show-kernels", "--color", "never")
    if cold.returncode != 0:
        raise SystemExit(f"readme: kgate check failed ({cold.returncode}):\n{cold.stdout}{cold.stderr}")
    _warm, warm_s = kgate(folder, "check", "--show-kernels", "--color", "never")
    report, _ = kgate(folder, "check", "--format", "json")
    import triton

    try:
        import torch

        torch_version: str | None = torch.__version__.split("+")[0]
    except ImportError:
        torch_version = None
    return Run(cold.stdout, json.loads(report.stdout)["kernels"], triton.__version__, torch_version,
               os.cpu_count() or 1, cold_s, warm_s)


def row_key(line: str) -> tuple[str, str, str] | None:
    parts = line.split()
    if len(parts) < 3:
        return None
    tag = parts[1].rsplit("#", 1)[-1]
    return parts[0], tag, parts[2]


def kernel(found: Run, key: tuple[str, str, str]) -> dict:
    name, tag, target = key
    return next(k for k in found.kernels if k["kernel"] == name and k["target"] == target
                and (k["variant"].endswith(f"#{tag}") or k.get("path") == tag))


def table(found: Run) -> str:
    """The table's header, the rows ROWS names (in its order), then the findings and the summary."""
    lines = found.table.rstrip("\n").splitlines()
    header = lines[0]
    rows = {row_key(line): line for line in lines[2:] if line and not line.startswith(("-", " "))}
    missing = [key for key in ROWS if key not in rows]
    if missing:
        raise SystemExit(f"readme: the run has no row {missing[0]} (update ROWS in docs/readme.py)")
    rest = [line for line in lines if ": KG" in line or line.startswith("kgate check:")]
    findings = [line for line in rest if ": KG" in line]
    cut = [f[: f.index(" [kernels.")] + " [...]" if " [kernels." in f else f for f in findings]
    return "\n".join([header, *(rows[key].rstrip() for key in ROWS), "...", *dict.fromkeys(cut), "",
                      *[line for line in rest if line.startswith("kgate check:")]])


def kib(value: int) -> str:
    return f"{value // 1024} KB" if value % 1024 == 0 else f"{value} bytes"


def render(found: Run) -> str:
    aligned, odd = kernel(found, GEMM_ALIGNED), kernel(found, GEMM_ODD)
    ceiling = "sits at the register ceiling" if odd["registers"] >= 255 else f"needs {odd['registers']} registers"
    made = f"Triton {found.triton}" + (f" (torch {found.torch})" if found.torch else "")
    return f"""{BEGIN}
Then gate the bundled kernels: the specialisations their tests and the GEMM
at LLM sizes launched on an H200, recorded in `kgate-capture.toml`, and
their registrations, each compiled for `sm_120a` and `sm_90a`. Made with
{made} on {found.cores} cores: the first run took {found.cold_s:.0f} s, an unchanged
re-run {found.warm_s * 1000:.0f} ms (it replays the recorded result).

```sh
kgate check --show-kernels
```

```
{table(found)}
```

Without `--show-kernels` the table keeps only the rows that have findings and
says how many it left out. One row per kernel variant and target: registers per thread, spill bytes,
shared memory per CTA, resident warps per sub-core (an average over the
SM's 4 sub-cores, so it can be a fraction: [reports](docs/reports.md#the-terminal-report)), the MMA instructions in
the PTX, the verdict, and the capture that recorded the row's launch (`-` for one only registered, and for CUDA).
A capture is gated on the targets it bound for; this one was written before captures recorded their device's
capability, so the H200's applies to both targets ([capture](docs/capture.md#a-capture-is-gated-on-the-targets-it-bound-for)).
The variant column keeps what tells a row from the
kernel's other rows, and the tag of its specialisation (findings, reports and
the baseline use the whole name). The same GEMM tile is two kernels: launched
at 4096 (`#{GEMM_ALIGNED[1]}`, every size a multiple of 16) it needs {aligned['registers']} registers and
{kib(aligned['smem_bytes'])} of shared memory on `sm_120a`; launched at its tests' odd sizes
(`#{GEMM_ODD[1]}`) it {ceiling}, a debt the baseline pins.
{END}"""


def current(text: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"readme: README.md has no {BEGIN} ... {END} part")
    return text[start:end + len(END)]


TIMING = re.compile(r"the first run took \d+ s, an unchanged\nre-run \d+ ms")
MADE = re.compile(r"Made with\nTriton (\S+)")


def without_timings(part: str) -> str:
    return TIMING.sub("the first run took N s, an unchanged\nre-run N ms", part)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md's part differs from a run now")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kgate-readme-") as scratch:
        found = run(tracked_copy(Path(scratch)))
    text = README.read_text(encoding="utf-8")
    part = render(found)
    if args.check:
        same = without_timings(current(text)) == without_timings(part)
        print("README.md: up to date" if same else "README.md: differs from a run now (python docs/readme.py)")
        return 0 if same else 1
    README.write_text(text.replace(current(text), part), encoding="utf-8")
    print(f"README.md: written from a run with Triton {found.triton}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
