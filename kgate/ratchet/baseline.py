"""The baseline file: what a project accepts today, pinned so that it can only get better.

Format (TOML, default `kgate-baseline.toml`), one entry per line, sorted, so
that the same state gives the same bytes and a diff reads like a changelog:

    # kgate baseline: accepted debts. Re-pin with `kgate baseline update`.
    version = 2

    [findings]
    "KG303|csrc/attention.cu|csrc/attention.cu" = { count = 1, value = 820 }

    [[toolchain]]
    versions = { "ptxas-blackwell" = "13.4.59", triton = "3.9.0" }

    [toolchain.kernels]
    "pkg.gemm:matmul|BK=64,BM=128,BN=128,warps=8,stages=3,bf16#1e242e9a|sm_120a" = { registers = 245, ... }

    [toolchain.findings]
    "KG102|pkg/gemm.py|pkg.gemm:matmul|BK=64,BM=128,BN=128,warps=8,stages=3,bf16#1e242e9a|sm_120a" = 1

What a compiler decides (kernel numbers, and the findings of compiled rules) is
pinned per toolchain: one `[[toolchain]]` table for each set of compiler
versions the baseline was updated with; a compile failure is never pinned
(`UNPINNABLE`), though an older file's pin of one is still read. Findings of source rules do
not depend on the compiler and are pinned once. A run compares with the pins of
its own toolchain (see `for_toolchain`); version 1 files (one `[toolchain]`
table) are read as one toolchain's pins.

Kernels are pinned by identity (kernel, variant, target); findings by rule,
path and a stable identity (kernel, or enclosing scope plus a normalised
snippet), never by line number, with counts. Size-like findings also carry
the accepted size, rounded up to the project's slack.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.config import toml_document, toml_string
from kgate.core.errors import BaselineError
from kgate.support.atomicio import atomic_write, read_input

FORMAT_VERSION = 2
METRICS = ("registers", "spill_bytes", "stack_bytes", "smem_bytes")
# Findings of kernels that were not compiled (a compile error, a compiler that timed out or crashed, captured
# specialisations that no longer fit): pinning one would stop gating its kernel for good, so none is ever pinned,
# and a pin of one (written by an older kgate, or by hand) accepts nothing.
UNPINNABLE = frozenset({"KG001", "KG005"})
HEADER = "# kgate baseline: accepted debts. Re-pin with `kgate baseline update`; review every change.\n"


@dataclass(frozen=True)
class Pin:
    """An accepted finding: how many times it occurs, and for size-like rules the accepted size."""

    count: int
    value: int | None = None


@dataclass
class ToolchainPins:
    """What one toolchain's compile of the project is accepted to be."""

    versions: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: dict[str, Pin] = field(default_factory=dict)  # findings of compiled rules and compile errors


@dataclass
class Baseline:
    """The baseline as one toolchain sees it: that toolchain's kernel pins, and every finding it accepts (the
    shared ones and its own); the other toolchains' pins ride along untouched in `others`."""

    toolchain: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: dict[str, Pin] = field(default_factory=dict)
    others: list[ToolchainPins] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.kernels and not self.findings and not self.others

    def sections(self) -> list[ToolchainPins]:
        """Every toolchain's pins, this view's first."""
        own = ToolchainPins(dict(self.toolchain), dict(self.kernels),
                            {k: v for k, v in self.findings.items() if toolchain_bound(k)})
        mine = [own] if own.versions or own.kernels or own.findings else []
        return mine + [o for o in self.others if not same_toolchain(o.versions, own.versions)]

    def for_toolchain(self, current: dict[str, str]) -> tuple[Baseline, str]:
        """The view a run with the `current` toolchain compares with, and how it was found: "pinned" (pins of
        this toolchain), "nearest" (none yet: the pins of the toolchain closest to it, kept as they are among
        the others so that re-pinning adds a toolchain instead of replacing one) or "none" (no pins of it, nor
        of another version of its compilers: every toolchain's pins are another's, kept as they are and
        compared with nothing). A run that compiled nothing names no compiler, so it has none; nor has a run
        whose compilers no pinned toolchain names (CUDA only, where only Triton was pinned)."""
        shared = {k: v for k, v in self.findings.items() if not toolchain_bound(k)}
        sections = self.sections()
        exact = [s for s in sections if same_toolchain(s.versions, current)]
        # Pins made by other versions of the same compilers (or by compilers a version 1 file did not name).
        related = [s for s in sections if current and (not s.versions or set(s.versions) & set(current))]
        if exact:
            chosen, status = exact[0], "pinned"
            rest = [s for s in sections if s is not chosen]
        elif related:
            chosen, status = nearest(related, current), "nearest"
            rest = sections
        else:
            return Baseline(findings=shared, others=sections), "none"
        return Baseline(dict(chosen.versions), dict(chosen.kernels), {**shared, **chosen.findings}, rest), status


