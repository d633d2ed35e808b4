"""`kgate capture` under what the earlier capture cases do not do: commands that change their own environment and
then start children that inherit it (os.environ edited, then subprocess, os.execv), commands that close or
replace the recorder's descriptor (a daemon's clean-up of every descriptor, a log file opened under the freed
number, dup2 onto it), that move or replace its record file, that run under a umask that leaves no permission;
launches at exit, through `warmup`, with an infinite or NaN constexpr, of modules discarded and imported again,
from a namespace package, from a child that outlives the command; and record files holding what no recorder
writes (a count TOML cannot hold, a source file that is a folder, duplicate keys, a byte-order mark, two records
on one line, a kernel name that is no identifier, a type Triton does not know, a link to a project file).

A capture records every launch or fails naming why; it never passes with a launch missing, never writes into
the command's files, never ends in a traceback.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import kgate
from test_capture_imports import blocks, entries, make_project

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

# A child that launches where its recorder binds offline, and exits 0 where nothing stands in for the driver.
CHILD = "import os, sys; sys.path.insert(0, os.getcwd()); import ops\ntry: ops.launch(32)\nexcept RuntimeError: pass"
LOST = "with an environment of its own that drops the capture"

# name -> (the command's script, the BLOCKs captured when it passes, words its output holds, whether it passes)
SCRIPTS = {
    "a-child-inherits-the-environment-after-pythonpath-was-dropped": (f"""\
        import os, subprocess, sys
        import ops
        ops.launch(64)
        os.environ.pop("PYTHONPATH")
        subprocess.run([sys.executable, "-c", {CHILD!r}])
        """, {64}, LOST, True),
    "a-child-inherits-another-capture-folder": (f"""\
        import os, subprocess, sys, tempfile
        import ops
        ops.launch(64)
        os.environ["KGATE_CAPTURE_DIR"] = tempfile.mkdtemp()
        subprocess.run([sys.executable, "-c", {CHILD!r}])
        """, {64}, LOST, True),
    "execv-after-pythonpath-was-dropped": (f"""\
        import os, sys
        import ops
        ops.launch(64)
        os.environ.pop("PYTHONPATH")
        os.execv(sys.executable, [sys.executable, "-c", {CHILD!r}])
        """, {64}, LOST, True),
    "posix-spawn-with-an-environment-without-the-capture": (f"""\
        import os, sys
        import ops
        ops.launch(64)
        env = {{k: v for k, v in os.environ.items() if not k.startswith("KGATE_")}}
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", {CHILD!r}], env)
        os.waitpid(pid, 0)
        """, {64}, LOST, True),
    "the-recorders-descriptor-closed-and-reused-by-a-log": ("""\
        import os
        import ops
        ops.launch(64)
        folder = os.environ["KGATE_CAPTURE_DIR"]
        for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith(folder):
                    os.close(fd)
            except OSError:
                pass
        with open("command.log", "w") as log:
            log.write("x" * 100000 + "\\n")
            log.flush()
            ops.launch(128)
        print("the command went on")
        """, {64, 128}, "the command went on", True),
    "every-descriptor-closed": ("""\
        import os
        import ops
        ops.launch(64)
        os.closerange(3, 65536)
        ops.launch(128)
        print("the command went on")
        """, {64, 128}, "the command went on", True),
    "a-log-duplicated-onto-the-recorders-descriptor": ("""\
        import os
        import ops
        ops.launch(64)
        folder = os.environ["KGATE_CAPTURE_DIR"]
        mine = [int(fd) for fd in os.listdir("/proc/self/fd")
                if os.path.realpath(f"/proc/self/fd/{fd}").startswith(folder)]
        with open("command.log", "w") as log:
            log.write("x" * 100000 + "\\n")
            log.flush()
            for fd in mine:
                os.dup2(log.fileno(), fd)
            ops.launch(128)
        print("the command went on")
        """, {64, 128}, "the command went on", True),
    "the-record-file-moved-away": ("""\
        import glob, os
        import ops
        ops.launch(64)
        for f in glob.glob(os.path.join(os.environ["KGATE_CAPTURE_DIR"], f"records-{os.getpid()}-*")):
            os.rename(f, f + ".done")
        ops.launch(128)
        print("the command went on")
        """, set(), "its record file was deleted while it ran", False),
    "the-record-file-replaced-under-its-name": ("""\
        import glob, os
        import ops
        ops.launch(64)
        for f in glob.glob(os.path.join(os.environ["KGATE_CAPTURE_DIR"], f"records-{os.getpid()}-*")):
            os.remove(f)
            open(f, "w").close()
        ops.launch(128)
        print("the command went on")
        """, set(), "its record file was deleted while it ran", False),
    "a-umask-that-leaves-no-permission": ("""\
        import os
        os.umask(0o777)
        import ops
        ops.launch(64)
        """, {64}, "", True),
    "a-launch-at-exit-and-one-through-warmup": ("""\
        import atexit
        import torch
        import ops
        ops.fill_kernel.warmup(torch.zeros(4096), 4096, BLOCK=256, grid=(1,))
        atexit.register(ops.launch, 512)
        """, {256, 512}, "", True),
    "modules-discarded-and-imported-again": ("""\
        import gc, importlib, shutil, sys
        import torch
        x = torch.zeros(4096)
        for block in (64, 128):
            mod = importlib.import_module("ops")
            mod.fill_kernel[(1,)](x, 4096, BLOCK=block)
            del sys.modules["ops"], mod
            gc.collect()
        """, {64, 128}, "", True),
    "a-child-that-outlives-the-command": ("""\
        import subprocess, sys, time
        body = "import ops, time; ops.launch(32); print('launched', flush=True); time.sleep(5)"
        child = subprocess.Popen([sys.executable, "-c", body], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "launched"
        """, {32}, "", True),
    "a-module-imported-under-two-names": ("""\
        import sys
        sys.path.insert(0, "pkg")
        import torch
        import pkg.kernels, kernels
        x = torch.zeros(4096)
        pkg.kernels.fill_kernel[(1,)](x, 4096, BLOCK=64)
        kernels.fill_kernel[(1,)](x, 4096, BLOCK=64)
        """, {64}, "", True),
}


def _script(project: Path, body: str) -> list[str]:
    (project / "case.py").write_text(textwrap.dedent(body))
    return [sys.executable, "case.py"]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_command_that_changes_what_the_recorder_relies_on(tmp_path: Path, name: str) -> None:
    body, wanted, words, passes = SCRIPTS[name]
    project = make_project(tmp_path)
    (project / "pkg").mkdir()
    (project / "pkg" / "kernels.py").write_text((project / "ops.py").read_text())
    run = kgate("capture", "--device", "cpu", "--", *_script(project, body), cwd=project, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    assert (run.code == 0) == passes and words in run.stdout + run.stderr, run.stderr
    if passes:
        assert blocks(project) == wanted, run.stderr
        assert {e.spec.kernel for e in entries(project)} <= {"ops:fill_kernel", "pkg.kernels:fill_kernel"}
    else:
        assert not (project / "kgate-capture.toml").exists()
    log = project / "command.log"
    if log.exists():
        assert log.read_text() == "x" * 100000 + "\n"  # no record went into the command's file


SPECIAL = '''\
import triton
import triton.language as tl


@triton.jit
def masked_max(x, out, n, FILL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=FILL)
    tl.store(out, tl.max(v, axis=0))
'''


@pytest.mark.parametrize("fill", ["-inf", "nan"])
def test_a_constexpr_toml_writes_as_a_special_float_is_captured_and_checked(tmp_path: Path, fill: str) -> None:
    project = make_project(tmp_path)
    (project / "special.py").write_text(SPECIAL)
    script = ("import torch, special\nx = torch.zeros(64); o = torch.zeros(1)\n"
              f"special.masked_max[(1,)](x, o, 64, FILL=float({fill!r}), BLOCK=64)\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", script, cwd=project, timeout=300)
    assert run.code == 0, run.stderr
    assert f"FILL = {fill}" in (project / "kgate-capture.toml").read_text()
    checked = kgate("check", "--format", "json", cwd=project)
    assert checked.code == 0, checked.stderr
    assert [k["constexprs"]["FILL"] for k in checked.json()["kernels"]] == [fill]


def test_a_kernel_of_a_namespace_package_is_captured_and_checked(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "space" / "inner").mkdir(parents=True)
    (project / "space" / "inner" / "ops.py").write_text((project / "ops.py").read_text())
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c",
                "import space.inner.ops as o; o.launch(64)", cwd=project, timeout=300)
    assert run.code == 0, run.stderr
    assert [e.spec.kernel for e in entries(project)] == ["space.inner.ops:fill_kernel"]
    assert kgate("check", cwd=project).code == 0


# ---- record files a command writes

ENV = {"type": "env", "where": "cpu sm_120a", "triton": "3.9.0"}


def _spec(project: Path, **extra: object) -> dict:
    return {"type": "spec", "version": 1, "id": "id64", "kernel": "ops:fill_kernel", "file": str(project / "ops.py"),
            "signature": {"n": "i32", "x": "*fp32"}, "constexprs": {"BLOCK": 64}, "divisible": ["n", "x"],
            "equal_to_1": [], "none": [], "options": {"num_stages": 3, "num_warps": 4}, **extra}


def _lines(*records: dict | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def _writer(project: Path, files: dict[str, str]) -> list[str]:
    """A command that writes these files into the capture's folder (`->name`: a link to that project file)."""
    (project / "files.json").write_text(json.dumps(files))
    body = ("import json, os, pathlib\nfolder = pathlib.Path(os.environ['KGATE_CAPTURE_DIR'])\n"
            "folder.mkdir(parents=True, exist_ok=True)\n"
            f"for name, text in json.loads(pathlib.Path({str(project / 'files.json')!r}).read_text()).items():\n"
            "    if text.startswith('->'):\n        os.link(text[2:], folder / name)\n"
            "    else:\n        (folder / name).write_bytes(text.encode())\n")
    return [sys.executable, "-c", body]


# name -> (the files, given the project; whether the capture passes; words its output holds; what `kgate check`
# then says of the file, or None where the capture leaves no file)
WRITTEN = {
    "a-count-toml-cannot-hold": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p), {"type": "launches", "id": "id64", "count": 2**70})},
        False, "a launches record whose 'count' is 1180591620717411303424", None),
    "a-source-file-that-is-the-project-folder": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, file=str(p)))}, False,
        "nothing captured", None),
    "duplicate-keys-the-last-holds": (
        lambda p: {"records-1.jsonl": _lines(ENV, json.dumps(_spec(p))[:-1] + ', "constexprs": {"BLOCK": 128}}')},
        True, "", "passed"),
    "a-byte-order-mark": (lambda p: {"records-1.jsonl": "\ufeff" + _lines(ENV, _spec(p))}, True, "", "passed"),
    "two-records-on-one-line": (lambda p: {"records-1.jsonl": json.dumps(ENV) + json.dumps(_spec(p)) + "\n"}, False,
                                "not JSON (Extra data", None),
    "an-environment-named-by-spaces": (lambda p: {"records-1.jsonl": _lines({**ENV, "where": "   "}, _spec(p))},
                                       True, "", "passed"),
    "a-kernel-name-that-is-no-identifier": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, kernel="ops:fill kernel"))}, False,
        'ops:fill kernel: not recorded: not a kernel\'s name as "package.module:function"', None),
    "a-type-triton-does-not-know": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, signature={"n": "i99", "x": "*fp32"}))}, True, "",
        "Triton's compiler raised KeyError: 'i99'"),
    "a-constexpr-that-is-a-table": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, constexprs={"BLOCK": {"a": 1}}))}, False,
        "constexprs.BLOCK: must be a number", None),
    "no-warps": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, options={"num_warps": 0, "num_stages": 3}))},
                 False, "options.num_warps: must be a positive integer", None),
    "a-hard-link-to-a-project-file": (lambda p: {"records-1.jsonl": "->" + str(p / "ops.py")}, False,
                                      "not a record kgate wrote", None),
    "a-marker-of-another-errno": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p)), "lost-5-EXDEV": ""}, False,
                                  "could not write its records (Invalid cross-device link)", None),
    "a-million-blank-lines": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p)) + "\n" * 1_000_000}, True, "",
                              "passed"),
    "a-source-file-compiled-to-bytecode": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, file=str(p / "__pycache__" / "ops.cpython-311.pyc")))},
        False, "nothing captured", None),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_record_files_holding_what_no_recorder_writes(tmp_path: Path, name: str) -> None:
    files, passes, words, checked = WRITTEN[name]
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--", *_writer(project, files(project)), cwd=project, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    assert (run.code == 0) == passes and words in run.stderr, run.stderr
    if checked is None:
        assert not (project / "kgate-capture.toml").exists()
        return
    check = kgate("check", cwd=project)
    assert "Traceback" not in check.stderr and checked in check.stdout + check.stderr, check.stdout + check.stderr
    assert (check.code == 0) == (checked == "passed")


def test_a_capture_file_whose_count_toml_cannot_hold_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--counts", "--", sys.executable, "-c", "import ops; ops.launch(64)",
                cwd=project, timeout=300)
    assert run.code == 0, run.stderr
    capture = project / "kgate-capture.toml"
    capture.write_text(capture.read_text().replace("launches = 1", f"launches = {2**70}"))
    checked = kgate("check", cwd=project)
    assert checked.code == 2 and "launches must be a non-negative integer within 64 bits" in checked.stderr, \
        checked.stderr
