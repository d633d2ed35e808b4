"""`kgate capture` holds whatever the order of imports: probes that load nothing (torch asks
`importlib.util.find_spec("triton")` at import from 2.14 on, and when asked about the device), `importlib`
imports, a spec executed by hand, an import on another thread, a set-up hook that queries the device, a Triton
imported before the command's first line (a `.pth` file, the environment's own sitecustomize), and Python
subprocesses (inheriting, spawned, forked).

Each case is a script of its own that launches one kernel with a BLOCK no other case uses; one capture runs
them all side by side, and every BLOCK must be in the capture file. A case that loses the recorder's hooks
records nothing (and offline, Triton then finds no driver).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect import captures

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

OPS = '''\
import triton
import triton.language as tl


@triton.jit
def fill_kernel(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


def launch(block):
    import os
    import torch

    x = torch.zeros(4096, device=os.environ.get("CASE_DEVICE", "cpu"))
    fill_kernel[(triton.cdiv(4096, block),)](x, 4096, BLOCK=block)
'''

# Each case's script: its import order, then one launch at its BLOCK (filled in as {block}).
CASES = {
    "probe-then-import": """
        import importlib.util
        assert importlib.util.find_spec("triton") is not None
        assert importlib.util.find_spec("triton") is not None
        import torch, ops
        ops.launch({block})
        """,
    "torch-first": """
        import torch
        import ops
        ops.launch({block})
        """,
    "importlib-import-module": """
        import importlib, importlib.util
        importlib.util.find_spec("triton")
        importlib.import_module("triton")
        importlib.import_module("ops").launch({block})
        """,
    "submodule-probe": """
        import importlib.util
        importlib.util.find_spec("triton.language")
        import ops
        ops.launch({block})
        """,
    "spec-executed-by-hand": """
        import importlib.util, sys
        spec = importlib.util.find_spec("triton")
        module = importlib.util.module_from_spec(spec)
        sys.modules["triton"] = module
        spec.loader.exec_module(module)
        import ops
        ops.launch({block})
        """,
    "imported-on-a-thread": """
        import importlib.util, threading
        importlib.util.find_spec("triton")
        thread = threading.Thread(target=lambda: __import__("triton"))
        thread.start()
        thread.join()
        import ops
        ops.launch({block})
        """,
    "inherited-subprocess": """
        import importlib.util, subprocess, sys
        importlib.util.find_spec("triton")
        subprocess.run([sys.executable, "-c", "import ops; ops.launch({block})"], check=True)
        """,
    "spawned-worker": """
        import importlib.util, multiprocessing
        import ops
        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                pool.apply(ops.launch, ({block},))
        """,
    "forked-after-import": """
        import os
        import ops
        pid = os.fork()
        if pid == 0:
            ops.launch({block})
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        """,
    "forked-before-import": """
        import importlib.util, os
        importlib.util.find_spec("triton")
        pid = os.fork()
        if pid == 0:
            import ops
            ops.launch({block})
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        """,
}


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def mode(request: pytest.FixtureRequest) -> tuple[list[str], dict[str, str], str]:
    """How the capture runs: offline on CPU tensors, or (on a machine with a CUDA GPU) on the GPU, where the
    launches run and `--verify` compares kgate's compile with each loaded kernel. (flags, environment, what the
    summary says)."""
    import torch

    if request.param == "cpu":
        return ["--device", "cpu"], {}, "launched offline for sm_120a"
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return ["--device", "gpu", "--verify"], {"CASE_DEVICE": "cuda"}, "launched on the GPU"


def entries(project: Path) -> list[captures.CapturedSpec]:
    return captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries


def blocks(project: Path) -> set[int]:
    return {int(e.spec.constexprs["BLOCK"]) for e in entries(project)}


def make_project(tmp_path: Path, setup: str | None = None) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "ops.py").write_text(OPS)
    config = 'targets = ["sm_120a"]\npython-path = ["."]\n'
    if setup is not None:
        (project / "setup_hook.py").write_text(textwrap.dedent(setup))
        config += 'setup = "setup_hook.py"\n'
    (project / "kgate.toml").write_text(config)
    return project


def write_cases(project: Path, cases: dict[str, str]) -> dict[int, str]:
    """One script per case and a shell script running them all at once; BLOCK -> case."""
    wanted: dict[int, str] = {}
    lines = []
    for number, (name, body) in enumerate(sorted(cases.items())):
        block = 16 << number
        wanted[block] = name
        script = project / f"case_{name.replace('-', '_')}.py"
        script.write_text(textwrap.dedent(body).format(block=block))
        lines.append(f"{sys.executable} {script.name} || echo {name} failed >&2 &")
    (project / "all.sh").write_text("\n".join(lines) + "\nwait\n")
    return wanted


def test_every_import_order_and_subprocess_is_captured(tmp_path: Path, mode: tuple) -> None:
    flags, env, where = mode
    project = make_project(tmp_path)
    wanted = write_cases(project, CASES)
    run = kgate("capture", *flags, "--", "sh", "all.sh", cwd=project, env=env, process=True)
    assert "failed" not in run.stderr, run.stderr
    assert run.code == 0, run.stdout + run.stderr
    missing = {name for block, name in wanted.items() if block not in blocks(project)}
    assert not missing, run.stderr
    assert f"of 1 kernel(s) {where} by {len(CASES)} process(es)" in run.stderr


@pytest.mark.parametrize("setup", [
    # A project's set-up that asks torch about the device (on a GPU machine it answers; here it raises).
    """\
    import importlib.util
    import torch
    importlib.util.find_spec("triton")
    if torch.cuda.is_available():
        torch.cuda.get_device_capability()
    else:
        try:
            torch.cuda.get_device_capability()
        except Exception:
            pass
    """,
    # A set-up that imports Triton itself, before the command's code.
    "import triton, triton.language\n",
], ids=["device-queries", "imports-triton"])
def test_a_set_up_hook_that_probes_or_imports_keeps_the_capture(tmp_path: Path, setup: str, mode: tuple) -> None:
    flags, env, _where = mode
    project = make_project(tmp_path, setup)
    wanted = write_cases(project, {name: CASES[name] for name in ("probe-then-import", "inherited-subprocess")})
    run = kgate("capture", *flags, "--", "sh", "all.sh", cwd=project, env=env, process=True)
    assert run.code == 0 and "failed" not in run.stderr, run.stdout + run.stderr
    assert blocks(project) == set(wanted), run.stderr


def test_triton_imported_before_the_first_line(tmp_path: Path) -> None:
    """A `.pth` file of the environment imports Triton before any sitecustomize runs; the environment's own
    sitecustomize (which kgate's hands over to) imports it after kgate's recorder has loaded."""
    project = make_project(tmp_path)
    # An environment whose site-packages holds a .pth that puts this one's packages on the path and imports
    # Triton (as a package's start-up .pth would).
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next((env_dir / "lib").glob("python*/site-packages"))
    marker = tmp_path / "triton-before-sitecustomize"
    (site / "zz_triton.pth").write_text(
        f"{sysconfig.get_paths()['purelib']}\n"
        f"import sys, pathlib; import triton; pathlib.Path({str(marker)!r}).write_text(str('sitecustomize' in "
        f"sys.modules))\n")
    own = tmp_path / "own_site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import triton\n")
    for name, block in (("pth", 16), ("own", 32)):
        (project / f"case_{name}.py").write_text(textwrap.dedent(CASES["torch-first"]).format(block=block))
    (project / "all.sh").write_text(
        f"{env_dir / 'bin' / 'python'} case_pth.py &\n"
        f"PYTHONPATH=\"$PYTHONPATH{os.pathsep}{own}\" {sys.executable} case_own.py &\n"
        "wait\n")
    run = kgate("capture", "--device", "cpu", "--", "sh", "all.sh", cwd=project)
    assert marker.read_text() == "False"  # Triton was imported before any sitecustomize ran
    assert run.code == 0, run.stderr
    assert blocks(project) == {16, 32}, run.stderr


def test_a_command_that_drops_the_capture_is_named(tmp_path: Path) -> None:
    """What kgate cannot record is said: a child started with an environment of its own, a command that replaces
    PYTHONPATH, a Python process that never imports Triton."""
    project = make_project(tmp_path)
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'print(1)'], env={'PATH': '/usr/bin'})"
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", code, cwd=project)
    assert run.code == 2
    assert "with an environment of its own that drops the capture" in run.stderr
    assert "none of the command's 1 Python process(es) imported Triton" in run.stderr
    run = kgate("capture", "--device", "cpu", "--", "env", "PYTHONPATH=.", sys.executable, "-c", "import ops",
                cwd=project)
    assert run.code == 2 and "no Python process of the command ran kgate's recorder" in run.stderr
    assert not (project / "kgate-capture.toml").exists()
