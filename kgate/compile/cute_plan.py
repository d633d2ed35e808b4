"""The variants of a CuTe DSL kernel: one per `cute.compile` call its registrations and captures describe.

Main-process side, beside the Triton planner (`kgate.compile.triton_plan.plan_variants`): a CuTe DSL call needs no
launcher to bind it, since its arguments are the specialisation (`kgate.core.cute`). What is checked here is that
the call fits the jit function the compile worker found (`kgate.compile.cute_backend.expand`): every argument it
names is a parameter, and every parameter without a default has an argument.
"""

from __future__ import annotations

from typing import Any

from kgate.compile import expectations
from kgate.compile.payloads import Variant
from kgate.core.cute import CuteEntry

LANGUAGE = "cute"


def language(entries: list[Any]) -> str:
    """The language a kernel's registrations are in: "cute" where they are CuTe DSL calls, else "triton"."""
    return LANGUAGE if entries and all(isinstance(e, CuteEntry) for e in entries) else "triton"


def variants(entry: CuteEntry, expansion: dict[str, Any]) -> list[Variant]:
    """Every call of a registration (or a capture) as a variant to compile; ValueError where one does not fit."""
    params = expansion["params"]
    names = [p["name"] for p in params]
    required = [p["name"] for p in params if not p["has_default"]]
    out: list[Variant] = []
    for call in entry.calls():
        unknown = [name for name in call.args if name not in names]
        missing = [name for name in required if name not in call.args]
        problems = []
        if missing:
            problems.append(f"args lack {', '.join(missing)}")
        if unknown:
            problems.append(f"args name {', '.join(unknown)}, not parameters of the jit function "
                            f"({', '.join(names) or 'none'})")
        if problems:
            raise ValueError("the call does not match the kernel: " + "; ".join(problems))
        out.append({
            "kernel": entry.kernel, "name": call.variant, "source": entry.source, "pdl": False, "kind": entry.kind,
            **expectations.requested(entry.expect or ()), "shapes": [dict(s) for s in entry.shapes],
            "call": call.to_record(), "captured": list(entry.captured),
        })
    return out
