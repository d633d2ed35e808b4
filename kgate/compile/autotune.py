"""An autotuned kernel's configs, as the plan knows them: what tells its variants' configs and launches apart.

An autotuner compiles every config it is given for a launch, times them on the GPU and keeps the fastest. kgate
compiles every config too (offline nothing can be timed), so the rules stage needs to know, of each variant,
which config of the autotuner it is and which launch it is a config of (`kgate.evaluate.configs`). That is read
here from the kernel's expansion: the configs (their constexprs, `num_warps`, `num_stages`), the constexprs its
heuristics compute (which may follow the config), and the variants a GPU capture marked as the autotuner's pick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgate.collect.specialization import format_value

if TYPE_CHECKING:
    from kgate.collect.captures import CapturedSpec


@dataclass(frozen=True)
class TuneConfig:
    """One `triton.Config` of an autotuner."""

    kwargs: dict[str, Any]
    num_warps: int
    num_stages: int

    def holds(self, constexprs: dict[str, Any], num_warps: int, num_stages: int | None) -> bool:
        """Whether a variant with these constexprs and options is this config."""
        return num_warps == self.num_warps and num_stages == self.num_stages and all(
            name in constexprs and constexprs[name] == value for name, value in self.kwargs.items())

    @property
    def label(self) -> str:
        """`BM=128, BN=64, num_warps=8, num_stages=3`, as the autotuner's `triton.Config` says it."""
        parts = [f"{name}={format_value(value)}" for name, value in sorted(self.kwargs.items())]
        return ", ".join([*parts, f"num_warps={self.num_warps}", f"num_stages={self.num_stages}"])


@dataclass(frozen=True)
class Autotuned:
    """An autotuned kernel: its configs, the constexprs they and its heuristics set, and the (variant, target) pairs
    a GPU capture marked `picked`."""

    kernel: str
    configs: tuple[TuneConfig, ...]
    computed: frozenset[str] = frozenset()  # constexprs its heuristics compute
    picked: frozenset[tuple[str, str]] = frozenset()

    @property
    def tuned(self) -> frozenset[str]:
        """The constexprs that differ from config to config of one launch: those the configs and heuristics set."""
        return frozenset(name for config in self.configs for name in config.kwargs) | self.computed

    def config_of(self, constexprs: dict[str, Any], num_warps: int, num_stages: int | None) -> int | None:
        """The index of the config a variant is, or None (a variant of the kernel that is none of its configs)."""
        return next((i for i, config in enumerate(self.configs) if config.holds(constexprs, num_warps, num_stages)),
                    None)

    def launch_of(self, target: str, signature: dict[str, str], specialization: dict[str, list[str]],
                  constexprs: dict[str, Any], pdl: bool) -> str:
        """What a variant's launch is on a target, whatever its config: its specialisation less what the configs
        and heuristics set (a heuristic's value may follow the config; two launches told apart only by one are
        taken together, which can only leave a finding an error)."""
        fixed = {name: value for name, value in constexprs.items() if name not in self.tuned}
        return json.dumps([target, signature, specialization, fixed, pdl], sort_keys=True, default=str)


def autotuned(kernel: str, expansion: dict[str, Any], captured: list[CapturedSpec],
              targets: tuple[str, ...]) -> Autotuned | None:
    """The kernel's autotuning as its expansion and its captures say it; None for a kernel with one config or none."""
    configs = tuple(TuneConfig(dict(c["kwargs"]), c["num_warps"], c["num_stages"]) for c in expansion["configs"])
    if len(configs) < 2:
        return None
    picked = frozenset((item.spec.variant, target) for item in captured if item.picked
                       for target in targets if item.applies_to(target))
    return Autotuned(kernel, configs, frozenset(expansion["heuristics"]), picked)
