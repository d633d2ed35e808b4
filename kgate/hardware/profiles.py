"""Device profiles (data in devices.toml) and the lookup by target."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# The profile whose SM stands for a target in per-SM rules (occupancy, smem).
PRIMARY = {"sm_120a": "rtx-5090", "sm_100a": "b200", "sm_90a": "h200"}
# Cards an audit shows side by side per target, unless asked for others.
AUDIT_DEFAULT = {"sm_120a": ("rtx-5090", "rtx-5060-ti"), "sm_100a": ("b200",), "sm_90a": ("h200",)}


@dataclass(frozen=True)
class Profile:
    key: str
    name: str
    arch: str
    sms: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_alloc_unit: int
    subcores_per_sm: int
    max_warps_per_sm: int
    max_ctas_per_sm: int
    smem_per_sm: int
    smem_optin_per_cta: int
    smem_reserved_per_cta: int
    l2_bytes: int
    dram_gbps: float
    mma_tflops: float
    block_scaled_mma: bool
    measured: tuple[str, ...]
    estimated: tuple[str, ...]

    @property
    def ridge(self) -> float:
        """FLOP per byte where a kernel turns from memory bound to compute bound."""
        return self.mma_tflops * 1e12 / (self.dram_gbps * 1e9)


@lru_cache(maxsize=1)
def profiles() -> dict[str, Profile]:
    raw = tomllib.loads(resources.files("kgate.hardware").joinpath("devices.toml").read_text())
    names = {f.name for f in fields(Profile)}
    out = {}
    for key, table in raw.items():
        data = {k: (tuple(v) if isinstance(v, list) else v) for k, v in table.items() if k in names}
        out[key] = Profile(key=key, **data)  # type: ignore[arg-type]
    return out


def primary(target: str) -> Profile:
    return profiles()[PRIMARY[target]]


def for_target(target: str) -> list[Profile]:
    return [p for p in profiles().values() if p.arch == target]
