"""kgate lint against ruff on the same trees, every ratio taken in one run on one machine.

    python bench/lint_bench.py                                  # the generated kernel tree
    python bench/lint_bench.py --serving 10000                  # a generated serving engine (bench/synth.py)
    python bench/lint_bench.py --tree ../some/repo --trees-in ../corpora --rounds 3

Each tree is copied into a scratch folder and measured by `bench/lint_trees.py` (see there for what each
figure is): the interpreter's floor (`python -c "import kgate"`), `kgate lint` cold against `ruff check --no-cache
--select ALL` (target: at most floor + 0.5 x ruff), warm against `ruff check --no-cache --select E9` (target: at
most floor + 2 x ruff), one file changed against a cold lint of that one file (target: at most warm + 1.2 x that),
for a file no other verdict reads and for the module the kernel modules import most, and the peak memory of the cold
runs (target: at most 2 x ruff's). The findings of the warm and changed runs are compared with `--no-cache` runs.
Medians of `--rounds` rounds, each round running every command once, in turn.

The generated kernel tree (`generate`): Triton kernel modules plus pytest modules; by default 40% of the kernel
modules hold autotuned kernels (autotune decorators with keys, some of them run-time, reset_to_zero lists, split-K
atomics, jit helpers), the others plain `@triton.jit` kernels with their launchers and autograd wrappers.
`--autotuned 1` makes every module autotuned: the worst case for kgate, which then parses every file.

kgate's modules are byte-compiled first, as `pip install` does (the environment may set PYTHONDONTWRITEBYTECODE,
which would make every run recompile kgate from source).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lint_trees
import synth

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
    parser.add_argument("--files", type=int, default=500, help="kernel modules of the generated tree (default 500; "
                        "0: none)")
    parser.add_argument("--tests", type=int, default=100, help="test modules of the generated tree (default 100)")
    parser.add_argument("--autotuned", type=float, default=0.4,
                        help="fraction of kernel modules with autotuned kernels (default 0.4; 1 = worst case)")
    parser.add_argument("--serving", type=int, default=0, metavar="N",
                        help="also a generated serving engine of N Python modules (bench/synth.py)")
    parser.add_argument("--tree", action="append", default=[], metavar="DIR", help="also this tree (copied)")
    parser.add_argument("--trees-in", action="append", default=[], metavar="DIR",
                        help="also every folder in DIR, each a tree")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per tree; the median counts (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = parser.parse_args()
    kgate, ruff = tool("kgate"), tool("ruff")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    byte_compile()
    trees = [Path(t) for t in args.tree] + [p for d in args.trees_in for p in sorted(Path(d).iterdir()) if p.is_dir()]
    results = []
    with tempfile.TemporaryDirectory(prefix="kgate-lint-bench-") as scratch:
        if args.files:
            root = Path(scratch) / "generated"
            root.mkdir()
            generate(root, args.files, args.tests, args.autotuned)
            results.append(one(f"generated ({args.files} kernel modules)", root, kgate, ruff, env, args.rounds))
        if args.serving:
            root = Path(scratch) / "serving"
            synth.serving_engine(root, args.serving)
            results.append(one(f"serving engine ({args.serving} modules)", root, kgate, ruff, env, args.rounds))
        for tree in trees:
            root = Path(scratch) / tree.name
            shutil.copytree(tree, root, symlinks=True, ignore=lint_trees.IGNORED_COPY)
            results.append(one(tree.name, root, kgate, ruff, env, args.rounds))
            shutil.rmtree(root, ignore_errors=True)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps([{"tree": r.name, "files": r.files, "edited": r.edited,
                                                "same_findings": r.same_findings,
                                                "figures": {k: vars(f) for k, f in r.figures.items()}}
                                               for r in results], indent=1))
    return 0 if all(all(r.same_findings.values()) and all(q <= 1 for *_x, q in lint_trees.ratios(r))
                    for r in results) else 1


def one(name: str, root: Path, kgate: str, ruff: str, env: dict[str, str], rounds: int) -> lint_trees.TreeResult:
    # The lint cache trusts a file's stat only once its mtime is two seconds old (kgate/pipeline/lint_cache.py).
    time.sleep(2.1)
    return lint_trees.measure_tree(name, root, kgate, ruff, env, rounds, lambda text: print(text, file=sys.stderr))


def report(results: list[lint_trees.TreeResult]) -> None:
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, {os.uname().machine}; load average "
          f"at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; medians of each round's wall time")
    for result in results:
        fig = result.figures
        print(f"\n{result.name}: {result.files} Python files; edited: "
              + ", ".join(f"{k} {v}" for k, v in result.edited.items()))
        print(f"  {'command':<44} {'wall':>9} {'cpu':>9} {'peak MB':>8}")
        for label, figures in fig.items():
            peak = f"{figures.peak_kb / 1024:8.0f}" if figures.peak_kb else ""
            print(f"  {label:<44} {figures.wall:8.3f}s {figures.cpu:8.3f}s {peak}")
        for label, ours, limit, ratio in lint_trees.ratios(result):
            print(f"  {label:<52} {ours:8.3f} / {limit:8.3f} = {ratio:5.2f} {'met' if ratio <= 1 else 'MISSED'}")
        for kind, same in result.same_findings.items():
            print(f"  findings, {kind} run against --no-cache: {'the same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    sys.exit(main())
