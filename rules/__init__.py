"""kgate's rule registry: one row per code, sorted. A code is never reused.

Installed, this folder is the package `kgate.rules`. Modules are imported on
demand, so `kgate lint` never loads the compiled rules and vice versa.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgate.core.rule import Rule

# code, name, module (relative to this package)
REGISTRY: tuple[tuple[str, str, str], ...] = (
    ("KG001", "compile-error", "meta.compile_error"),
    ("KG002", "unused-suppression", "meta.unused_suppression"),
    ("KG003", "invalid-suppression", "meta.invalid_suppression"),
    ("KG004", "unreadable-source", "meta.unreadable_source"),
    ("KG005", "stale-capture", "meta.stale_capture"),
    ("KG101", "block-scale-missing", "compiled.block_scale_missing"),
    ("KG102", "register-ceiling", "compiled.register_ceiling"),
    ("KG103", "spill", "compiled.spill"),
    ("KG104", "smem-budget", "compiled.smem_budget"),
    ("KG105", "occupancy", "compiled.occupancy"),
    ("KG106", "ptx-target", "compiled.ptx_target"),
    ("KG107", "pdl-missing-wait", "compiled.pdl_missing_wait"),
    ("KG108", "recompile-per-shape", "capture.recompile_per_shape"),
    ("KG109", "local-memory-in-loop", "compiled.local_memory_in_loop"),
    ("KG110", "load-width", "compiled.load_width"),
    ("KG201", "runtime-autotune", "python.runtime_autotune"),
    ("KG202", "autotune-side-effect", "python.autotune_side_effect"),
    ("KG203", "interpret-in-tests", "python.interpret_in_tests"),
    ("KG204", "device-print", "python.device_print"),
    ("KG301", "arch-target", "cuda.arch_target"),
    ("KG302", "launch-guard", "cuda.launch_guard"),
    ("KG303", "kernel-file-size", "cuda.kernel_file_size"),
)

# Rules a run selects only when they are named (by code, name, prefix or ALL, in `select`, `extend-select` or on
# the command line): what they report is a team's choice more than a defect, and by default it would bury the rest.
# The rule module says so too (`Rule.opt_in`); a test keeps the two in step.
OPT_IN: frozenset[str] = frozenset({"KG110", "KG303"})


def default_codes() -> list[str]:
    """The codes a configuration that selects nothing runs: every rule but the opt-in ones."""
    return [code for code in codes() if code not in OPT_IN]


@cache
def load(code: str) -> Rule:
    for row_code, _name, module in REGISTRY:
        if row_code == code:
            rule: Rule = importlib.import_module(f"{__name__}.{module}").RULE
            if rule.code != code:
                raise RuntimeError(f"rule module {module} declares {rule.code}, registry says {code}")
            return rule
    raise KeyError(code)


def codes(layer: str | None = None) -> list[str]:
    """Codes of the registry, optionally of one layer (the module's folder)."""
    return [code for code, _name, module in REGISTRY if layer is None or module.split(".")[0] == layer]


def all_rules(layer: str | None = None) -> list[Rule]:
    return [load(code) for code in codes(layer)]


def options(code: str, configured: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Every option of rule `code` under a configuration: `configured` maps codes to the options resolved
    from it (`Selection.options`); a rule it does not name takes the defaults its module declares."""
    values = (configured or {}).get(code)
    return dict(values) if values is not None else load(code).resolve_options({})


def option(code: str, name: str, configured: Mapping[str, Mapping[str, Any]] | None = None) -> Any:
    """The value option `name` of rule `code` takes under a configuration (see `options`).

    Thresholds live in the rule's options only: whatever else judges by one
    of them (the ratchet, the audit) reads it here, so one configured value
    moves them all."""
    if name not in load(code).options:
        raise KeyError(f"{code} has no option {name!r}")
    return options(code, configured)[name]
