"""The compile and facts stages know no rule: they carry out the plan of what the selected rules read.

A rule says which artifacts it reads and, for SASS, of which kernels (`Rule.reads`, `Rule.sass_when`); the rules
stage makes the run's plan from the selection (`kgate.evaluate.plan`). Nothing in `kgate/compile/` or
`kgate/facts/` names a rule's code, its name or its module, imports the registry, or decides by itself which
kernels a rule reads the SASS of: the source is read here as text (comments and docstrings included) and with
`ast`, nothing is imported from it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.artifacts import Artifact, ArtifactPlan, Need
from kgate.evaluate.plan import artifact_plan

REPO = Path(__file__).resolve().parent.parent
STAGES = (REPO / "kgate" / "compile", REPO / "kgate" / "facts")
CODE = re.compile(r"\bKG\d{3}\b")
# How a rule module is named from elsewhere: `kgate.rules.compiled.spill`, `rules.compiled.spill`.
MODULE = re.compile(r"\brules\.(?:meta|compiled|capture|python|cuda)\.\w+")
# What the compile and facts stages decided by themselves before rules declared what they read: which kernels' SASS
# a rule reads, by name. A name that comes back is a rule's need hard-coded again.
HARD_CODED = ("needs_sass", "sass_patterns", "reads_sass", "makes_sass")


def _rule_words() -> list[str]:
    """The rules' names that cannot be taken for words of the domain (those of more than one word), the functions
    with which rules say whose SASS they read, and the names the stages used to decide it themselves."""
    names = [name for _code, name, _module in registry.REGISTRY if "-" in name]
    tests = [rule.sass_when.__name__ for rule in registry.all_rules() if rule.sass_when is not None]
    return names + tests + list(HARD_CODED)


def rule_knowledge(path: Path, words: list[str]) -> list[str]:
    """What a stage's module knows of the rules: codes, rule names, rule modules, imports of the registry."""
    text = path.read_text(encoding="utf-8")
    found = [f"code {m.group(0)}" for m in CODE.finditer(text)]
    found += [f"rule module {m.group(0)}" for m in MODULE.finditer(text)]
    found += [f"rule word {word}" for word in words if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text)]
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name == "kgate.rules" or a.name.startswith("kgate.rules.")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "kgate" and any(a.name == "rules" for a in node.names):
                found.append("import kgate.rules")
            elif node.module == "kgate.rules" or node.module.startswith("kgate.rules."):
                found.append(f"import {node.module}")
    return found


def test_the_compile_and_facts_stages_know_no_rule() -> None:
    words = _rule_words()
    found = [f"{path.relative_to(REPO)}: {what}" for stage in STAGES for path in sorted(stage.rglob("*.py"))
             for what in rule_knowledge(path, words)]
    assert not found, "the compile and facts stages carry out the plan and know no rule:\n" + "\n".join(found)


def test_the_checker_sees_what_a_stage_must_not_know(tmp_path: Path) -> None:
    words = _rule_words()
    test = next(rule.sass_when.__name__ for rule in registry.all_rules() if rule.sass_when is not None)
    planted = {
        "code.py": 'FAILURE = "KG005"\n',
        "name.py": '"""Read for local-memory-in-loop."""\n',
        "module.py": "import importlib\nimportlib.import_module('kgate.rules.compiled.spill')\n",
        "registry.py": "from kgate import rules\n",
        "submodule.py": "from kgate.rules.compiled import spill\n",
        "need.py": "def needs_sass(variant):\n    return variant['pdl']\n",
        "predicate.py": f"from somewhere import {test}\n",
    }
    for name, text in planted.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert rule_knowledge(tmp_path / name, words), name
    # Words of the domain are not rule names: a spill, occupancy, the PTX target, PDL and expectations.
    (tmp_path / "domain.py").write_text('"""spill bytes, occupancy, ptx_target, pdl, expect block_scale"""\n',
                                        encoding="utf-8")
    assert rule_knowledge(tmp_path / "domain.py", words) == []


def test_every_rule_declares_what_it_reads() -> None:
    for rule in registry.all_rules():
        assert rule.reads, rule.code
        if rule.sass_when is not None:
            assert Artifact.SASS in rule.reads, rule.code
            # It reaches the compile workers by name: a function at the top of a rule module.
            assert rule.sass_when.__module__.startswith("kgate.rules."), rule.code
            assert "<" not in rule.sass_when.__qualname__, rule.code
        if rule.layer in ("python", "cuda"):
            assert rule.reads == frozenset({Artifact.SOURCE}), rule.code


def test_the_plan_holds_what_the_selected_rules_read() -> None:
    sass_rules = [rule for rule in registry.all_rules() if Artifact.SASS in rule.reads]
    assert sass_rules
    none = artifact_plan([r.code for r in registry.all_rules() if Artifact.SASS not in r.reads])
    assert Artifact.SASS not in none.reads
    for rule in sass_rules:
        plan = artifact_plan([rule.code])
        assert plan.needs == tuple(Need(a, rule.sass_when if a is Artifact.SASS else None)
                                   for a in sorted(rule.reads, key=lambda a: a.value))
    every = artifact_plan([], sass_every=True)
    assert every.reads == frozenset({Artifact.SASS}) and every.wants(Artifact.SASS, object())
    # The plan's key follows the selection: a run that newly selects a SASS rule is another plan.
    assert artifact_plan([sass_rules[0].code]).key() != artifact_plan([]).key()


@pytest.mark.parametrize("plan", [ArtifactPlan(), artifact_plan([])])
def test_an_empty_plan_wants_no_sass(plan: ArtifactPlan) -> None:
    assert not plan.wants(Artifact.SASS, object()) and plan.reads == frozenset()
