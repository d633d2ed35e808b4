"""Capture record files and the processes that write them, under what real commands do to them.

Record files a command leaves in the capture's folder (CRLF lines, duplicates, a record about a specialisation
in a file read before the specialisation's own, a field the recorder never writes, a marker of lost records,
names kgate did not pick); processes whose records cannot stay whole (a file size limit, a record file the
command deletes or cuts short, a process started under a killed one's id); children forked while another
thread records, forked ones that end with `sys.exit` or through `multiprocessing`, spawned ones, threads
launching together; unicode in modules, kernels and constexprs. A capture records every launch or fails
naming why; it never passes with a launch missing, never breaks or hangs the command, and writes what a
reviewer can read.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import kgate
from test_capture_imports import blocks, entries, make_project

from kgate.collect import captures

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

ENV = {"type": "env", "where": "cpu sm_120a", "triton": "3.9.0"}


def _spec(project: Path, block: int, **extra: object) -> dict:
    return {"type": "spec", "version": 1, "id": f"id{block}", "kernel": "ops:fill_kernel",
            "file": str(project / "ops.py"), "signature": {"n": "i32", "x": "*fp32"}, "constexprs": {"BLOCK": block},
            "divisible": ["n", "x"], "equal_to_1": [], "none": [], "options": {"num_stages": 3, "num_warps": 4},
            **extra}


def _lines(*records: dict, end: str = "\n") -> str:
    return "".join(json.dumps(r) + end for r in records)


def _write_files(project: Path, files: dict[str, str]) -> list[str]:
    """A command that writes these files into the capture's folder (and runs no kernel)."""
    (project / "files.json").write_text(json.dumps(files))
    body = ("import json, os, pathlib\nfolder = pathlib.Path(os.environ['KGATE_CAPTURE_DIR'])\n"
            "folder.mkdir(parents=True, exist_ok=True)\n"
            f"for name, text in json.loads(pathlib.Path({str(project / 'files.json')!r}).read_text()).items():\n"
            "    if name.endswith('/'):\n        (folder / name).mkdir()\n"
            "    else:\n        (folder / name).write_bytes(text.encode())\n")
    return [sys.executable, "-c", body]


