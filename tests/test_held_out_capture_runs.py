"""Held-out commands for `kgate capture`, run as a user runs them, that the earlier capture cases do not have: one
kernel launched from two threads (the same launch and two), a plain wrapper that launches again, keyword arguments
in another order than the signature, a constexpr given by position, `num_warps`/`num_stages`/`num_ctas` given to the
launch, an autotuned kernel whose key changes, a heuristics kernel, run-time bool and float arguments, a launch from
a coroutine, kernels defined in the script, in a function and in a module run with `-m`, a module imported under two
names and under a name of no module, a kernel made by `triton.jit`, `triton.autotune` or `triton.heuristics` in
another module than its function's, a command that changes folder, reads stdin, takes arguments with spaces, or is a
pytest run; and record files a process leaves that no recorder of this kgate writes (a newer record version, an
environment with a key the recorder does not write, a last line cut inside a UTF-8 character).

Each launch is recorded under the name `kgate check` imports it by and gated by it, or said as not recorded; a
record kgate does not know makes the capture fail and leaves the capture file as it was."""

from __future__ import annotations

import shlex
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
def add(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


@triton.jit
def pair(x, y, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * SCALE, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)],
                 key=["n"])
@triton.jit
def tuned(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heur(x, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x + offs, 1.0)
    else:
        tl.store(x + offs, 1.0, mask=offs < n)


@triton.jit
def flags(x, n, on, f, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if on:
        tl.store(x + offs, f, mask=offs < n)
'''

IMPL = '''\
import triton
import triton.language as tl


def body(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)


def tuned_body(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 2.0, mask=offs < n)


@triton.jit
def base(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
'''

# Kernels made in this module from another module's functions.
WRAPPED = '''\
import triton
import impl

jitted = triton.jit(impl.body)
tuned_jitted = triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})],
                               key=["n"])(triton.jit(impl.tuned_body))
tuned_base = triton.autotune(configs=[triton.Config({"BLOCK": 512})], key=["n"])(impl.base)
heur_base = triton.heuristics({"BLOCK": lambda a: 1024})(impl.base)
'''

LAUNCHES = '''\
import asyncio, sys, threading
import torch
import ops

x = torch.zeros(8192)
y = torch.zeros(8192)
threads = [threading.Thread(target=lambda b=b: ops.add[(1,)](x, 4096, BLOCK=b)) for b in (16, 16, 32)]
[t.start() for t in threads]
[t.join() for t in threads]


class Replay:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        self.fn()
        self.fn()


Replay(lambda: ops.add[(1,)](x, 4096, BLOCK=64))()
ops.pair[(1,)](n=4096, SCALE=2.0, y=y, BLOCK=128, x=x)
ops.pair[(1,)](x, y, 4096, 256, 3.0)
ops.add[(1,)](x, 4096, BLOCK=512, num_warps=2, num_stages=1)
ops.add[(1,)](x, 4096, BLOCK=1024, num_ctas=1)
ops.tuned[lambda m: (1,)](x, 64)
ops.tuned[lambda m: (1,)](x, 4096)
ops.tuned[lambda m: (1,)](x, 64)
ops.heur[(1,)](x, 4096, BLOCK=2048)
ops.heur[(1,)](x, 4095, BLOCK=2048)
ops.flags[(1,)](x, 4096, True, 1.5, BLOCK=16)


async def main():
    ops.add[(1,)](x, 4096, BLOCK=4096)

asyncio.run(main())
assert sys.argv[1:] == ["a b", "c  d", "'e'"], sys.argv
'''

# The command's main module, run with `python -m`: kernels of its own (at the top, in a function, made from another
# module's function), then the other launches, imported, then a launch sized by stdin and one after a change of folder.
RUN_AS_MAIN = '''\
import os, sys, torch, triton, triton.language as tl
import impl


@triton.jit
def local(x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), 1.0)


def make():
    @triton.jit
    def inner(x, BLOCK: tl.constexpr):
        tl.store(x + tl.arange(0, BLOCK), 1.0)
    return inner


made_here = triton.jit(impl.tuned_body)
local[(1,)](torch.zeros(64), BLOCK=16)
make()[(1,)](torch.zeros(64), BLOCK=16)
made_here[(1,)](torch.zeros(64), 64, BLOCK=16)
import launches, two_names, wrapped_launches  # noqa: E401
import ops
ops.add[(1,)](torch.zeros(64), 64, BLOCK=int(sys.stdin.read().strip()))
os.chdir(os.path.dirname(os.getcwd()))
ops.add[(1,)](torch.zeros(64), 64, BLOCK=8)
'''

KERN = '''\
import triton
import triton.language as tl