def pinnable(finding_key: str) -> bool:
    """Whether the baseline may accept a finding: anything but a kernel that did not compile (`UNPINNABLE`)."""
    return finding_key.split("|", 1)[0] not in UNPINNABLE


def toolchain_bound(finding_key: str) -> bool:
    """Whether a finding depends on the compiler: compiled rules, and compile errors."""
    code = finding_key.split("|", 1)[0]
    return code == "KG001" or code in _compiled_codes()


def _compiled_codes() -> frozenset[str]:
    return frozenset(registry.codes("compiled"))


def same_toolchain(pinned: dict[str, str], current: dict[str, str]) -> bool:
    """The same compilers: every tool both name has the same version (a run without CUDA kernels names no nvcc)."""
    common = set(pinned) & set(current)
    return bool(common) and all(pinned[k] == current[k] for k in common) or not pinned and not current


def nearest(sections: list[ToolchainPins], current: dict[str, str]) -> ToolchainPins:
    """The pinned toolchain closest to `current`: most tools of the same version, then the newest Triton."""
    def score(section: ToolchainPins) -> tuple[int, tuple[int, ...]]:
        same = sum(section.versions.get(k) == v for k, v in current.items())
        return same, _version(section.versions.get("triton", ""))

    return max(sections, key=score)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.replace("+", ".").split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


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
        raw = read_input(path)
    except FileNotFoundError:
        return Baseline()
    except OSError as exc:
        raise BaselineError(f"cannot read the baseline: {exc.strerror}", path=where) from None
    return parse(raw, where)


# What to do about a baseline kgate cannot read: `kgate baseline update` reads the file first, so it cannot be the
# remedy of its own error.
RECOVER = ("fix it by hand, restore it from version control, or delete it and run `kgate baseline update "
           "--accept-new` to pin today's findings again")


def parse(raw: bytes, where: str) -> Baseline:
    try:
        data, text = toml_document(raw, where, BaselineError, "not valid UTF-8")
        return _from_data(data, text, where)
    except BaselineError as exc:
        raise BaselineError(f"{exc.message} ({RECOVER})", path=exc.path, line=exc.line) from None


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return None