# name -> (the files, given the project; whether the capture passes; words its output holds; BLOCKs captured)
WRITTEN = {
    "crlf-line-endings": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64), end="\r\n")}, True, "", {64}),
    "a-record-twice-in-one-file": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64), _spec(p, 64))}, True, "",
                                   {64}),
    "one-launch-in-two-processes": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)),
                                               "records-2.jsonl": _lines(ENV, _spec(p, 64))}, True, "", {64}),
    "blank-and-empty-files": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)), "records-2.jsonl": "",
                                         "records-3.jsonl": "\n  \n\t\n"}, True, "", {64}),
    "a-name-with-letters-kgate-never-picks": (lambda p: {"records-ünï-€.jsonl": _lines(ENV, _spec(p, 32))}, True, "",
                                              {32}),
    "picked-before-its-spec": (lambda p: {"records-1.jsonl": _lines({"type": "picked", "id": "id64"}),
                                          "records-2.jsonl": _lines(ENV, _spec(p, 64))}, True, "", {64}),
    "counted-before-its-spec": (lambda p: {"records-1.jsonl": _lines({"type": "launches", "id": "id64", "count": 5}),
                                           "records-2.jsonl": _lines(ENV, _spec(p, 64))}, True, "", {64}),
    "counts-of-no-spec": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64),
                                                               {"type": "launches", "id": "nobody", "count": 5})},
                          True, "", {64}),
    "a-field-the-recorder-never-writes": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64, cluster_dims=[2, 1, 1]))}, False,
        "a spec record with an unknown key 'cluster_dims'", set()),
    "a-field-another-kgate-adds-beside-good-records": (
        lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)),
                   "records-2.jsonl": _lines(ENV, _spec(p, 32, maxnreg_hint=128))}, False,
        "the capture is incomplete: a launch may be missing", set()),
    "garbage-beside-good-records": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)),
                                               "records-2.jsonl": '{"type": "spec", "ver\n'}, False,
                                    "line 1: not a record kgate wrote", set()),
    "a-marker-of-lost-records": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)), "lost-77-ENOSPC": ""},
                                 False, "could not write its records (No space left on device)", set()),
    "a-marker-of-a-deleted-file": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)), "lost-77-removed": ""},
                                   False, "its record file was deleted while it ran", set()),
    "a-marker-of-an-unknown-cause": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)), "lost-77-whatever": ""},
                                     False, "could not write its records (a write failed)", set()),
    "a-huge-valid-record": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64, constexprs={"BLOCK": 64,
                                                                                   "TAG": "t" * 20_000_000}))},
                            True, "", {64}),
    "a-live-record-with-more-figures": (lambda p: {"records-1.jsonl": _lines(
        ENV, _spec(p, 64), {"type": "live", "id": "id64", "n_regs": 12, "clock_khz": 2_000_000})}, True, "", {64}),
    "an-older-kgates-spec-without-a-version": (
        lambda p: {"records-1.jsonl": _lines(ENV, {k: v for k, v in _spec(p, 64).items() if k != "version"})},
        False, "a spec record without 'version'", set()),
    "a-newer-kgates-env-field": (lambda p: {"records-1.jsonl": _lines({**ENV, "driver": "580.1"}, _spec(p, 64))},
                                 False, "a env record with an unknown key 'driver'", set()),
    "a-fractional-count": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64),
                                                                {"type": "launches", "id": "id64", "count": 2.5})},
                           False, "a launches record whose 'count' is 2.5", set()),
    "a-marker-made-as-a-folder": (lambda p: {"records-1.jsonl": _lines(ENV, _spec(p, 64)), "lost-77-EMFILE/": ""},
                                  False, "could not write its records (Too many open files)", set()),
    "a-where-with-a-bidirectional-override": (
        lambda p: {"records-1.jsonl": _lines({**ENV, "where": "cpu \u202esm_120a"}, _spec(p, 64))}, True, "", {64}),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_record_files_a_command_leaves(tmp_path: Path, name: str) -> None:
    files, passes, words, wanted = WRITTEN[name]
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--counts", "--", *_write_files(project, files(project)), cwd=project,
                timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    assert (run.code == 0) == passes and words in run.stderr, run.stderr
    if not passes:
        assert not (project / "kgate-capture.toml").exists()  # left as it was
        return
    assert blocks(project) == wanted
    text = (project / "kgate-capture.toml").read_text()
    assert "not a record" not in run.stderr and "\u202e" not in text  # shown escaped, never raw
    found = entries(project)
    if name == "picked-before-its-spec":
        assert [e.picked for e in found] == [True]
    if name == "counted-before-its-spec":
        assert [e.launches for e in found] == [5]
    if name == "one-launch-in-two-processes":
        assert [e.launches for e in found] == [None] and len(found) == 1
    if name == "a-where-with-a-bidirectional-override":
        assert "\\u202e" in text and [e.captured for e in found] == [("cpu \u202esm_120a",)]


def _script(project: Path, name: str, body: str) -> list[str]:
    (project / name).write_text(textwrap.dedent(body))
    return [sys.executable, name]


FULL = """\
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))  # room for a line or two of records
    import ops
    ops.launch(64)
    ops.launch(128)
    print("the command went on")
"""

# name -> (the command's script; the words of the failure)
INCOMPLETE = {
    "a-file-size-limit": (FULL, "could not write its records (File too large)"),
    "a-file-size-limit-in-one-of-two-processes": (
        ("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import ops; ops.launch(32)'], check=True)\n"
         f"open('limited.py', 'w').write({textwrap.dedent(FULL)!r})\n"
         "subprocess.run([sys.executable, 'limited.py'], check=True)\n"),
        "could not write its records (File too large)"),
    "the-record-file-deleted-by-the-command": (
        ("import glob, os\nimport ops\nops.launch(64)\n"
         "for f in glob.glob(os.path.join(os.environ['KGATE_CAPTURE_DIR'], f'records-{os.getpid()}*')):\n"
         "    os.remove(f)\nops.launch(128)\nprint('the command went on')\n"),
        "its record file was deleted while it ran"),
    "the-record-file-cut-short-by-the-command": (
        ("import glob, os\nimport ops\nops.launch(64)\n"
         "for f in glob.glob(os.path.join(os.environ['KGATE_CAPTURE_DIR'], f'records-{os.getpid()}*')):\n"
         "    open(f, 'w').close()\nops.launch(128)\nprint('the command went on')\n"),
        "its record file was cut short"),
}


