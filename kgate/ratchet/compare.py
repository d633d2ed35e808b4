"""Two-way comparison of a run against the baseline.

Worse or new fails. Better or gone fails too, as a stale pin, unless the
project chose `ratchet = "tighten"`: a pin that no longer describes the code
must be re-pinned so every change of a number is deliberate and reviewed.
A run that covered only some kernels, targets or files says nothing about
the rest.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, Severity
from kgate.facts.model import KernelFacts
from kgate.ratchet.baseline import METRICS, Baseline, Pin, kernel_key, pinnable, split_kernel_key, toolchain_bound

KINDS = ("TOOLCHAIN", "NEW", "WORSE", "IMPROVED", "GONE")


@dataclass(frozen=True)
class Difference:
    kind: str  # one of KINDS
    subject: str  # a kernel key or a finding key
    detail: str  # e.g. "registers 240 -> 248"
    fails: bool
    old: Any = None
    new: Any = None

    def __str__(self) -> str:
        suffix = "" if self.fails else " (accepted)"
        return f"{self.kind:<9} {self.subject}: {self.detail}{suffix}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail, "fails": self.fails,
                "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Scope:
    """What a run looked at; the comparison is limited to it."""

    compiled: bool = False
    kernels: frozenset[str] | None = None  # kernel names covered; None: every registered kernel
    targets: frozenset[str] = frozenset()
    # The run built every target the project names (no `--target`): a pin of a target outside `targets` is one the
    # project no longer builds, covered and gone, not one another run covers.
    every_target: bool = False
    # What failed to compile in this run: Triton kernel names and CUDA source paths (a CUDA failure is its file's).
    # Their pins say nothing about the code now: they are kept, never compared as gone.
    failed: frozenset[str] = frozenset()
    source: bool = False
    paths: frozenset[str] | None = None  # files linted; None: the whole project
    codes: frozenset[str] = frozenset()  # rules that ran
    compiled_codes: frozenset[str] = frozenset()
    # A shard's slice (`kgate check --shard`): its Triton kernel names and CUDA source paths; None: not sharded.
    # CUDA kernels are matched by their file (the variant), since two files may define kernels of one name.
    shard: frozenset[str] | None = None

    def in_shard(self, kernel: str, variant: str) -> bool:
        return self.shard is None or kernel in self.shard or variant in self.shard

    def covers_kernel(self, key: str) -> bool:
        kernel, variant, target = split_kernel_key(key)
        return self.compiled and self.built(target) and (self.kernels is None or kernel in self.kernels) \
            and not self.did_not_compile(kernel, variant) and self.in_shard(kernel, variant)

    def built(self, target: str) -> bool:
        """Whether this run answers for a target's pins: one it built, or any where it built every target."""
        return self.every_target or target in self.targets

    def did_not_compile(self, kernel: str, variant: str) -> bool:
        """Whether a kernel (a CUDA kernel by its file, its variant) failed to compile in this run."""
        return kernel in self.failed or variant in self.failed

    def covers_finding(self, key: str) -> bool:
        code, path, identity = key.split("|", 2)
        if code not in self.codes:
            return False
        if code in self.compiled_codes:
            parts = identity.split("|")
            kernel = parts[0]
            variant = parts[1] if len(parts) > 1 else ""
            target = parts[2] if len(parts) > 2 else ""
            return self.compiled and (self.kernels is None or kernel in self.kernels) and \
                (not target or self.built(target)) and self.in_shard(kernel, variant) and \
                not self.did_not_compile(kernel, variant)
        return self.source and (self.paths is None or path in self.paths)