@triton.jit
def twice(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 1.0, mask=offs < n)
'''

TWO_NAMES = '''\
import importlib.util, sys, torch
sys.path.insert(0, "pkg")
import pkg.kern, kern
assert pkg.kern is not kern
x = torch.zeros(64)
pkg.kern.twice[(1,)](x, 64, BLOCK=16)
kern.twice[(1,)](x, 64, BLOCK=32)
spec = importlib.util.spec_from_file_location("no.such.module", "pkg/kern.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.twice[(1,)](x, 64, BLOCK=64)
'''

FILES = {
    "ops.py": OPS, "impl.py": IMPL, "wrapped.py": WRAPPED, "launches.py": LAUNCHES,
    "pkg/__init__.py": "", "pkg/kern.py": KERN, "pkg/run.py": RUN_AS_MAIN,
    "two_names.py": TWO_NAMES,
    "wrapped_launches.py": ("import torch, wrapped\nx = torch.zeros(4096)\nwrapped.jitted[(1,)](x, 64, BLOCK=16)\n"
                            "wrapped.tuned_jitted[(1,)](x, 64)\nwrapped.tuned_base[(1,)](x, 64)\n"
                            "wrapped.heur_base[(1,)](x, 64)\n"),
    "tests/test_launch.py": "import torch, ops\n\n\ndef test_launch():\n    ops.add[(1,)](torch.zeros(64), 64, BLOCK=2)\n",
    "kgate.toml": 'targets = ["sm_120a"]\npython-path = ["."]\n',
}


def make_project(root: Path) -> Path:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """One capture of every command above, in one shell: the project, the exit code and stderr."""
    project = make_project(tmp_path_factory.mktemp("runs") / "project")
    python = shlex.quote(sys.executable)
    script = "; ".join([f"echo 4 | {python} -m pkg.run 'a b' 'c  d' \"'e'\"",
                        f"{python} -m pytest -q -p no:cacheprovider tests/test_launch.py"])
    run = kgate("capture", "--device", "cpu", "--counts", "--", "sh", "-c", f"set -e; {script}", cwd=project,
                timeout=600)
    return project, run.code, run.stderr


def entries(project: Path) -> dict[tuple[str, str], object]:
    out = {}
    for entry in captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries:
        out[entry.spec.kernel, entry.spec.variant.split("#")[0]] = entry
    return out


# (kernel, variant without its tag) -> the launches counted, None where the autotuner's binds count too.
RECORDED = {
    # Two threads, the same launch: one entry of two launches; a third thread's other launch, its own.
    ("ops:add", "BLOCK=16,warps=4,stages=3,fp32"): 2,
    ("ops:add", "BLOCK=32,warps=4,stages=3,fp32"): 1,
    # A wrapper that launches twice.
    ("ops:add", "BLOCK=64,warps=4,stages=3,fp32"): 2,
    # Keywords in another order, a constexpr by position.
    ("ops:pair", "BLOCK=128,SCALE=2.0,warps=4,stages=3,fp32"): 1,
    ("ops:pair", "BLOCK=256,SCALE=3.0,warps=4,stages=3,fp32"): 1,
    # Launch options: given ones recorded, num_ctas=1 is the default.
    ("ops:add", "BLOCK=512,warps=2,stages=1,fp32"): 1,
    ("ops:add", "BLOCK=1024,warps=4,stages=3,fp32"): 1,
    # An autotuned kernel whose key changes: each config, once per specialisation.
    ("ops:tuned", "BLOCK=32,warps=1,stages=3,fp32"): None,
    ("ops:tuned", "BLOCK=64,warps=2,stages=3,fp32"): None,
    # Heuristics: both values of the computed constexpr.
    ("ops:heur", "BLOCK=2048,EVEN=false,warps=4,stages=3,fp32"): 1,
    ("ops:heur", "BLOCK=2048,EVEN=true,warps=4,stages=3,fp32"): 1,
    # Run-time bool and float arguments; a coroutine's launch; a folder changed; stdin; a pytest run.
    ("ops:flags", "BLOCK=16,warps=4,stages=3,fp32"): 1,
    ("ops:add", "BLOCK=4096,warps=4,stages=3,fp32"): 1,
    ("ops:add", "BLOCK=8,warps=4,stages=3,fp32"): 1,
    ("ops:add", "BLOCK=4,warps=4,stages=3,fp32"): 1,
    ("ops:add", "BLOCK=2,warps=4,stages=3,fp32"): 1,
    # One module under two names, and loaded under a name of no module: the project's module name for each.
    ("pkg.kern:twice", "BLOCK=16,warps=4,stages=3,fp32"): 1,
    ("pkg.kern:twice", "BLOCK=32,warps=4,stages=3,fp32"): 1,
    ("pkg.kern:twice", "BLOCK=64,warps=4,stages=3,fp32"): 1,
    # Kernels made in another module than their function's: by the name that module holds them under.
    ("wrapped:jitted", "BLOCK=16,warps=4,stages=3,fp32"): 1,
    ("wrapped:tuned_jitted", "BLOCK=128,warps=4,stages=3,fp32"): None,
    ("wrapped:tuned_jitted", "BLOCK=256,warps=4,stages=3,fp32"): None,
    # An autotuner or heuristics around a kernel its own module holds: the kernel's own name, as in one module.
    ("impl:base", "BLOCK=512,warps=4,stages=3,fp32"): None,
    ("impl:base", "BLOCK=1024,warps=4,stages=3,fp32"): 1,
}


def test_the_capture_passes_and_says_each_kernel_it_cannot_record(captured: tuple[Path, int, str]) -> None:
    _project, code, stderr = captured
    assert code == 0, stderr
    assert "__main__:local: defined in the script the command ran" in stderr
    assert "__main__:make.<locals>.inner: defined inside a function or class" in stderr
    assert "__main__:made_here: defined in the script the command ran" in stderr
    # The recorder looks for a kernel's name without reading what else the command's modules hold (torch warns on
    # some of its names when read).
    assert "Traceback" not in stderr and "FutureWarning" not in stderr and "DeprecationWarning" not in stderr, stderr


@pytest.mark.parametrize("key", sorted(RECORDED), ids=lambda key: f"{key[0]}-{key[1]}")
def test_each_launch_is_recorded_under_its_name(captured: tuple[Path, int, str], key: tuple[str, str]) -> None:
    project, _code, stderr = captured
    found = entries(project)
    assert key in found, (sorted(found), stderr)
    if RECORDED[key] is not None:
        assert found[key].launches == RECORDED[key], (key, found[key].launches)


def test_nothing_else_is_recorded_and_every_entry_compiles(captured: tuple[Path, int, str]) -> None:
    project, _code, _stderr = captured
    assert set(entries(project)) == set(RECORDED)
    check = kgate("check", "-j", "2", "--kernel", "wrapped:*", "--kernel", "pkg.*",
                  cwd=project, timeout=900)
    assert check.code == 0, check.stdout + check.stderr
    assert "passed: 6 kernel variant(s)" in check.stdout, check.stdout


FORGE = '''\
import glob, json, os, sys, torch, ops
ops.add[(1,)](torch.zeros(64), 64, BLOCK=8)
folder = os.environ["KGATE_CAPTURE_DIR"]
mine = [p for p in glob.glob(folder + "/records-*.jsonl") if f"-{os.getpid()}-" in os.path.basename(p)][0]
lines = open(mine).read().splitlines()


def changed(change):
    out = []
    for line in lines:
        record = json.loads(line)
        change(record)
        out.append(json.dumps(record) + "\\n")
    return "".join(out).encode()


if sys.argv[1] == "cut-in-a-character":
    data = "".join(line + "\\n" for line in lines).encode() + '{"type": "spec", "kernel": "ops:\\u00e9'.encode()[:-1]
    open(os.path.join(folder, "records-1-cut.jsonl"), "wb").write(data)
else:
    os.remove(mine)
    open(os.path.join(folder, "records-1-newer.jsonl"), "wb").write(changed(
        lambda record: record.update(version=record["version"] + 1) if "version" in record else None))
    open(os.path.join(folder, "records-2-env.jsonl"), "wb").write(changed(
        lambda record: record.update(version=99) if record.get("type") == "env" else None))
'''


def test_a_record_this_kgate_does_not_write_fails_the_capture(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "forge.py").write_text(FORGE)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "forge.py", "unknown", cwd=project, timeout=300)
    assert run.code == 2, run.stderr
    # A newer record version, and an environment with a key this recorder does not write: each said, none recorded.
    assert "records-1-newer.jsonl, line 4: not a record kgate wrote: a spec record whose 'version' is 2" in run.stderr
    assert "records-2-env.jsonl, line 3: not a record kgate wrote: a env record with an unknown key" in run.stderr
    assert "kgate-capture.toml is unchanged" in run.stderr and not (project / "kgate-capture.toml").exists()
    assert "Traceback" not in run.stderr


def test_a_last_line_cut_inside_a_character_is_a_write_cut_short(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "forge.py").write_text(FORGE)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "forge.py", "cut-in-a-character", cwd=project,
                timeout=300)
    assert run.code == 0 and "not a record" not in run.stderr, run.stderr
    assert set(entries(project)) == {("ops:add", "BLOCK=8,warps=4,stages=3,fp32")}


IMPL2 = '''\
import triton
import triton.language as tl


@triton.jit
def other_body(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, 3.0, mask=offs < n)


@triton.jit
def renamed(y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, 3.0, mask=offs < n)
'''


def test_a_recorded_name_that_now_holds_another_kernel(captured: tuple[Path, int, str], tmp_path: Path) -> None:
    """The capture names a kernel by the name its module holds it under: when that name holds another module's
    kernel since, `kgate check` compiles that one where it fits the captured launch, and says the entry is stale
    where it does not."""
    project = make_project(tmp_path / "project")
    (project / "kgate-capture.toml").write_bytes((captured[0] / "kgate-capture.toml").read_bytes())
    (project / "impl2.py").write_text(IMPL2)
    (project / "wrapped.py").write_text("from impl2 import other_body as jitted, renamed as tuned_jitted\n")
    check = kgate("check", "--kernel", "wrapped:*", cwd=project, timeout=900)
    assert check.code == 1, check.stdout + check.stderr
    assert ("KG005 error stale-capture: 2 captured specialisation(s) of wrapped:tuned_jitted no longer fit the kernel: "
            "the kernel has no parameter x any more") in check.stdout, check.stdout
    assert "0 errors" not in check.stdout and "1 kernel variant(s)" in check.stdout, check.stdout
