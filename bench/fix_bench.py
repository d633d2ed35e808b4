"""`kgate lint --add-ignore` and `kgate lint --fix` on 100 findings in 50 files, next to ruff, in one run.

    python bench/fix_bench.py [--files 50] [--rounds 3] [--helpers 12] [--tree DIR ...] [--save DIR]

Generates two projects of `--files` files (a tenth of them CUDA sources, the rest Triton kernel modules and their
pytest modules, each Python module padded with `--helpers` ordinary functions, about 6 KB with the default), every
file holding two findings:

- for `--add-ignore`: kernel modules with two of KG201 (an autotune key that follows the token count), KG202 (an
  atomic in an autotuned kernel whose buffer is never reset) and KG204 (a device print); test modules with two
  `TRITON_INTERPRET` settings (KG203); CUDA sources with two unchecked launches (KG302). Every one is pinned with a
  comment.
- for `--fix --unsafe-fixes`: test modules with a `TRITON_INTERPRET` setting alone on its line (removed on the text)
  and a `kgate: ignore` comment that suppresses nothing (KG002, dropped); one test module in five has its setting on
  a line it shares with another statement (removed through libcst); kernel modules with two unused suppressions;
  CUDA sources with two unchecked launches, each given a check after it (KG302).

Each round copies the tree afresh, lints it once (the run a developer makes before pinning or fixing, which fills
the cache), then times the command; the median of the rounds counts (target: at most 2 s), and the command is timed
once more without that first lint. Side by side in the same rounds: the interpreter's floor (`python -c "import
kgate"`) and `ruff check --isolated --select ALL --add-noqa` on a fresh copy of the same tree (ruff writes a
directive for every one of its own findings: their count is printed). The findings left afterwards are checked:
none but the pins' KG003 placeholders after `--add-ignore`, none after `--fix`.

`--tree DIR` (repeatable) also measures a real tree the same way (copied first; the original is never touched),
printing the findings pinned and fixed rather than a verdict, and times `--fix` once more on the tree with every
finding pinned and each pin's codes then made stale (every pin an unused suppression, which the fix removes). `--save DIR` keeps each tree as the last round left it
(DIR/<tree>/<command>), to compare what two versions of kgate write.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IGNORED_COPY = shutil.ignore_patterns(".kgate-cache", ".ruff_cache", ".git")

HELPER = '''

def shape_{i}_{n}(batch, hidden={hidden}):
    """Reference shapes for case {n}: a batch of rows, padded to a multiple of 16."""
    rows = [len(item) for item in batch]
    padded = [(r + 15) // 16 * 16 for r in rows]
    return {{"rows": rows, "padded": padded, "hidden": hidden, "total": sum(padded) * hidden}}
'''

KERNEL = '''"""Fused kernels, module {i}."""

import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config({{"BLOCK": 64}}, num_warps=4), triton.Config({{"BLOCK": 128}}, num_warps=8)]
{helpers}{first}{second}
'''

RUNTIME_KEY = '''

@triton.autotune(configs=CONFIGS, key=["n_tokens", "D"])
@triton.jit
def rmsnorm_{i}(x, out, n_tokens, D: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs))
'''

ATOMIC = '''

@triton.autotune(configs=CONFIGS, key=["K"])
@triton.jit
def splitk_{i}(a, b, c, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(c + offs, tl.load(a + offs) * tl.load(b + offs))
'''

DEVICE_PRINT = '''

@triton.jit
def scale_{i}(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.device_print("v", v)
    tl.store(x + offs, v * 2, mask=offs < n)
'''

UNUSED_IN_KERNEL = '''

def launch_{i}_{n}(x):
    out = torch.empty_like(x)  # kgate: ignore[KG204] a device print was here once
    return out
'''

TEST = '''"""Tests of the fused kernels, module {i}."""

import os

import pytest
import torch

from kernels import ops_{i} as ops
{helpers}

@pytest.mark.parametrize("n", [1, 127, 4096])
def test_forward_{i}(n):
{setting}
    x = torch.randn(n)
    torch.testing.assert_close(ops.forward(x), x * 2){second}
'''

SETTING_ALONE = '    os.environ["TRITON_INTERPRET"] = "1"'
SETTING_SHARED = '    os.environ["TRITON_INTERPRET"] = "1"; torch.manual_seed(0)'

SECOND_SETTING = '''


def test_backward_{i}(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert ops.backward(torch.ones(4)).shape == (4,)'''

UNUSED_SUPPRESSION = '''


def test_sizes_{i}():
    assert ops.sizes() == [128, 256]  # kgate: ignore[KG204] a device print was here once'''

CUDA = '''// Launchers of the elementwise kernels, file {i}.
#include <cstdlib>
#include <cuda_runtime.h>

#define CUDA_CHECK(call) do {{ cudaError_t e_ = (call); if (e_ != cudaSuccess) abort(); }} while (0)

__global__ void scale_{i}(float* x, float a) {{ x[threadIdx.x] *= a; }}

void launch_scale_{i}(float* x, cudaStream_t stream) {{
  scale_{i}<<<1, 32, 0, stream>>>(x, 2.f);
}}

void launch_halve_{i}(float* x, cudaStream_t stream) {{
  scale_{i}<<<1, 32, 0, stream>>>(x, 0.5f);
}}

void launch_checked_{i}(float* x) {{
  scale_{i}<<<1, 32>>>(x, 1.f);
  CUDA_CHECK(cudaGetLastError());
}}
'''


def generate(root: Path, files: int, helpers: int, fixing: bool) -> None:
    """A project of `files` files with two findings each (see the module's docstring)."""
    for folder in ("kernels", "tests", "csrc"):
        (root / folder).mkdir(parents=True)
    (root / "kgate.toml").write_text("")
    cuda = max(1, files // 10)
    tests = (files - cuda) // 2
    kernels = files - cuda - tests
    cases = (RUNTIME_KEY, ATOMIC, DEVICE_PRINT)
    for i in range(kernels):
        body = "".join(HELPER.format(i=i, n=n, hidden=1024 << n % 3) for n in range(helpers))
        if fixing:
            first, second = (UNUSED_IN_KERNEL.format(i=i, n=n) for n in (0, 1))
        else:
            first, second = (cases[(i + n) % 3].format(i=i) for n in (0, 1))
        (root / "kernels" / f"ops_{i}.py").write_text(KERNEL.format(i=i, helpers=body, first=first, second=second))
    for i in range(tests):
        body = "".join(HELPER.format(i=i, n=n, hidden=1024 << n % 3) for n in range(helpers))
        setting = SETTING_SHARED if fixing and i % 5 == 4 else SETTING_ALONE
        second = (UNUSED_SUPPRESSION if fixing else SECOND_SETTING).format(i=i)
        (root / "tests" / f"test_ops_{i}.py").write_text(TEST.format(i=i, helpers=body, setting=setting,
                                                                      second=second))
    for i in range(cuda):
        (root / "csrc" / f"launch_{i}.cu").write_text(CUDA.format(i=i))


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc.stdout + proc.stderr


def left(kgate: str, root: Path, env: dict[str, str]) -> dict[str, int]:
    """The findings a lint reports now, counted by code."""
    report = json.loads(_json(kgate, root, env))
    counts: dict[str, int] = {}
    for finding in report["findings"]:
        counts[finding["code"]] = counts.get(finding["code"], 0) + 1
    return dict(sorted(counts.items()))


def _json(kgate: str, root: Path, env: dict[str, str]) -> str:
    proc = subprocess.run([kgate, "lint", "--no-cache", "--format", "json"], cwd=root, env=env, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kgate lint --format json failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


class Result:
    def __init__(self) -> None:
        self.primed: list[float] = []
        self.unprimed = 0.0
        self.after: dict[str, int] = {}
        self.said = ""


COMMANDS = {"--add-ignore": ["--add-ignore"], "--fix --unsafe-fixes": ["--fix", "--unsafe-fixes"],
            "--fix, pins made stale": ["--fix"]}
_PINNED = re.compile(r"kgate: ignore\[[^\]]*\](?= TODO: give the reason)")


def stale_pins(kgate: str, template: Path, into: Path, env: dict[str, str]) -> None:
    """`template` with every finding pinned, then each pin's codes replaced by KG204 (nothing reports a device print
    on those lines): every pin is an unused suppression, whose fix removes it."""
    shutil.copytree(template, into, ignore=IGNORED_COPY)
    run([kgate, "lint", "--no-cache", "--add-ignore"], into, env)
    for path in into.rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if "TODO: give the reason" in text:
            path.write_text(_PINNED.sub("kgate: ignore[KG204]", text), encoding="utf-8", errors="surrogateescape")
    shutil.rmtree(into / ".kgate-cache", ignore_errors=True)


def measure(name: str, template: Path, scratch: Path, kgate: str, ruff: str, env: dict[str, str], rounds: int,
            save: Path | None, labels: list[str]) -> tuple[dict[str, Result], list[float], list[float], str]:
    """Rounds of the kgate commands (`labels`), ruff's `--add-noqa` and the floor, in turn."""
    commands = {label: COMMANDS[label] for label in labels}
    results = {label: Result() for label in commands}
    floor: list[float] = []
    noqa: list[float] = []
    noqa_said = ""
    stale = scratch / f"stale-{name}"
    if "--fix, pins made stale" in commands:
        stale_pins(kgate, template, stale, env)
    for round_ in range(rounds + 1):
        for index, (label, command) in enumerate(commands.items()):
            root = scratch / f"command{index}-{round_}"
            shutil.copytree(stale if label == "--fix, pins made stale" else template, root, ignore=IGNORED_COPY)
            time.sleep(2.1)  # the lint cache trusts a file's stat only once its mtime is two seconds old
            if round_ < rounds:
                run([kgate, "lint"], root, env)  # the lint before the pins or fixes
            seconds, said = run([kgate, "lint", *command], root, env)
            result = results[label]
            if round_ < rounds:
                result.primed.append(seconds)
            else:
                result.unprimed = seconds
                result.after = left(kgate, root, env)
                result.said = said.strip().splitlines()[-1] if said.strip() else ""
                if save is not None:
                    shutil.copytree(root, save / name / label.replace(" ", "").replace(",", "-").strip("-"),
                                    ignore=IGNORED_COPY)
            shutil.rmtree(root)
        if round_ < rounds:
            floor.append(run([sys.executable, "-c", "import kgate"], scratch, env)[0])
            root = scratch / f"ruff{round_}"
            shutil.copytree(template, root, ignore=IGNORED_COPY)
            seconds, noqa_said = run([ruff, "check", "--isolated", "--no-cache", "--select", "ALL", "--add-noqa"],
                                     root, env)
            noqa.append(seconds)
            shutil.rmtree(root)
    return results, floor, noqa, noqa_said.strip().splitlines()[-1] if noqa_said.strip() else ""


def report(name: str, before: dict[str, int], results: dict[str, Result], floor: list[float], noqa: list[float],
           noqa_said: str, expected: dict[str, dict[str, int]] | None) -> bool:
    met = True
    print(f"{name}: findings {before}")
    print(f"  floor (python -c 'import kgate')    {statistics.median(floor):6.2f} s")
    print(f"  ruff check --select ALL --add-noqa  {statistics.median(noqa):6.2f} s  ({noqa_said})")
    for label, result in results.items():
        median = statistics.median(result.primed)
        verdict = ""
        if expected is not None:
            ok = median <= 2.0 and result.after == expected[label]
            met = met and ok
            verdict = f": {'met' if ok else 'MISSED'} (target <= 2 s; left {expected[label]} expected)"
        print(f"  kgate lint {label:<24} {median:6.2f} s (after a lint; {result.unprimed:.2f} s without one); "
              f"left {result.after}{verdict}")
        print(f"    {result.said}")
    return met


def tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"fix_bench: `{name}` not found (pip install -e '.[test]' ruff)")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--helpers", type=int, default=12, help="ordinary functions per Python module (default 12)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], metavar="DIR", help="also this tree (copied)")
    parser.add_argument("--save", metavar="DIR", help="keep each tree as the last round left it, under DIR")
    args = parser.parse_args()
    kgate, ruff = tool("kgate"), tool("ruff")
    import kgate as package

    compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)  # as `pip install` leaves kgate
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    save = Path(args.save) if args.save else None
    if save is not None and save.exists():
        raise SystemExit(f"fix_bench: {save} exists")
    met = True
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; median of {args.rounds} rounds; "
          f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="kgate-fix-bench-") as scratch_name:
        scratch = Path(scratch_name)
        for fixing in (False, True):
            kind = "fix" if fixing else "pin"
            template = scratch / f"template-{kind}"
            generate(template, args.files, args.helpers, fixing)
            before = left(kgate, template, env)
            label = "--fix --unsafe-fixes" if fixing else "--add-ignore"
            results, floor, noqa, noqa_said = measure(f"generated-{kind}", template, scratch, kgate, ruff, env,
                                                      args.rounds, save, [label])
            pinned = sum(count for code, count in before.items() if code not in ("KG002", "KG003", "KG004"))
            expected = {label: {} if fixing else {"KG003": pinned}}
            met = report(f"generated, {args.files} files, for {'--fix' if fixing else '--add-ignore'}", before,
                         results, floor, noqa, noqa_said, expected) and met
        for tree in args.tree:
            template = scratch / f"tree-{Path(tree).name}"
            shutil.copytree(tree, template, ignore=IGNORED_COPY)
            for path in template.rglob("*"):  # a read-only original is copied read-only: pins need to write
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o200)
            before = left(kgate, template, env)
            results, floor, noqa, noqa_said = measure(Path(tree).name, template, scratch, kgate, ruff, env,
                                                      args.rounds, save, list(COMMANDS))
            report(f"{Path(tree).name}", before, results, floor, noqa, noqa_said, None)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
