"""The five budgets of a kernel on a card, computed from measured facts.

1. registers per thread -> CTAs per SM by registers
2. shared memory -> CTAs per SM by shared memory, pipeline stages that fit
3. warps per sub-core (judged against rule KG105's `min_warps_per_subcore`)
4. waves: SM utilisation of the last wave for a declared problem shape
5. arithmetic intensity against the card's ridge point
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgate.hardware.profiles import Profile

# Thresholds that judge these numbers are rule options (KG102, KG103, KG105), never constants here:
# a caller passes the value `kgate.rules.option` resolves under its configuration.


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


# --- Helpers for the audit report: tiles, operand widths, pipeline depth, cliffs. ---

# The warps-per-sub-core rows of the register table (seed method, budget 1).
WARPS_TABLE = (4, 5, 6, 8, 12)
# Block-scaled formats (MXFP8, MXFP4) carry one 1-byte scale per 32 elements along K.
SCALE_GROUP = 32
# The accumulator should stay under about this share of the registers (seed method).
ACCUMULATOR_SHARE = 0.6

_TILE_NAMES = {
    "M": ("BM", "BLOCK_M", "BLOCK_SIZE_M", "TILE_M"),
    "N": ("BN", "BLOCK_N", "BLOCK_SIZE_N", "TILE_N"),
    "K": ("BK", "BLOCK_K", "BLOCK_SIZE_K", "TILE_K"),
}
_DTYPE = re.compile(r"^(fp|bf|f|i|u|b)(\d+)")


def tile(constexprs: Mapping[str, Any], dim: str) -> int | None:
    """The tile size along `dim` ("M", "N" or "K") from a variant's constexprs, by the usual names."""
    for name in _TILE_NAMES[dim]:
        value = constexprs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def dtype_bytes(triton_type: str) -> float | None:
    """Bytes per element of a Triton type string (`*bf16` -> 2, `*fp8e4nv` -> 1, `i32` -> 4)."""
    match = _DTYPE.match(triton_type.lstrip("*").strip())
    if not match:
        return None
    return int(match.group(2)) / 8


def spill_cliff_bytes(registers: int, fraction: float) -> float:
    """Spill bytes past which a kernel falls off the cliff: `fraction` (rule KG103's `cliff_fraction`) of the
    register bytes per thread."""
    return fraction * registers * 4


def accumulator_registers(bm: int, bn: int, num_warps: int, acc_words: float = 1.0) -> float:
    """Registers per thread that a BM x BN accumulator takes (fp32: 1 word per element, fp16: 0.5)."""
    return bm * bn * acc_words / (32 * num_warps)


def warps_per_subcore_by_registers(registers: int, profile: Profile) -> float:
    """Resident warps per sub-core that the register file allows, ignoring CTA granularity."""
    per_warp = registers_per_warp(max(registers, 1), profile)
    return profile.registers_per_sm // per_warp / profile.subcores_per_sm


def buffers_that_fit(smem_bytes: int, buffers: int, per_buffer: int, budget: int) -> int:
    """Pipeline buffers of `per_buffer` bytes that fit in `budget` beside the kernel's other shared memory."""
    other = smem_bytes - buffers * per_buffer
    return max(0, (budget - other) // per_buffer) if per_buffer > 0 else 0


def gemm_ctas(m: int, n: int, bm: int, bn: int) -> int:
    return math.ceil(m / bm) * math.ceil(n / bn)


@dataclass(frozen=True)
class Traffic:
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def gemm_traffic(m: int, n: int, k: int, signature: Mapping[str, str]) -> Traffic | None:
    """FLOPs and compulsory DRAM bytes of an M x N x K GEMM with the operand widths of its signature.

    Pointer arguments in order: the first two that are not scales are A and
    B, the last is C; a pointer whose name contains "scale" holds one byte
    per SCALE_GROUP elements of the operand it follows. None when the
    signature does not read as a GEMM.
    """
    pointers = [(name, ty) for name, ty in signature.items() if ty.startswith("*")]
    operands = [(name, ty) for name, ty in pointers if "scale" not in name.lower()]
    if len(operands) < 3:
        return None
    widths = [dtype_bytes(ty) for _name, ty in operands]
    if any(w is None for w in widths):
        return None
    a, b, c = widths[0], widths[1], widths[-1]
    assert a is not None and b is not None and c is not None
    elements = {operands[0][0]: m * k, operands[1][0]: k * n}
    traffic = m * k * a + k * n * b + m * n * c
    previous = ""
    for name, ty in pointers:
        if "scale" in name.lower() and previous in elements:
            traffic += elements[previous] / SCALE_GROUP * (dtype_bytes(ty) or 1)
        else:
            previous = name
    return Traffic(2.0 * m * n * k, traffic)