@pytest.mark.parametrize("name", sorted(INCOMPLETE))
def test_records_that_cannot_stay_whole_fail_the_capture_not_the_command(tmp_path: Path, name: str) -> None:
    body, words = INCOMPLETE[name]
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--", *_script(project, "case.py", body), cwd=project, timeout=300)
    assert "Traceback" not in run.stderr and "the command went on" in run.stdout + run.stderr, run.stderr
    assert run.code == 2 and words in run.stderr, run.stderr
    assert "the capture is incomplete" in run.stderr and not (project / "kgate-capture.toml").exists()


# name -> (the command's script; the BLOCKs it launches; the launch counts of each BLOCK with --counts, or None)
LAUNCHES = {
    "a-killed-processs-id-used-again": ("""\
        import os, pathlib
        folder = pathlib.Path(os.environ["KGATE_CAPTURE_DIR"])
        # what a killed process of the same id left: a line cut short
        (folder / f"records-{os.getpid()}.jsonl").write_text('{"type": "start"}\\n{"type": "spec", "ver')
        import ops
        ops.launch(64)
        """, {64}, None),
    "a-child-killed-after-its-launch": ("""\
        import os, signal, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import ops, time; ops.launch(32); time.sleep(60)"])
        import time
        deadline = time.time() + 120
        while time.time() < deadline and not any(
                "fill_kernel" in open(f).read() for f in __import__("glob").glob(
                    os.path.join(os.environ["KGATE_CAPTURE_DIR"], "records-*"))):
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
        """, {32}, None),
    "a-child-forked-while-a-thread-records": ("""\
        import os, threading, time
        import torch
        import ops, ops2

        x = torch.zeros(64)
        ops.launch(16)
        done = threading.Event()

        def long_records():
            for i in range(2):
                ops2.tagged[(1,)](x, 64, TAG=str(i) * 20_000_000, BLOCK=64)
            done.set()

        thread = threading.Thread(target=long_records)
        thread.start()
        while not done.is_set():
            pid = os.fork()
            if pid == 0:
                ops.launch(128)
                os._exit(0)
            deadline = time.time() + 30
            while time.time() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
                time.sleep(0.01)
            if time.time() >= deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise SystemExit("a forked child hung")
        thread.join()
        """, {16, 128}, None),
    "a-forked-child-that-ends-with-sys-exit": ("""\
        import os, sys
        import ops
        for _ in range(3):
            ops.launch(64)
        pid = os.fork()
        if pid == 0:
            ops.launch(64)
            sys.exit(0)
        os.waitpid(pid, 0)
        """, {64}, {64: 4}),
    "forked-grandchildren-that-end-with-sys-exit": ("""\
        import os, sys
        import ops
        ops.launch(64)
        for _ in range(2):  # a child, then its child
            pid = os.fork()
            if pid:
                os.waitpid(pid, 0)
                sys.exit(0)
            ops.launch(64)
        sys.exit(0)
        """, {64}, {64: 3}),
    "multiprocessing-fork-and-spawn-children": ("""\
        import multiprocessing as mp
        import ops
        if __name__ == "__main__":
            ops.launch(64)
            for method in ("fork", "spawn"):
                p = mp.get_context(method).Process(target=ops.launch, args=(64,))
                p.start()
                p.join()
        """, {64}, {64: 3}),
    "a-pool-of-spawned-workers": ("""\
        import multiprocessing as mp
        import ops
        if __name__ == "__main__":
            pool = mp.get_context("spawn").Pool(2)
            pool.map(ops.launch, [32, 64, 32, 64])
            pool.close()  # the workers end as processes do (a pool's `with` terminates them: no counts then)
            pool.join()
        """, {32, 64}, {32: 2, 64: 2}),
    "threads-launching-one-specialisation-together": ("""\
        import threading
        import ops
        threads = [threading.Thread(target=lambda: [ops.launch(64) for _ in range(25)]) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        """, {64}, {64: 200}),
    "threads-launching-different-specialisations": ("""\
        from concurrent.futures import ThreadPoolExecutor
        import ops
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(ops.launch, [16, 32, 64, 128, 256, 512] * 3))
        """, {16, 32, 64, 128, 256, 512}, {16: 3, 32: 3, 64: 3, 128: 3, 256: 3, 512: 3}),
    "a-child-given-the-environment-and-more": ("""\
        import os, subprocess, sys
        subprocess.run([sys.executable, "-c", "import ops; ops.launch(32)"], check=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        """, {32}, None),
}

