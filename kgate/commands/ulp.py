"""`kgate ulp`: run the bundled kernels' precision tests and print the worst ULP of each output.

The tests are the installed `kgate.kernels` test modules, run by pytest in a
child process with kgate's pytest plugin recording every `ulp` check to a
JSON-lines file; the table is read back from that file, so it shows exactly
what the tests measured and judged. `--device` goes to the tests through
`KGATE_ULP_DEVICE`: `cpu` runs the Triton kernels under the interpreter (in
grandchild processes: the test process itself never interprets), `gpu`
requires a CUDA device, `auto` takes one when torch sees it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgate.core.errors import KgateError
from kgate.report.table import aligned
from kgate.support import scratch as made_scratch
from kgate.support import tools
from kgate.support.install import install_hint

TIMEOUT = 3600.0
DIRECTIONS = {"forward": 0, "backward": 1}


@dataclass(frozen=True)
class Check:
    """One recorded `ulp` check."""

    kernel: str
    dtype: str
    direction: str
    output: str
    shape: str
    mode: str
    ulp: float  # inf when the result had a NaN or infinity the reference did not
    max_ulp: float
    floor: float
    where: str
    reason: str
    passed: bool

    @property
    def key(self) -> tuple[str, int, str, str, tuple[int, ...], str]:
        size = tuple(int(n) for n in self.shape.split("x") if n.isdigit())
        return (self.kernel, DIRECTIONS.get(self.direction, 2), self.output, self.dtype, size, self.shape)


def run(args: argparse.Namespace) -> int:
    _require_packages(args.device)
    started = time.perf_counter()
    with made_scratch.folder("kgate-ulp-") as folder:
        record = Path(folder) / "ulp.jsonl"
        # From the temporary folder: `python -m` puts the working directory first on
        # sys.path, where a `kgate/` folder (a checkout of kgate, say) would hide the
        # installed package and its tests.
        proc = tools.run(pytest_argv(Path(folder), record, args.keyword), cwd=folder, env=_environment(args.device),
                         timeout=TIMEOUT, check=False)
        checks, skipped = read_records(record)
    seconds = time.perf_counter() - started
    if proc.returncode == 5:
        raise KgateError(f"no precision test matches -k {args.keyword!r}" if args.keyword
                         else "no precision tests found in kgate.kernels")
    if proc.returncode not in (0, 1):
        raise KgateError(f"the precision tests could not run (pytest exit {proc.returncode}):\n"
                         + _tail(proc.stdout + proc.stderr))
    for line in render(checks, skipped):
        print(line)
    if proc.returncode == 1:
        print("\n" + _failure_summary(proc.stdout + proc.stderr))
    failed = sum(not c.passed for c in checks)
    wheres = ", ".join(sorted({c.where for c in checks})) or "nowhere"
    errors = " (and tests that failed before measuring: see above)" if proc.returncode == 1 and not failed else ""
    verdict = "FAILED" if proc.returncode else "passed"
    print(f"\nkgate ulp: {verdict}: {len(checks) - failed} of {len(checks)} checks within their thresholds, "
          f"{len(skipped)} skipped; ran on {wheres} in {seconds:.1f} s{errors}")
    return 1 if proc.returncode else 0


def pytest_argv(folder: Path, record: Path, keyword: str | None) -> list[str]:
    """pytest on the installed kernels package, isolated from the caller's pytest configuration.

    An empty configuration file of our own (in `folder`) keeps pytest from
    picking up the addopts or plugins of whatever project the command runs in.
    """
    package = _kernels_folder()
    config = folder / "pytest.ini"
    config.write_text("[pytest]\n")
    argv = [sys.executable, "-m", "pytest", "--pyargs", "kgate.kernels", "-p", "kgate.pytest_plugin",
            f"--kgate-ulp-record={record}", "-q", "-rfEs", "--no-header", "-p", "no:cacheprovider",
            "-c", str(config), f"--rootdir={package.parent}"]
    if keyword:
        argv += ["-k", keyword]
    return argv


def read_records(path: Path) -> tuple[list[Check], list[tuple[str, str]]]:
    """(checks sorted by kernel, direction, output, dtype; (test, reason) of skipped tests)."""
    checks: list[Check] = []
    skipped: list[tuple[str, str]] = []
    if not path.exists():
        return checks, skipped
    for line in path.read_text().splitlines():
        row: dict[str, Any] = json.loads(line)
        if "skipped" in row:
            skipped.append((row["test"], row["skipped"]))
            continue
        checks.append(Check(row["kernel"], row["dtype"], row["direction"], row["output"], row["shape"], row["mode"],
                            _number_of(row["ulp"]), _number_of(row["max_ulp"]), _number_of(row["floor"]),
                            row["where"], row["reason"], bool(row["passed"])))
    return sorted(checks, key=lambda c: c.key), sorted(skipped)


def _number_of(value: Any) -> float:
    """A number as the plugin writes it: a JSON number, or "nan", "inf", "-inf" (`json_report.finite`); null
    (an older plugin's non-finite ULP) is infinite."""
    if value is None:
        return math.inf
    if isinstance(value, str) and value not in ("nan", "inf", "-inf"):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def render(checks: list[Check], skipped: list[tuple[str, str]]) -> list[str]:
    """The table, one row per output, then the reasons for widened thresholds and skipped tests."""
    reasons = sorted({c.reason for c in checks if c.reason})
    marks = {reason: "*" * (i + 1) for i, reason in enumerate(reasons)}
    header = ("kernel", "direction", "output", "dtype", "shape", "mode", "worst ULP", "threshold", "floor",
              "ran on", "verdict")
    rows = [header]
    for c in sorted(checks, key=lambda c: c.key):
        rows.append((c.kernel, c.direction, c.output, c.dtype, c.shape, c.mode, _number(c.ulp),
                     _number(c.max_ulp) + marks.get(c.reason, ""), _number(c.floor), c.where,
                     "ok" if c.passed else "FAIL"))
    out = aligned(rows, {6, 7, 8})
    if reasons or skipped:
        out.append("")
    out += [f"{marks[reason]} {reason}" for reason in reasons]
    by_reason: dict[str, list[str]] = {}
    for test, reason in skipped:
        by_reason.setdefault(reason, []).append(test.rsplit("/", 1)[-1])
    out += [f"skipped {len(tests)}: {reason} ({', '.join(tests)})" for reason, tests in sorted(by_reason.items())]
    return out


def _number(value: float) -> str:
    return "nan/inf" if not math.isfinite(value) else f"{value:.3f}"


def _environment(device: str) -> dict[str, str]:
    env = {**os.environ, "KGATE_ULP_DEVICE": device, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    # The test process must compile real kernels; only the runner's own children interpret.
    env.pop("TRITON_INTERPRET", None)
    return env


def _kernels_folder() -> Path:
    spec = importlib.util.find_spec("kgate.kernels")
    if spec is None or not spec.submodule_search_locations:
        raise KgateError("kgate.kernels is not installed: reinstall kgate")
    return Path(next(iter(spec.submodule_search_locations)))


def _require_packages(device: str) -> None:
    missing = [name for name in ("torch", "numpy", "pytest") if importlib.util.find_spec(name) is None]
    if missing:
        raise KgateError(f"kgate ulp needs {', '.join(missing)}: {install_hint('ulp', missing)}")
    if device == "gpu":
        import torch

        if not torch.cuda.is_available():
            raise KgateError("--device gpu: torch sees no CUDA device (use --device cpu for the interpreter)")


def _failure_summary(output: str) -> str:
    """pytest's short test summary: one line per failed test, with the start of its message."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "short test summary info" in line), None)
    if start is None:
        return _tail(output)
    return "\n".join(line for line in lines[start + 1:] if line.startswith(("FAILED", "ERROR")))


def _tail(text: str, count: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-count:])
