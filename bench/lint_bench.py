"""kgate lint against ruff on the same tree, in one run on one machine.

    python bench/lint_bench.py [--files 500] [--tests 100] [--autotuned 0.4] [--runs 7] [--keep DIR]

Generates a tree of Triton kernel modules plus pytest modules: by default
40% of the kernel modules hold autotuned kernels (autotune decorators with
keys, some of them run-time, reset_to_zero lists, split-K atomics, jit
helpers), the others plain `@triton.jit` kernels with their launchers and
autograd wrappers, one kernel with atomics among them. `--autotuned 1` makes
every module autotuned: the worst case for kgate, which then parses every
file. It measures, each the
fastest of `--runs` runs with the commands interleaved so that they share
the machine's noise:

- `kgate lint` cold (its cache removed before every run), against
  `ruff check --select ALL --no-cache` (target: at most 1x);
- `kgate lint` warm (its cache full, nothing changed), against
  `ruff check --select E9` both without ruff's cache (`--no-cache`, the
  target: at most 3x) and with ruff's cache primed (shown for reference:
  a warm ruff run is a single native process start, which no Python program
  matches: `python -c pass` is printed next to it);
- `kgate lint` on one file, warm, as the commit hook runs it.

kgate's modules are byte-compiled first, as `pip install` does (the
environment may set PYTHONDONTWRITEBYTECODE, which would make every run
recompile kgate from source).
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

HEADER = '''"""Synthetic Triton kernels, module {index}."""

import torch
import triton
import triton.language as tl

from .common import CONFIGS_{index}, MODEL_KEYS

BLOCKS = [128, 256, 512, 1024]
'''

ELEMENTWISE = '''

@triton.jit
def _{name}_act(v, ALPHA: tl.constexpr):
    return v * tl.sigmoid(ALPHA * v)


@triton.autotune(configs=[triton.Config({{"BLOCK": b}}, num_warps=w) for b in BLOCKS for w in (4, 8)],
                 key=["D"])
@triton.jit
def {name}(x, y, out, n, D: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(y + offs, mask=mask, other=0.0).to(tl.float32)
    g = _{name}_act(a, {alpha}) * b
    tl.store(out + offs, g.to(out.dtype.element_ty), mask=mask)


def {name}_launch(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    {name}[grid](x, y, out, n, x.shape[-1])
    return out
'''

NORM = '''

@triton.autotune(configs=CONFIGS_{index}, key={key})
@triton.jit
def {name}(x, w, out, n_tokens, eps, D: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    v = tl.load(x + row * D + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(v * v, axis=0) / D + eps)
    tl.store(out + row * D + cols, (v / rms * scale * {alpha}).to(out.dtype.element_ty), mask=mask)


def {name}_launch(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_tokens, d = x.shape
    out = torch.empty_like(x)
    {name}[(n_tokens,)](x, w, out, n_tokens, eps, d)
    return out
'''

GEMM = '''

@triton.autotune(
    configs=[
        triton.Config({{"BM": 128, "BN": 128, "BK": 64}}, num_warps=8, num_stages=3),
        triton.Config({{"BM": 64, "BN": 128, "BK": 64}}, num_warps=4, num_stages=4),
    ],
    key={key},
    reset_to_zero={reset},
)
@triton.jit
def {name}(a, b, c, M, N, K: tl.constexpr, SPLIT_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = pid_k * BK + tl.arange(0, BK)
    a_ptrs = a + rm[:, None] * K + rk[None, :]
    b_ptrs = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK * SPLIT_K)):
        x = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK * SPLIT_K, other=0.0)
        y = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK * SPLIT_K, other=0.0)
        acc = tl.dot(x, y, acc)
        a_ptrs += BK * SPLIT_K
        b_ptrs += BK * SPLIT_K * N
    acc = acc * {alpha}
    c_ptrs = c + rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c.dtype.element_ty), mask=mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask)
'''

PLAIN = '''

@triton.jit
def {name}(x, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    v = tl.where(v > 0, v, v * {alpha})
    tl.store(out + offs, v.to(out.dtype.element_ty), mask=mask)


@triton.jit
def {name}_histogram(x, bins, n, NUM_BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0)
    tl.atomic_add(bins + (v % NUM_BINS), 1, mask=offs < n)


def {name}_launch(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    {name}[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


class {cls}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return {name}_launch(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad, grad * {alpha})
'''

COMMON = '''"""Shared autotuning configurations."""

import triton

MODEL_KEYS = ["D"]
{configs}
'''

TEST = '''"""Tests for module {index}."""

import os

import pytest
import torch

from kernels.pkg{package} import ops_{index} as ops


@pytest.fixture(autouse=True)
def _seed(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    torch.manual_seed({index})


@pytest.mark.parametrize("n", [1, 127, 4096])
def test_elementwise(n):
    x = torch.randn(n)
    torch.testing.assert_close(ops.ew_{index}_launch(x, x), x * torch.sigmoid({alpha} * x) * x)


def test_interpreter_runs_in_a_child_process():
    env = {{**os.environ, "{variable}": "1"}}
    assert env["{variable}"] == "1"
'''


def generate(root: Path, files: int, tests: int, autotuned: float = 0.4, seed: int = 0) -> dict[str, int]:
    """Write the tree; returns counts. `autotuned`: the fraction of kernel modules with autotuned kernels
    (the others hold plain `@triton.jit` kernels, one of them with atomics, and their launchers).
    Deterministic for a seed."""
    rng = random.Random(seed)
    packages = max(1, files // 50)
    (root / "pyproject.toml").write_text('[project]\nname = "kernels"\n\n[tool.kgate]\ntargets = ["sm_120a"]\n')
    counts = {"modules": 0, "tests": 0, "kernels": 0, "autotuned": 0}
    for package in range(packages):
        folder = root / "kernels" / f"pkg{package}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
        configs = "\n".join(f'CONFIGS_{i} = [triton.Config({{"BLOCK": b}}, num_warps=4) for b in (256, 512, 1024)]'
                            for i in range(package, files, packages))
        (folder / "common.py").write_text(COMMON.format(configs=configs))
    (root / "kernels" / "__init__.py").write_text("")
    for index in range(files):
        package = index % packages
        parts = [HEADER.format(index=index)]
        alpha = round(rng.uniform(0.5, 2.0), 3)
        if rng.random() < autotuned:
            parts.append(ELEMENTWISE.format(name=f"ew_{index}", alpha=alpha))
            norm_key = rng.choice(['["D"]', "MODEL_KEYS", '["n_tokens", "D"]'])
            parts.append(NORM.format(name=f"rmsnorm_{index}", index=index, key=norm_key, alpha=alpha))
            gemm_key = rng.choice(['["K", "SPLIT_K"]', '["M", "N", "K"]', '["K"]'])
            reset = rng.choice(['["c"]', "None"])
            parts.append(GEMM.format(name=f"gemm_{index}", key=gemm_key, reset=reset, alpha=alpha))
            counts["autotuned"] += 1
        else:
            parts.append(PLAIN.format(name=f"ew_{index}", cls=f"LeakyRelu{index}", alpha=alpha))
        (root / "kernels" / f"pkg{package}" / f"ops_{index}.py").write_text("".join(parts))
        counts["modules"] += 1
        counts["kernels"] += 3
    test_dir = root / "tests"
    test_dir.mkdir(exist_ok=True)
    for index in range(tests):
        variable = "TRITON_INTERPRET" if index % 5 == 0 else "TRITON_DEBUG"
        (test_dir / f"test_ops_{index}.py").write_text(TEST.format(index=index, package=index % packages,
                                                                   alpha=0.5, variable=variable))
        counts["tests"] += 1
    return counts


def fastest(commands: dict[str, list[str]], cwd: Path, runs: int, env: dict[str, str],
            before: dict[str, Callable[[], None]] | None = None) -> dict[str, tuple[float, float]]:
    """(wall, cpu) seconds of each command, the fastest of `runs` rounds, commands interleaved.

    CPU time is user + system of the process and of the workers it waited for; when the
    machine is shared it says how much work a tool did, which its wall time may not.
    """
    best = {name: (float("inf"), float("inf")) for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            if before and name in before:
                before[name]()
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"lint_bench: `{name}` not found (pip install -e '.[test]')")
    return found


def byte_compile() -> None:
    import kgate.rules

    import kgate

    for package in (kgate, kgate.rules):
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500, help="kernel modules to generate (default 500)")
    parser.add_argument("--tests", type=int, default=100, help="test modules to generate (default 100)")
    parser.add_argument("--autotuned", type=float, default=0.4,
                        help="fraction of kernel modules with autotuned kernels (default 0.4; 1 = worst case)")
    parser.add_argument("--runs", type=int, default=7, help="runs per measurement; the fastest counts")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    args = parser.parse_args()
    kgate, ruff = [tool("kgate")], tool("ruff")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    byte_compile()
    scratch = None
    if args.keep:
        root = Path(args.keep).resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        scratch = tempfile.mkdtemp(prefix="kgate-lint-bench-")
        root = Path(scratch)
    try:
        return measure(root, args, kgate, ruff, env)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def measure(root: Path, args: argparse.Namespace, kgate: list[str], ruff: str, env: dict[str, str]) -> int:
    counts = generate(root, args.files, args.tests, args.autotuned)
    total = sum(1 for _ in root.rglob("*.py"))
    # The lint cache trusts a file's stat only once its mtime is two seconds old (see kgate/pipeline/lint_cache.py).
    time.sleep(2.1)
    cache = root / ".kgate-cache"
    ruff_cache = root / ".ruff_cache"

    def drop_kgate_cache() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    one_file = str(next(root.glob("kernels/pkg0/ops_*.py")).relative_to(root))
    cold = fastest({"kgate lint (cold)": kgate + ["lint"],
                    "ruff check --select ALL --no-cache": [ruff, "check", "--select", "ALL", "--no-cache", "."]},
                   root, args.runs, env, before={"kgate lint (cold)": drop_kgate_cache})
    subprocess.run(kgate + ["lint"], cwd=root, env=env, stdout=subprocess.DEVNULL)  # fill the cache
    subprocess.run([ruff, "check", "--select", "E9", "."], cwd=root, env=env, stdout=subprocess.DEVNULL)
    warm = fastest({"kgate lint (warm)": kgate + ["lint"],
                    "ruff check --select E9 --no-cache": [ruff, "check", "--select", "E9", "--no-cache", "."],
                    "ruff check --select E9 (ruff's cache primed)": [ruff, "check", "--select", "E9", "."],
                    "kgate lint ONE_FILE (warm, as the commit hook)": kgate + ["lint", "--force-exclude", one_file],
                    "python -c pass (interpreter start)": [sys.executable, "-c", "pass"]},
                   root, args.runs, env)
    check = subprocess.run(kgate + ["lint", "--format", "json"], cwd=root, env=env, capture_output=True, text=True)
    findings = check.stdout.count('"code": "KG')

    cores = os.cpu_count() or 1
    print(f"machine: {cores} cores, Python {sys.version.split()[0]}, {os.uname().machine}; "
          f"fastest of {args.runs} runs each")
    print(f"tree: {counts['modules']} kernel modules ({counts['kernels']} kernels; {counts['autotuned']} modules "
          f"with autotuned kernels), {counts['tests']} test modules, {total} Python files; "
          f"kgate reports {findings} findings")
    print("ruff: --no-cache runs neither read nor write .ruff_cache; the primed E9 run reads it "
          f"({'present' if ruff_cache.exists() else 'absent'})")
    print()
    times = {**cold, **warm}
    print(f"{'':<60} {'wall':>8}    {'cpu':>8}")
    for name, (wall, cpu) in times.items():
        print(f"{name.replace('ONE_FILE', one_file):<60} {wall * 1000:8.1f} ms {cpu * 1000:8.1f} ms")
    print()
    ratios = [
        ("cold: kgate lint / ruff --select ALL --no-cache", cold["kgate lint (cold)"][0],
         cold["ruff check --select ALL --no-cache"][0], 1.0),
        ("warm: kgate lint / ruff --select E9 --no-cache", warm["kgate lint (warm)"][0],
         warm["ruff check --select E9 --no-cache"][0], 3.0),
        ("warm: kgate lint / ruff --select E9, ruff's cache primed", warm["kgate lint (warm)"][0],
         warm["ruff check --select E9 (ruff's cache primed)"][0], None),
    ]
    print("ratios of wall times:")
    met = True
    for label, ours, theirs, target in ratios:
        ratio = ours / theirs
        verdict = ""
        if target is not None:
            verdict = f"target <= {target:g}x: {'met' if ratio <= target else 'MISSED'}"
            met = met and ratio <= target
        else:
            verdict = "reference"
        print(f"{label:<60} {ratio:6.2f}x  {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
