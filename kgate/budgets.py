"""The five budgets of a kernel on a card, computed from measured facts.

1. registers per thread -> CTAs per SM by registers
2. shared memory -> CTAs per SM by shared memory, pipeline stages that fit
3. warps per sub-core (the latency-hiding threshold is 5)
4. waves: SM utilisation of the last wave for a declared problem shape
5. arithmetic intensity against the card's ridge point
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kgate.profiles import Profile

LATENCY_HIDING_WARPS = 5


@dataclass(frozen=True)
class Residency:
    ctas_by_registers: int
    ctas_by_smem: int
    ctas_by_warps: int
    ctas_by_hardware: int
    ctas_per_sm: int
    warps_per_subcore: float
    limiter: str


def registers_per_warp(registers: int, profile: Profile) -> int:
    unit = profile.register_alloc_unit
    return math.ceil(registers * 32 / unit) * unit


def residency(registers: int, smem_bytes: int, num_warps: int, profile: Profile) -> Residency:
    """How many CTAs of this kernel fit on one SM, and what limits it."""
    per_cta_regs = registers_per_warp(max(registers, 1), profile) * num_warps
    by_regs = profile.registers_per_sm // per_cta_regs if per_cta_regs else profile.max_ctas_per_sm
    if smem_bytes > profile.smem_optin_per_cta:
        by_smem = 0
    elif smem_bytes > 0:
        by_smem = profile.smem_per_sm // (smem_bytes + profile.smem_reserved_per_cta)
    else:
        by_smem = profile.max_ctas_per_sm
    by_warps = profile.max_warps_per_sm // num_warps
    limits = {"registers": by_regs, "shared memory": by_smem, "warps": by_warps,
              "CTA slots": profile.max_ctas_per_sm}
    ctas = min(limits.values())
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    return Residency(by_regs, by_smem, by_warps, profile.max_ctas_per_sm, ctas,
                     ctas * num_warps / profile.subcores_per_sm, limiter)


def max_registers_for(warps_per_subcore: int, profile: Profile) -> int:
    """Registers per thread that still allow `warps_per_subcore` resident warps."""
    return profile.registers_per_sm // (warps_per_subcore * profile.subcores_per_sm * 32)


def stages_that_fit(smem_bytes: int, num_stages: int, budget: int) -> int:
    """Pipeline stages of this kernel's per-stage footprint that fit in `budget`."""
    if num_stages <= 0 or smem_bytes <= 0:
        return 0
    per_stage = smem_bytes / num_stages
    return int(budget // per_stage)


@dataclass(frozen=True)
class Waves:
    ctas: int
    waves: int
    efficiency: float


def waves(ctas: int, profile: Profile, ctas_per_sm: int = 1) -> Waves:
    """Wave quantisation: the average SM's share against the busiest SM's."""
    slots = profile.sms * max(ctas_per_sm, 1)
    full = math.ceil(ctas / slots) if ctas else 0
    efficiency = (ctas / slots) / full if full else 0.0
    return Waves(ctas, full, efficiency)


def gemm_intensity(m: int, n: int, k: int, bytes_per_element: float) -> float:
    flops = 2 * m * n * k
    traffic = (m * k + k * n + m * n) * bytes_per_element
    return flops / traffic
