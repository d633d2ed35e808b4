"""The replay of an unchanged `kgate check`: same bytes, same exit code, nothing else loaded; any change runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import inprocess
import pytest
from conftest import FIXTURES, REPO, copy_project, kgate

from kgate.pipeline import fastpath
from kgate.support.tools import bundled_tool

PROBE = ("import sys; from kgate.entry import main; sys.argv = ['kgate'] + sys.argv[1:]; code = main(); "
         "ran = 'kgate.pipeline.check' in sys.modules or 'kgate.pipeline.lint' in sys.modules; "
         "print('RAN' if ran else 'REPLAYED', file=sys.stderr); sys.exit(code)")


def probe_process(project: Path, *args: str, env: dict[str, str] | None = None,
                  command: str = "check") -> tuple[int, str, bool]:
    """(exit code, stdout, whether it was a replay) of `kgate check ARGS` in a fresh process: a replay is a run
    that never imported the check or lint pipeline."""
    proc = subprocess.run([sys.executable, "-c", PROBE, command, *args], cwd=project, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600, check=False)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, proc.stdout, bool(lines) and lines[-1] == "REPLAYED"


def probe(project: Path, *args: str, env: dict[str, str] | None = None,
          command: str = "check") -> tuple[int, str, bool]:
    """(exit code, stdout, whether it was a replay) of `kgate check ARGS`, run in this process (`inprocess`): a
    replay is a run whose `fastpath.replay` gave the exit code itself, so that the command line went no further.
    (That a replay imports nothing else is `probe_process`'s to show.)"""
    outcomes: list[int | None] = []
    real = fastpath.replay

    def watched(argv: list[str]) -> int | None:
        outcomes.append(real(argv))
        return outcomes[-1]

    fastpath.replay = watched
    try:
        code, stdout, _stderr = inprocess.run([command, *args], cwd=project, env=env, timeout=600)
    finally:
        fastpath.replay = real
    return code, stdout, bool(outcomes) and outcomes[-1] is not None


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project("ratchet", tmp_path_factory.mktemp("fastpath"))
    return root


def test_an_unchanged_run_is_replayed_byte_for_byte(project: Path) -> None:
    first = probe_process(project, "-q")
    second = probe_process(project, "-q")
    assert first[2] is False and second[2] is True
    assert first[:2] == second[:2]
    # The same outcome seen from inside: the in-process probe the other tests use agrees with the process's.
    assert probe(project, "-q") == second
    assert first[0] == 1  # the fixture's row_scale is over its lowered register threshold


def test_formats_and_flags_are_recorded_separately(project: Path) -> None:
    probe(project, "--format", "json")
    code, out, replayed = probe(project, "--format", "json")
    assert replayed and out.startswith("{")
    assert probe(project, "-q", "--select", "KG105")[2] is False


def test_editing_a_kernel_runs_again(project: Path) -> None:
    probe(project, "-q")
    path = project / "rows.py"
    original = path.read_text()
    try:
        path.write_text(original.replace("1e-6", "1e-5"))
        code, out, replayed = probe(project, "-q")
        assert not replayed
        assert probe(project, "-q")[2] is True
    finally:
        path.write_text(original)


def test_a_new_file_a_touched_file_and_the_environment_run_again(project: Path) -> None:
    probe(project, "-q")
    (project / "sub").mkdir(exist_ok=True)
    assert probe(project, "-q")[2] is False
    (project / "sub" / "new_kernel.py").write_text("x = 1\n")
    assert probe(project, "-q")[2] is False
    assert probe(project, "-q")[2] is True
    time.sleep(0.01)
    os.utime(project / "kgate.toml")
    assert probe(project, "-q")[2] is False
    assert probe(project, "-q", env={"TRITON_PTXAS_BLACKWELL_PATH": "/nonexistent/ptxas"})[2] is False


def test_verbose_and_no_cache_are_never_replayed(project: Path) -> None:
    probe(project, "-q", "-v")
    assert probe(project, "-q", "-v")[2] is False
    assert probe(project, "-q", "--no-cache")[2] is False


def test_a_replay_writes_a_missing_output_file_again(project: Path) -> None:
    out = project / "report.json"
    probe(project, "--format", "json", "-o", str(out))
    content = out.read_text()
    out.unlink()
    code, _stdout, replayed = probe(project, "--format", "json", "-o", str(out))
    assert replayed and out.read_text() == content


def test_an_input_changed_during_the_run_is_never_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record keeps the states the snapshot took before the run: a file edited while the run reads the project
    has another state by the next run, which runs in full and reports the file as it is."""
    (tmp_path / "kgate.toml").write_text("")
    kernel = tmp_path / "k.py"
    kernel.write_text("import triton\n")
    from kgate.pipeline import lint, lint_report

    real = lint.run_lint

    def editing(*args: object, **kwargs: object) -> lint.LintRun:
        kernel.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr):\n"
                          "    x = tl.load(x_ptr)\n    print(x)\n    tl.store(x_ptr, x + 1)\n")  # after the snapshot
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lint_report, "run_lint", editing)
    first = probe(tmp_path, "--format", "json", command="lint")
    monkeypatch.setattr(lint_report, "run_lint", real)
    second = probe(tmp_path, "--format", "json", command="lint")
    assert not second[2]
    assert "KG204" in second[1] and second[1] == first[1]
    assert probe(tmp_path, "--format", "json", command="lint")[2]


def test_a_file_the_replay_stated_is_not_stated_again_by_the_runs_snapshot(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay that does not hold (the last file it looks at changed) gives the states it took to the snapshot of the
    full run, which states each file once; and they are that run's only."""
    (tmp_path / "kgate.toml").write_text("")
    for name in ("a.py", "b.py", "z.py"):
        (tmp_path / name).write_text("import triton\n")
    probe(tmp_path, "--format", "json", command="lint")
    time.sleep(0.01)
    (tmp_path / "z.py").write_text("import triton\n\nx = 1\n")
    stated: dict[str, int] = {}
    real = fastpath.path_state

    def counted(path: str) -> list[int] | None:
        stated[os.path.basename(path)] = stated.get(os.path.basename(path), 0) + 1
        return real(path)

    monkeypatch.setattr(fastpath, "path_state", counted)
    assert not probe(tmp_path, "--format", "json", command="lint")[2]
    assert stated["a.py"] == stated["b.py"] == stated["z.py"] == 1
    assert fastpath.stated(["lint", "--format", "json"]) == {}


def _folders_with_an_excluded_one(tmp_path: Path) -> None:
    """Python files in a package and a subpackage, a C++ file, and an excluded folder the import words still read."""
    (tmp_path / "kgate.toml").write_text('extend-exclude = ["vendor"]\n')
    for rel in ("pkg/a.py", "pkg/sub/b.py", "csrc/k.cu", "vendor/v.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("from .k import launch\n" if rel.endswith(".py") else "")
    (tmp_path / "pkg/k.py").write_text(  # its autotune key is decided where its launcher is called: in other modules
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], key=['n'])\n@triton.jit\n"
        "def kern(x, n, BLOCK: tl.constexpr):\n    tl.store(x + tl.arange(0, BLOCK), n)\n\n\n"
        "def launch(x, n):\n    kern[(1,)](x, n, BLOCK=128)\n")