OPS2 = """\
import triton
import triton.language as tl


@triton.jit
def tagged(x, n, TAG: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
"""


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_every_launch_of_every_process_is_recorded_once(tmp_path: Path, name: str) -> None:
    body, wanted, counts = LAUNCHES[name]
    project = make_project(tmp_path)
    (project / "ops2.py").write_text(OPS2)
    args = ["--counts"] if counts is not None else []
    run = kgate("capture", "--device", "cpu", *args, "--", *_script(project, "case.py", body), cwd=project,
                timeout=600)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
    assert "not a record" not in run.stderr and "incomplete" not in run.stderr, run.stderr
    assert blocks(project) == wanted | ({64} if name == "a-child-forked-while-a-thread-records" else set())
    if counts is not None:
        found = {int(e.spec.constexprs["BLOCK"]): e.launches for e in entries(project)}  # type: ignore[arg-type]
        assert found == counts, found


UNICODE_OPS = """\
import triton
import triton.language as tl


@triton.jit
def fill(x, n, ETIQUETA: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
"""
UNICODE_RUN = """\
import torch
import módulo
x = torch.zeros(64)
módulo.fill[(1,)](x, 64, ETIQUETA="ñandú \\u202e\\u200b\\x1b[31m", BLOCK=64)
"""


def test_unicode_in_a_module_a_constexpr_and_the_file_a_reviewer_reads(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "módulo.py").write_text(UNICODE_OPS)
    (tmp_path / "run.py").write_text(UNICODE_RUN)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", cwd=tmp_path, timeout=300)
    assert run.code == 0, run.stderr
    text = (tmp_path / "kgate-capture.toml").read_text()
    assert "ñandú" in text and "\u202e" not in text and "\u200b" not in text and "\\u202e\\u200b" in text
    (back,) = captures.load(tmp_path / "kgate-capture.toml", "kgate-capture.toml").entries
    assert back.spec.kernel == "módulo:fill" and back.spec.constexprs["ETIQUETA"] == "ñandú \u202e\u200b\x1b[31m"
    checked = kgate("check", "--format", "json", cwd=tmp_path)
    assert checked.code == 0, checked.stderr
    assert [k["kernel"] for k in checked.json()["kernels"]] == ["módulo:fill"]


RENAMED = {
    "renamed-in-its-module": ("ops.py", lambda text: text.replace("fill_kernel", "fill_renamed"),
                              "module ops has no attribute 'fill_kernel' (did you mean 'fill_renamed'?)"),
    "moved-to-another-module": ("ops.py", lambda text: "from moved import launch\n",
                                "module ops has no attribute 'fill_kernel'"),
    "a-parameter-renamed": ("ops.py", lambda text: text.replace("x, n, BLOCK", "x, count, BLOCK").replace(
        "offs < n", "offs < count"), "the kernel has no parameter n any more"),
}


@pytest.mark.parametrize("name", sorted(RENAMED))
def test_a_captured_kernel_renamed_since_is_a_stale_capture(tmp_path: Path, name: str) -> None:
    file, edit, words = RENAMED[name]
    project = make_project(tmp_path)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", "import ops; ops.launch(64)", cwd=project,
                timeout=300)
    assert run.code == 0, run.stderr
    (project / "moved.py").write_text((project / "ops.py").read_text())
    (project / file).write_text(edit((project / file).read_text()))
    checked = kgate("check", "--format", "json", cwd=project)
    assert checked.code == 1, checked.stderr
    (finding,) = checked.json()["findings"]
    assert finding["code"] == "KG005" and words in finding["message"], finding
