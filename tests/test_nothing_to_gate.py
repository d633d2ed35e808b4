"""A gate of nothing never passes: a project with no kernel to compile, or a selection that leaves none, is exit 2
with one line, in every command that gates; a shard may get no unit of a project that has some."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import Run, kgate

from kgate.core.errors import KgateError

KERNEL = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def scale(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2.0, mask=offs < n)
''')

REGISTERED = '''
[[triton]]
kernel = "ops:scale"
signature = { x = "*fp32", n = "i32" }
constexprs = { BLOCK = 128 }
targets = ["sm_120a"]
'''


def targets_only(root: Path) -> Path:
    """What a team adopting kgate writes first: the targets in pyproject.toml, and kernels nobody captured."""
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "ops"\n\n[tool.kgate]\ntargets = ["sm_120a"]\n')
    (root / "ops.py").write_text(KERNEL)
    return root


def registered(root: Path) -> Path:
    root.mkdir()
    (root / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\npython-path = ["."]\n' + REGISTERED)
    (root / "ops.py").write_text(KERNEL)
    return root


def said_nothing(run: Run, start: str = "kgate: error: nothing to gate: ") -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr.startswith(start) and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr


def test_a_configuration_of_targets_only_fails_every_command_that_gates(tmp_path: Path) -> None:
    root = targets_only(tmp_path / "p")
    check = kgate("check", cwd=root)
    said_nothing(check, "kgate: error: nothing to gate: pyproject.toml registers no kernel and lists no CUDA source")
    assert "[[tool.kgate.triton]]" in check.stderr and "[[tool.kgate.cuda]] sources" in check.stderr
    assert check.stdout == ""
    for command in (["check", "--format", "json"], ["check", "--shard", "1/2"], ["audit", "-o", "out"], ["diff"]):
        run = kgate(*command, cwd=root)
        said_nothing(run)
        assert run.stderr == check.stderr, command
    assert not (root / "out").exists()
    with pytest.raises(KgateError, match="^nothing to gate: pyproject.toml registers no kernel"):
        from kgate import api

        api.check(root)


def test_an_update_of_a_project_without_kernels_pins_its_source_findings_and_says_so(tmp_path: Path) -> None:
    """Not a verdict: a project kgate only lints pins its source findings for `kgate lint` this way."""
    root = targets_only(tmp_path / "p")
    (root / "tuned.py").write_text('import triton\n\n\n@triton.autotune(configs=[], key=["n_tokens"])\n@triton.jit\n'
                                   'def norm(x, n_tokens):\n    pass\n')
    update = kgate("baseline", "update", "--accept-new", cwd=root)
    assert update.code == 0, update.stdout + update.stderr
    assert update.stderr.startswith("kgate: note: no kernel to compile")
    assert "KG201|tuned.py|norm|n_tokens" in (root / "kgate-baseline.toml").read_text()
    assert kgate("lint", cwd=root).code == 0


def test_a_selection_that_leaves_no_kernel_fails(tmp_path: Path) -> None:
    root = registered(tmp_path / "p")
    said_nothing(kgate("check", "--target", "sm_90a", cwd=root),
                 "kgate: error: nothing to gate: no selected kernel is built for sm_90a")
    said_nothing(kgate("check", "--language", "cuda", cwd=root),
                 "kgate: error: --language cuda: nothing to gate: the configuration lists no CUDA sources")
    said_nothing(kgate("check", "--kernel", "scael", cwd=root),
                 "kgate: error: --kernel 'scael': no kernel of the project matches")
    said_nothing(kgate("baseline", "update", "--target", "sm_90a", cwd=root))
    assert not (root / "kgate-baseline.toml").exists()


def test_an_empty_slice_of_a_project_with_kernels_passes(tmp_path: Path) -> None:
    """One unit over two shards: one of them gets none, and says so; the whole project had one."""
    root = registered(tmp_path / "p")
    runs = [kgate("check", "--shard", f"{index}/2", "--target", "sm_120a", cwd=root) for index in (1, 2)]
    assert [run.code for run in runs] == [0, 0], [run.stderr for run in runs]
    assert sorted(run.stdout.count("0 of 1 unit(s)") for run in runs) == [0, 1], [run.stdout for run in runs]


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_sources_that_define_no_kernel_are_nothing_to_gate(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "host.cu").write_text("int twice(int x) { return 2 * x; }\n")
    said_nothing(kgate("check", cwd=tmp_path),
                 "kgate: error: nothing to gate: the configured CUDA sources define no kernel (a __global__ "
                 "function) for sm_120a")
    (tmp_path / "device.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    run = kgate("check", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr
