"""Held-out cases for the compile workers' protocol: a worker copied by a project's fork at import never answers
for a task (its answer was taken for the next task's, a traceback or another kernel's facts); bytes on a worker's
pipe that are no outcome end that worker as its death does, never kgate; and a record another kgate of the same
version wrote (an install from another commit) is never read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Run, kgate, kgate_modules_reached

from kgate.compile.cache import CODE_PACKAGES
from kgate.compile.protocol import TASKS

ROOT = Path(__file__).resolve().parent.parent

FORKS = textwrap.dedent("""
    import os

    import triton
    import triton.language as tl

    import kgate

    if os.fork() == 0:
        pass  # a background process started carelessly: the child goes on importing, as the parent does


    @kgate.register(signature={"x": "*fp32", "n": "i32"}, constexprs={"BLOCK": 128}, num_warps=4)
    @triton.jit
    def add_one(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)
""")


def test_a_module_that_forks_at_import_is_compiled_as_one_that_does_not(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\njobs = 1\n')
    (tmp_path / "forks.py").write_text(FORKS)
    run = kgate("check", "--format", "json", cwd=tmp_path, process=True, timeout=600)
    assert run.code == 0, run.stderr
    report = json.loads(run.stdout)
    assert [k["kernel"] for k in report["kernels"]] == ["forks:add_one"], report["kernels"]
    assert report["findings"] == []


# In a process of its own (a fork server): a worker imports a module that writes a framed message that is no
# pickle, then one that is a pickle of no outcome, to every socket it holds (the worker's pipe among them).
SCRIPT = textwrap.dedent("""
    import json, sys
    from kgate.compile.pool import Pool
    from kgate.compile.protocol import Task

    here = sys.argv[1]
    outcomes = []
    with Pool(1) as pool:
        pool.run([Task("triton.expand", {"kernel": f"{name}:k", "sys_path": [here]}) for name in ("garbage", "other")],
                 120, lambda index, outcome: outcomes.append((index, outcome.ok, str(outcome.value)[:200])))
    print(json.dumps(sorted(outcomes)))
""")
WRITES = textwrap.dedent("""
    import os, pickle, stat, struct
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!i", len(BODY)) + BODY)
        except OSError:
            pass
    k = None
""")


def test_bytes_on_a_workers_pipe_that_are_no_outcome_end_that_worker(tmp_path: Path) -> None:
    (tmp_path / "garbage.py").write_text('BODY = b"not a pickle"\n' + WRITES)
    (tmp_path / "other.py").write_text('import pickle\nBODY = pickle.dumps(["no", "outcome"])\n' + WRITES)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    outcomes = json.loads(proc.stdout)
    assert [(index, ok) for index, ok, _said in outcomes] == [(0, False), (1, False)]
    assert all("the compile worker answered" in said and "it was stopped" in said
               for _index, _ok, said in outcomes), outcomes


# ----------------------------------------------------------------------------- records another kgate wrote

def test_every_module_a_compile_task_imports_keys_its_records() -> None:
    """The code of every kgate module a compile worker's task reaches, through the modules it imports, is part of
    the key of what the task makes (`code_digest`): its package is among CODE_PACKAGES."""
    seen = kgate_modules_reached(entry.partition(":")[0] for entry in TASKS.values())
    packages = {name.split(".")[1] for name in seen if name.count(".") > 1 and not name.startswith("kgate.rules")}
    assert "compile" in packages and "capture" in packages
    assert sorted(packages - set(CODE_PACKAGES)) == []


HEAVY = r"""
extern "C" __global__ void heavy(const float* __restrict__ x, float* out, int n) {
    float acc[48];
#pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = x[j * n + threadIdx.x];
    for (int i = 1; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < 48; ++j) acc[j] = acc[j] * x[i * 48 + j] + acc[(j + 7) % 48];
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 48; ++j) s += acc[j] * (j + 1);
    out[threadIdx.x] = s;
}
"""


def _registers(run: Run) -> list[int]:
    assert run.code in (0, 1), run.stderr
    return [k["registers"] for k in json.loads(run.stdout)["kernels"]]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is needed")
def test_a_compile_record_another_kgate_wrote_is_not_read(tmp_path: Path) -> None:
    """Two installs of one version at one place (a development checkout at two commits): the records the first
    wrote, compiling with other flags, are not this kgate's; it compiles again."""
    install = tmp_path / "install"
    shutil.copytree(ROOT / "kgate", install / "kgate", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", install / "kgate" / "rules", ignore=shutil.ignore_patterns("__pycache__"))
    backend = install / "kgate" / "compile" / "cuda_backend.py"
    ours = backend.read_text(encoding="utf-8")
    anchor = '"-cubin", "-lineinfo",'
    assert anchor in ours
    project = tmp_path / "project"
    project.mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["heavy.cu"]\n')
    (project / "heavy.cu").write_text(HEAVY)
    env = {"PYTHONPATH": str(install)}
    expected = _registers(kgate("check", "--format", "json", "--no-cache", cwd=project, env=env, process=True))
    backend.write_text(ours.replace(anchor, '"-cubin", "-maxrregcount=32", "-lineinfo",'), encoding="utf-8")
    other = _registers(kgate("check", "--format", "json", cwd=project, env=env, process=True))
    assert other != expected and max(other) <= 32  # the other kgate's records, in the cache
    backend.write_text(ours, encoding="utf-8")
    assert _registers(kgate("check", "--format", "json", cwd=project, env=env, process=True)) == expected
