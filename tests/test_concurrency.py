"""No data lost: runs at once on one cache, a run killed mid-compile, damaged cache records, atomic writes.

Every file kgate keeps (facts cache, lint cache, artifacts, the baseline, reports written with -o,
the audit) is written whole or not at all (kgate.support.atomicio.atomic_write, or a temporary name
moved into place), and a cache record that is not whole or not of its shape is rebuilt, never
trusted. These tests run the real command line on fixtures/mixed (Triton and CUDA kernels, one of
each launched with PDL so that SASS is disassembled into the cache too).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, Run, copy_project, kgate, session_processes

from kgate.compile.cache import kept
from kgate.support.tools import bundled_tool

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
CHECK = ("check", "--format", "json")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """A project with a warm cache, and the JSON a serial cold run wrote for it."""
    project = copy_project("mixed", tmp_path_factory.mktemp("reference"))
    run = kgate(*CHECK, cwd=project)
    assert run.code == 1, run.stderr
    assert {k["kernel"] for k in run.json()["kernels"]} == {"add<float>", "consumer", "kernels:pdl_scale",
                                                            "kernels:scale"}
    assert {k["kernel"] for k in run.json()["kernels"] if k["sass"]} == {"consumer", "kernels:pdl_scale"}
    return project, run


def _start(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | (env or {})
    return subprocess.Popen([sys.executable, "-m", "kgate", *args], cwd=project, env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def test_two_checks_at_once_on_one_empty_cache_agree_with_a_serial_run(tmp_path: Path,
                                                                       reference: tuple[Path, Run]) -> None:
    project = copy_project("mixed", tmp_path)
    first, second = _start(project, *CHECK), _start(project, *CHECK)
    outputs = [proc.communicate(timeout=600) for proc in (first, second)]
    assert [first.returncode, second.returncode] == [1, 1], outputs
    assert outputs[0][0] == outputs[1][0] == reference[1].stdout
    # What they left in the cache is whole: a serial run now compiles nothing and says the same.
    assert "0 compiled, 4 from cache" in kgate("check", "-v", cwd=project).stdout
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_a_check_killed_mid_compile_leaves_nothing_a_later_run_trusts(tmp_path: Path,
                                                                      reference: tuple[Path, Run]) -> None:
    project = copy_project("mixed", tmp_path)
    proc = _start(project, *CHECK, "--jobs", "1")
    sid = os.getsid(proc.pid)
    artifacts = project / ".kgate-cache" / "v1" / "artifacts"
    deadline = time.monotonic() + 120
    while not (artifacts.is_dir() and any(artifacts.iterdir())) and proc.poll() is None:
        assert time.monotonic() < deadline, "the compile never started"
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed: nothing was tested"
    proc.send_signal(signal.SIGKILL)  # as the OOM killer or a cancelled CI job would: no cleanup runs
    proc.communicate(timeout=60)
    # Its workers see it gone and stop, with the compilers they started.
    deadline = time.monotonic() + 10
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(sid) == []
    rerun = kgate(*CHECK, cwd=project)
    assert rerun.code == 1 and rerun.stdout == reference[1].stdout, rerun.stderr


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_a_killed_check_leaves_no_compiler_running(tmp_path: Path) -> None:
    """A worker blocked in a hung ptxas cannot notice the pipe to kgate closing: it watches its parent."""
    project = tmp_path / "hang"
    shutil.copytree(FIXTURES / "bad" / "ptxas-hang", project, ignore=shutil.ignore_patterns("case.toml"))
    config = project / "kgate.toml"
    # The case's own short timeout would stop the hang before the test sees it: this test kills kgate itself.
    text, replaced = re.subn(r"(?m)^timeout = .*$", "timeout = 600", config.read_text())
    assert replaced == 1
    config.write_text(text)
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(REPO / "tests" / "fake_tools" / "ptxas_hang"),
           "KGATE_TEST_REAL_PTXAS": str(bundled_tool("ptxas-blackwell"))}
    proc = _start(project, "check", "--no-cache", env=env)
    sid = os.getsid(proc.pid)
    deadline = time.monotonic() + 120
    while not any("sleep 600" in p for p in session_processes(sid)):  # the fake ptxas is hanging
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(sid) == []


def test_truncated_and_misshapen_cache_records_are_rebuilt(tmp_path: Path, reference: tuple[Path, Run]) -> None:
    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)
    cache = project / ".kgate-cache" / "v1"
    facts = sorted((cache / "compiled").glob("*.json"))
    cuda = sorted((cache / "cuda").glob("*.json"))
    lint = sorted((cache / "lint").glob("*.json"))
    assert len(facts) == 2 and len(cuda) == 2 and len(lint) == 1
    for path in (facts[0], cuda[0], *lint):  # cut mid-record, as a full disk or a crash of the machine would
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    facts[1].write_text('{"kernel": "k", "entry": {}}')  # whole JSON, but not a record kgate wrote
    cuda[1].write_text('{"kernels": [{"symbol": "_Z1kv"}]}')
    run = kgate("check", "-v", cwd=project)
    assert run.code == 1, run.stderr
    assert "4 compiled, 0 from cache" in run.stdout  # every damaged record was rebuilt, none trusted
    # ...and replaced by a whole one: the next run compiles nothing and says what a clean run says.
    assert "0 compiled, 4 from cache" in kgate("check", "-v", cwd=project).stdout
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout


def test_a_cache_record_is_trusted_only_for_the_key_and_content_it_was_written_with(
        tmp_path: Path, reference: tuple[Path, Run]) -> None:
    """Whole JSON of the right shape is not enough: a record copied over another key's (a kernel would vanish
    and another show twice), one replaced by an empty list of kernels, one whose figures were edited."""
    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)
    cache = project / ".kgate-cache" / "v1"
    facts = sorted((cache / "compiled").glob("*.json"))
    cuda = sorted((cache / "cuda").glob("*.json"))
    facts[1].write_bytes(facts[0].read_bytes())
    cuda[1].write_bytes(cuda[0].read_bytes())
    cuda[0].write_text('{"kernels": []}')
    record = json.loads(facts[0].read_text())
    value = record.get("value", record)
    value["dynamic_smem"] += 1
    facts[0].write_text(json.dumps(record))
    run = kgate("check", "-v", cwd=project)
    assert "4 compiled, 0 from cache" in run.stdout, run.stdout + run.stderr
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout


def test_damaged_facts_records_are_read_again_from_the_artifacts_and_damaged_artifacts_compiled_again(
        tmp_path: Path, reference: tuple[Path, Run]) -> None:
    """The facts stage's records (v1/facts) are rebuilt from the cached artifacts, compiling nothing; an artifact
    that is not what its compile record says (the PTX edited) makes its unit compile again."""
    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)
    cache = project / ".kgate-cache" / "v1"
    built = sorted((cache / "facts").glob("*.json"))
    assert len(built) == 4  # two Triton variants, two CUDA files
    built[0].write_bytes(built[0].read_bytes()[:100])
    record = json.loads(built[1].read_text())
    record["value"]["kernels"][0][1]["resources"]["registers"] += 1
    built[1].write_text(json.dumps(record))
    for path in built[2:]:
        path.unlink()
    run = kgate("check", "-v", cwd=project)
    assert run.code == 1 and "0 compiled, 4 from cache" in run.stdout, run.stdout + run.stderr
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout
    assert sorted((cache / "facts").glob("*.json")) == built  # each written whole again, under its key
    for path in built:
        path.unlink()
    ptx = min((cache / "artifacts").glob("*/kernel.ptx.*"))  # the PTX as its record reads it (by its hash)
    ptx.write_text(ptx.read_text() + "\n// edited\n")
    run = kgate("check", "-v", cwd=project)
    assert run.code == 1 and "1 compiled, 3 from cache" in run.stdout, run.stdout + run.stderr
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout


def _not_regular(path: Path) -> bool:
    return path.is_symlink() or not stat.S_ISREG(path.lstat().st_mode)


def test_what_stands_where_a_cache_record_should_be_is_never_followed_or_waited_on(
        tmp_path: Path, reference: tuple[Path, Run]) -> None:
    """A link to /dev/zero (endless), a named pipe (an open that never returns), a folder, a file past the size
    bound, or a link to another project's record (whole, of the same key, but not this cache's file) in place of
    a record of any kind, a compile artifact, the parse index or the run record: each is a missing record,
    rebuilt within seconds; the file a link points to is neither read nor written. Triton's own cache files are
    not kept past their compile, and what an older release or a killed worker left of them is removed unread."""
    from kgate.support.atomicio import CACHE_LIMIT

    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)
    other = reference[0] / ".kgate-cache" / "v1"
    before = {p: p.read_bytes() for p in other.rglob("*.json")}
    # The reference folder's run records, if it left any (run records name their folder): this folder's check
    # below leaves its own.
    shutil.rmtree(project / ".kgate-cache" / "v1" / "runs", ignore_errors=True)
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout  # this folder's
    cache = project / ".kgate-cache" / "v1"
    facts = sorted((cache / "compiled").glob("*.json"))
    cuda = sorted((cache / "cuda").glob("*.json"))
    (lint,) = sorted((cache / "lint").glob("*.json"))
    (run_record,) = sorted((cache / "runs").glob("*.json"))
    triton = project / ".kgate-cache" / "triton"
    assert len(facts) == 2 and len(cuda) == 2 and not list(triton.iterdir())  # each compile's folder is gone
    (triton / "OLDKEY").mkdir()  # an older release's shared layout, its group file a pipe
    os.mkfifo(triton / "OLDKEY" / "__grp__scale.json")
    (triton / f"{2**31 - 1}-gone").mkdir()  # the folder of a worker killed mid-compile

    def replace(path: Path, how: str) -> None:
        path.unlink()
        if how == "dev-zero":
            path.symlink_to("/dev/zero")
        elif how == "fifo":
            os.mkfifo(path)
        elif how == "folder":
            path.mkdir()
        elif how == "huge":
            with open(path, "wb") as handle:
                handle.truncate(CACHE_LIMIT + 1)  # sparse: no disk used
        else:
            path.symlink_to(other / path.relative_to(cache))

    planted = {facts[0]: "dev-zero", facts[1]: "other-project", cuda[0]: "fifo", cuda[1]: "folder",
               lint: "huge", cache / "pyindex.json": "dev-zero", run_record: "fifo",
               **{path: "fifo" for path in (cache / "spans").glob("*.json")}}
    for path, how in planted.items():
        replace(path, how)
    run = kgate("check", "-v", cwd=project, timeout=300)
    assert run.code == 1 and "4 compiled, 0 from cache" in run.stdout, run.stdout + run.stderr
    assert not list(triton.iterdir())
    assert kgate(*CHECK, cwd=project, timeout=300).stdout == reference[1].stdout  # its run record replaced too
    assert not [p for p in planted if _not_regular(p)]  # each rebuilt, a regular file of this cache
    # ...with an ordinary file's permissions, not those of what stood there (/dev/zero is writable by all).
    assert {stat.S_IMODE(p.stat().st_mode) for p in planted} == {stat.S_IMODE(facts[0].parent.stat().st_mode) & 0o666}
    # The cubins the check kept but did not disassemble, replaced by pipes: `--sass` compiles those again.
    # Each under its own name and under its hash's, which the record reads.
    folders = [folder for folder in (cache / "artifacts").iterdir() if not (folder / "kernel.sass").exists()]
    cubins = [path for folder in folders for path in folder.glob("kernel.cubin*")]
    assert folders and len(cubins) >= 2 * len(folders)
    for path in cubins:
        replace(path, "fifo")
    run = kgate("check", "--sass", "-v", cwd=project, timeout=300)
    assert run.code == 1 and f"{len(folders)} compiled" in run.stdout, run.stdout + run.stderr
    rebuilt = [kept(folder / "kernel.cubin", hashlib.sha256((folder / "kernel.cubin").read_bytes()).hexdigest())
               for folder in folders]  # the compile's cubin, under its name and its hash's
    assert not [p for folder in folders for p in (folder / "kernel.cubin", *rebuilt) if _not_regular(p)]
    assert {p: p.read_bytes() for p in other.rglob("*.json")} == before


def test_a_damaged_run_record_or_python_index_means_a_full_run(tmp_path: Path, reference: tuple[Path, Run]) -> None:
    """The records that let an unchanged check skip work (kgate.pipeline.fastpath's run record, the parse index) are
    caches too: damaged, they are ignored, not trusted and not crashed on."""
    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)
    assert kgate(*CHECK, cwd=project).stdout == reference[1].stdout  # leaves the run record
    runs = sorted((project / ".kgate-cache" / "v1" / "runs").glob("*.json"))
    index = project / ".kgate-cache" / "v1" / "pyindex.json"
    assert runs and index.is_file()
    for path in runs:
        record = json.loads(path.read_text())
        del record["stdout"]
        record["exit"] = "x"
        path.write_text(json.dumps(record))
    entries = json.loads(index.read_text())
    for key in entries["files"]:
        entries["files"][key] = {"stat": entries["files"][key][0]}
    index.write_text(json.dumps(entries))
    run = kgate(*CHECK, cwd=project)
    assert (run.code, run.stdout) == (1, reference[1].stdout), run.stderr
    for path in (*runs, index):
        path.write_bytes(path.read_bytes()[:100])
    run = kgate(*CHECK, cwd=project)
    assert (run.code, run.stdout) == (1, reference[1].stdout), run.stderr


def test_reports_and_the_baseline_get_the_permissions_of_an_ordinary_file(tmp_path: Path,
                                                                          reference: tuple[Path, Run]) -> None:
    project = tmp_path / "warm"
    shutil.copytree(reference[0], project)

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    old = os.umask(0o022)
    try:
        assert kgate("check", "--format", "sarif", "-o", "report.sarif", cwd=project).code == 1
        assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    finally:
        os.umask(old)
    assert mode(project / "report.sarif") == mode(project / "kgate-baseline.toml") == 0o644
    (project / "report.sarif").chmod(0o640)  # an existing report keeps the mode its owner gave it
    assert kgate("check", "--format", "sarif", "-o", "report.sarif", cwd=project).code == 0  # now baselined
    assert mode(project / "report.sarif") == 0o640
    old = os.umask(0o077)
    try:
        assert kgate("check", "--format", "json", "-o", "private.json", cwd=project).code == 0
    finally:
        os.umask(old)
    assert mode(project / "private.json") == 0o600


# Functions allowed to write files, and why each write is whole or harmless.
WRITERS = {
    ("kgate/support/atomicio.py", "stage"): "temporary file, fsync (not for a sealed cache record) and os.replace in "
                                           "`commit` (`atomic_write`)",
    ("kgate/evaluate/source.py", "_fork_worker"): "a pipe to the parent, not a file",
    ("kgate/commands/ulp.py", "pytest_argv"): "a pytest.ini in a fresh temporary folder",
    ("kgate/compile/cuda_probe.py", "probe_task"): "the shared memory probe's source in a fresh temporary folder of "
                                                    "its own, which nvcc compiles there",
    ("kgate/capture/session.py", "locked"): "a lock file opened to append to, never written",
    ("kgate/compile/environments.py", "_locked"): "a lock file opened to append to, never written",
    ("kgate/compile/environments.py", "_install"): "a record inside a temporary folder, moved into place whole",
    ("kgate/compile/import_children.py", "_open_report"): "a report in a folder of the run's own, appended to line "
                                                           "by line and read back up to its last whole line",
}


def _writes(tree: ast.Module) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call that writes a file."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                func = child.func
                attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                modes = [a.value for a in child.args[1:2] + [k.value for k in child.keywords if k.arg == "mode"]
                         if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if attr in ("write_text", "write_bytes") or attr in ("open", "fdopen") and any(
                        set(m) & set("wax+") for m in modes):
                    out.append((function, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return out


def test_every_file_kgate_writes_goes_through_a_whole_file_writer() -> None:
    found = set()
    for path in sorted((REPO / "kgate").rglob("*.py")) + sorted((REPO / "rules").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for function, line in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            assert (rel, function) in WRITERS, f"{rel}:{line}: {function} writes a file directly"
            found.add((rel, function))
    assert found == set(WRITERS)  # an entry here that writes nothing any more is stale


# `kgate baseline update` with its write held back: every update reads the baseline, then waits before writing,
# so that two started together both read it before either writes (the window in which pins were lost).
SLOW_UPDATE = textwrap.dedent("""
    import sys, time
    from kgate.compile.pool import start_server
    start_server()
    import kgate.commands.baseline as command
    real = command.save
    def slow(*args, **kwargs):
        time.sleep(float(sys.argv[1]))
        return real(*args, **kwargs)
    command.save = slow
    from kgate.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.fixture(scope="module")
def ratchet_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """fixtures/ratchet for two targets, every kernel at risk (so each update pins its part), with a warm cache;
    and the baseline one whole update writes."""
    project = copy_project("ratchet", tmp_path_factory.mktemp("ratchet"))
    config = project / "kgate.toml"
    text = config.read_text()
    config.write_text(text.replace('targets = ["sm_120a"]', 'targets = ["sm_120a", "sm_90a"]')
                      .replace("threshold = 100", "threshold = 1"))
    whole = kgate("baseline", "update", "--accept-new", cwd=project)
    assert whole.code == 0, whole.stderr
    baseline = (project / "kgate-baseline.toml").read_text()
    assert baseline.count("|sm_120a\" = {") == baseline.count("|sm_90a\" = {") == 2  # two kernels, two targets
    (project / "kgate-baseline.toml").unlink()
    return project, baseline


@pytest.mark.parametrize("parts", [("--target", "sm_120a", "--target", "sm_90a"),
                                   ("--shard", "1/2", "--shard", "2/2")], ids=["targets", "shards"])
def test_baseline_updates_at_once_lose_no_pin(ratchet_project: tuple[Path, str], tmp_path: Path,
                                              parts: tuple[str, ...]) -> None:
    project = tmp_path / "project"
    shutil.copytree(ratchet_project[0], project)
    script = tmp_path / "slow_update.py"
    script.write_text(SLOW_UPDATE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    procs = [subprocess.Popen([sys.executable, str(script), "3", "baseline", "update", "--accept-new", flag, value],
                              cwd=project, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for flag, value in (parts[:2], parts[2:])]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert all("kgate: wrote kgate-baseline.toml" in out for out, _err in outputs), outputs
    # Each update pinned its part over what the other wrote: together, what one whole update pins.
    assert (project / "kgate-baseline.toml").read_text() == ratchet_project[1]
