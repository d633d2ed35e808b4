"""The baseline file: what a project accepts today, pinned so that it can only get better.

Format (TOML, default `kgate-baseline.toml`), one entry per line, sorted, so
that the same state gives the same bytes and a diff reads like a changelog:

    # kgate baseline: accepted debts. Re-pin with `kgate baseline update`.
    version = 1

    [toolchain]
    ptxas = "13.4, V13.4.59"
    triton = "3.9.0"

    [kernels]
    "pkg.gemm:matmul|BK=64,BM=128,BN=128,warps=8,stages=3|sm_120a" = { registers = 245, spill_bytes = 0, stack_bytes = 0, smem_bytes = 32768 }

    [findings]
    "KG102|pkg/gemm.py|pkg.gemm:matmul|BK=64,BM=128,BN=128,warps=8,stages=3|sm_120a" = 1
    "KG303|csrc/attention.cu|csrc/attention.cu" = { count = 1, value = 820 }

Kernels are pinned by identity (kernel, variant, target); findings by rule,
path and a stable identity (kernel, or enclosing scope plus a normalised
snippet), never by line number, with counts. Size-like findings also carry
the accepted size, rounded up to the project's slack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.atomicio import atomic_write
from kgate.config import toml_document
from kgate.errors import BaselineError

FORMAT_VERSION = 1
METRICS = ("registers", "spill_bytes", "stack_bytes", "smem_bytes")
HEADER = "# kgate baseline: accepted debts. Re-pin with `kgate baseline update`; review every change.\n"


@dataclass(frozen=True)
class Pin:
    """An accepted finding: how many times it occurs, and for size-like rules the accepted size."""

    count: int
    value: int | None = None


@dataclass
class Baseline:
    toolchain: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: dict[str, Pin] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.kernels and not self.findings


def kernel_key(kernel: str, variant: str, target: str) -> str:
    return f"{kernel}|{variant}|{target}"


def split_kernel_key(key: str) -> tuple[str, str, str]:
    kernel, variant, target = key.rsplit("|", 2)
    return kernel, variant, target


# --------------------------------------------------------------------------- reading


def load(path: Path, display: str | None = None) -> Baseline:
    """Read a baseline; a missing file is an empty baseline, a broken one a BaselineError naming the line."""
    where = display or str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Baseline()
    except OSError as exc:
        raise BaselineError(f"cannot read the baseline: {exc.strerror}", path=where) from None
    return parse(raw, where)


def parse(raw: bytes, where: str) -> Baseline:
    data, text = toml_document(raw, where, BaselineError, "not valid UTF-8 (re-generate it with `kgate baseline update`)")
    return _from_data(data, text, where)


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return None


def _from_data(data: dict[str, Any], text: str, where: str) -> Baseline:
    def fail(message: str, needle: str) -> BaselineError:
        return BaselineError(message, path=where, line=_line_of(text, needle))

    unknown = sorted(set(data) - {"version", "toolchain", "kernels", "findings"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}", unknown[0])
    version = data.get("version")
    if version != FORMAT_VERSION:
        raise fail(f"unsupported baseline version {version!r} (this kgate writes {FORMAT_VERSION})", "version")
    baseline = Baseline()
    toolchain = data.get("toolchain", {})
    if not isinstance(toolchain, dict) or not all(isinstance(v, str) for v in toolchain.values()):
        raise fail("[toolchain] must map tool names to version strings", "[toolchain]")
    baseline.toolchain = dict(toolchain)
    kernels = data.get("kernels", {})
    if not isinstance(kernels, dict):
        raise fail("[kernels] must be a table", "kernels")
    for key, metrics in kernels.items():
        if key.count("|") < 2:
            raise fail(f"kernel entry {key!r} is not 'kernel|variant|target'", key)
        if not isinstance(metrics, dict) or set(metrics) != set(METRICS) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in metrics.values()):
            raise fail(f"kernel entry {key!r} must hold non-negative integers {', '.join(METRICS)}", key)
        baseline.kernels[key] = dict(metrics)
    findings = data.get("findings", {})
    if not isinstance(findings, dict):
        raise fail("[findings] must be a table", "findings")
    known = set(registry.codes())
    for key, value in findings.items():
        if key.count("|") < 2:
            raise fail(f"finding entry {key!r} is not 'CODE|path|identity'", key)
        if key.split("|", 1)[0] not in known:
            # Never judged (no rule reports it), so a typo would sit in the file for ever.
            raise fail(f"finding entry {key!r} names an unknown rule (see `kgate rules`)", key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            baseline.findings[key] = Pin(value)
        elif isinstance(value, dict) and set(value) == {"count", "value"} and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()) \
                and value["count"] > 0:
            baseline.findings[key] = Pin(value["count"], value["value"])
        else:
            raise fail(f"finding entry {key!r} must be a positive count or {{ count = N, value = V }}", key)
    return baseline


# --------------------------------------------------------------------------- writing


def _string(value: str) -> str:
    """A TOML basic string (JSON's escaping is valid TOML for these characters)."""
    return json.dumps(value, ensure_ascii=False)


def render(baseline: Baseline) -> str:
    lines = [HEADER, f"version = {FORMAT_VERSION}\n"]
    if baseline.toolchain:
        lines.append("\n[toolchain]\n")
        for name in sorted(baseline.toolchain):
            lines.append(f"{_string(name)} = {_string(baseline.toolchain[name])}\n")
    lines.append("\n[kernels]\n")
    for key in sorted(baseline.kernels):
        metrics = baseline.kernels[key]
        body = ", ".join(f"{m} = {metrics[m]}" for m in METRICS)
        lines.append(f"{_string(key)} = {{ {body} }}\n")
    lines.append("\n[findings]\n")
    for key in sorted(baseline.findings):
        pin = baseline.findings[key]
        if pin.value is None:
            lines.append(f"{_string(key)} = {pin.count}\n")
        else:
            lines.append(f"{_string(key)} = {{ count = {pin.count}, value = {pin.value} }}\n")
    return "".join(lines)


def save(baseline: Baseline, path: Path, display: str | None = None) -> None:
    """Write atomically: an interrupted write leaves the old file whole."""
    try:
        atomic_write(path, render(baseline).encode())
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline: {exc.strerror}", path=display or str(path)) from None
