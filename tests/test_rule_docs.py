"""Every rule of the registry documents itself, and `kgate explain` / `kgate rules` print it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import REPO, kgate

from kgate import rules as registry
from kgate.core.rule import DOC_SECTIONS, LAYERS

CODES = registry.codes()


@pytest.mark.parametrize("code", CODES)
def test_rule_has_every_documentation_section(code: str) -> None:
    doc = registry.load(code).doc
    positions = [doc.find(section + "\n") for section in DOC_SECTIONS]
    missing = [s for s, p in zip(DOC_SECTIONS, positions) if p < 0]
    assert not missing, f"{code} lacks {missing}"
    assert positions == sorted(positions), f"{code}: sections out of order"
    bodies = re.split("|".join(re.escape(s + "\n") for s in DOC_SECTIONS), doc)[1:]
    for section, body in zip(DOC_SECTIONS, bodies):
        text = body.split("\n## ", 1)[0].strip()
        assert text, f"{code}: {section} is empty"


@pytest.mark.parametrize("code", CODES)
def test_rule_module_matches_its_registry_row(code: str) -> None:
    rule = registry.load(code)
    _code, name, module = next(row for row in registry.REGISTRY if row[0] == code)
    assert (rule.code, rule.name, rule.layer) == (code, name, module.split(".")[0])
    assert rule.layer in LAYERS
    assert re.fullmatch(r"KG\d{3}", code) and re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", name)
    assert rule.summary and not rule.summary.endswith(".")
    if rule.layer in ("python", "cuda"):
        assert rule.files, f"{code}: a source rule must say which files it reads"


def test_registry_is_sorted_and_unique() -> None:
    assert CODES == sorted(CODES) and len(set(CODES)) == len(CODES)
    names = [name for _c, name, _m in registry.REGISTRY]
    assert len(set(names)) == len(names)


def test_every_rule_module_is_registered() -> None:
    modules = {f"{p.parent.name}.{p.stem}" for p in (REPO / "rules").glob("*/*.py")
               if p.stem != "__init__" and not p.stem.startswith("_")}
    assert modules == {module for _c, _n, module in registry.REGISTRY}


def test_explain_prints_the_documentation_by_code_or_name(tmp_path: Path) -> None:
    by_code = kgate("explain", "KG201", cwd=tmp_path)
    by_name = kgate("explain", "runtime-autotune", cwd=tmp_path)
    assert by_code.code == 0 and by_code.stdout == by_name.stdout
    assert by_code.stdout.startswith("# KG201 runtime-autotune\n")
    assert registry.load("KG201").doc.strip() in by_code.stdout
    assert 'allowed-keys = []' in by_code.stdout


def test_explain_json(tmp_path: Path) -> None:
    run = kgate("explain", "kg202", "--format", "json", cwd=tmp_path)
    data = json.loads(run.stdout)
    assert data["code"] == "KG202" and data["layer"] == "python" and data["files"] == ["*.py"]
    assert "## Why is this bad?" in data["doc"]


def test_explain_unknown_rule_is_a_usage_error(tmp_path: Path) -> None:
    run = kgate("explain", "KG999", cwd=tmp_path)
    assert run.code == 2 and "KG999" in run.stderr and "Traceback" not in run.stderr


def test_rules_lists_every_rule(tmp_path: Path) -> None:
    text = kgate("rules", cwd=tmp_path)
    assert text.code == 0
    for code in CODES:
        assert re.search(rf"^{code}\s", text.stdout, re.MULTILINE)
    data = json.loads(kgate("rules", "--format", "json", cwd=tmp_path).stdout)
    assert [r["code"] for r in data] == CODES
    assert all(r["doc"] for r in data)
