"""Re-pinning: `kgate baseline update`.

By default a re-pin only records what got better or went away; a new debt
(an at-risk kernel that was not pinned, a worse number, a new finding) is
written only with `accept_new`, so a re-pin never silently absorbs a
regression. Entries the run did not cover are kept as they are, and so are
the pins of a kernel or CUDA file that did not compile in the run (a
timeout or a full disk says nothing about its numbers); its compile failure
is never pinned, not even with `accept_new`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kgate.core.findings import Finding
from kgate.ratchet.baseline import METRICS, Baseline, Pin, pinnable, split_kernel_key
from kgate.ratchet.compare import RunState, folded_into, folded_pin, round_up


@dataclass
class Repin:
    baseline: Baseline
    changes: list[str] = field(default_factory=list)  # what was written
    refused: list[str] = field(default_factory=list)  # debts left out without --accept-new
    failing: list[str] = field(default_factory=list)  # kernels that did not compile: never pinned, even with it
    # The toolchain whose pins a toolchain without its own starts from ("triton 3.8.0"); "": none.
    started_from: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def drop(self, key: str, why: str) -> None:
        """A pin the run's toolchain does not keep. Started from another toolchain's pins, that one still has it."""
        if self.started_from:
            self.changes.append(f"left out  {key}: {why} (still pinned for {self.started_from})")
        else:
            self.changes.append(f"removed   {key}: {why}")


def repin(old: Baseline, state: RunState, *, accept_new: bool, slack: int = 10) -> Repin:
    """Re-pin what the run covered in its own toolchain's pins; the other toolchains' pins are kept as they are.
    A toolchain without pins yet starts from those of the closest one, and a run that compiled nothing names no
    toolchain, so it re-pins none (`Baseline.for_toolchain`)."""
    status = "pinned"
    if state.scope.compiled:
        old, status = old.for_toolchain(state.toolchain)
    new = Baseline(dict(old.toolchain), {k: dict(v) for k, v in old.kernels.items()}, dict(old.findings),
                   list(old.others))
    out = Repin(new, started_from=_words(old.toolchain) if status == "nearest" else "")
    _repin_toolchain(old, state, status, out)
    _repin_kernels(old, state, accept_new, out)
    _repin_findings(old, state, accept_new, slack, out)
    return out


def _repin_toolchain(old: Baseline, state: RunState, status: str, out: Repin) -> None:
    if not state.scope.compiled or not state.toolchain:
        return
    current = {k: v for k, v in state.toolchain.items() if not k.endswith(".id")}
    if status == "nearest":
        out.baseline.toolchain = current
        kept = len(out.baseline.sections()) - 1
        out.changes.append(f"toolchain: new pins for {_words(current)}, from those of the closest pinned toolchain "
                           f"({kept} other toolchain(s) kept as they are)")
        return
    merged = {**old.toolchain, **current}
    if merged != old.toolchain:
        out.baseline.toolchain = merged
        out.changes.append("toolchain: " + _words(current))


def _words(versions: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))


def _repin_kernels(old: Baseline, state: RunState, accept_new: bool, out: Repin) -> None:
    current = state.kernel_metrics()
    at_risk = state.at_risk()
    kernels = out.baseline.kernels
    for key in sorted(old.kernels):
        if key not in current:
            if state.scope.covers_kernel(key):
                del kernels[key]
                target = split_kernel_key(key)[2]
                out.drop(key, "no longer compiled" if target in state.scope.targets else f"{target} no longer built")
            continue
        now = current[key]
        if key not in at_risk:
            del kernels[key]
            out.drop(key, "no longer at risk")
            continue
        pinned = old.kernels[key]
        merged = {}
        for metric in METRICS:
            if now[metric] > pinned[metric] and not accept_new:
                out.refused.append(f"worse     {key}: {metric} {pinned[metric]} -> {now[metric]} (needs --accept-new)")
                merged[metric] = pinned[metric]
            else:
                merged[metric] = now[metric]
        if merged != pinned:
            kernels[key] = merged
            words = ", ".join(f"{m} {pinned[m]} -> {merged[m]}" for m in METRICS if merged[m] != pinned[m])
            out.changes.append(f"updated   {key}: {words}")
    for key in sorted(at_risk - set(old.kernels)):
        if accept_new:
            kernels[key] = current[key]
            out.changes.append(f"pinned    {key}: " + ", ".join(f"{m} {current[key][m]}" for m in METRICS))
        else:
            out.refused.append(f"new       {key}: at-risk kernel not pinned (needs --accept-new)")


def _repin_findings(old: Baseline, state: RunState, accept_new: bool, slack: int, out: Repin) -> None:
    groups: dict[str, list[Finding]] = defaultdict(list)
    for finding in state.pinned_findings():
        groups[finding.baseline_key].append(finding)
    findings = out.baseline.findings
    into = folded_into(state.findings)
    for key in sorted(old.findings):
        if not pinnable(key):  # written by an older kgate or by hand: it accepts nothing
            del findings[key]
            out.drop(key, "a kernel that does not compile is never pinned")
            continue
        if key in groups or not state.scope.covers_finding(key):
            continue
        del findings[key]
        out.drop(key, f"reported inside {into[key]} now (one cause, one finding)" if key in into else "gone")
    for key in sorted({f.baseline_key for f in state.unpinnable()}):
        out.failing.append(f"failing   {key}: did not compile; never pinned, and its kernel's pins are kept as "
                           f"they are (fix it, then update again)")
    for key in sorted(groups):
        group = groups[key]
        count = len(group)
        sizes = [f.value for f in group if f.value is not None]
        value = round_up(max(sizes), slack) if sizes else None
        pinned = old.findings.get(key) or folded_pin(old, group)  # a folded part's pin moves to its root's key
        if pinned is None:
            if accept_new:
                findings[key] = Pin(count, value)
                out.changes.append(f"pinned    {key}: {count}" + (f" (size {value})" if value is not None else ""))
            else:
                out.refused.append(f"new       {key}: {count} finding(s) not pinned (needs --accept-new)")
            continue
        new_count = count if (accept_new or count < pinned.count) else pinned.count
        new_value = pinned.value
        if value is not None:
            if pinned.value is None or accept_new or value < pinned.value:
                new_value = value
            elif value > pinned.value:
                out.refused.append(f"worse     {key}: size {pinned.value} -> {value} (needs --accept-new)")
        if count > pinned.count and not accept_new:
            out.refused.append(f"worse     {key}: {pinned.count} -> {count} finding(s) (needs --accept-new)")
        updated = Pin(new_count, new_value)
        if key not in old.findings:
            findings[key] = updated
            out.changes.append(f"pinned    {key}: {new_count}, the pin of what is now folded into it")
        elif updated != pinned:
            findings[key] = updated
            out.changes.append(f"updated   {key}: {pinned.count} -> {new_count}"
                               + (f", size {pinned.value} -> {new_value}" if new_value != pinned.value else ""))
