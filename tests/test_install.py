"""kgate installed into a user's project as the README's "Use kgate in your project" says: the distribution's
name, the install hints, and the wheel itself in a fresh environment beside the project's own Triton.

The wheel test builds kgate from a copy of this checkout's tracked files (setuptools from the test extra, no
build isolation, so no package index is asked), installs it alone into a fresh virtual environment whose only
other packages are this one's (a `.pth` line, as a project's environment has its Triton and torch), and runs
the commands of the README's section there: lint, a capture on CPU tensors, check, doctor.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from kgate.support import install

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *patterns], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_the_distribution_and_its_extras_are_what_the_hints_name() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == install.DISTRIBUTION
    extras = project["optional-dependencies"]
    assert {name: tuple(extras[name]) for name in install.EXTRAS} == install.EXTRAS
    assert install.install_hint("fix") == "pip install 'libcst>=1.1' (kgate's extra fix: kernel-gate[fix])"
    assert install.install_hint("ulp", ["torch"]) == "pip install 'torch>=2.4' (kgate's extra ulp: kernel-gate[ulp])"


# `pip install kgate`, `'kgate[fix]'`, `pipx install kgate`: each installs the other project of that name.
OTHER_PROJECT = re.compile(r"""(?:pip|pipx|uv pip|uv tool)\s+install\s+(?:-U\s+|--upgrade\s+)?['"]?kgate\b(?![-_.])""")


def test_no_doc_or_message_installs_the_other_project_named_kgate() -> None:
    files = tracked("*.md", "*.py", "*.yaml", "*.toml", ".ci/run")
    assert len(files) > 100
    said = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
            for path in files if path.name != "test_install.py"
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if OTHER_PROJECT.search(line) or "'kgate[" in line or '"kgate[' in line]
    assert not said, "\n".join(said)


OPS = '''\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def add(x, y):
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for path in tracked():
        if path.is_file():
            target = source / path.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(out), str(source)], check=True, capture_output=True, timeout=600)
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_installs_into_a_project_and_gates_it(tmp_path: Path, wheel: Path) -> None:
    pytest.importorskip("torch", reason="the capture launches on CPU tensors (pip install torch)")
    assert wheel.name.startswith("kernel_gate-")
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=600)
    # The project's environment: its Triton and torch (and kgate's own dependencies) are this one's packages.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGATE_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env.pop("TRITON_INTERPRET", None)
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, cwd=tmp_path, env=env).stdout.strip())
    (site / "zz_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([python, "-c", "import kgate, triton; print(kgate.__file__)"], check=True,
                           capture_output=True, text=True, cwd=tmp_path, env=env).stdout.strip()
    assert Path(where).is_relative_to(env_dir), where  # the wheel's kgate, not this checkout's
    for boot in ("capture", "compile"):  # what starts kgate's recorders in the programs they watch
        assert (Path(where).parent / boot / "boot" / "sitecustomize.py").is_file(), boot

    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "ops.py").write_text(OPS)
    (project / "tests").mkdir()
    (project / "tests" / "test_ops.py").write_text(textwrap.dedent("""\
        import torch
        from pkg import ops

        def test_add():
            ops.add(torch.zeros(4096), torch.ones(4096))
        """))
    (project / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "0"\n\n[tool.kgate]\n'
                                            'targets = ["sm_120a"]\n')

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(env_dir / "bin" / "kgate"), *args], cwd=project, env=env, capture_output=True,
                              text=True, timeout=600)

    lint = run("lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    captured = run("capture", "--device", "cpu", "--", str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "tests")
    assert captured.returncode == 0, captured.stdout + captured.stderr
    assert "1 specialisation(s) of 1 kernel(s) launched offline for sm_120a" in captured.stderr
    checked = run("check", "--format", "json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    kernels = [k for k in __import__("json").loads(checked.stdout)["kernels"]]
    assert {k["kernel"] for k in kernels} == {"pkg.ops:add_kernel"}
    assert all(k["target"] == "sm_120a" for k in kernels)
    doctor = run("doctor")
    assert doctor.returncode == 0 and str(env_dir) in doctor.stdout + doctor.stderr, doctor.stdout
