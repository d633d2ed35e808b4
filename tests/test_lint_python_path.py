"""`kgate lint` follows a project's imports through its configured `python-path` folders, as `kgate check`
imports them: a kernel module that takes Triton, or a launcher, from a package in another of those folders
(`python-path = [".", "lib"]`, `from pkgtu.tu import triton, tl` with `lib/pkgtu/tu.py`) is read as it runs, and a
warm lint after the setting changes is the lint of the new setting."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import kgate

TU = "import triton\nimport triton.language as tl\n"
KERNEL = '''from pkgtu.tu import tl, triton

CONFIGS = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})]


@triton.autotune(configs=CONFIGS, key=["R"])
@triton.jit
def rows_kernel(x, R, BLOCK: tl.constexpr):
    pass


def launch(x):
    rows_kernel[(x.shape[0],)](x, x.shape[0])
'''


def _project(root: Path, python_path: str) -> Path:
    for rel, text in {"kgate.toml": f'targets = ["sm_120a"]\npython-path = {python_path}\n', "pkg/__init__.py": "",
                      "pkg/ops.py": KERNEL, "lib/pkgtu/__init__.py": "", "lib/pkgtu/tu.py": TU}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _findings(root: Path, *args: str) -> list[tuple[str, int, str]]:
    run = kgate("lint", "--format", "json", "--select", "KG201", *args, cwd=root)
    assert run.code in (0, 1), run.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(run.stdout)["findings"]]


def test_a_module_taken_from_another_python_path_folder_is_followed(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", '[".", "lib"]')
    assert _findings(project, "--no-cache") == [("pkg/ops.py", 6, "KG201")]


def test_a_folder_no_python_path_entry_names_is_not_a_root(tmp_path: Path) -> None:
    # Good twin: without `lib` on the path, `pkgtu` is no module of the project (an installed package, for all lint
    # can tell), and its `triton` is not followed there.
    project = _project(tmp_path / "p", '["."]')
    assert _findings(project, "--no-cache") == []


def test_a_warm_lint_after_the_python_path_changes_is_the_new_settings_lint(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", '["."]')
    assert _findings(project) == []
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = [".", "lib"]\n')
    assert _findings(project) == _findings(project, "--no-cache") == [("pkg/ops.py", 6, "KG201")]
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    assert _findings(project) == []
