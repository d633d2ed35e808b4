"""`kgate capture` reads its processes' record files as inputs (kgate.capture.records): through the bounded
reader that refuses pipes, devices and links, each line validated against one schema. Anything the command
writes into the record folder is a problem line, never a traceback or a hang; and what the recorder writes
names every launch rightly (a forked child's environment, the name a module holds a kernel under, a constexpr
TOML can hold, a library in the project's own virtual environment)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.capture import records
from kgate.collect import captures

torch = pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

ENV = json.dumps({"type": "env", "where": "cpu sm_120a", "triton": "3"})
SPEC = {"type": "spec", "version": 1, "id": "a1", "kernel": "ops:k", "file": "/elsewhere/ops.py",
        "signature": {"x": "*fp32"}, "options": {"num_warps": 4, "num_stages": 3}}


def _line(record: object) -> str:
    return json.dumps(record) + "\n"


# name -> (what the command writes into records-9.jsonl, as bytes or text; the problem line's words)
WRITTEN: dict[str, tuple[bytes | str, str]] = {
    "a-list": ("[1]\n", "line 1: not a record kgate wrote: a JSON list, not an object"),
    "a-number": ("7\n", "line 1: not a record kgate wrote: a JSON int, not an object"),
    "env-without-where": ('{"type": "env"}\n', "line 1: not a record kgate wrote: a env record without 'where'"),
    "env-where-empty": ('{"type": "env", "where": ""}\n', "a env record whose 'where' is ''"),
    "env-capability-not-major-minor": ('{"type": "env", "where": "GPU", "capability": "sm_90"}\n',
                                       "a env record whose 'capability' is 'sm_90'"),
    "env-capability-a-number": ('{"type": "env", "where": "GPU", "capability": 9.0}\n',
                                "a env record whose 'capability' is 9.0"),
    "spec-without-file": (ENV + "\n" + _line({k: v for k, v in SPEC.items() if k != "file"}),
                          "line 2: not a record kgate wrote: a spec record without 'file'"),
    "spec-of-another-version": (ENV + "\n" + _line({**SPEC, "version": 2}), "a spec record whose 'version' is 2"),
    "spec-version-true": (ENV + "\n" + _line({**SPEC, "version": True}), "a spec record whose 'version' is True"),
    "spec-id-a-number": (ENV + "\n" + _line({**SPEC, "id": 3}), "a spec record whose 'id' is 3"),
    "spec-kernel-not-a-name": (ENV + "\n" + _line({**SPEC, "kernel": "no colon"}),
                               "no colon: not recorded: not a kernel's name"),
    "spec-kernel-dots": (ENV + "\n" + _line({**SPEC, "kernel": "..:k"}), "..:k: not recorded: not a kernel's name"),
    "spec-file-with-nul": (ENV + "\n" + _line({**SPEC, "kernel": "nomodule:k", "file": "/a\u0000b.py"}),
                           "defined outside the project were not recorded (nomodule:k)"),
    "spec-options-wrong": (ENV + "\n" + _line({**SPEC, "kernel": "nomodule:k", "file": "/x.py",
                                               "options": "fast"}), "defined outside the project"),
    "spec-without-env": (_line(SPEC), "records-9.jsonl: launches without the record of where they ran"),
    "unknown-type": ('{"type": "bogus"}\n', "unknown record type 'bogus'"),
    "type-not-text": ('{"type": ["env"]}\n', "unknown record type ['env']"),
    "unknown-key": ('{"type": "start", "extra": 1}\n', "a start record with an unknown key 'extra'"),
    "launches-count-text": ('{"type": "launches", "id": "a", "count": "x"}\n',
                            "a launches record whose 'count' is 'x'"),
    "launches-count-negative": ('{"type": "launches", "id": "a", "count": -1}\n', "whose 'count' is -1"),
    "lost-child-command-list": ('{"type": "lost-child", "command": ["a"]}\n', "whose 'command' is ['a']"),
    "huge-value": ('{"type": "launches", "id": "a", "count": "' + "x" * 5_000_000 + '"}\n',
                   "a launches record whose 'count' is 'xxxxxxxx"),
    "not-utf-8": (b"\xff\xfe{}\n", "line 1: not a record kgate wrote: not valid UTF-8"),
    "utf-16": ('{"type": "start"}\n'.encode("utf-16"), "not valid UTF-8"),
    "nul-byte": (b'{"type": "start"}\x00\n', "not valid UTF-8 (a NUL byte"),
    "nested-deeply": ("[" * 200_000 + "\n", "not JSON (nested too deeply)"),
    "not-json": ("{type: start}\n", "line 1: not a record kgate wrote: not JSON"),
    "many-bad-lines": ("[1]\n" * 100, "records-9.jsonl: ... and 95 more line(s) that are not records"),
}


def _command(body: str) -> list[str]:
    return [sys.executable, "-c", "import os, pathlib\nfolder = pathlib.Path(os.environ['KGATE_CAPTURE_DIR'])\n"
                                  "folder.mkdir(parents=True, exist_ok=True)\n" + body]


def _capture(project: Path, body: str) -> tuple[int, str]:
    run = kgate("capture", "--device", "cpu", "--", *_command(body), cwd=project, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return run.code, run.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_project("capture", tmp_path)


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_what_the_command_writes_among_the_records_is_a_problem_line(project: Path, name: str) -> None:
    content, words = WRITTEN[name]
    data = content if isinstance(content, bytes) else content.encode()
    (project / "payload").write_bytes(data)
    code, stderr = _capture(project, f"(folder / 'records-9.jsonl').write_bytes(pathlib.Path({str(project / 'payload')!r}).read_bytes())\n")
    assert code == 2, stderr
    assert words in stderr, stderr
    assert all(len(line) < 2000 for line in stderr.splitlines())  # a record is shown cut short


# name -> (how the command puts a record file that is not a regular file, the problem line's words)
PLANTED = {
    "fifo": ("os.mkfifo(folder / 'records-9.jsonl')", "records-9.jsonl: cannot read it: not a regular file "
                                                       "(a named pipe)"),
    "link-to-dev-zero": ("os.symlink('/dev/zero', folder / 'records-9.jsonl')",
                         "records-9.jsonl: cannot read it: not a regular file (a symbolic link)"),
    "link-to-a-record-file": ("(folder / 'real').write_text('{\"type\": \"start\"}\\n')\n"
                              "os.symlink(folder / 'real', folder / 'records-9.jsonl')",
                              "records-9.jsonl: cannot read it: not a regular file (a symbolic link)"),
    "a-folder": ("(folder / 'records-9.jsonl').mkdir()", "records-9.jsonl: cannot read it: Is a directory"),
    "the-folder-a-link": ("import shutil\nshutil.rmtree(folder)\nos.mkdir(str(folder) + '-x')\n"
                          "pathlib.Path(str(folder) + '-x', 'records-9.jsonl').write_text('[1]\\n')\n"
                          "os.symlink(str(folder) + '-x', folder)",
                          "the capture's record folder was replaced by a symbolic link: its records are not read"),
    "the-folder-removed": ("import shutil\nshutil.rmtree(folder)",
                           "the capture's record folder cannot be read: No such file or directory"),
    "a-linked-folder": ("os.mkdir(folder / 'elsewhere')\nos.symlink(folder / 'elsewhere', folder / 'records-9.jsonl')",
                        "records-9.jsonl: cannot read it: not a regular file (a symbolic link)"),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_record_file_that_is_not_a_regular_file_is_refused_unread(project: Path, name: str) -> None:
    code, stderr = _capture(project, PLANTED[name][0] + "\n")
    assert code == 2, stderr
    assert PLANTED[name][1] in stderr, stderr


def test_a_line_cut_short_by_a_killed_process_and_repeated_lines_are_no_problem(project: Path) -> None:
    body = ("(folder / 'records-9.jsonl').write_text('{\"type\": \"start\"}\\n' * 3 + '{\"type\": \"triton\"}\\n'"
            " + '{\"type\": \"spec\", \"ver')\n")
    code, stderr = _capture(project, body)
    assert code == 2, stderr
    assert "not a record" not in stderr and "the command ran no @triton.jit kernel" in stderr, stderr


LAUNCHES = textwrap.dedent("""\
    import os
    import sys

    import torch
    import triton
    import triton.language as tl

    import aliased

    x = torch.zeros(4096)
    aliased.kern[(1,)](x, 4096, BLOCK=128)
    if sys.argv[1:] == ["fork"]:
        pid = os.fork()
        if pid == 0:
            aliased.big[(1,)](x, 4096, C=3, BLOCK=64)
            os._exit(0)
        os.waitpid(pid, 0)
    if sys.argv[1:] == ["huge"]:
        aliased.big[(1,)](x, 4096, C=2**70, BLOCK=64)
