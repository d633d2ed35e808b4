"""What kgate keys a registration's compile record on when binding it runs code after the module's import: the
project's heuristics' reads, never the compiler's own (a module Triton imports late as it binds, a path it tests):
those are the toolchain's, keyed by its version, and keying them made a warm check compile every variant again
whenever the environment of the run before differed in a way only the compiler's look-ups saw (another PYTHONPATH
under Triton 3.6, whose binding imports a module of its own late and looks for torch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import kgate
from test_held_out_import_probes import HEURISTIC
from test_import_keys import CFG

# Run in a process of its own, as a compile worker runs a binding: the recorder on, the project's module imported,
# then, recorded apart, the compiler's own code testing a path and the project's heuristic testing another.
BINDING = '''\
import json, os, sys
sys.path.insert(0, {project!r})
import triton.runtime.cache
from kgate.compile import import_binding, import_recorder
import_recorder.recorder([])
with import_recorder.recording({project!r}, [{project!r}], {project!r}):
    import heur
apart = import_binding.recording_apart({project!r}, [{project!r}], {project!r})
with apart:
    triton.runtime.cache.FileCacheManager("k" * 64).get_file("compiler-own.json")
    heur.probe()
print(json.dumps(sorted(apart.reads)))
'''


def test_a_binding_keys_the_projects_reads_and_not_the_compilers(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "heur.py").write_text(
        "import os\n\n\ndef probe():\n    return os.path.exists(os.path.join(os.path.dirname(__file__), 'tiles.txt'))\n")
    env_cache = tmp_path / "triton-cache"
    run = subprocess.run([sys.executable, "-c", BINDING.format(project=str(project))], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "TRITON_CACHE_DIR": str(env_cache), "HOME": str(tmp_path)},
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    names = json.loads(run.stdout.splitlines()[-1])
    assert "stat:./tiles.txt" in names, names  # the heuristic's probe keys the record
    assert not [n for n in names if "compiler-own" in n], names  # Triton's own look-up in its cache does not


def test_a_warm_check_after_a_run_under_another_pythonpath_compiles_nothing(tmp_path: Path) -> None:
    """A heuristic registration: a cold check run with an extra PYTHONPATH folder that holds nothing the project
    imports, then a warm one without it: served from the cache, and the same report."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_heur.py").write_text(HEURISTIC.format(expression="256"))
    extra = tmp_path / "tools"
    extra.mkdir()
    pythonpath = os.pathsep.join([str(extra), *filter(None, [os.environ.get("PYTHONPATH")])])
    cold = kgate("check", "-v", "--format", "json", cwd=project, env={"PYTHONPATH": pythonpath}, process=True)
    assert cold.code == 0, cold.stdout + cold.stderr
    warm = kgate("check", "-v", cwd=project, process=True)
    assert "0 compiled, 1 from cache" in warm.stdout + warm.stderr, warm.stdout + warm.stderr
    again = kgate("check", "--format", "json", cwd=project, process=True)
    assert json.loads(again.stdout)["kernels"] == json.loads(cold.stdout)["kernels"]