@dataclass(frozen=True)
class RunState:
    kernels: list[KernelFacts]
    findings: list[Finding]  # active findings after suppressions
    toolchain: dict[str, str]
    scope: Scope
    fail_on: Severity = Severity.ERROR
    # The rules' configured options (`Selection.options`); a rule not named takes its defaults.
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def pinned_findings(self) -> list[Finding]:
        """Findings the baseline tracks: those that would fail the run, less those no pin may accept (a kernel that
        did not compile stays failing until it compiles)."""
        return [f for f in self.findings if f.severity.rank <= self.fail_on.rank and pinnable(f.baseline_key)]

    def unpinnable(self) -> list[Finding]:
        """Failing findings the baseline never accepts: kernels that did not compile."""
        return [f for f in self.findings if f.severity.rank <= self.fail_on.rank and not pinnable(f.baseline_key)]

    def kernel_metrics(self) -> dict[str, dict[str, int]]:
        return {kernel_key(*k.key): metrics_of(k) for k in self.kernels}

    def at_risk(self) -> set[str]:
        flagged = {(f.kernel, f.variant, f.target) for f in self.pinned_findings() if f.kernel and f.variant}
        threshold = registry.option("KG102", "threshold", self.options)  # register-ceiling, as configured
        out = set()
        for k in self.kernels:
            res = k.resources
            if res.registers >= threshold or res.spill_stores or res.spill_loads \
                    or res.stack_bytes or k.key in flagged:
                out.add(kernel_key(*k.key))
        return out


def metrics_of(facts: KernelFacts) -> dict[str, int]:
    res = facts.resources
    return {"registers": res.registers, "spill_bytes": res.spill_stores, "stack_bytes": res.stack_bytes,
            "smem_bytes": res.smem_bytes}


@dataclass(frozen=True)
class Comparison:
    """A run against the baseline, built once by `compare`."""

    differences: list[Difference] = field(default_factory=list)  # every one, as `kgate baseline update` re-pins
    active: list[Finding] = field(default_factory=list)  # still reported
    baselined: list[Finding] = field(default_factory=list)  # accepted by a pin
    # The differences a reported finding already says (a new finding, the worse figure of a kernel the finding is
    # about), by finding: reports show them on the finding's own line, never again on a line of their own.
    standing: dict[Finding, tuple[Difference, ...]] = field(default_factory=dict)

    @property
    def failures(self) -> list[Difference]:
        return [d for d in self.differences if d.fails]

    @property
    def unattached(self) -> list[Difference]:
        """The differences no reported finding says: a pin that improved or is gone, a kernel at risk that no
        finding names, a toolchain without pins."""
        said = {id(d) for shown in self.standing.values() for d in shown}
        return [d for d in self.differences if id(d) not in said]


@dataclass
class _Comparing:
    """A `Comparison` as `compare` makes it, before it is handed on."""

    differences: list[Difference] = field(default_factory=list)
    active: list[Finding] = field(default_factory=list)
    baselined: list[Finding] = field(default_factory=list)
    standing: dict[Finding, tuple[Difference, ...]] = field(default_factory=dict)

    def attach(self, finding: Finding, diff: Difference) -> None:
        """Say `diff` on a reported finding (once)."""
        shown = self.standing.get(finding, ())
        if all(d is not diff for d in shown):
            self.standing[finding] = (*shown, diff)


