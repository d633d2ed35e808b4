"""Baselines pinned before variants named their specialisation: carried over to today's names.

A Triton variant's name used to be its constexprs and options (`BLOCK=64,warps=4,stages=3`); it now
also says which specialisation it is (`BLOCK=64,warps=4,stages=3,fp16#3fa2c1d0`, see
`kgate.collect.specialization`). An entry of an older baseline is read as the one current variant
of the same kernel and target whose name starts with the old name. Where two current variants
would match (one registration now gated with two dtypes), the entry is left as it is: it shows as
gone, and the new variants as new, for a person to review. `kgate check` compares through this
mapping, and `kgate baseline update` writes the new names.
"""

from __future__ import annotations

import dataclasses
import re

from kgate.ratchet.baseline import Baseline, Pin, kernel_key, split_kernel_key


def renames(old_keys: set[str], current: set[tuple[str, str, str]]) -> dict[str, str]:
    """Old `kernel|variant|target` keys -> the one current key each stands for now."""
    by_prefix: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for kernel, variant, target in current:
        if "#" in variant:
            by_prefix.setdefault((kernel, target), []).append((kernel, variant, target))
    out = {}
    for key in old_keys:
        try:
            kernel, variant, target = split_kernel_key(key)
        except ValueError:
            continue
        if "#" in variant or not variant:
            continue
        matches = [k for k in by_prefix.get((kernel, target), ())
                   if k[1].startswith(variant + ",") or k[1].startswith(variant + "#")]
        if len(matches) == 1:
            out[key] = kernel_key(*matches[0])
    return out


def migrate(baseline: Baseline, current: set[tuple[str, str, str]]) -> tuple[Baseline, int]:
    """The baseline with old variant names replaced by today's, and how many entries were renamed."""
    kernel_renames = renames(set(baseline.kernels), current)
    finding_renames: dict[str, str] = {}
    for key in baseline.findings:
        code, path, rest = _split_finding(key)
        if rest is None:
            continue
        head = "|".join(rest.split("|")[:3])
        extra = rest[len(head):]
        found = renames({head}, current).get(head)
        if found:
            finding_renames[key] = f"{code}|{path}|{found}{extra}"
    if not kernel_renames and not finding_renames:
        return baseline, 0
    kernels = {kernel_renames.get(k, k): v for k, v in baseline.kernels.items()}
    findings: dict[str, Pin] = {}
    for key, pin in baseline.findings.items():
        findings[finding_renames.get(key, key)] = pin
    # The other toolchains' pins ride along as they are: a rename of this toolchain's names drops none of theirs.
    return dataclasses.replace(baseline, kernels=kernels, findings=findings), len(kernel_renames) + len(finding_renames)


def _split_finding(key: str) -> tuple[str, str, str | None]:
    parts = key.split("|", 2)
    if len(parts) < 3 or parts[2].count("|") < 2:
        return key, "", None
    return parts[0], parts[1], parts[2]


# Where a comment may start in a source finding's snippet: after the code, its marker (`#`, `//`, `/*`).
_COMMENT_START = re.compile(r"#|//|/\*")


def without_comments(baseline: Baseline, current: set[str]) -> tuple[Baseline, int]:
    """The baseline with source findings pinned as kgate pinned them before a snippet left its line's comment out
    (`print(x) # debug`) keyed as today (`print(x)`), and how many were renamed. A pin is renamed only where its key
    is no current finding's and exactly one current key is its text up to a comment marker; two old pins of one
    line's code (the same print twice, with two comments) become one pin of both counts."""
    renames: dict[str, str] = {}
    for key in baseline.findings:
        if key in current:
            continue
        found = {key[:m.start()].rstrip() for m in _COMMENT_START.finditer(key)} & current
        if len(found) == 1:
            renames[key] = found.pop()
    if not renames:
        return baseline, 0
    findings: dict[str, Pin] = {}
    for key, pin in baseline.findings.items():
        new = renames.get(key, key)
        if new in findings:
            before = findings[new]
            values = [v for v in (before.value, pin.value) if v is not None]
            pin = Pin(before.count + pin.count, max(values) if values else None)
        findings[new] = pin
    return dataclasses.replace(baseline, findings=findings), len(renames)