def test_the_folders_the_snapshot_listed_are_not_listed_again_as_the_run_walks_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record of what a run read beyond its snapshot leaves out the folders the snapshot holds: the lint's walk
    and the readers of the project's Python and C++ files list each of them without a second listing for the record;
    a folder outside the snapshot (an excluded one the import words still read) is recorded."""
    from kgate.support import reads

    _folders_with_an_excluded_one(tmp_path)
    listed: list[str] = []
    real = reads.listing
    monkeypatch.setattr(reads, "listing", lambda folder, ignored: (listed.append(folder), real(folder, ignored))[1])
    probe(tmp_path, "--format", "json", command="lint")
    assert [os.path.relpath(p, tmp_path) for p in listed if p.startswith(str(tmp_path))] == ["vendor"]


def test_the_runs_walks_of_the_project_take_the_folders_its_snapshot_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lint's walk and the reading of the project's Python and C++ files take each folder's entries as the
    snapshot listed them: every folder of the project is listed once a run (an excluded one the snapshot left out is
    listed by the reading that walks it)."""
    _folders_with_an_excluded_one(tmp_path)
    scanned: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": (scanned.append(os.fspath(path)), real(path))[1])
    code, out, _replayed = probe(tmp_path, "--format", "json", command="lint")
    monkeypatch.setattr(os, "scandir", real)
    assert code == 0 and out == probe(tmp_path, "--format", "json", "--no-cache", command="lint")[1]
    inside = sorted(os.path.relpath(p, tmp_path) for p in scanned if p.startswith(str(tmp_path))
                    and ".kgate-cache" not in p)
    assert inside == [".", "csrc", "pkg", "pkg/sub", "vendor"]


