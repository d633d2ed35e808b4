"""The import graph follows the pipeline: collect -> compile -> facts -> rules -> findings -> ratchet -> report.

A module may import its own stage and the stages before it, never a later one; the commands sit on
top and never import each other. The graph is read from the source with `ast` (nothing is imported),
lazy imports inside functions and `TYPE_CHECKING` blocks included: a late import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Source folders and the package each installs as (pyproject's package-dir).
PACKAGES = {"kgate": REPO / "kgate", "kgate.rules": REPO / "rules"}

# The shared model (kgate.core): what every stage reads and writes, so any module may import it. The
# shared model imports only itself and the utilities, never a stage.
SHARED_MODEL = {
    "kgate.core": "findings, the rule contract, selection, suppression, configuration, errors, a run's result",
    "kgate.rules": "the registry of rule codes (the package's __init__ only: rule modules load on demand)",
}

# Utilities with no pipeline knowledge (kgate.support: file writes and reads, JSON, the cache folder,
# subprocesses, signals, tool versions), and the package's public API (`kgate.register`, `kgate.numerics`).
UTILITIES = {
    "kgate": "the package: __version__ and `kgate.register` (public)",
    "kgate.support": "atomic files, JSON, recorded reads, the cache folder, signals, external tools",
    "kgate.numerics": "ULP comparison helpers (public, used by the pytest plugin and `kgate ulp`)",
}

# The stages in pipeline order; a module belongs to the stage of the longest prefix that names it.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    # `kgate capture` records the launches that collection reads as kernel entries.
    ("collect", ("kgate.collect", "kgate.capture")),
    ("compile", ("kgate.compile",)),
    # The hardware model (device profiles, budgets, architecture features) interprets the facts.
    ("facts", ("kgate.facts", "kgate.hardware")),
    ("rules", ("kgate.rules.", "kgate.evaluate")),
    ("findings", ()),  # the findings and their suppression are shared model (kgate.core)
    # Two runs' facts set side by side: the baseline's pins, or another revision's or Triton's kernels.
    ("ratchet", ("kgate.ratchet", "kgate.diff.model", "kgate.diff.compare")),
    ("report", ("kgate.report",)),
    # A check's run as data, split into shards and merged back.
    ("shard", ("kgate.shard",)),
    # One run of the whole pipeline, and the replay of an unchanged one.
    ("pipeline", ("kgate.pipeline", "kgate.diff")),
    # The Python API (kgate.api): a lint, a check and one kernel's compile as functions with typed results. A
    # package of its own, not a module at the top: the commands route through it, so it sits below them.
    ("api", ("kgate.api",)),
    # Entry points: the commands, the CLI that dispatches to them, the pytest plugin.
    ("commands", ("kgate.commands", "kgate.cli", "kgate.entry", "kgate.__main__", "kgate.pytest_plugin")),
]

# Modules of kgate.commands that are helpers for every command, not commands.
COMMAND_HELPERS = {"kgate.commands", "kgate.commands.common", "kgate.commands.recording"}



def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def typing_only_nodes(tree: ast.AST) -> set[int]:
    """The import statements inside `if TYPE_CHECKING:` blocks (annotations only, never run)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            inside.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return inside


