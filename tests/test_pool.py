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

# In a process of its own (the fork server and file descriptor 2 are changed): the server starts in folder
# `first` with PROBE=first; then kgate moves to `second`, sets PROBE=second, puts a folder first on its import
# path and points its stderr at a file; a worker then imports the probe module, which writes what it runs under.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    from kgate.compile.pool import Pool, start_server

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
        pool.run([("triton.expand", {"kernel": "probe:k", "sys_path": [here]})], 60,
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