def test_replay_output_matches_the_cli(project: Path) -> None:
    full = kgate("check", "-q", "--no-cache", cwd=project)
    replayed = probe(project, "-q")
    assert (replayed[0], replayed[1]) == (full.code, full.stdout)


def test_an_unchanged_lint_is_replayed_and_an_edit_runs_it_again(project: Path) -> None:
    (project / "tuned.py").write_text(
        "import triton\n\n\n@triton.autotune(configs=[], key=['n_tokens'])\n@triton.jit\n"
        "def k(x, n_tokens):\n    pass\n")
    try:
        first = probe(project, command="lint")
        second = probe(project, command="lint")
        assert first[0] == 1 and "KG201" in first[1]
        assert second[2] is True and second[:2] == first[:2]
        (project / "tuned.py").write_text("x = 1\n")
        third = probe(project, command="lint")
        assert third[2] is False and third[0] == 0
    finally:
        (project / "tuned.py").unlink()


def test_a_lint_without_a_configuration_is_replayed_until_one_appears_above(tmp_path: Path) -> None:
    """A project with no configuration lints with the defaults, its cache in the current folder: an unchanged lint is
    replayed there too, and a configuration that appears in a folder above (which the run would then use) or a
    pyproject.toml there runs it again."""
    project = tmp_path / "outer" / "project"
    project.mkdir(parents=True)
    (project / "tuned.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.autotune(configs=[], key=['n_tokens'])\n"
        "@triton.jit\ndef k(x, n_tokens):\n    tl.device_print('x', x)\n")
    first = probe(project, command="lint")
    assert first[0] == 1 and "KG201" in first[1] and "KG204" in first[1] and first[2] is False
    assert probe(project, command="lint") == (*first[:2], True)
    (tmp_path / "outer" / "kgate.toml").write_text('select = ["KG204"]\n')
    configured = probe(project, command="lint")
    assert configured[2] is False and "KG204" in configured[1] and "KG201" not in configured[1]
    (tmp_path / "outer" / "kgate.toml").unlink()
    assert probe(project, command="lint") == (*first[:2], True)
    (tmp_path / "outer" / "pyproject.toml").write_text('[project]\nname = "outer"\n')
    assert probe(project, command="lint") == (*first[:2], False)
    assert probe(project, command="lint") == (*first[:2], True)


def test_old_records_are_pruned(tmp_path: Path) -> None:
    for i in range(70):
        (tmp_path / f"{i:03d}.json").write_text("{}")
        os.utime(tmp_path / f"{i:03d}.json", ns=(i * 10**9, i * 10**9))
    fastpath._prune(str(tmp_path))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 64 and left[0] == "006.json"


# --------------------------------------------------------------------------- what the run read, wherever it is