def _from_data(data: dict[str, Any], text: str, where: str) -> Baseline:
    def fail(message: str, needle: str) -> BaselineError:
        return BaselineError(message, path=where, line=_line_of(text, needle))

    version = data.get("version")
    if "version" not in data:
        raise fail(f"no `version = {FORMAT_VERSION}` line: not a baseline kgate wrote", "version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in (1, FORMAT_VERSION):
        raise fail(f"unsupported baseline version {version!r} (this kgate writes {FORMAT_VERSION})", "version")
    if version == 1:
        unknown = sorted(set(data) - {"version", "toolchain", "kernels", "findings"})
        if unknown:
            raise fail(f"unknown key {unknown[0]!r}", unknown[0])
        section = _section({"versions": data.get("toolchain", {}), "kernels": data.get("kernels", {}),
                            "findings": {}}, fail, "[toolchain]")
        findings = _findings(data.get("findings", {}), fail)
        return Baseline(section.versions, section.kernels, findings)
    unknown = sorted(set(data) - {"version", "toolchain", "findings"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}", unknown[0])
    shared = _findings(data.get("findings", {}), fail)
    bound = [k for k in shared if toolchain_bound(k)]
    if bound:
        raise fail(f"finding entry {bound[0]!r} depends on the compiler: it belongs in a [[toolchain]]", bound[0])
    tables = data.get("toolchain", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise fail("toolchain must be an array of tables ([[toolchain]])", "toolchain")
    sections = [_section(t, fail, "[[toolchain]]") for t in tables]
    for i, section in enumerate(sections):
        if any(same_toolchain(section.versions, other.versions) for other in sections[:i]):
            raise fail(f"two [[toolchain]] tables pin the same compilers ({_describe(section.versions)})",
                       "[[toolchain]]")
    if not sections:
        return Baseline(findings=shared)
    first, rest = sections[0], sections[1:]
    return Baseline(first.versions, first.kernels, {**shared, **first.findings}, rest)


def _section(table: dict[str, Any], fail: Any, name: str) -> ToolchainPins:
    unknown = sorted(set(table) - {"versions", "kernels", "findings"})
    if unknown:
        raise fail(f"unknown key {unknown[0]!r} in a {name}", unknown[0])
    versions = table.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise fail(f"{name} versions must map tool names to version strings", "toolchain")
    kernels = table.get("kernels", {})
    if not isinstance(kernels, dict):
        raise fail("kernels must be a table", "kernels")
    pins: dict[str, dict[str, int]] = {}
    for key, metrics in kernels.items():
        if key.count("|") < 2:
            raise fail(f"kernel entry {key!r} is not 'kernel|variant|target'", key)
        if not isinstance(metrics, dict) or set(metrics) != set(METRICS) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in metrics.values()):
            raise fail(f"kernel entry {key!r} must hold non-negative integers {', '.join(METRICS)}"
                       f"{_fields_off(metrics)}", key)
        pins[key] = dict(metrics)
    findings = _findings(table.get("findings", {}), fail)
    shared = [k for k in findings if not toolchain_bound(k)]
    if shared:
        raise fail(f"finding entry {shared[0]!r} does not depend on the compiler: it belongs in [findings]",
                   shared[0])
    return ToolchainPins(dict(versions), pins, findings)


def _findings(table: Any, fail: Any) -> dict[str, Pin]:
    if not isinstance(table, dict):
        raise fail("[findings] must be a table", "findings")
    known = set(registry.codes())
    out: dict[str, Pin] = {}
    for key, value in table.items():
        if key.count("|") < 2:
            raise fail(f"finding entry {key!r} is not 'CODE|path|identity'", key)
        if key.split("|", 1)[0] not in known:
            # Never judged (no rule reports it), so a typo would sit in the file for ever.
            raise fail(f"finding entry {key!r} names an unknown rule (see `kgate rules`)", key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[key] = Pin(value)
        elif isinstance(value, dict) and set(value) == {"count", "value"} and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()) \
                and value["count"] > 0:
            out[key] = Pin(value["count"], value["value"])
        else:
            raise fail(f"finding entry {key!r} must be a positive count or {{ count = N, value = V }}", key)
    return out


def _describe(versions: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "no tools"


# --------------------------------------------------------------------------- writing


def _string(value: str) -> str:
    """A TOML basic string."""
    return toml_string(value)


def render(baseline: Baseline) -> str:
    lines = [HEADER, f"version = {FORMAT_VERSION}\n", "\n[findings]\n"]
    lines += _finding_lines({k: v for k, v in baseline.findings.items() if not toolchain_bound(k)})
    newest_first = sorted(baseline.sections(), reverse=True,
                          key=lambda s: (_version(s.versions.get("triton", "")), json.dumps(s.versions, sort_keys=True)))
    for section in newest_first:
        versions = ", ".join(f"{_string(k)} = {_string(v)}" for k, v in sorted(section.versions.items()))
        lines.append(f"\n[[toolchain]]\nversions = {{ {versions} }}\n" if versions else "\n[[toolchain]]\n")
        lines.append("\n[toolchain.kernels]\n")
        for key in sorted(section.kernels):
            metrics = section.kernels[key]
            body = ", ".join(f"{m} = {metrics[m]}" for m in METRICS)
            lines.append(f"{_string(key)} = {{ {body} }}\n")
        lines.append("\n[toolchain.findings]\n")
        lines += _finding_lines(section.findings)
    return "".join(lines)


def _finding_lines(findings: dict[str, Pin]) -> list[str]:
    out = []
    for key in sorted(findings):
        pin = findings[key]
        if pin.value is None:
            out.append(f"{_string(key)} = {pin.count}\n")
        else:
            out.append(f"{_string(key)} = {{ count = {pin.count}, value = {pin.value} }}\n")
    return out


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the baseline for one read-modify-write: a second `kgate baseline update` waits here, then re-pins over
    what the first wrote, so that neither loses the other's pins (two updates of different targets, kernels or
    shards at once).

    The lock is the baseline's folder (flock): the file itself is replaced by a rename on every write, so a lock
    on it would not be shared, and a lock file of its own would be one more file in the project. A file system
    without locks leaves the write as it was: whole, but last one wins.
    """
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def save(baseline: Baseline, path: Path, display: str | None = None) -> None:
    """Write atomically: an interrupted write leaves the old file whole."""
    try:
        text = render(baseline)
    except UnicodeEncodeError:
        key = next(k for k in [*baseline.findings, *(k for s in baseline.sections() for k in (*s.kernels, *s.findings))]
                   if not _encodable(k))
        raise BaselineError(f"cannot pin {key.encode('utf-8', 'backslashreplace').decode()!r}: a name in it is not "
                            f"valid UTF-8 (rename the file)", path=display or str(path)) from None
    try:
        atomic_write(path, text.encode(), follow=True)
    except OSError as exc:
        raise BaselineError(f"cannot write the baseline: {exc.strerror}", path=display or str(path)) from None


def _fields_off(metrics: object) -> str:
    """What a kernel pin's table has that it must not, or lacks: `` (it has `occupancy`, no `smem_bytes`)``."""
    if not isinstance(metrics, dict):
        return ""
    extra = [name for name in metrics if name not in METRICS]
    missing = [name for name in METRICS if name not in metrics]
    said = [f"it has {', '.join(f'`{n}`' for n in extra)}"] if extra else []
    said += [f"no {', '.join(f'`{n}`' for n in missing)}"] if missing else []
    return f" ({'; '.join(said)})" if said else ""
