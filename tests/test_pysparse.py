"""Parsing only what the rules read (kgate.collect.pysparse) never changes a verdict.

On every Python file of this repository and of the fixtures, and on a
generated kernel tree: the reduced text keeps lines and columns, parses
whenever the file does, and the Python rules report exactly what they report
on the whole file.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

from kgate.collect import depends, pysparse
from kgate.collect.source import SourceFile, UnreadableSource
from kgate.core.config import Config
from kgate.core.selection import build_selection
from kgate.evaluate import source as engine

NEEDLES = ("autotune", "atomic_", "TRITON_INTERPRET", "knobs")
sys.path.insert(0, str(REPO / "bench"))
import lint_bench  # noqa: E402


def corpus(tmp: Path) -> list[Path]:
    lint_bench.generate(tmp, files=40, tests=10, autotuned=0.5)
    folders = [REPO / "kgate", REPO / "rules", REPO / "tests", REPO / "bench", REPO / "kernels", FIXTURES, tmp]
    return sorted(p for folder in folders for p in folder.rglob("*.py") if ".kgate-cache" not in p.parts)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return corpus(tmp_path_factory.mktemp("sparse"))


def test_the_reduced_text_keeps_positions_and_parses(files: list[Path]) -> None:
    checked = 0
    for path in files:
        source = SourceFile(str(path), path.name, path.read_bytes())
        try:
            assert source.tree is not None
            lines = source.lines
        except UnreadableSource:
            continue  # a deliberately broken fixture
        text = pysparse.sparse(lines, NEEDLES)
        if text is None:
            continue
        reduced = text.split("\n")
        assert len(reduced) == len(lines), path
        assert all(r in ("", l, "    pass") for r, l in zip(reduced, lines)), path
        ast.parse(text)
        checked += 1
    assert checked > 100


def test_rules_report_the_same_on_the_reduced_and_the_whole_file(files: list[Path],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rules = engine.source_rules(build_selection(Config(root=REPO)))
    sparse_results = {p: engine.lint_bytes(str(p), p.name, p.read_bytes(), rules) for p in files}
    monkeypatch.setattr(pysparse, "split", lambda lines, remember=True: None)  # no module can be read in part
    depends.new_run()  # nor is one split already
    whole_results = {p: engine.lint_bytes(str(p), p.name, p.read_bytes(), rules) for p in files}
    differ = [p for p in files if sparse_results[p].findings != whole_results[p].findings
              and not any(f.code == "KG004" for f in whole_results[p].findings)]
    assert differ == []
    assert sum(len(r.findings) for r in sparse_results.values()) > 50


def test_code_inside_a_string_is_not_taken_for_a_definition() -> None:
    lines = [
        "import triton",
        "EXAMPLE = '''",
        "@triton.autotune(configs=[], key=['M'])",
        "def k(M): pass",
        "'''",
        "QUOTES = '\"\"\"'  # a triple quote inside a string",
        "def launcher(x):",
        "    return x",
        "@triton.autotune(configs=[], key=['n'])",
        "def real(n):",
        "    return n",
    ]
    text = pysparse.sparse(lines, ("autotune",))
    assert text is not None
    kept = text.split("\n")
    assert kept[1:5] == lines[1:5]  # the string is a module-level statement: kept whole, as it is
    assert kept[6:8] == ["", ""]  # a definition that mentions no needle is blanked
    assert kept[8:11] == lines[8:10] + ["    pass"]  # the needle is in the decorator: the body goes
    tree = ast.parse(text)
    assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == ["real"]