KERNEL = (FIXTURES / "bad" / "import-error" / "k.py").read_text()
WRAPPER = "#!/bin/sh\nexec {nvcc} \"$@\"\n"


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A project whose check reads outside its walk: a kernel module under a `python-path` entry outside the
    project, one behind a symlinked folder, one in an `extend-exclude` folder, the flags of its CUDA file from
    a `compile_commands.json` in the excluded `build/`, and nvcc through a symlinked toolkit folder."""
    base = tmp_path_factory.mktemp("reader")
    project = base / "project"
    for rel in ("k.py", "vendored/vk.py", "../outside/ext.py", "../elsewhere/lk.py"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(KERNEL)
    (project / "linked").symlink_to(base / "elsewhere", target_is_directory=True)
    (project / "t.cu").write_text("__global__ void scale(float* x, int n) { int i = threadIdx.x; "
                                  "if (i < n) x[i] *= SCALE; }\n")
    (project / "build").mkdir()
    (project / "build" / "compile_commands.json").write_text(json.dumps([{
        "directory": str(project), "file": "t.cu", "command": "nvcc -DSCALE=2.0f -c t.cu -o t.o"}]))
    registrations = "".join(f'\n[[triton]]\nkernel = "{name}:good"\nsignature = {{ x = "*fp32", n = "i32" }}\n'
                            f'constexprs = {{ BLOCK = 128 }}\n' for name in ("k", "ext", "linked.lk", "vk"))
    (project / "kgate.toml").write_text(
        'targets = ["sm_120a"]\npython-path = [".", "../outside", "vendored"]\nextend-exclude = ["vendored"]\n'
        + registrations + '\n[[cuda]]\nsources = ["t.cu"]\ncompile_commands = "build/compile_commands.json"\n')
    real = shutil.which("nvcc")
    for release in ("cuda-a", "cuda-b"):
        (base / release / "bin").mkdir(parents=True)
        (base / release / "bin" / "nvcc").write_text(WRAPPER.format(nvcc=real))
        (base / release / "bin" / "nvcc").chmod(0o755)
    (base / "cuda").symlink_to(base / "cuda-a", target_is_directory=True)
    env = {"PATH": f"{base / 'cuda' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    assert probe(project, "-q", env=env)[0] == 0
    return project, env


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("edit", ["compile_commands", "outside", "symlinked", "excluded", "toolkit"])
def test_an_input_read_outside_the_project_walk_runs_again(reader: tuple[Path, dict[str, str]], edit: str) -> None:
    project, env = reader
    probe(project, "-q", env=env)  # leaves the run record (the fixture ran outside this test's environment)
    assert probe(project, "-q", env=env)[2] is True
    changes = {
        "compile_commands": project / "build" / "compile_commands.json",
        "outside": project.parent / "outside" / "ext.py",
        "symlinked": project.parent / "elsewhere" / "lk.py",
        "excluded": project / "vendored" / "vk.py",
    }
    if edit == "toolkit":
        link = project.parent / "cuda"
        link.unlink()
        link.symlink_to(project.parent / "cuda-b", target_is_directory=True)
    else:
        path = changes[edit]
        text = path.read_text()
        path.write_text(text.replace("SCALE=2.0f", "SCALE=3.0f") if edit == "compile_commands"
                        else text.replace("* 2.0", "* 3.0"))  # edited in place: the folder's listing is unchanged
    assert probe(project, "-q", env=env)[2] is False  # not the old verdict
    assert probe(project, "-q", env=env)[2] is True


HELPED = """\
import triton
import triton.language as tl
import kghelper

