"""tests/new_rule.py writes a new rule's files into a copy of the rules folder: a module that imports and
registers, a registry row in code order, and a fixture folder whose cases the lint engine reports as stated
once `check` is written."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import new_rule
import pytest
from conftest import REPO, expectations

from kgate import rules as registry
from kgate.collect.files import glob_matcher
from kgate.collect.registry import triton_entries
from kgate.core.config import load_config
from kgate.core.rule import DOC_SECTIONS, SourceContext
from kgate.evaluate import source as engine


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "rules", tmp_path / "rules", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "fixtures" / "rules").mkdir(parents=True)
    return tmp_path


def load_registry(root: Path, name: str) -> ModuleType:
    """The copy's rules package, imported under a name of its own (the installed one stays as it is)."""
    spec = importlib.util.spec_from_file_location(name, root / "rules" / "__init__.py",
                                                  submodule_search_locations=[str(root / "rules")])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("layer", ["compiled", "python", "cuda"])
def test_a_scaffolded_rule_imports_registers_and_documents_itself(checkout: Path, layer: str) -> None:
    assert new_rule.main(["--root", str(checkout), layer, "tile-too-wide", "--summary", "A tile wider than it needs"]) == 0
    copy = load_registry(checkout, f"scaffolded_{layer}")
    try:
        series = new_rule.LAYERS[layer]  # compiled and capture rules share the KG1xx codes
        code = f"KG{max(int(c[2:]) for c in registry.codes() if series <= int(c[2:]) < series + 100) + 1:03d}"
        assert copy.codes() == sorted(copy.codes()) == sorted([*registry.codes(), code])
        rule = copy.load(code)
        assert (rule.code, rule.name, rule.layer, rule.summary) == (code, "tile-too-wide", layer,
                                                                    "A tile wider than it needs")
        assert all(section + "\n" in rule.doc for section in DOC_SECTIONS)
        folder = checkout / "fixtures" / "rules" / code
        planted = expectations(folder, (".py", ".cu"))
        assert {c for _p, _l, c, _t in planted} == {code}
        config = load_config(folder / "kgate.toml")
        assert config.select == (code,) or list(config.select) == [code]
        if layer == "compiled":
            assert {e.kernel for e in triton_entries(config)} == {"tile_too_wide:bad_case", "tile_too_wide:good_twin"}
    finally:
        for name in [n for n in sys.modules if n.startswith(f"scaffolded_{layer}")]:
            del sys.modules[name]


def test_a_scaffolded_source_rule_once_written_reports_its_bad_case_only(checkout: Path) -> None:
    """Fill in `check` as a rule author would; the lint engine then reports exactly the folder's expectation."""
    assert new_rule.main(["--root", str(checkout), "cuda", "bare-kernel-name"]) == 0
    module = next((checkout / "rules" / "cuda").glob("bare_kernel_name.py"))
    module.write_text(module.read_text().replace('''    return ()''', '''    for number, line in enumerate(source.text.splitlines(), 1):
        if "void bad_case" in line:
            yield Report("a bad case", line=number, col=1, scope="bad_case")'''))
    copy = load_registry(checkout, "scaffolded_written")
    try:
        code = copy.codes("cuda")[-1]
        rule = copy.load(code)
        folder = checkout / "fixtures" / "rules" / code
        rules = [engine.SourceRule(rule, glob_matcher(rule.files), SourceContext(options={}))]
        found = set()
        for path in sorted(folder.glob("*.cu")):
            result = engine.lint_bytes(str(path), path.name, path.read_bytes(), rules)
            found |= {(path.name, f.line, f.code, str(f.col)) for f in result.findings}
        assert found == expectations(folder, (".cu",)) and found
    finally:
        for name in [n for n in sys.modules if n.startswith("scaffolded_written")]:
            del sys.modules[name]


def test_a_taken_name_or_code_is_refused_with_one_line(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (checkout / "rules" / "__init__.py").read_text()
    assert new_rule.main(["--root", str(checkout), "compiled", "spill"]) == 2
    assert new_rule.main(["--root", str(checkout), "python", "fresh-name", "--code", "KG201"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("new_rule: error: ") for line in err)
    assert (checkout / "rules" / "__init__.py").read_text() == before
    assert not list((checkout / "fixtures" / "rules").iterdir())
