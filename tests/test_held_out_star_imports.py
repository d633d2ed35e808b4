"""Held-out cases for names a kernel module takes through its own star imports (`from .common import *`, then
`@triton.jit`; `from triton import *`, then `@jit`): the source rules see Triton behind them as behind any other
import, and a warm lint follows an edit of the module the star reads."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import kgate

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'
PRINTS = '\n\n@{jit}\ndef k(x):\n    tl.device_print("x", x)\n    tl.store(x, 0)\n'
CASES = {
    "a project module's star": {"pkg/common.py": "import triton\nimport triton.language as tl\n",
                                "pkg/ops.py": "from .common import *\n" + PRINTS.format(jit="triton.jit")},
    "Triton's star": {"pkg/ops.py": "from triton import *\nimport triton.language as tl\n" + PRINTS.format(jit="jit")},
    "a star of names imported": {"pkg/jitlib.py": "import triton.language as tl\nfrom triton import jit\n",
                                 "pkg/ops.py": "from pkg.jitlib import *\n" + PRINTS.format(jit="jit")},
}


def project(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"pyproject.toml": CONFIG, "pkg/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def codes(root: Path, *flags: str) -> list[str]:
    run = kgate("lint", *flags, cwd=root)
    return sorted(line.split(":")[0] + " " + line.split(": ")[1].split()[0] for line in run.stdout.splitlines()
                  if ": KG" in line)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_kernel_behind_a_star_import_is_a_kernel(tmp_path: Path, case: str) -> None:
    root = project(tmp_path, CASES[case])
    assert codes(root, "--no-cache") == ["pkg/ops.py KG204"]


def test_a_warm_lint_follows_the_module_a_star_import_reads(tmp_path: Path) -> None:
    root = project(tmp_path, CASES["a project module's star"])
    assert codes(root) == ["pkg/ops.py KG204"]
    time.sleep(0.01)
    (root / "pkg" / "common.py").write_text('import triton\nimport triton.language as tl\n__all__ = ["tl"]\n')
    assert codes(root) == codes(root, "--no-cache") == []
    (root / "pkg" / "common.py").write_text('import triton\nimport triton.language as tl\n__all__ = ["tl", "triton"]\n')
    assert codes(root) == codes(root, "--no-cache") == ["pkg/ops.py KG204"]