@triton.jit
def good(x, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + i, kghelper.bump(tl.load(x + i, mask=i < n)), mask=i < n)
"""


def test_a_module_of_an_installed_package_that_a_kernel_imports_is_an_input(tmp_path: Path) -> None:
    """A helper installed in the environment's own site-packages (under sys.prefix, where kgate's
    installation lives too), imported by a kernel module: editing it in place runs the check again."""
    import sysconfig

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = str(env / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    # kgate and Triton as this environment has them; the helper is the new environment's own package.
    (site / "outer.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    helper = site / "kghelper.py"
    helper.write_text("import triton\n\n@triton.jit\ndef bump(v):\n    return v + 1\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "k.py").write_text(HELPED)
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n[[triton]]\nkernel = "k:good"\n'
                                        'signature = { x = "*fp32", n = "i32" }\nconstexprs = { BLOCK = 128 }\n')

    def replayed() -> bool:
        proc = subprocess.run([python, "-c", PROBE, "check", "-q"], cwd=project, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stderr.strip().splitlines()[-1] == "REPLAYED"

    assert [replayed(), replayed()] == [False, True]
    helper.write_text(helper.read_text().replace("v + 1", "v + 2"))  # in place: the folder's listing is unchanged
    assert [replayed(), replayed()] == [False, True]


def test_lint_runs_again_after_an_edit_in_place_behind_a_symlinked_folder(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "project").mkdir()
    project = tmp_path / "project"
    (project / "kgate.toml").write_text("")
    (project / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    module = tmp_path / "elsewhere" / "m.py"
    module.write_text("x = 1\n")
    first = probe(project, command="lint")
    assert first[0] == 0 and probe(project, command="lint")[2] is True
    module.write_text("import triton\n\n\n@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef k(x, n):\n"
                      "    pass\n\n\ndef go(x):\n    k[(1,)](x, x.shape[0])\n")
    run = probe(project, command="lint")
    assert run[2] is False and run[0] == 1


def test_a_compile_timeout_is_never_replayed(tmp_path: Path) -> None:
    project = copy_project("bad/ptxas-hang", tmp_path)
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(REPO / "tests" / "fake_tools" / "ptxas_hang"),
           "KGATE_TEST_REAL_PTXAS": str(bundled_tool("ptxas-blackwell"))}
    first = probe(project, "-q", env=env)
    assert first[0] == 1 and "timed out" in first[1]
    assert probe(project, "-q", env=env)[2] is False  # compiled again, not the timeout replayed


# --------------------------------------------------------------------------- run records are checked, not trusted


def _record_of(project: Path, *args: str) -> Path:
    """The run record `kgate check ARGS` leaves and replays, where a replay in this environment looks for it."""
    probe(project, *args)
    assert probe(project, *args)[2] is True
    code = ("import sys; from kgate.pipeline import fastpath; where = fastpath._record_path(sys.argv[1:]); "
            "print(getattr(where, 'path', where))")
    where = subprocess.run([sys.executable, "-c", code, "check", *args], cwd=project, capture_output=True, text=True,
                           check=True, env=dict(os.environ))
    return Path(where.stdout.strip())


def test_a_planted_run_record_neither_passes_the_gate_nor_writes_anywhere(project: Path, tmp_path: Path) -> None:
    record = _record_of(project, "-q")
    planted = tmp_path / "planted.txt"
    forged = {**json.loads(record.read_text()), "files": {}, "dirs": {}, "stdout": "kgate check: passed\n",
              "exit": 0, "outputs": {str(planted): "written by a replay"}}
    forged.pop("sha256", None)
    record.write_text(json.dumps(forged))
    code, out, replayed = probe(project, "-q")
    assert (code, replayed) == (1, False) and "passed" not in out
    assert not planted.exists()


def test_a_record_of_another_command_or_project_is_not_replayed(project: Path, tmp_path: Path) -> None:
    other = copy_project("ratchet", tmp_path)
    mine = _record_of(other, "-q")
    # Another project's record for the same command, put where this project's record would be.
    theirs = _record_of(project, "-q")
    mine.write_bytes(theirs.read_bytes())
    assert probe(other, "-q")[2] is False
    # Another command's record (JSON output) in place of this one's.
    json_record = _record_of(other, "--format", "json")
    mine = _record_of(other, "-q")
    mine.write_bytes(json_record.read_bytes())
    _code, out, replayed = probe(other, "-q")
    assert not replayed and not out.startswith("{")


def test_a_run_record_edited_to_pass_is_not_replayed(project: Path) -> None:
    """A record carries a hash of its content: an edited output or exit code runs the command again."""
    first = probe(project, "-q")
    assert first[0] == 1 and probe(project, "-q")[2] is True
    records = (project / ".kgate-cache" / "v1" / "runs").glob("*.json")
    record, data = next((p, d) for p in records if (d := json.loads(p.read_text()))["argv"] == ["check", "-q"])
    assert data["exit"] == 1
    data.update(exit=0, stdout="")
    record.write_text(json.dumps(data))
    again = probe(project, "-q")
    assert again == (first[0], first[1], False)


def test_the_disassemblers_on_path_are_compiler_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SASS of CUDA kernels is nvdisasm's where it can be: the one PATH finds keys a replay like cuobjdump."""
    for name in ("cuobjdump", "nvdisasm"):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    files = fastpath.compiler_files()
    assert str(tmp_path / "cuobjdump") in files and str(tmp_path / "nvdisasm") in files
