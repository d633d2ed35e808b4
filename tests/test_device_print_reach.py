"""KG204 on what no shipped launch reaches: a debug helper nothing calls or imports, and a test's kernel. Whether a
helper is imported is read from the project's other modules, so a warm lint must see an import added later."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import FIXTURES, kgate


def _reported(project: Path) -> set[tuple[str, str]]:
    run = kgate("lint", "--format", "json", "--exit-zero", cwd=project)
    assert run.code == 0, run.stderr
    return {(f["path"], re.search(r"function `(\w+)`", f["message"]).group(1))  # type: ignore[union-attr]
            for f in json.loads(run.stdout)["findings"] if f["code"] == "KG204"}


def test_an_unused_helper_is_reported_once_another_module_imports_it(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "rules" / "KG204", project)
    before = _reported(project)
    assert ("engine/debugging.py", "show_row") in before and ("engine/debugging.py", "show_unused") not in before
    assert not any(path.startswith("tests/") for path, _ in before)
    (project / "engine" / "late.py").write_text("from engine.debugging import show_unused\n")
    after = _reported(project)  # warm: the lint cache holds debugging.py's verdict with what it read
    assert after == before | {("engine/debugging.py", "show_unused")}
    (project / "engine" / "late.py").unlink()
    assert _reported(project) == before


def test_a_helper_its_own_module_calls_is_reported(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "rules" / "KG204", project)
    module = project / "device_print.py"
    assert ("device_print.py", "print_value") not in _reported(project)
    module.write_text(module.read_text() + "\n\n@triton.jit\ndef uses(value):\n    print_value(value)\n")
    assert ("device_print.py", "print_value") in _reported(project)