def round_up(value: int, slack: int) -> int:
    """The pinned ceiling of a size-like value: rounded up to a multiple of the slack."""
    if slack <= 1:
        return value
    return -(-value // slack) * slack


def toolchain_changes(baseline: Baseline, current: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {name: (old, current[name]) for name, old in sorted(baseline.toolchain.items())
            if name in current and current[name] != old}


def compare(baseline: Baseline, state: RunState, *, mode: str = "two-way", toolchain_policy: str = "fail",
            slack: int = 10) -> Comparison:
    """The run against the baseline as its toolchain sees it (`Baseline.for_toolchain`). A toolchain with no
    pins of its own yet is compared with the closest pinned one, and `toolchain_policy` says what that does
    ("fail": a TOOLCHAIN line fails the run until it is pinned; "warn": every difference that depends on the
    compiler is reported and accepted; "compare": compared as if pinned)."""
    status = "pinned"
    if state.scope.compiled:
        baseline, status = baseline.for_toolchain(state.toolchain)
    result = _Comparing()
    stale_fails = mode == "two-way"
    changes = toolchain_changes(baseline, state.toolchain) if state.scope.compiled else {}
    lenient = False
    if changes and status != "pinned":
        words = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in changes.items())
        policy_fails = toolchain_policy == "fail"
        lenient = toolchain_policy == "warn"
        if policy_fails:
            advice = "; pin it with `kgate baseline update --accept-new` once the numbers are reviewed"
        elif lenient:
            advice = ("; differences that depend on the compiler are reported, not failed, until it is pinned "
                      "(`kgate baseline update --accept-new`)")
        else:
            advice = ""
        result.differences.append(Difference(
            "TOOLCHAIN", "baseline", f"no pins for this toolchain; compared with the pins of the closest one "
            f"({words}); toolchain-change = {toolchain_policy!r}{advice}", policy_fails,
            {n: o for n, (o, _new) in changes.items()}, {n: new for n, (_o, new) in changes.items()}))
    about_kernels = _compare_kernels(baseline, state, result, stale_fails, not lenient)
    _compare_findings(baseline, state, result, stale_fails, slack, lenient)
    _attach_to_kernel_findings(result, about_kernels, state.fail_on)
    order = {kind: i for i, kind in enumerate(KINDS)}
    result.differences.sort(key=lambda d: (order[d.kind], d.subject, d.detail))
    return Comparison(result.differences, result.active, result.baselined, result.standing)


# A kernel's difference, with the kernel variant it is about and the figure that got worse ("" for a kernel new to
# the baseline).
AboutKernel = tuple[tuple[str, str, str], str, Difference]


def _compare_kernels(baseline: Baseline, state: RunState, result: _Comparing, stale_fails: bool,
                     metric_fails: bool) -> list[AboutKernel]:
    """Compare the kernels' figures with their pins; the NEW and WORSE differences, with the variant each is about."""
    current = state.kernel_metrics()
    variants = {kernel_key(*k.key): k.key for k in state.kernels}
    at_risk = state.at_risk()
    about: list[AboutKernel] = []
    for key in sorted(current):
        pin = baseline.kernels.get(key)
        now = current[key]
        if pin is None:
            if key in at_risk:
                detail = ", ".join(f"{m} {now[m]}" for m in METRICS)
                diff = Difference("NEW", key, f"at-risk kernel not in the baseline ({detail})", metric_fails, None,
                                  now)
                result.differences.append(diff)
                about.append((variants[key], "", diff))
            continue
        for metric in METRICS:
            if now[metric] > pin[metric]:
                diff = Difference("WORSE", key, f"{metric} {pin[metric]} -> {now[metric]}", metric_fails,
                                  pin[metric], now[metric])
                result.differences.append(diff)
                about.append((variants[key], metric, diff))
            elif now[metric] < pin[metric]:
                result.differences.append(Difference("IMPROVED", key, f"{metric} {pin[metric]} -> {now[metric]}",
                                                     stale_fails and metric_fails, pin[metric], now[metric]))
    for key in sorted(baseline.kernels):
        if key not in current and state.scope.covers_kernel(key):
            target = split_kernel_key(key)[2]
            why = "pinned kernel variant no longer compiled" if target in state.scope.targets else \
                f"pinned kernel variant of {target}, a target the project no longer builds"
            result.differences.append(Difference("GONE", key, why,
                                                 stale_fails and metric_fails, baseline.kernels[key], None))
    return about


def _attach_to_kernel_findings(result: _Comparing, about: list[AboutKernel], fail_on: Severity) -> None:
    """A kernel's difference on the reported findings that already say it: a worse figure on the findings of the
    rules that measure it (registers on register-ceiling's), a kernel new to the baseline on its findings that
    put it at risk (those of a rule that measures a pinned figure, and those that fail the run)."""
    on_kernel: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for finding in result.active:
        if finding.kernel and finding.variant and finding.target:
            on_kernel[(finding.kernel, finding.variant, finding.target)].append(finding)
    for variant, metric, diff in about:
        for finding in on_kernel.get(variant, ()):
            measures = {m for code in (finding.code, *finding.folded) for m in registry.load(code).measures}
            says = metric in measures if metric else bool(measures) or finding.severity.rank <= fail_on.rank
            if says:
                result.attach(finding, diff)


def folded_into(findings: list[Finding]) -> dict[str, str]:
    """The baseline key each folded finding had on its own -> the key of the finding that carries it now."""
    return {part: f.baseline_key for f in findings for part in f.folded_keys}


def folded_pin(baseline: Baseline, group: list[Finding]) -> Pin | None:
    """For findings whose own key has no pin: the pin of a part folded into them, written while it was reported on
    its own (a baseline from before its finding was folded: the same debt, pinned under the part's key)."""
    pins = [baseline.findings[key] for f in group for key in f.folded_keys if key in baseline.findings]
    return max(pins, key=lambda p: p.count) if pins else None


def _compare_findings(baseline: Baseline, state: RunState, result: _Comparing, stale_fails: bool,
                      slack: int, lenient: bool = False) -> None:
    tracked = state.pinned_findings()
    tracked_ids = {id(f) for f in tracked}
    result.active.extend(f for f in state.findings if id(f) not in tracked_ids)
    groups: dict[str, list[Finding]] = defaultdict(list)
    for finding in tracked:
        groups[finding.baseline_key].append(finding)
    for key in sorted(groups):
        group = sorted(groups[key])
        if lenient and toolchain_bound(key):
            # A toolchain without pins of its own: what its compiler decides is reported, not failed.
            pin = baseline.findings.get(key, Pin(0))
            result.baselined.extend(group)
            if len(group) > pin.count:  # the finding itself is not printed (accepted): say what it is here
                result.differences.append(Difference("NEW", key, f"{len(group)} finding(s), {pin.count} pinned: "
                                                     f"{group[0].severity.value}: {group[0].message}", False,
                                                     pin.count, len(group)))
            elif len(group) < pin.count:
                result.differences.append(Difference("GONE", key, f"{pin.count} pinned, {len(group)} now", False,
                                                     pin.count, len(group)))
            continue
        pin = baseline.findings.get(key) or folded_pin(baseline, group) or Pin(0)
        sizes = [f.value for f in group if f.value is not None]
        if sizes and pin.count and pin.value is not None:
            size = max(sizes)
            if size > pin.value:
                diff = Difference("WORSE", key, f"size {pin.value} -> {size}", True, pin.value, size)
                result.differences.append(diff)
                result.active.extend(group)
                for finding in group:
                    result.attach(finding, diff)
                continue
            if round_up(size, slack) < pin.value:
                result.differences.append(Difference("IMPROVED", key, f"size {pin.value} -> {size}", stale_fails,
                                                     pin.value, size))
        accepted, extra = group[: pin.count], group[pin.count:]
        result.baselined.extend(accepted)
        result.active.extend(extra)
        if extra:
            diff = Difference("NEW", key, f"{len(group)} finding(s), {pin.count} pinned", True, pin.count, len(group))
            result.differences.append(diff)
            for finding in extra:
                result.attach(finding, diff)
        elif len(group) < pin.count:
            result.differences.append(Difference("GONE", key, f"{pin.count} pinned, {len(group)} now",
                                                 stale_fails, pin.count, len(group)))
    below = {f.baseline_key: f for f in state.findings if f.severity.rank > state.fail_on.rank}
    into = folded_into(state.findings)
    for key in sorted(baseline.findings):
        # A pin of a compile failure accepts nothing (the failure stays active); `baseline update` drops it.
        if key not in groups and pinnable(key) and state.scope.covers_finding(key):
            pin = baseline.findings[key]
            if key in into:
                # Its finding is now part of another one, of the same cause: two pins became one, nothing improved.
                result.differences.append(Difference(
                    "GONE", key, f"{pin.count} pinned; reported inside {into[key]} now (one cause, one finding), "
                    f"so it needs no pin of its own (`kgate baseline update` removes it)", False, pin.count, 0))
                continue
            if key in below:
                # Still reported, at a severity the baseline does not pin (a config of an autotuned launch that
                # others pass, a severity setting): the code did not change, so the stale pin fails nothing.
                result.differences.append(Difference(
                    "GONE", key, f"{pin.count} pinned; reported as a {below[key].severity.value} now, below fail-on, "
                    f"so it needs no pin (`kgate baseline update` removes it)", False, pin.count, 0))
                continue
            result.differences.append(Difference("GONE", key, f"{pin.count} pinned, 0 now",
                                                 stale_fails and not (lenient and toolchain_bound(key)), pin.count, 0))
    result.active.sort()

