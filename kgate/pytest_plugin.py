"""pytest plugin (entry point `kgate`): a `ulp` fixture that asserts and records precision, and a
`kgate_compile` fixture that compiles a kernel and hands back its facts.

    def test_gelu(ulp):
        ulp(got, ref, "bf16", max_ulp=0.6, kernel="gelu", direction="forward")

The call fails like `kgate.numerics.assert_ulp` (the message names the worst
element, its value, the reference and the ULP). With `--kgate-ulp-record FILE`
(or `KGATE_ULP_RECORD=FILE` in the environment) every check, passing or not,
also appends one line of strict JSON to FILE: `kgate ulp` builds its table from these
lines, so the table always shows exactly what the tests measured.

    def test_no_spills(kgate_compile):
        facts = kgate_compile(matmul_kernel, signature={...}, constexprs={...}, target="sm_120a")
        assert facts.spills == 0 and facts.has_block_scale

`kgate_compile` is `kgate.api.compile_kernel` with the project found from pytest's root folder: kgate's own
compile path and its cache, so an unchanged kernel compiles once, not once per test run (docs/api.md).

Loading this plugin imports neither torch, numpy nor Triton.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kgate.numerics import NonFiniteMismatch, UlpMismatch, assert_ulp, format_of, rounding_floor, ulp_report
from kgate.report.json_report import dumps

if TYPE_CHECKING:
    from kgate.api import KernelFacts

RECORD_ENV = "KGATE_ULP_RECORD"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kgate", "kgate precision tests")
    group.addoption("--kgate-ulp-record", metavar="FILE", default=None,
                    help=f"append one JSON line per `ulp` check to FILE (default: ${RECORD_ENV})")


@dataclass
class UlpCheck:
    """The `ulp` fixture: call it like assert_ulp, with labels for the record."""

    test: str
    record_path: str | None

    def __call__(self, got: Any, ref: Any, dtype: Any, max_ulp: float, *, mode: str = "elementwise",
                 kernel: str = "", direction: str = "", output: str = "", where: str = "",
                 reason: str = "") -> float:
        """Assert `got` is within `max_ulp` of `ref`; record the worst error; return it.

        `where` says what ran the kernel (e.g. "interpreter" or a GPU's name);
        `reason` says why the threshold is what it is when it was widened.
        """
        __tracebackhide__ = True  # a failure points at the test's line, not at this helper
        fmt = format_of(dtype)
        try:
            worst: float = ulp_report(got, ref, fmt.name, mode).ulp
        except NonFiniteMismatch:
            worst = math.inf
        if self.record_path:
            import numpy as np

            append_record(self.record_path, {
                "test": self.test, "kernel": kernel, "dtype": fmt.name, "direction": direction, "output": output,
                "shape": "x".join(str(n) for n in np.shape(ref)) or "scalar",
                "mode": mode, "ulp": worst, "max_ulp": max_ulp,
                "floor": rounding_floor(ref, fmt.name, mode), "where": where, "reason": reason,
                "passed": worst <= max_ulp,
            })
        label = " ".join(part for part in (kernel, direction, output, fmt.name) if part)
        try:
            assert_ulp(got, ref, fmt.name, max_ulp, mode)
        except UlpMismatch as exc:
            detail = f" [{reason}]" if reason else ""
            raise UlpMismatch(f"{label}: {exc}{detail}" if label else f"{exc}{detail}") from None
        return worst


def record_path(config: pytest.Config) -> str | None:
    return config.getoption("--kgate-ulp-record", default=None) or os.environ.get(RECORD_ENV) or None


@pytest.fixture
def ulp(request: pytest.FixtureRequest) -> UlpCheck:
    """Assert precision in ULP of the output dtype, and record it for `kgate ulp`."""
    return UlpCheck(request.node.nodeid, record_path(request.config))


class KernelCompiler:
    """The `kgate_compile` fixture: `kgate.api.compile_kernel` for the project pytest runs in."""

    def __init__(self, rootpath: Path) -> None:
        self.rootpath = rootpath

    def __call__(self, kernel: Any, *, target: str | None = None, project: Any = None, **fields: Any) -> KernelFacts:
        """Compile one variant of `kernel` (the `@triton.jit` function or "module:function") with a
        `kgate.register`'s fields for `target` (default: the project's first target); its `KernelFacts`. The
        project is pytest's root folder's unless `project` names another, as compile_kernel's `project` does."""
        __tracebackhide__ = True
        from kgate.api import compile_kernel  # the compile side loads only when a test asks for a kernel

        return compile_kernel(kernel, target=target, project=self.rootpath if project is None else project,
                              **fields)


@pytest.fixture
def kgate_compile(request: pytest.FixtureRequest) -> KernelCompiler:
    """Compile a Triton kernel with kgate (cached) and return its facts: registers, spills, MMA, occupancy."""
    return KernelCompiler(request.config.rootpath)


def pytest_configure(config: pytest.Config) -> None:
    path = record_path(config)
    if path:
        config.pluginmanager.register(_SkipRecorder(path), "kgate-ulp-skips")


class _SkipRecorder:
    """Records skipped tests with their reason, so that a table of results says what did not run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            append_record(self.path, {"test": report.nodeid, "skipped": reason})


def append_record(path: str, row: dict[str, Any]) -> None:
    """One JSON line, appended in a single write: O_APPEND keeps lines whole across parallel workers.

    Strict JSON, as kgate's JSON reports: a non-finite number (a result that overflowed, a threshold left
    open) is written as the string "nan", "inf" or "-inf"."""
    line = dumps(row, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