def imports(module: str, path: Path, known: set[str], *, annotations: bool = True) -> set[str]:
    """The kgate modules `module` imports (a `from P import name` of a submodule counts as that submodule);
    with `annotations=False`, those named only for type annotations are left out."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = set() if annotations else typing_only_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.add(sub if sub in known else source)
    return {t for t in targets if t in known}


def in_prefix(module: str, prefix: str) -> bool:
    """A prefix names a module and its submodules; one ending in "." only the submodules."""
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def is_shared(module: str) -> bool:
    """Shared model or a utility: the package itself by its exact name, the others with their submodules."""
    exact = {"kgate", "kgate.rules"}  # the package and the registry, not their submodules
    return module in exact or any(in_prefix(module, s) for s in (*SHARED_MODEL, *UTILITIES) if s not in exact)


def stage_of(module: str) -> str | None:
    placed = [(len(prefix), stage) for stage, prefixes in STAGES for prefix in prefixes if in_prefix(module, prefix)]
    return max(placed)[1] if placed else None


def is_command(module: str) -> bool:
    return module.startswith("kgate.commands.") and module not in COMMAND_HELPERS


def violations() -> list[tuple[str, str, str]]:
    files = module_files()
    known = set(files)
    order = {stage: i for i, (stage, _) in enumerate(STAGES)}
    found: list[tuple[str, str, str]] = []
    for module, path in files.items():
        # The shared model may name a stage's types in annotations (a result holds facts and a
        # comparison); it never imports a stage at run time. Stages are held to every import.
        for target in sorted(imports(module, path, known, annotations=not is_shared(module))):
            if target == module or is_shared(target):
                continue
            if is_shared(module):
                found.append((module, target, "shared model imports a stage"))
                continue
            here, there = stage_of(module), stage_of(target)
            if here is None or there is None:
                found.append((module, target, f"unplaced module: {module if here is None else target}"))
            elif order[there] > order[here]:
                found.append((module, target, f"{here} imports the later stage {there}"))
            elif is_command(module) and is_command(target):
                found.append((module, target, "a command imports another command"))
    return found


def test_every_module_has_a_place() -> None:
    unplaced = [m for m in module_files() if not is_shared(m) and stage_of(m) is None]
    assert not unplaced, f"modules in no stage (add them to STAGES, SHARED_MODEL or UTILITIES): {unplaced}"


def test_imports_follow_the_pipeline() -> None:
    new = violations()
    for module, target, why in new:
        print(f"{module} -> {target}: {why}")
    assert not new, "imports against the pipeline:\n" + "\n".join(f"  {m} -> {t}: {w}" for m, t, w in new)


def test_the_checker_sees_an_edge_against_the_pipeline(tmp_path: Path) -> None:
    # The walker resolves `from package import submodule` and relative imports to the submodule.
    path = tmp_path / "gate.py"
    path.write_text("from typing import TYPE_CHECKING\nfrom kgate.report import table\nfrom ..facts import model\n"
                    "if TYPE_CHECKING:\n    from kgate.ratchet import compare\n", encoding="utf-8")
    known = {"kgate.report", "kgate.report.table", "kgate.facts", "kgate.facts.model", "kgate.ratchet",
             "kgate.ratchet.compare"}
    assert imports("kgate.ratchet.gate", path, known) == {"kgate.report.table", "kgate.facts.model",
                                                          "kgate.ratchet.compare"}
    # An import for annotations only is left out where asked (the shared model's allowance).
    assert imports("kgate.ratchet.gate", path, known, annotations=False) == {"kgate.report.table", "kgate.facts.model"}
    assert stage_of("kgate.report.table") == "report" and stage_of("kgate.ratchet.gate") == "ratchet"
    assert stage_of("kgate.rules.compiled.spill") == "rules" and stage_of("kgate.rules") is None
    assert is_shared("kgate.core.result") and is_shared("kgate.rules") and not is_shared("kgate.rules.compiled.spill")
    assert not is_shared("kgate.collect.files") and is_shared("kgate.support.tools")


# What stays at the top of the package: the public API and the entry points; everything else lives in
# the folder of its stage, the shared model (core), the hardware model or the utilities (support).
TOP_LEVEL = {"__init__", "__main__", "cli", "entry", "numerics", "pytest_plugin"}


def test_the_package_top_holds_only_the_public_api_and_entry_points() -> None:
    loose = sorted(p.stem for p in (REPO / "kgate").glob("*.py") if p.stem not in TOP_LEVEL)
    assert not loose, f"modules at the top of kgate/ (move them into their stage's folder): {loose}"