""")
ALIASED = textwrap.dedent("""\
    import triton
    import triton.language as tl


    def _impl(x, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)


    kern = triton.jit(_impl)


    @triton.jit
    def big(x, n, C: tl.constexpr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)
""")


@pytest.fixture
def launching(tmp_path: Path) -> Path:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "aliased.py").write_text(ALIASED)
    (tmp_path / "run.py").write_text(LAUNCHES)
    return tmp_path


def _entries(root: Path) -> list[captures.CapturedSpec]:
    return captures.load(root / "kgate-capture.toml", "kgate-capture.toml").entries


def test_a_forked_childs_launches_are_of_the_parents_environment(launching: Path) -> None:
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", "fork", cwd=launching)
    assert run.code == 0, run.stderr
    found = _entries(launching)
    assert {e.spec.kernel for e in found} == {"aliased:big", "aliased:kern"}
    assert all(e.captured == ("cpu sm_120a",) for e in found)
    assert set(captures.load(launching / "kgate-capture.toml", "x").environments) == {"cpu sm_120a"}


def test_a_kernel_is_recorded_by_the_name_its_module_holds_it_under_and_check_compiles_it(launching: Path) -> None:
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", cwd=launching)
    assert run.code == 0, run.stderr
    assert [e.spec.kernel for e in _entries(launching)] == ["aliased:kern"]
    checked = kgate("check", "--format", "json", cwd=launching)
    assert checked.code == 0, checked.stderr
    assert [k["kernel"] for k in checked.json()["kernels"]] == ["aliased:kern"]


def test_a_constexpr_beyond_64_bits_is_a_problem_not_a_toml_integer(launching: Path) -> None:
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", "huge", cwd=launching)
    assert run.code == 0, run.stderr
    assert "aliased:big: not recorded: an integer constexpr beyond 64 bits (1180591620717411303424)" in run.stderr
    assert "1180591620717411303424" not in (launching / "kgate-capture.toml").read_text()
    assert [e.spec.kernel for e in _entries(launching)] == ["aliased:kern"]


def test_a_librarys_kernel_in_the_projects_virtual_environment_is_outside_the_project(launching: Path) -> None:
    site = launching / ".venv" / "lib" / "python3" / "site-packages"
    (site / "libk").mkdir(parents=True)
    (launching / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "libk" / "__init__.py").write_text(ALIASED.replace("kern =", "libkern ="))
    (launching / "lib.py").write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport torch, libk\n"
                                      "libk.libkern[(1,)](torch.zeros(64), 64, BLOCK=64)\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "lib.py", cwd=launching)
    assert "add its folder to python-path" not in run.stderr, run.stderr
    assert "1 specialisation(s) of 1 kernel(s) defined outside the project were not recorded (libk:libkern)" \
        in run.stderr, run.stderr


@pytest.mark.parametrize("folder", ["env", "tools/conda"])
def test_every_environment_inside_the_project_is_outside_it(tmp_path: Path, folder: str) -> None:
    from kgate.collect.membership import in_project

    (tmp_path / folder / "lib").mkdir(parents=True)
    mark = "conda-meta" if "conda" in folder else "pyvenv.cfg"
    (tmp_path / folder / mark).mkdir() if mark == "conda-meta" else (tmp_path / folder / mark).write_text("")
    assert not in_project(str(tmp_path / folder / "lib" / "k.py"), [str(tmp_path)])
    assert not in_project(str(tmp_path / "a" / "site-packages" / "k.py"), [str(tmp_path)])
    assert not in_project(str(tmp_path / "a" / "dist-packages" / "k.py"), [str(tmp_path)])
    assert in_project(str(tmp_path / "pkg" / "k.py"), [str(tmp_path)])


def test_every_record_type_the_recorder_writes_is_in_the_schema() -> None:
    source = (Path(records.__file__).parent / "runtime.py").read_text()
    import re

    written = set(re.findall(r'"type": "([a-z-]+)"', source))
    assert written == set(records.SCHEMA), written ^ set(records.SCHEMA)
    assert os.path.basename(records.PATTERN.replace("*", "1")) == "records-1.jsonl"


def _spec(**constexprs: object) -> object:
    from kgate.collect.specialization import Specialization

    return Specialization("ops:k", {"x": "*fp32"}, dict(constexprs), options={"num_warps": 4, "num_stages": 3})


def test_a_huge_string_constexpr_keeps_the_variant_name_one_short_unique_row() -> None:
    one, other = _spec(S="x" * 100_000), _spec(S="x" * 99_999 + "y")
    assert len(one.variant) < 120 and one.variant != other.variant  # type: ignore[attr-defined]
    assert _spec(S="short").variant.startswith("S=short,")  # type: ignore[attr-defined]


@pytest.mark.parametrize(("one", "other"), [(-0.0, 0.0), (0, False), (1, True), (1, 1.0)])
def test_constexprs_python_tells_apart_are_different_variants(one: object, other: object) -> None:
    assert _spec(C=one).variant != _spec(C=other).variant  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -0.0, 2**63 - 1, -2**63, "\x1b[31m\u2028"])
def test_a_constexpr_toml_can_hold_is_written_and_read_back_the_same(tmp_path: Path, value: object) -> None:
    import math

    entry = captures.CapturedSpec(_spec(C=value), ("cpu sm_120a",))  # type: ignore[arg-type]
    capture = captures.CaptureFile({"cpu sm_120a": {"triton": "3"}}, [entry])
    captures.save(capture, tmp_path / "c.toml", "c.toml")
    (back,) = captures.load(tmp_path / "c.toml", "c.toml").entries
    got = back.spec.constexprs["C"]
    assert (math.isnan(got) and math.isnan(value)) if isinstance(value, float) and math.isnan(value) \
        else (got == value and type(got) is type(value) and str(got) == str(value))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**70])
def test_a_capture_file_entry_beyond_64_bits_is_refused(value: int) -> None:
    from kgate.collect.specialization import Specialization

    with pytest.raises(ValueError, match="an integer within 64 bits"):
        Specialization.from_record({**_spec(C=value).to_record()})  # type: ignore[attr-defined]


NAMED = textwrap.dedent("""\
    import triton
    import triton.language as tl


    def _impl(x, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)


    only_alias = triton.jit(_impl)


    @triton.jit
    def base(x, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 3.0, mask=o < n)


    second_name = base


    @triton.heuristics({"EVEN": lambda a: a["n"] % 64 == 0})
    @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=[])
    @triton.jit
    def stacked(x, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(x + o, tl.load(x + o, mask=o < n) * 4.0, mask=o < n)


    if True:
        @triton.jit
        def in_if(x, n, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(x + o, tl.load(x + o, mask=o < n) * 5.0, mask=o < n)


    def make():
        @triton.jit
        def closure(x, n, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(x + o, tl.load(x + o, mask=o < n) * 6.0, mask=o < n)
        return closure


    class Outer:
        class Inner:
            nested = staticmethod(base)
""")
NAMED_RUN = textwrap.dedent("""\
    import functools

    import torch

    import named

    x = torch.zeros(4096)
    named.only_alias[(1,)](x, 4096, BLOCK=128)
    named.second_name[(1,)](x, 4096, BLOCK=32)
    functools.partial(named.base[(1,)], BLOCK=16)(x, 4096)
    named.stacked[(1,)](x, 4096)
    named.in_if[(1,)](x, 4096, BLOCK=128)
    named.make()[(1,)](x, 4096, BLOCK=128)
    named.Outer.Inner.nested[(1,)](x, 4096, BLOCK=8)
""")


def test_kernels_are_named_as_check_imports_them_through_aliases_wrappers_and_blocks(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "named.py").write_text(NAMED)
    (tmp_path / "run.py").write_text(NAMED_RUN)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "run.py", cwd=tmp_path)
    assert run.code == 0, run.stderr
    assert "named:make.<locals>.closure: defined inside a function or class" in run.stderr
    by_kernel: dict[str, set[int]] = {}
    for entry in _entries(tmp_path):
        by_kernel.setdefault(entry.spec.kernel, set()).add(entry.spec.constexprs["BLOCK"])  # type: ignore[arg-type]
    assert by_kernel == {"named:only_alias": {128}, "named:base": {8, 16, 32}, "named:stacked": {64},
                         "named:in_if": {128}}
    checked = kgate("check", "--format", "json", cwd=tmp_path)
    assert checked.code == 0, checked.stderr
    assert {k["kernel"] for k in checked.json()["kernels"]} == set(by_kernel)
