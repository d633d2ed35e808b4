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
    tl.store(x, n)
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


KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def fill(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
'''


def test_a_check_at_a_monorepos_top_names_the_project_below_and_gates_it_with_config(tmp_path: Path) -> None:
    """The pre-commit check hook runs at the repository's top: where no configuration is there or above, the error
    names the one below (quoted for a shell), and `--config` with it gates that project from the top."""
    import pytest

    pytest.importorskip("triton")
    project = tmp_path / "services" / "ops kernels"
    project.mkdir(parents=True)
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n[[triton]]\nkernel = "ops:fill"\n'
                                        'signature = { x = "*fp32", n = "i32" }\nconstexprs = { BLOCK = 128 }\n')
    (project / "ops.py").write_text(KERNEL)
    (tmp_path / ".hidden" / "x").mkdir(parents=True)
    (tmp_path / ".hidden" / "x" / "kgate.toml").write_text("")  # a hidden folder's is no project of the repository
    top = kgate("check", cwd=tmp_path)
    assert top.code == 2
    assert ("a project below here has its own: services/ops kernels/kgate.toml (run kgate in its folder, or name it: "
            "`kgate check --config 'services/ops kernels/kgate.toml'`)") in top.stderr, top.stderr
    named = kgate("check", "--config", "services/ops kernels/kgate.toml", cwd=tmp_path)
    assert named.code == 0, named.stdout + named.stderr
    assert "1 kernel variant(s)" in named.stdout
