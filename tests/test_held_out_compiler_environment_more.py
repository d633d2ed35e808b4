"""What the compilers read, beyond tests/test_held_out_compiler_environment.py: an options file named by
NVCC_APPEND_FLAGS or NVCC_PREPEND_FLAGS and edited, a wrapper that runs its compiler through a path built from a
variable whose link a toolkit switched in place retargets, a wrapper written in Python reading its variable with
`os.environ.get`, one sourcing a settings file, one appending to a log (which must not make every run compile
again), a host compiler folder NVCC_CCBIN names, a knob naming a file by a relative path; and the preflight of a
ptxas a variable names that is a folder, not executable, or fails to say its version.

Each key case compiles real kernels: a run without the change fills the cache, then a warm run with it must report
what a run with it and no cache reports.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import kgate
from test_compile_environment import AXPB
from test_held_out_compiler_environment import (
    PTXAS,
    WRAPPED,
    _compiled,
    _cuda,
    _gcc_wrapper,
    _outcome,
    _real_nvcc,
    _triton,
    _warm_is_cold,
    _write_program,
    needs_nvcc,
    needs_ptxas,
)

from kgate.support import tools


@needs_nvcc
@pytest.mark.parametrize("variable, form", [("NVCC_APPEND_FLAGS", "--options-file {}"),
                                            ("NVCC_PREPEND_FLAGS", "--options-file={}")])
def test_an_options_file_the_flags_name_edited(tmp_path: Path, variable: str, form: str) -> None:
    root = _cuda(tmp_path / "p", WRAPPED)
    options = tmp_path / "options.txt"
    options.write_text("-DKG_WRAPPED\n")
    env = {variable: form.format(options)}
    wrapped, plain = _warm_is_cold(root, env, env, lambda: options.write_text("\n"))
    assert wrapped != plain


@needs_nvcc
def test_a_wrapper_running_its_compiler_through_a_variables_path_retargeted(tmp_path: Path) -> None:
    """`exec "$KG_TOOLKIT/bin/nvcc"`, KG_TOOLKIT a link to the toolkit in use, switched in place to another."""
    for name, extra in (("plain", ""), ("wrapped", "-DKG_WRAPPED")):
        _write_program(tmp_path / name / "bin" / "nvcc", f'#!/bin/sh\nexec {_real_nvcc()} "$@" {extra}\n')
    _write_program(tmp_path / "bin" / "nvcc", '#!/bin/sh\nexec "$KG_TOOLKIT/bin/nvcc" "$@"\n')
    link = tmp_path / "toolkit"
    link.symlink_to(tmp_path / "plain")
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "KG_TOOLKIT": str(link)}

    def switch() -> None:
        link.unlink()
        link.symlink_to(tmp_path / "wrapped")

    plain, wrapped = _warm_is_cold(_cuda(tmp_path / "p", WRAPPED), env, env, switch)
    assert wrapped != plain


@needs_ptxas
def test_a_python_wrapper_reading_its_variable_with_environ_get(tmp_path: Path) -> None:
    root = _triton(tmp_path / "p")
    wrapper = _write_program(tmp_path / "bin" / "ptxas", (
        f"#!{sys.executable}\nimport os, sys\n"
        "extra = os.environ.get('KG_PTXAS_EXTRA', '').split()\n"
        f"args = sys.argv[1:] if sys.argv[1:2] == ['--version'] else sys.argv[1:] + extra\n"
        f"os.execv({str(PTXAS)!r}, [{str(PTXAS)!r}, *args])\n"))
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    plain, wrapped = _warm_is_cold(root, env, {**env, "KG_PTXAS_EXTRA": "--opt-level 0"})
    assert wrapped != plain


@needs_ptxas
def test_a_wrapper_sourcing_a_settings_file_edited(tmp_path: Path) -> None:
    root = _triton(tmp_path / "p")
    settings = tmp_path / "ptxas-settings.sh"
    settings.write_text("EXTRA=\n")
    wrapper = _write_program(tmp_path / "bin" / "ptxas", (
        f'#!/bin/sh\n. {settings}\ncase "$1" in --version) exec {PTXAS} "$@";; esac\nexec {PTXAS} "$@" $EXTRA\n'))
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    plain, wrapped = _warm_is_cold(root, env, env, lambda: settings.write_text('EXTRA="--opt-level 0"\n'))
    assert wrapped != plain


@needs_ptxas
def test_a_wrapper_appending_to_a_log_compiles_once(tmp_path: Path) -> None:
    """What a wrapper writes is no input of it: the log growing with every compile keys nothing."""
    root = _triton(tmp_path / "p")
    log = tmp_path / "ptxas.log"
    log.write_text("")
    wrapper = _write_program(tmp_path / "bin" / "ptxas", f'#!/bin/sh\necho "$@" >> {log}\nexec {PTXAS} "$@"\n')
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    assert "1 compiled" in _compiled(root, env)
    assert log.read_text()
    assert "0 compiled, 1 from cache" in _compiled(root, env)


@needs_nvcc
def test_a_host_compiler_folder_nvcc_ccbin_names_edited(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p", WRAPPED)
    _gcc_wrapper(tmp_path / "gcc-bin", "")
    env = {"NVCC_CCBIN": str(tmp_path / "gcc-bin")}
    plain, wrapped = _warm_is_cold(root, env, env, lambda: _gcc_wrapper(tmp_path / "gcc-bin", "-DKG_WRAPPED=1"))
    assert wrapped != plain


def test_a_knob_naming_a_file_by_a_relative_path(tmp_path: Path) -> None:
    root = _triton(tmp_path / "p", AXPB.replace("import triton.language as tl\n", (
        "import triton.language as tl\nfrom triton.language.extra import libdevice\n")).replace(
            "* 2.5 + 1.0", "* 2.5 + libdevice.exp(1.0)"))
    libdevice = next(Path(tools.triton_bin_dir() or ".").parent.glob("lib/libdevice*.bc"))
    shutil.copy(libdevice, root / "libdevice.bc")
    env = {"TRITON_LIBDEVICE_PATH": "libdevice.bc"}
    good = _outcome(root, env=env)
    (root / "libdevice.bc").write_bytes(b"not bitcode" + bytes(64))
    assert _outcome(root, env=env) == _outcome(root, "--no-cache", env=env) != good


# what the variable names -> the words of the one line kgate says
PREFLIGHT = {
    "a-folder": (lambda folder: folder, "no such executable"),
    "a-file-not-executable": (lambda folder: _plain_file(folder / "ptxas"), "no such executable"),
    "a-ptxas-failing-to-say-its-version": (
        lambda folder: _write_program(folder / "ptxas", '#!/bin/sh\necho "no version" >&2\nexit 3\n'),
        "exited with status 3"),
}


def _plain_file(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    return path


@pytest.mark.parametrize("name", sorted(PREFLIGHT))
def test_a_ptxas_a_variable_names_that_cannot_run_stops_the_run(tmp_path: Path, name: str) -> None:
    named, words = PREFLIGHT[name]
    root = _triton(tmp_path / "p")
    run = kgate("check", cwd=root, env={"TRITON_PTXAS_BLACKWELL_PATH": str(named(tmp_path))})
    assert run.code == 2 and "Traceback" not in run.stderr, run.stderr
    assert words in run.stderr.strip().splitlines()[-1], run.stderr
