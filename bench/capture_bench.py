"""`kgate capture` and `kgate check` over captured specialisations, measured side by side in one run.

    python bench/capture_bench.py [--modules 10] [--keep DIR]        # check over >= 300 captured specialisations
    python bench/capture_bench.py --overhead [--rounds 3] -- COMMAND   # a test run with and without capture

The first form builds the synthetic repository of bench/synth.py (Triton elementwise, reduction and GEMM
kernels), registers nothing, and captures a launch script that calls every kernel in both variants at
three sizes on CPU tensors (4096, 4104 and 1: divisible by 16, not, and the constant 1), so each variant
gives three specialisations. Then it measures, and prints with their targets and ratios:

- the capture itself (no GPU: launches are bound, nothing runs);
- the compile floor: every captured specialisation compiled by calling triton.compile directly, serially,
  with an empty cache;
- `kgate check` cold (empty caches) against 1.15 x floor / cores + 2 s, and warm (nothing changed) against
  min(1 s, 2 x `import kgate`).

The second form times COMMAND and `kgate capture -- COMMAND` alternately, `--rounds` times each, in the
current folder (the capture writes to a temporary file), and prints the medians and their ratio; the target
is at most 1.1. On a machine with a GPU, COMMAND runs and launches as usual under the recorder.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth
from check_bench import median_time, timed

SIZES = (4096, 4104, 1)

LAUNCHES = r'''
"""Every synthetic kernel in both variants at three sizes, on CPU tensors."""
import tomllib, importlib, torch
config = tomllib.load(open("kgate.registrations.toml", "rb"))
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
for entry in config["triton"]:
    module, _, name = entry["kernel"].partition(":")
    kernel = getattr(importlib.import_module(module), name)
    variants = [{}] + list(entry.get("variants", []))
    for override in variants:
        constexprs = {**entry["constexprs"], **{k: v for k, v in override.items() if k not in ("num_warps", "num_stages")}}
        options = {"num_warps": override.get("num_warps", entry.get("num_warps", 4)),
                   "num_stages": override.get("num_stages", entry.get("num_stages", 3))}
        for size in SIZES:
            args = []
            for arg, ty in entry["signature"].items():
                if ty.startswith("*"):
                    args.append(torch.empty(size * 16 + 64, dtype=DTYPES[ty[1:]]))
                elif ty.startswith("fp"):
                    args.append(1e-6)
                else:
                    args.append(size)
            kernel[(1,)](*args, **constexprs, **options)
'''

FLOOR = r'''
import importlib, sys, time, tomllib, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, ".")
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
entries = tomllib.load(open("kgate-capture.toml", "rb"))["specialization"]
started = time.perf_counter()
for entry in entries:
    module, _, name = entry["kernel"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    signature, constants, attrs = {}, {}, {}
    for index, param in enumerate(fn.params):
        if param.name in entry["signature"]:
            signature[param.name] = entry["signature"][param.name]
            if param.name in entry.get("divisible", []):
                attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            signature[param.name] = "constexpr"
            value = entry.get("constexprs", {}).get(param.name, 1 if param.name in entry.get("equal_to_1", []) else None)
            constants[(index,)] = value
    triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", 120, 32),
                   options=entry["options"])
print(time.perf_counter() - started)
'''


def check_over_captures(modules: int, keep: str | None) -> None:
    cores = len(os.sched_getaffinity(0))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TRITON_INTERPRET")}
    workdir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="kgate-capture-bench-"))
    if workdir.exists() and keep:
        shutil.rmtree(workdir)
    counts = synth.generate(workdir, modules=modules, cuda_files=0)
    config = workdir / "kgate.toml"
    # The registrations drive the launch script; the project itself registers nothing: it is gated by capture.
    (workdir / "kgate.registrations.toml").write_text(config.read_text())
    config.write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (workdir / "launches.py").write_text(f"SIZES = {SIZES!r}\n" + LAUNCHES)
    kgate = [sys.executable, "-m", "kgate"]
    print(f"machine: {cores} cores, Python {sys.version.split()[0]}, {os.uname().machine}")
    try:
        capture, _code, _peak = timed([*kgate, "capture", "--device", "cpu", "--", sys.executable, "launches.py"],
                                      workdir, env)
        import tomllib

        specs = len(tomllib.loads((workdir / "kgate-capture.toml").read_text())["specialization"])
        print(f"synthetic repository: {counts['triton_variants']} registered variants launched at {len(SIZES)} "
              f"sizes: {specs} captured specialisations, target sm_120a")
        with tempfile.TemporaryDirectory() as cache:
            floor_env = {**env, "TRITON_CACHE_DIR": cache, "TRITON_ALWAYS_COMPILE": "1"}
            out = subprocess.run([sys.executable, "-c", FLOOR], cwd=workdir, env=floor_env, check=True,
                                 capture_output=True, text=True)
            floor = float(out.stdout.strip().splitlines()[-1])
        shutil.rmtree(workdir / ".kgate-cache", ignore_errors=True)
        check = [*kgate, "check", "-q"]
        cold, cold_code, peak_kb = timed(check, workdir, env, rss=True)
        warm = median_time(check, workdir, 5)
        import_time = median_time([sys.executable, "-c", "import kgate"], workdir, 10)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    cold_target = 1.15 * floor / cores + 2
    warm_target = min(1.0, 2 * import_time)
    rows = [
        (f"kgate capture of the launch script ({specs} specialisations)", capture, None, None),
        ("compile floor (serial triton.compile of every specialisation)", floor, None, None),
        ("kgate check cold", cold, cold_target, "1.15 x floor / cores + 2 s"),
        ("kgate check warm (nothing changed)", warm, warm_target, "min(1 s, 2 x import kgate)"),
        ('python -c "import kgate"', import_time, None, None),
    ]
    print(f"{'measure':<64} {'seconds':>9} {'target':>9} {'ratio':>7}  target rule")
    for name, value, target, rule in rows:
        if target is None:
            print(f"{name:<64} {value:>9.3f}")
        else:
            print(f"{name:<64} {value:>9.3f} {target:>9.3f} {value / target:>7.2f}  {rule}")
    print(f"{'peak memory, kgate and workers (MB)':<64} {peak_kb / 1024:>9.0f}")
    print(f"cold run exit code {cold_code}")


def overhead(command: list[str], rounds: int) -> None:
    kgate = [shutil.which("kgate") or ""] if shutil.which("kgate") else [sys.executable, "-m", "kgate"]
    with tempfile.TemporaryDirectory() as scratch:
        captured = [*kgate, "capture", "-o", str(Path(scratch) / "capture.toml"), "--", *command]
        plain_times, capture_times = [], []
        for _ in range(rounds):
            plain_times.append(timed(command, Path.cwd())[0])
            capture_times.append(timed(captured, Path.cwd())[0])
    plain, with_capture = statistics.median(plain_times), statistics.median(capture_times)
    print(f"command: {' '.join(command)} ({rounds} rounds, alternating; medians)")
    print(f"{'without capture':<24} {plain:>9.3f} s")
    print(f"{'with kgate capture':<24} {with_capture:>9.3f} s")
    print(f"{'ratio':<24} {with_capture / plain:>9.3f}   (target at most 1.1)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", type=int, default=10, help="synthetic modules of 5 kernels x 2 variants")
    parser.add_argument("--keep", metavar="DIR", help="build the repository here and keep it")
    parser.add_argument("--overhead", action="store_true", help="time COMMAND with and without capture")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.overhead:
        if not command:
            parser.error("--overhead needs a command after --")
        overhead(command, args.rounds)
    else:
        started = time.perf_counter()
        check_over_captures(args.modules, args.keep)
        print(f"bench wall time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
