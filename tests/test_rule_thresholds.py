"""A rule's thresholds live in its options only, and whatever else judges by them follows the configuration.

The ratchet (which kernels are at risk), the audit (spill cliff, warps per
sub-core, the kinds judged) and the budgets it computes read KG102, KG103 and
KG105's options through the rule registry. Each configuration below changes
one option; the rule's verdict, the ratchet's and the audit's must agree under
it. No compiler here: crafted facts, the rules in-process.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.config import parse_config
from kgate.core.selection import Selection, build_selection
from kgate.evaluate import compiled as evaluate
from kgate.facts.model import KernelFacts, Resources
from kgate.facts.ptx import PtxEntry
from kgate.hardware.profiles import primary
from kgate.ratchet.baseline import kernel_key
from kgate.ratchet.compare import RunState, Scope
from kgate.report import audit_model
from kgate.report.audit_tables import budget_rows

PACKAGE = Path(__file__).resolve().parents[1] / "kgate"
TARGET = "sm_120a"


def facts(name: str, *, kind: str, registers: int, spill: int = 0, num_warps: int = 4) -> KernelFacts:
    entry = PtxEntry(name=name, mma={}, has_wait=False, has_launch_dependents=False, global_accesses=0,
                     unwaited_accesses=())
    return KernelFacts(kernel=f"pkg.k:{name}", variant="v", target=TARGET, language="triton", path="pkg/k.py",
                       line=1, kind=kind, num_warps=num_warps, num_stages=1, expect=(), pdl=False,
                       ptx_target=TARGET, entry=entry, resources=Resources(registers, spill, spill, spill, 0, 0))


# Registers near the register-ceiling default; spills near the cliff; elementwise kernels at 4 to 8 warps per
# sub-core and a GEMM (not judged by occupancy unless configured).
KERNELS = [facts(f"r{regs}", kind="gemm", registers=regs) for regs in (96, 200, 239, 240, 255)] + \
    [facts(f"s{spill}", kind="gemm", registers=128, spill=spill) for spill in (40, 100, 128, 129, 300)] + \
    [facts(f"e{regs}", kind="elementwise", registers=regs, num_warps=8) for regs in (64, 80, 96, 102, 128, 168)] + \
    [facts("g168", kind="gemm", registers=168, num_warps=8)]

CONFIGURATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "defaults": {},
    "register-ceiling": {"register-ceiling": {"threshold": 200}},
    "spill-cliff": {"spill": {"cliff_fraction": 0.1}},
    "spill-cliff-wide": {"spill": {"cliff_fraction": 1.0}},
    "occupancy-warps": {"occupancy": {"min_warps_per_subcore": 3}},
    "occupancy-warps-high": {"occupancy": {"min_warps_per_subcore": 8}},
    "occupancy-kinds": {"occupancy": {"kinds": ["gemm"]}},
}


def selection(options: dict[str, dict[str, Any]]) -> Selection:
    config = parse_config({"options": options}, root=Path("."), source=None)
    return build_selection(config, select=["KG102", "KG103", "KG105"])


def verdicts(sel: Selection) -> dict[str, set[str]]:
    """Per kernel, the codes the rules report (KG103 only when past the cliff, an error)."""
    out: dict[str, set[str]] = {}
    for k in KERNELS:
        found = evaluate.kernel_findings(k, sel)
        out[k.kernel] = {f.code for f in found if f.code != "KG103" or f.severity.value == "error"}
    return out


@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_ratchet_and_audit_judge_by_the_rules_configured_options(name: str) -> None:
    sel = selection(CONFIGURATIONS[name])
    rules = verdicts(sel)

    # The ratchet: a kernel without spills and without findings is at risk exactly when KG102 reports it.
    scope = Scope(compiled=True, targets=frozenset({TARGET}), codes=frozenset(sel.enabled),
                  compiled_codes=frozenset(registry.codes("compiled")), source=False)
    at_risk = RunState(KERNELS, [], {}, scope, options=sel.options).at_risk()
    for k in KERNELS:
        if not k.resources.spill_stores:
            assert (kernel_key(*k.key) in at_risk) == ("KG102" in rules[k.kernel]), k.kernel

    # The audit and its budgets: the same cliff, the same warps needed, the same kinds judged.
    model = audit_model.build(KERNELS, [], [], {TARGET: (primary(TARGET),)},
                              limits=audit_model.Thresholds.under(sel.options))
    occupancy, spill = registry.options("KG105", sel.options), registry.options("KG103", sel.options)
    for audit in model.kernels:
        k, verdict = audit.facts, rules[audit.facts.kernel]
        assert audit.latency_warps == occupancy["min_warps_per_subcore"]
        assert audit.latency_bound_kind == (k.kind in occupancy["kinds"])
        assert audit.spill_cliff == spill["cliff_fraction"] * k.resources.registers * 4
        assert (k.resources.spill_stores > audit.spill_cliff) == ("KG103" in verdict), k.kernel
        spill_row = next(row for row in budget_rows(audit) if row.label == "spills")
        assert (spill_row.status[0] == "bad") == ("KG103" in verdict), k.kernel
        below = audit.cards[0].residency.warps_per_subcore < audit.latency_warps
        assert (audit.latency_bound_kind and below) == ("KG105" in verdict), k.kernel
        warps_row = next(row for row in budget_rows(audit) if row.label == "warps per sub-core")
        if audit.latency_bound_kind:
            assert (warps_row.status[0] == "bad") == ("KG105" in verdict), k.kernel
        assert f"needs {audit.latency_warps}" in warps_row.cells[0] or not audit.latency_bound_kind


def test_each_configuration_changes_what_is_judged() -> None:
    """The configurations above are not vacuous: each moves the verdicts away from the defaults."""
    default = verdicts(selection({}))
    for name, options in CONFIGURATIONS.items():
        if name != "defaults":
            assert verdicts(selection(options)) != default, name


def test_registry_option_is_the_configured_value_or_the_rules_default() -> None:
    sel = selection({"register-ceiling": {"threshold": 200}})
    assert registry.option("KG102", "threshold", sel.options) == 200
    assert registry.option("KG102", "threshold") == registry.load("KG102").options["threshold"].default
    assert registry.option("KG103", "cliff_fraction", sel.options) == \
        registry.load("KG103").options["cliff_fraction"].default
    with pytest.raises(KeyError):
        registry.option("KG102", "cliff_fraction")


# --- No threshold outside the rules ---

# The defaults of the rules' options, and the words a name holding one of them would contain.
OWNED: list[tuple[object, re.Pattern[str]]] = [
    (registry.load("KG102").options["threshold"].default, re.compile(r"threshold|ceiling|register", re.IGNORECASE)),
    (registry.load("KG103").options["cliff_fraction"].default, re.compile(r"cliff|spill|fraction", re.IGNORECASE)),
    (registry.load("KG105").options["min_warps_per_subcore"].default,
     re.compile(r"latency|hiding|min_warps|warps_per_subcore|warps_needed", re.IGNORECASE)),
]


def _names(node: ast.AST) -> set[str]:
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
        elif isinstance(sub, ast.arg):
            out.add(sub.arg)
    return out


def _constants(node: ast.AST) -> list[object]:
    return [sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant)
            and isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool)]


def _bindings(tree: ast.AST) -> list[tuple[set[str], ast.AST, int]]:
    """(names, value) pairs: assignments, annotated fields, keyword arguments, parameter defaults, comparisons."""
    out: list[tuple[set[str], ast.AST, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            out.append((set().union(*(_names(t) for t in node.targets)), node.value, node.lineno))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            out.append((_names(node.target), node.value, node.lineno))
        elif isinstance(node, ast.keyword) and node.arg:
            out.append(({node.arg}, node.value, node.value.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                out.append(({arg.arg}, default, default.lineno))
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
                if kw_default is not None:
                    out.append(({arg.arg}, kw_default, kw_default.lineno))
        elif isinstance(node, ast.Compare):
            out.append((_names(node), node, node.lineno))
    return out


def owned_literals(package: Path) -> list[str]:
    """`path:line name = value` for every rule default written, beside a name for it, outside the rules."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for names, value, line in _bindings(tree):
            for literal, words in OWNED:
                named = sorted(n for n in names if words.search(n))
                if named and any(c == literal and type(c) is type(literal) for c in _constants(value)):
                    found.append(f"{path.relative_to(package.parent)}:{line} {named[0]} = {literal!r}")
    return sorted(set(found))


def test_no_rule_threshold_outside_the_rules() -> None:
    assert owned_literals(PACKAGE) == []


def test_the_scan_finds_a_threshold_written_outside_the_rules(tmp_path: Path) -> None:
    package = tmp_path / "kgate"
    package.mkdir()
    (package / "m.py").write_text("LATENCY_HIDING_WARPS = 5\nCLIFF = 0.25\n\n"
                                  "class S:\n    register_threshold: int = 240\n\n"
                                  "def at_risk(registers, spill_fraction=0.25):\n    return registers >= 240\n"
                                  "WARPS_TABLE = (4, 5, 6)\n")
    assert [entry.split(" ", 1)[0] for entry in owned_literals(package)] == \
        ["kgate/m.py:1", "kgate/m.py:2", "kgate/m.py:5", "kgate/m.py:7", "kgate/m.py:8"]
