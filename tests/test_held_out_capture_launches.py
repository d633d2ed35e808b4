"""Held-out launches for `kgate capture`: constexprs of every kind of value (a bool, None, a tuple, a nested tuple, a
negative float, a string with quotes, a line break and letters beyond ASCII, a default left to the kernel), strings
that read as another value in kgate's files (`"None"`, `"tl.float16"`, `"jit:..."`, `"gl.X()"`) or that no UTF-8
file can hold (a lone surrogate), a specialisation
launched twice, `do_not_specialize` with an argument of 1, pointers 16 bytes and 4 bytes off an allocation, grids of
one, two and three dimensions and of zeros; commands whose processes end by a non-zero exit, `os._exit`, SIGKILL,
SIGTERM, and a fork pool; `--output` into a new folder whose name holds spaces and letters beyond ASCII, into a
folder, and into another project's capture file.

Each launch is recorded as Triton's launcher bound it and compiled by `kgate check`, or said as a launch kgate
cannot record; never recorded as another value."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect import captures

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

OPS = '''\
import triton
import triton.language as tl


@triton.jit
def kinds(x, n, FLAG: tl.constexpr, OPT: tl.constexpr, SHAPE: tl.constexpr, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if FLAG:
        tl.store(x + offs, 1.0, mask=offs < n)
    else:
        tl.store(x + offs, 2.0, mask=offs < n)


@triton.jit
def maybe(x, n, OPT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.static_assert(OPT is not None)
    tl.store(x + offs, 1.0, mask=offs < n)


@triton.jit(do_not_specialize=["n"])
def nospec(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


@triton.jit
def grid3(x, n, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) + tl.program_id(1) + tl.program_id(2)) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


def launch(block):
    import torch

    grid3[(1,)](torch.zeros(64), 64, BLOCK=block)
'''

LAUNCHES = '''\
import torch, triton.language as tl, ops
x = torch.zeros(4096)
ops.kinds[(1,)](x, 4096, FLAG=True, OPT=None, SHAPE=(2, 3))
ops.kinds[(1,)](x, 4096, FLAG=False, OPT=-0.5, SHAPE=((1, 2), (3,)), BLOCK=128)
ops.kinds[(1,)](x, 4096, FLAG=False, OPT=-0.5, SHAPE=((1, 2), (3,)), BLOCK=128)
ops.kinds[(1,)](x, 4096, FLAG=True, OPT='a"b\\nc\\u00e9', SHAPE=(None, "a"), BLOCK=256)
ops.maybe[(1,)](x, 64, OPT="None", BLOCK=16)
ops.maybe[(1,)](x, 64, OPT="tl.float16", BLOCK=32)
ops.maybe[(1,)](x, 64, OPT="jit:ops:grid3", BLOCK=64)
ops.maybe[(1,)](x, 64, OPT="gl.BlockedLayout()", BLOCK=128)
ops.maybe[(1,)](x, 64, OPT=("x", "None"), BLOCK=256)
ops.maybe[(1,)](x, 64, OPT=tl.float16, BLOCK=512)
ops.maybe[(1,)](x, 64, OPT="Nonesuch", BLOCK=1024)
ops.maybe[(1,)](x, 64, OPT="a\\ud800", BLOCK=2048)
ops.nospec[(1,)](x, 4096, BLOCK=32)
ops.nospec[(1,)](x, 1, BLOCK=32)
ops.grid3[(1,)](x, 4096, BLOCK=16)
ops.grid3[(2, 2)](x, 4096, BLOCK=16)
ops.grid3[(2, 2, 2)](x, 4096, BLOCK=16)
ops.grid3[(0,)](x, 4096, BLOCK=32)
ops.grid3[(0, 0, 0)](x, 4096, BLOCK=32)
ops.grid3[(1,)](x[4:], 4092, BLOCK=128)
ops.grid3[(1,)](x[1:], 4092, BLOCK=256)
'''


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "ops.py").write_text(OPS)
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    return root


def capture(project: Path, *args: str) -> tuple[int, str]:
    run = kgate("capture", "--device", "cpu", *args, cwd=project, timeout=300)
    return run.code, run.stderr


def specs(path: Path) -> dict[tuple[str, int], list]:
    out: dict[tuple[str, int], list] = {}
    for entry in captures.load(path, path.name).entries:
        out.setdefault((entry.spec.kernel.split(":")[1], int(entry.spec.constexprs["BLOCK"])), []).append(entry.spec)
    return out


def test_constexprs_grids_and_pointers_are_recorded_as_bound_or_said(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "launches.py").write_text(LAUNCHES)
    code, stderr = capture(project, "--", sys.executable, "launches.py")
    assert code == 0, stderr
    found = specs(project / "kgate-capture.toml")
    # Strings kgate's files would read back as None, a dtype, a @jit function or a Gluon layout: said, not recorded.
    for value in ("'None'", "'tl.float16'", "'jit:ops:grid3'", "'gl.BlockedLayout()'"):
        assert f"ops:maybe: not recorded: the string constexpr {value}, which kgate's files read as something else" \
            in stderr, stderr
    # A string no UTF-8 file can hold (a lone surrogate): said, not recorded, and the capture is not refused for it.
    assert "ops:maybe: not recorded: the string constexpr 'a\\ud800', which holds a lone surrogate" in stderr, stderr
    assert {block for kernel, block in found if kernel == "maybe"} == {512, 1024}, sorted(found)
    assert found["maybe", 512][0].constexprs["OPT"] == "tl.float16"  # the dtype itself
    assert found["maybe", 1024][0].constexprs["OPT"] == "Nonesuch"
    # Every kind of value as it was given; a default the kernel gives; one record of a launch made twice.
    assert found["kinds", 64][0].constexprs == {"BLOCK": 64, "FLAG": True, "OPT": "None", "SHAPE": [2, 3]}
    assert found["kinds", 128][0].constexprs == {"BLOCK": 128, "FLAG": False, "OPT": -0.5, "SHAPE": [[1, 2], [3]]}
    assert found["kinds", 256][0].constexprs["OPT"] == 'a"b\nc\u00e9'
    assert len(found["kinds", 128]) == 1
    # do_not_specialize: n of 1 is the same launch as n of 4096.
    assert len(found["nospec", 32]) == 1 and not found["nospec", 32][0].equal_to_1
    # Grids of one, two and three dimensions are one specialisation; a grid of zeros is bound as well.
    assert len(found["grid3", 16]) == 1 and len(found["grid3", 32]) == 1
    # A pointer 16 bytes off its allocation is divisible by 16; 4 bytes off, it is not.
    assert "x" in found["grid3", 128][0].divisible and "x" not in found["grid3", 256][0].divisible
    check = kgate("check", "-j", "2", cwd=project, timeout=900)
    assert check.code == 0, check.stdout + check.stderr
    assert f"passed: {sum(len(v) for v in found.values())} kernel variant(s)" in check.stdout, check.stdout


# How each process of the command ends, after its launch at BLOCK.
ENDINGS = {
    2: "sys.exit(3)",
    4: "os._exit(0)",
    8: "os.kill(os.getpid(), signal.SIGKILL)",
    16: "os.kill(os.getpid(), signal.SIGTERM)",
}
POOL = '''\
import multiprocessing as mp, ops
if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(ops.launch, [32, 64, 128])
'''


def test_every_process_keeps_its_launches_however_it_ends(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    lines = []
    for block, ending in ENDINGS.items():
        (project / f"end_{block}.py").write_text(f"import os, signal, sys, ops\nops.launch({block})\n{ending}\n")
        lines.append(f"{sys.executable} end_{block}.py &")
    (project / "pool.py").write_text(POOL)
    (project / "all.sh").write_text("\n".join([*lines, f"{sys.executable} pool.py &", "wait", "exit 5"]) + "\n")
    code, stderr = capture(project, "--", "sh", "all.sh")
    assert code == 5, stderr
    assert "the command exited 5" in stderr, stderr
    assert {block for _kernel, block in specs(project / "kgate-capture.toml")} == {*ENDINGS, 32, 64, 128}


def test_output_into_a_new_folder_of_any_name_a_folder_and_another_projects_file(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "one.py").write_text("import ops\nops.launch(64)\n")
    named = project / "new folder ü€" / "sub" / "capture file.toml"
    code, stderr = capture(project, "--output", str(named.relative_to(project)), "--", sys.executable, "one.py")
    assert code == 0, stderr
    assert set(specs(named)) == {("grid3", 64)}
    assert not (project / "kgate-capture.toml").exists()
    code, stderr = capture(project, "--output", "new folder ü€", "--", sys.executable, "one.py")
    assert code == 2 and "new folder ü€: is a folder, not a capture file" in stderr, stderr
    # Asked for by name, another project's capture file gains this project's launch and keeps its own entries.
    other = make_project(tmp_path / "other")
    (other / "kgate-capture.toml").write_bytes(named.read_bytes())
    (project / "two.py").write_text("import ops\nops.launch(128)\n")
    code, stderr = capture(project, "--output", str(other / "kgate-capture.toml"), "--", sys.executable, "two.py")
    assert code == 0, stderr
    assert set(specs(other / "kgate-capture.toml")) == {("grid3", 64), ("grid3", 128)}


# An edit of the kernel since the capture -> why its captured launch no longer fits (None: it still does).
BINDS_OTHERWISE = {
    "an-annotation-of-another-type": (("def grid3(x, n,", "def grid3(x, n: tl.int64,"),
                                      "n is annotated i64 now (captured as i32)"),
    "do-not-specialize": (("@triton.jit\ndef grid3", '@triton.jit(do_not_specialize=["n"])\ndef grid3'),
                          "n is in do_not_specialize now (captured as specialised)"),
    "do-not-specialize-on-alignment": (
        ("@triton.jit\ndef grid3", '@triton.jit(do_not_specialize_on_alignment=["x"])\ndef grid3'),
        "x is in do_not_specialize_on_alignment now (captured as divisible by 16)"),
    "an-annotation-of-the-captured-type": (("def grid3(x, n,", "def grid3(x, n: tl.int32,"), None),
}


def test_a_captured_launch_the_kernel_now_binds_otherwise_is_not_compiled_as_captured(tmp_path: Path) -> None:
    """A capture names the argument types and the specialisation the launcher bound; a kernel annotated or told not to
    specialise since binds other ones, so the capture no longer describes any launch: said, never gated as if."""
    project = make_project(tmp_path / "project")
    (project / "one.py").write_text("import ops\nops.launch(64)\n")
    code, stderr = capture(project, "--", sys.executable, "one.py")
    assert code == 0, stderr
    for name, ((old, new), why) in BINDS_OTHERWISE.items():
        (project / "ops.py").write_text(OPS.replace(old, new))
        check = kgate("check", cwd=project, timeout=900)
        if why is None:
            assert check.code == 0, (name, check.stdout + check.stderr)
        else:
            assert check.code == 1 and f"no longer fits the kernel: {why}" in check.stdout, (name, check.stdout)
