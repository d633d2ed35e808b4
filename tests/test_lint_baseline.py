"""`kgate lint` and the committed baseline: pinned source findings pass, new ones fail, and only a
whole-project run calls a pin stale."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import kgate

KERNEL = textwrap.dedent("""\
    import triton


    @triton.autotune(configs=[], key=["n_tokens"])
    @triton.jit
    def norm(x, n_tokens):
        pass
""")
BASELINE = 'version = 1\n\n[findings]\n"KG201|pkg/{name}.py|norm|n_tokens" = 1\n'


def project(root: Path) -> Path:
    (root / "kgate.toml").write_text("")
    (root / "pkg").mkdir()
    for name in ("a", "b"):
        (root / "pkg" / f"{name}.py").write_text(KERNEL)
    (root / "kgate-baseline.toml").write_text(BASELINE.format(name="a"))
    return root


def test_a_pinned_source_finding_is_accepted_and_a_new_one_fails(tmp_path: Path) -> None:
    root = project(tmp_path)
    run = kgate("lint", cwd=root)
    assert run.code == 1
    assert "pkg/b.py:4:35: KG201" in run.stdout and "pkg/a.py:4" not in run.stdout
    # The new finding says so on its own line, and on no second line.
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("pkg/b.py:4:35: KG201")]
    assert line.startswith("pkg/b.py:4:35: KG201 error runtime-autotune (new): ")
    assert "1 baselined" in run.stdout and "NEW" not in run.stdout
    assert kgate("lint", "pkg/a.py", cwd=root).code == 0
    assert kgate("lint", "--no-baseline", "pkg/a.py", cwd=root).code == 1


def test_a_stale_pin_fails_the_whole_project_run_only(tmp_path: Path) -> None:
    root = project(tmp_path)
    clean = KERNEL.replace('key=["n_tokens"]', "key=[]")
    (root / "pkg" / "b.py").write_text(clean)
    (root / "pkg" / "a.py").write_text(clean)  # a's pinned finding is fixed
    whole = kgate("lint", cwd=root)
    assert whole.code == 1 and "GONE" in whole.stdout and "KG201|pkg/a.py|norm|n_tokens" in whole.stdout
    # Given files (pre-commit's batches), a pin that no longer matches is shown, never failed.
    files = kgate("lint", "pkg/a.py", "pkg/b.py", cwd=root)
    assert files.code == 0, files.stdout
    assert "GONE      KG201|pkg/a.py|norm|n_tokens: 1 pinned, 0 now (accepted)" in files.stdout
    other = kgate("lint", "pkg/b.py", cwd=root)
    assert other.code == 0 and "GONE" not in other.stdout


OTHER_TOOLCHAIN = """
[[toolchain]]
versions = { "triton" = "0.0.1" }

[toolchain.kernels]
"x:y|v|sm_120a" = { registers = 250, spill_bytes = 0, stack_bytes = 0, smem_bytes = 0 }

[toolchain.findings]
"KG102|x.py|x:y|v|sm_120a" = 1
"""


def test_an_update_that_compiles_nothing_keeps_every_toolchains_pins(tmp_path: Path) -> None:
    """A project without kernels names no compiler: another toolchain's pins are neither re-pinned nor gone."""
    root = project(tmp_path)
    baseline = root / "kgate-baseline.toml"
    baseline.write_text(BASELINE.format(name="a").replace("version = 1", "version = 2") + OTHER_TOOLCHAIN)
    update = kgate("baseline", "update", "--accept-new", cwd=root)
    assert update.code == 0, update.stdout + update.stderr
    assert "x:y" not in update.stdout and "pinned    KG201|pkg/b.py|norm|n_tokens: 1" in update.stdout
    assert baseline.read_text().endswith(OTHER_TOOLCHAIN)  # the last table: kgate writes the newest Triton first
    assert "pinning the source rules' findings only" in update.stderr
    lint = kgate("lint", cwd=root)  # the gate of a project kgate only lints
    assert lint.code == 0 and "GONE" not in lint.stdout, lint.stdout + lint.stderr
    check = kgate("check", cwd=root)  # compiles nothing: not a pass
    assert check.code == 2 and check.stderr.startswith("kgate: error: nothing to gate: "), check.stderr


LAUNCH = "__global__ void k(float* x) { x[0] = 1; }\nvoid launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n"


def test_a_pin_of_a_file_named_with_a_control_character_is_written_as_valid_toml(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('python-path = ["."]\n')
    (tmp_path / "d\x7fel.cu").write_text(LAUNCH)  # DEL: JSON leaves it raw, TOML forbids it raw
    update = kgate("baseline", "update", "--accept-new", cwd=tmp_path)
    assert update.code == 0, update.stderr
    assert "\\u007f" in (tmp_path / "kgate-baseline.toml").read_text()
    lint = kgate("lint", cwd=tmp_path)
    assert lint.code == 0, lint.stdout + lint.stderr

