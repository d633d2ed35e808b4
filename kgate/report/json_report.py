"""JSON output: stable, sorted, documented in docs/reports.md ("JSON output").

Top level: {"version": 1, "command", "findings": [...], "kernels": [...],
"ratchet": [...], "summary": {...}}. Findings carry code, name, severity,
path, line, col, end_line, end_col, kernel, variant, target, message,
identity, value, related (other places: path, line, ptx_line, message) and ratchet (the baseline
differences the finding says, which the top-level "ratchet" list leaves out); kernels carry registers, spill_bytes (spill stores), spill_loads,
stack_bytes, smem_bytes, smem_dynamic_unknown, constexprs, signature, specialization (Triton: the
arguments the launcher specialised, as divisible_by_16, equal_to_1 and none),
source ("registered", "captured", or "registered+captured" for a launch both are; "" for CUDA), captured
(the capture environments the row's launch was recorded in that are gated on its target, as the capture file
names them; [] where no capture recorded it), instructions (PTX MMA opcodes
by full name, with counts) and sass (SASS opcode counts of the kernels whose SASS the run read: where a selected
rule reads it, as the run's `ArtifactPlan` says, or every kernel under --sass; null for the others, never
disassembled for the report alone). Every key is always present; lists are sorted and keys are
written in sorted order. Nothing in it depends on timing or on the machine,
so the same inputs give the same bytes. JSON has no NaN or infinity: a
non-finite float (a `nan` or `inf` constexpr) is written as the string
"nan", "inf" or "-inf", the way kgate's TOML files spell it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kgate.core.findings import Finding, sort_findings
from kgate.core.result import Result
from kgate.report.escape import json_ready

if TYPE_CHECKING:
    from kgate.facts.model import KernelFacts

SCHEMA_VERSION = 1


def kernel_record(facts: KernelFacts) -> dict[str, Any]:
    # Imported here: a `kgate lint` result has no kernels and should not pay for these.
    from kgate.hardware.budgets import residency
    from kgate.hardware.profiles import primary

    res = facts.resources
    occupancy = residency(res.registers, res.smem_bytes, facts.num_warps, primary(facts.target))
    record = {
        "kernel": facts.kernel,
        "variant": facts.variant,
        "target": facts.target,
        "language": facts.language,
        "kind": facts.kind,
        "path": facts.path,
        "line": facts.line,
        "num_warps": facts.num_warps,
        "num_stages": facts.num_stages,
        "registers": res.registers,
        "spill_bytes": res.spill_stores,
        "spill_loads": res.spill_loads,
        "stack_bytes": res.stack_bytes,
        "smem_bytes": res.smem_bytes,
        "smem_dynamic_unknown": facts.smem_dynamic_unknown,
        "ptx_target": facts.ptx_target,
        "pdl": facts.pdl,
        "expect": list(facts.expect),
        "constexprs": dict(sorted(facts.constexprs.items())),
        "signature": dict(sorted(facts.signature.items())),
        "specialization": {k: sorted(v) for k, v in sorted(facts.specialization.items())},
        "source": facts.source,
        "captured": list(facts.captured),
        "warps_per_subcore": occupancy.warps_per_subcore,
        "instructions": dict(sorted(facts.entry.mma.items())),
        "sass": dict(sorted(facts.sass.opcodes.items())) if facts.sass is not None else None,
    }
    return record


def finding_record(finding: Finding, result: Result) -> dict[str, Any]:
    """A finding and, as its `ratchet`, the baseline differences it says (which the top-level `ratchet` leaves
    out: each difference is reported once)."""
    return {**finding.to_json(), "ratchet": [d.to_json() for d in result.standing_of(finding)]}


def to_dict(result: Result) -> dict[str, Any]:
    out = {
        "version": SCHEMA_VERSION,
        "command": result.command,
        "findings": [finding_record(f, result) for f in sort_findings(list(result.findings))],
        "kernels": [kernel_record(k) for k in sorted(result.kernels, key=lambda k: k.key)],
        "ratchet": [d.to_json() for d in result.ratchet],
        "summary": {
            "findings": len(result.findings),
            "failing": len(result.failing()),
            "kernels": len(result.kernels),
            "baselined": result.baselined,
            "suppressed": result.suppressed,
            "exit_code": result.exit_code(),
            "exit_forced": result.exit_forced(),
        },
    }
    if result.matrix is not None:
        out["matrix"] = result.matrix  # only a `--triton` or `--cute-dsl` run has it
    if result.shard is not None:
        out["shard"] = result.shard  # only a shard's run has it (docs/ci.md: "Sharding across CI runners")
    return out


def dumps(value: Any, **options: Any) -> str:
    """Strict JSON (RFC 8259): never a bare NaN or Infinity, never a lone surrogate (a file name that is not UTF-8
    is written `x\\xff.cu`), which JSON parsers other than Python's refuse."""
    return json.dumps(json_ready(value), allow_nan=False, **options)


def render(result: Result, config: object = None) -> str:
    data = to_dict(result)
    shard = data.pop("shard", None)
    ready = json_ready(data)
    if shard is not None:
        # The `shard` object is for `kgate merge`, which checks the names a shard read against the checkout and
        # against its digest: a name that is not UTF-8 stays the name itself there (Python's `\udcff` escape).
        ready["shard"] = json_ready(shard, text=False)
    return json.dumps(ready, allow_nan=False, indent=2, sort_keys=True) + "\n"
