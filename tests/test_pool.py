"""The compile workers' fork server is only where Triton is already imported: a worker runs under what kgate has
when the worker starts (its environment, working folder, import path and stderr), not under what kgate had when
the server started. (multiprocessing hands over the folder and the import path; kgate the rest.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# In a process of its own (the fork server and file descriptor 2 are changed): the server starts in folder
# `first` with PROBE=first; then kgate moves to `second`, sets PROBE=second, puts a folder first on its import
# path and points its stderr at a file; a worker then imports the probe module, which writes what it runs under.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    from kgate.compile.pool import Pool, start_server
    from kgate.compile.protocol import Task

    here = sys.argv[1]
    os.chdir(os.path.join(here, "first"))
    os.environ["PROBE"] = "first"
    start_server()
    os.chdir(os.path.join(here, "second"))
    os.environ["PROBE"] = "second"
    sys.path.insert(0, os.path.join(here, "on-the-path"))
    err = os.open(os.path.join(here, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(err, 2)
    outcomes = []
    with Pool(1, {"ADDED": "yes"}) as pool:
        pool.run([Task("triton.expand", {"kernel": "probe:k", "sys_path": [here]})], 60,
                 lambda index, outcome: outcomes.append(outcome.ok))
    print(json.dumps(outcomes))
""")
PROBE = textwrap.dedent("""
    import json, os, sys
    print("the probe's own line", file=sys.stderr)
    import triton.runtime.cache
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "seen.json"), "w") as out:
        json.dump({"cwd": os.getcwd(), "probe": os.environ.get("PROBE"), "added": os.environ.get("ADDED"),
                   "path": sys.path, "triton_key": triton.runtime.cache.triton_key.cache_info().currsize}, out)
    k = None
""")


def probe(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    """SCRIPT run in `tmp_path` (without TRITON_INTERPRET in its environment), and what the worker saw."""
    for folder in ("first", "second", "on-the-path"):
        (tmp_path / folder).mkdir()
    (tmp_path / "probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [False]  # the probe is no kernel: the task fails after the import
    return proc, json.loads((tmp_path / "seen.json").read_text())


def test_a_worker_runs_under_what_kgate_has_when_it_starts(tmp_path: Path) -> None:
    proc, seen = probe(tmp_path)
    assert seen["cwd"] == str(tmp_path / "second")
    assert (seen["probe"], seen["added"]) == ("second", "yes")
    assert str(tmp_path / "on-the-path") in seen["path"]
    assert "the probe's own line" in (tmp_path / "stderr.txt").read_text()
    assert "the probe's own line" not in proc.stderr


def test_a_worker_starts_with_the_hash_of_tritons_installation(tmp_path: Path) -> None:
    """Triton keys every compile on a hash of its own files (libtriton's half a gigabyte included, about half a
    second): the fork server computes it once, and no worker computes it again."""
    _proc, seen = probe(tmp_path)
    assert seen["triton_key"] == 1


SERVER = textwrap.dedent("""
    import sys
    from multiprocessing import forkserver
    from kgate.entry import main  # the console script's

    seen, sys.argv = sys.argv[1], ["kgate", *sys.argv[2:]]
    code = main()
    with open(seen, "w") as out:
        out.write(f"{code} {forkserver._forkserver._forkserver_pid is not None}")
""")
KERNEL = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def copy(x, y, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)
""")


def test_a_run_that_finds_everything_in_its_cache_starts_no_fork_server(tmp_path: Path) -> None:
    """The server imports Triton and hashes its installation (about a second of CPU) for workers a run that
    compiles nothing never asks for: it starts with the first worker."""
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n[[triton]]\nkernel = "k:copy"\n'
                                         'signature = { x = "*fp32", y = "*fp32", n = "i32" }\n'
                                         'constexprs = { BLOCK = 64 }\n')
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}

    def check(*args: str) -> tuple[str, str]:
        subprocess.run([sys.executable, "-c", SERVER, str(tmp_path / "seen"), "check", *args], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300, check=True)
        code, started = (tmp_path / "seen").read_text().split()
        return code, started

    assert check() == ("0", "True")  # compiled: the server served its worker
    assert check("-v") == ("0", "False")  # from the cache (-v: never a replay of the run before)


def test_a_task_no_worker_runs_is_refused_where_it_is_made() -> None:
    """A task's name is checked as the task is made, in kgate: in the worker, an unknown name would end the worker
    and read as a compiler that died."""
    from kgate.compile.protocol import TASKS, Task

    assert Task("sass", {"cubin": "x"}).function == tuple(TASKS["sass"].split(":"))
    with pytest.raises(ValueError, match="no compile worker task is named 'triton.compiled'"):
        Task("triton.compiled", {})


# Workers of a pool that compiles CUDA sources alone, then of one that compiles Triton kernels, then CUDA again, in
# one process: whether each pool's fork server has Triton loaded (its library mapped), and which server it was.
SERVER_KINDS = textwrap.dedent("""
    import json, sys
    from multiprocessing import forkserver
    from kgate.compile.pool import Pool
    from kgate.compile.protocol import Task

    def served(triton):
        with Pool(1, triton=triton) as pool:  # a task that fails at once: the worker it started is what counts
            pool.run([Task("cuda.sass", {"cubin": sys.argv[1], "symbols": ["k"]})], 60, lambda index, outcome: None)
        pid = forkserver._forkserver._forkserver_pid
        with open(f"/proc/{pid}/maps") as maps:
            return [pid, "libtriton" in maps.read()]

    print(json.dumps([served(False), served(True), served(False)]))
""")


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc")
def test_a_cuda_only_pool_starts_a_server_without_triton(tmp_path: Path) -> None:
    """A run that compiles CUDA sources alone never uses Triton in a worker: its fork server does not import it
    (nor hash its installation, nor set up its backend) before the first compile can start. A pool that needs
    Triton afterwards in the same process gets a new server that has it, and that one serves CUDA pools too."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SERVER_KINDS, str(tmp_path / "missing.cubin")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    (cuda, cuda_has), (full, full_has), (again, again_has) = json.loads(proc.stdout)
    assert (cuda_has, full_has, again_has) == (False, True, True)
    assert cuda != full == again
