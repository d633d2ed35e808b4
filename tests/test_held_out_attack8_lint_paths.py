"""`kgate lint --config sub/kgate.toml`, run from a folder above that project (a monorepo's top): the project's files
keep their project-relative names, so its per-file-ignores and exclusions apply to them as in a lint from the
project's own top; a file of the folder outside the project keeps its absolute name."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import kgate

PRINTING = '''\
import triton
import triton.language as tl


@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    tl.device_print("n", n)
'''


def test_a_lint_from_above_the_project_names_its_files_from_the_project_top(tmp_path: Path) -> None:
    project = tmp_path / "services" / "ops"
    (project / "legacy").mkdir(parents=True)
    (project / "generated").mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\nextend-exclude = ["generated/"]\n'
                                        '[per-file-ignores]\n"legacy/*.py" = ["KG204"]\n')
    (project / "legacy" / "old.py").write_text(PRINTING)
    (project / "generated" / "made.py").write_text(PRINTING)
    (project / "new.py").write_text(PRINTING)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "outside.py").write_text(PRINTING)
    from_top = kgate("lint", "--config", "services/ops/kgate.toml", "--format", "json", "--no-cache", cwd=tmp_path)
    from_project = kgate("lint", "--format", "json", "--no-cache", cwd=project)
    paths = sorted(f["path"] for f in json.loads(from_top.stdout)["findings"])
    assert paths == sorted(["new.py", (tmp_path / "tools" / "outside.py").as_posix()]), from_top.stdout
    assert [f["path"] for f in json.loads(from_project.stdout)["findings"]] == ["new.py"]
