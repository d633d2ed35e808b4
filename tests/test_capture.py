"""`kgate capture` on this CPU-only machine: real kernels launched on CPU tensors, bound by Triton's own launcher
for sm_120a without running, recorded, then gated by `kgate check`.

fixtures/capture registers nothing: its launchers run plain, autotuned (decorated and applied as a function),
heuristics-wrapped and project-wrapped kernels with stride 1, None, dtype constexprs and sizes that are and are
not multiples of 16.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Run, copy_project, expectations, kgate

from kgate.collect import captures

torch = pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

LAUNCH = [sys.executable, "launch.py"]
KERNELS = {"ops:applied_kernel", "ops:bias_kernel", "ops:block_kernel", "ops:even_kernel", "ops:rows_kernel",
           "ops:scale_kernel", "ops:tuned_kernel", "ops:wrapped_kernel"}


def entries(project: Path, name: str = "kgate-capture.toml") -> list[captures.CapturedSpec]:
    return captures.load(project / name, name).entries


def of(project: Path, kernel: str) -> list[captures.CapturedSpec]:
    return [e for e in entries(project) if e.spec.kernel == f"ops:{kernel}"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("capture", tmp_path_factory.mktemp("capture"))


@pytest.fixture(scope="module")
def captured(project: Path) -> Run:
    run = kgate("capture", "--device", "cpu", "--", *LAUNCH, cwd=project)
    assert run.code == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def checked(project: Path, captured: Run) -> Run:
    return kgate("check", "--format", "json", cwd=project)


def test_every_kernel_launched_is_captured_whatever_wraps_it(project: Path, captured: Run) -> None:
    assert {e.spec.kernel for e in entries(project)} == KERNELS
    assert "21 specialisation(s) of 8 kernel(s) launched offline for sm_120a" in captured.stderr
    assert all(e.captured == ("cpu sm_120a",) for e in entries(project))
    # Offline nothing can be timed: every autotune config is bound, whether autotune decorates or is called.
    for kernel, blocks in (("tuned_kernel", {128, 256}), ("applied_kernel", {64, 512})):
        assert {e.spec.constexprs["BLOCK"] for e in of(project, kernel)} == blocks
    assert {e.spec.constexprs["EVEN"] for e in of(project, "even_kernel")} == {True, False}  # 4096 and 4168


def test_the_launchers_specialisation_is_recorded_as_it_decided(project: Path, captured: Run) -> None:
    scale = {e.spec.constexprs["OUT_DTYPE"]: e.spec for e in of(project, "scale_kernel")}
    assert set(scale) == {"tl.float16", "tl.float32"}
    ones = scale["tl.float16"]  # stride 1: compiled as the constant 1
    assert ones.equal_to_1 == ("stride",) and "stride" not in ones.signature
    assert "stride" in scale["tl.float32"].signature and not scale["tl.float32"].equal_to_1
    bias = {e.spec.none: e.spec for e in of(project, "bias_kernel")}
    assert set(bias) == {(), ("bias",)} and "bias" not in bias[("bias",)].signature
    block = [e.spec for e in of(project, "block_kernel")]  # 4096 / 64 rows divisible by 16, 4168 / 64 not
    assert sorted("n_rows" in s.divisible for s in block) == [False, True]


def test_the_record_is_tritons_own_specialisation_data(project: Path, captured: Run) -> None:
    """The launcher's `specialization_data` (the JSON Triton itself serialises for preloading a kernel) for the
    same launch, read independently of kgate's recorder, says what the capture file says."""
    import triton
    import triton.language as tl
    from triton import knobs
    from triton.runtime.driver import driver

    from kgate.capture.runtime import offline_driver

    sys.path.insert(0, str(project))
    try:
        import ops

        seen = []
        saved, saved_hook = driver._active, knobs.runtime.jit_cache_hook
        driver.set_active(offline_driver(120))
        knobs.runtime.jit_cache_hook = lambda **kw: seen.append(json.loads(kw["compile"]["specialization_data"])) or True
        try:
            ops.scale(torch.zeros(8192, dtype=torch.float16), 1, tl.float16)
        finally:
            driver._active, knobs.runtime.jit_cache_hook = saved, saved_hook
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("ops", None)
    (data,) = seen
    names = list(data["signature"])
    constants = {names[key[0]]: value for key, value in zip(data["constant_keys"], data["constant_vals"])}
    divisible = sorted(names[key[0]] for key, attrs in zip(data["attrs_keys"], data["attrs_vals"])
                       if ["tt.divisibility", 16] in attrs)
    spec = next(e.spec for e in of(project, "scale_kernel") if e.spec.constexprs["OUT_DTYPE"] == "tl.float16")
    assert constants == {"stride": 1, "BLOCK": 1024, "OUT_DTYPE": "fp16"}
    assert {k: v for k, v in data["signature"].items() if v != "constexpr"} == spec.signature
    assert divisible == list(spec.divisible)
    assert data["options"]["num_warps"] == spec.num_warps and triton.__version__


def test_capturing_again_gives_the_same_bytes(project: Path, captured: Run) -> None:
    before = (project / "kgate-capture.toml").read_bytes()
    again = kgate("capture", "--device", "cpu", "--", *LAUNCH, cwd=project)
    assert again.code == 0, again.stderr
    assert "(0 new)" in again.stderr
    assert (project / "kgate-capture.toml").read_bytes() == before


def test_check_gates_every_captured_specialisation(project: Path, checked: Run) -> None:
    data = checked.json()
    rows = data["kernels"]
    assert len(rows) == len(entries(project)) == 21
    assert {r["source"] for r in rows} == {"captured"}
    assert {r["variant"] for r in rows} == {e.spec.variant for e in entries(project)}
    ones = next(r for r in rows if r["kernel"] == "ops:scale_kernel" and r["constexprs"]["OUT_DTYPE"] == "tl.float16")
    assert ones["specialization"] == {"divisible_by_16": ["n", "out", "x"], "equal_to_1": ["stride"], "none": []}
    assert "stride" not in ones["signature"]
    found = {(f["path"], f["line"], f["code"], f["target"] or "") for f in data["findings"]}
    assert found == expectations(project)  # the planted KG108 and nothing else
    assert checked.code == 0  # KG108 is a warning


def test_kgate_compiles_the_ptx_the_launcher_would(project: Path, checked: Run) -> None:
    """Byte for byte: Triton's own compile of the launch's specialisation is one of the PTX files kgate made."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(project))
    try:
        import ops

        fn = ops.scale_kernel
        signature = {"x": "*fp16", "out": "*fp16", "n": "i32", "stride": "constexpr", "BLOCK": "constexpr",
                     "OUT_DTYPE": "constexpr"}
        constants = {(3,): 1, (4,): 1024, (5,): tl.float16}
        attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
        ptx = triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", 120, 32),
                             options={"num_warps": 4, "num_stages": 3}).asm["ptx"]
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("ops", None)
    made = {p.read_text() for p in (project / ".kgate-cache").rglob("kernel.ptx")}
    assert ptx in made


def test_replace_drops_the_kernels_old_entries_and_a_second_capture_merges(project: Path, checked: Run,
                                                                          tmp_path: Path) -> None:
    copy = copy_project("capture", tmp_path)
    (copy / "kgate-capture.toml").write_bytes((project / "kgate-capture.toml").read_bytes())
    full = {e.key for e in entries(copy)}
    one_size = kgate("capture", "--device", "cpu", "--replace", "--", *LAUNCH, "4096", cwd=copy)
    assert one_size.code == 0, one_size.stderr
    replaced = {e.key for e in entries(copy)}
    assert replaced < full  # every kernel ran, so each kept only what 4096 launched
    assert {e.spec.constexprs["EVEN"] for e in of(copy, "even_kernel")} == {True}
    grown = kgate("capture", "--device", "cpu", "--", *LAUNCH, "4168", cwd=copy)
    assert grown.code == 0, grown.stderr
    merged = {e.key for e in entries(copy)}
    assert replaced < merged and {e.spec.constexprs["EVEN"] for e in of(copy, "even_kernel")} == {True, False}


def test_the_commands_exit_code_is_passed_through_and_what_it_launched_is_kept(tmp_path: Path) -> None:
    project = copy_project("capture", tmp_path)
    (project / "fails.py").write_text("import sys, ops\nops.launch_all(4096)\nsys.exit(3)\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "fails.py", cwd=project)
    assert run.code == 3
    assert "the command exited 3" in run.stderr and entries(project)


def test_a_killed_command_keeps_every_launch_it_recorded(tmp_path: Path) -> None:
    project = copy_project("capture", tmp_path)
    (project / "killed.py").write_text("import os, signal, ops\nops.launch_all(4096)\n"
                                       "os.kill(os.getpid(), signal.SIGKILL)\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "killed.py", cwd=project)
    assert run.code == 128 + signal.SIGKILL, run.stderr
    assert f"the command exited {128 + signal.SIGKILL}" in run.stderr
    assert {e.spec.kernel for e in entries(project)} == KERNELS


@pytest.mark.parametrize(("command", "code", "message"), [
    (["no-such-command-kgate"], 2, "kgate: error: cannot run 'no-such-command-kgate': no such command"),
    ([sys.executable, "-c", "pass"], 2, "kgate: nothing captured: none of the command's 1 Python process(es) imported "
                                        "Triton"),
    ([sys.executable, "-c", "import ops"], 2, "kgate: nothing captured: the command ran no @triton.jit kernel"),
    ([], 2, "kgate: error: kgate capture needs a command to run"),
])
def test_a_command_that_cannot_run_or_launches_nothing_is_one_line(tmp_path: Path, command: list[str], code: int,
                                                                    message: str) -> None:
    project = copy_project("capture", tmp_path)
    run = kgate("capture", "--device", "cpu", "--", *command, cwd=project)
    assert run.code == code, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(message), run.stderr
    assert "Traceback" not in run.stderr and not (project / "kgate-capture.toml").exists()


@pytest.mark.parametrize("elsewhere", [True, False], ids=["another-python-first-on-path", "kgates-own-python"])
def test_a_python_the_path_leads_to_outside_kgates_environment_is_named(tmp_path: Path, elsewhere: bool) -> None:
    """`kgate capture -- python ops.py` from an environment not activated: the `python` PATH finds is another
    installation's, which has no Triton; the message says which Python ran, not only that nothing imported Triton."""
    project = copy_project("capture", tmp_path / "project")
    other = tmp_path / "other-install" / "bin"
    other.mkdir(parents=True)
    (other / "python").write_text("#!/bin/sh\necho 'No module named torch' >&2\nexit 1\n")
    (other / "python").chmod(0o755)
    first = other if elsewhere else Path(sys.executable).parent
    run = kgate("capture", "--device", "cpu", "--", "python", "-c", "raise SystemExit(1)", cwd=project,
                env={**os.environ, "PATH": os.pathsep.join([str(first), os.environ.get("PATH", "")])})
    assert run.code == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("kgate: nothing captured:"), run.stderr
    named = f"the command's `python` is {other / 'python'}, not the Python kgate runs in ({sys.executable})"
    assert (named in last) is elsewhere, last


def test_the_interpreter_is_named_when_it_hides_every_launch(tmp_path: Path) -> None:
    import subprocess

    project = copy_project("capture", tmp_path)
    run = subprocess.run([sys.executable, "-m", "kgate", "capture", "--device", "cpu", "--", *LAUNCH], cwd=project,
                         env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600,
                         check=False)
    assert run.returncode != 0  # 2, or the command's own failure under the interpreter
    assert "kgate: nothing captured: TRITON_INTERPRET is set" in run.stderr


def test_two_captures_at_once_both_land(tmp_path: Path) -> None:
    import subprocess

    project = copy_project("capture", tmp_path)
    env = {**os.environ, "PYTHONPATH": ""}
    procs = [subprocess.Popen([sys.executable, "-m", "kgate", "capture", "--device", "cpu", "--", *LAUNCH, size],
                              cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for size in ("4096", "4168")]
    for proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    even = {e.spec.constexprs["EVEN"] for e in entries(project) if e.spec.kernel == "ops:even_kernel"}
    assert even == {True, False}


STALE = [
    ("a renamed parameter", "def scale_kernel(x, out, n, stride,", "def scale_kernel(x, out, n_elements, stride,",
     "the kernel has no parameter n any more"),
    ("a removed kernel", "def bias_kernel(", "def bias_kernel_v2(", "has no attribute 'bias_kernel'"),
    ("a parameter made constexpr", "def even_kernel(x, n, BLOCK", "def even_kernel(x, n: tl.constexpr, BLOCK",
     "n became tl.constexpr"),
]


@pytest.mark.parametrize(("what", "old", "new", "why"), STALE, ids=[s[0] for s in STALE])
def test_a_stale_entry_is_one_line_and_never_compiled(tmp_path: Path, project: Path, checked: Run, what: str,
                                                       old: str, new: str, why: str) -> None:
    copy = copy_project("capture", tmp_path)
    (copy / "kgate-capture.toml").write_bytes((project / "kgate-capture.toml").read_bytes())
    # The cache of the checked capture: what the edit leaves as it was is not compiled again.
    shutil.copytree(project / ".kgate-cache", copy / ".kgate-cache", symlinks=True)
    ops = copy / "ops.py"
    text = ops.read_text()
    assert text.count(old) == 1
    ops.write_text(text.replace(old, new).replace("bias_kernel[", "bias_kernel_v2["))
    run = kgate("check", "--format", "json", cwd=copy)
    assert run.code == 1, run.stderr
    stale = [f for f in run.json()["findings"] if f["code"] == "KG005"]
    assert len(stale) == 1, stale
    assert stale[0]["path"] == "kgate-capture.toml" and why in stale[0]["message"]
    assert "capture again" in stale[0]["message"]
    kernel = stale[0]["kernel"]
    assert not [k for k in run.json()["kernels"] if k["kernel"] == kernel]


def test_a_module_that_needs_set_up_imports_with_the_setup_hook(tmp_path: Path) -> None:
    project = copy_project("capture", tmp_path)
    ops = project / "ops.py"
    ops.write_text("import probe\nprobe.require()\n" + ops.read_text())
    (project / "probe.py").write_text(textwrap.dedent("""\
        READY = False

        def require():
            if not READY:
                raise RuntimeError("No device were detected")
        """))
    (project / "setup_for_kgate.py").write_text("import probe\nprobe.READY = True\n")
    without = kgate("capture", "--device", "cpu", "--", *LAUNCH, cwd=project)
    assert without.code != 0 and "No device were detected" in without.stderr
    config = project / "kgate.toml"
    config.write_text(config.read_text() + 'setup = "setup_for_kgate.py"\n')
    captured = kgate("capture", "--device", "cpu", "--", *LAUNCH, cwd=project)
    assert captured.code == 0, captured.stderr
    # One kernel's specialisations are enough to see the compile workers import the module.
    checked = kgate("check", "-q", "--kernel", "ops:scale_kernel", cwd=project)
    assert checked.code == 0, checked.stdout + checked.stderr  # the compile workers ran the set-up too
    config.write_text(config.read_text().replace('setup = "setup_for_kgate.py"\n', ""))
    unset = kgate("check", "-q", "--no-cache", "--kernel", "ops:scale_kernel", cwd=project)
    assert unset.code == 1
    assert "No device were detected" in unset.stdout and "`setup`" in unset.stdout


def test_the_environments_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    project = copy_project("capture", tmp_path)
    site = project / "site_extra"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import pathlib\npathlib.Path('sitecustomize-ran').write_text('yes')\n")
    run = kgate("capture", "--device", "cpu", "--", *LAUNCH, cwd=project, env={"PYTHONPATH": str(site)})
    assert run.code == 0, run.stderr
    assert (project / "sitecustomize-ran").read_text() == "yes" and entries(project)


def test_launch_counts_only_when_asked(project: Path, captured: Run, tmp_path: Path) -> None:
    assert all(e.launches is None for e in entries(project))  # the module's capture, without --counts
    assert "\nlaunches = " not in (project / "kgate-capture.toml").read_text()
    copy = copy_project("capture", tmp_path)
    (copy / "kgate-capture.toml").write_bytes((project / "kgate-capture.toml").read_bytes())
    assert kgate("capture", "--device", "cpu", "--counts", "--replace", "--", *LAUNCH, cwd=copy).code == 0
    counted = {e.spec.kernel: e.launches for e in entries(copy)}
    assert all(count and count >= 1 for count in counted.values())
    (scale,) = [e for e in of(copy, "scale_kernel") if e.spec.equal_to_1]
    assert scale.launches == 2  # stride 1 at both sizes: one specialisation, launched twice


def test_the_audit_covers_the_captured_specialisations(project: Path, checked: Run, tmp_path: Path) -> None:
    run = kgate("audit", "-o", str(tmp_path / "audit"), cwd=project)
    assert run.code == 0, run.stderr
    assert "no kernels" not in run.stderr  # nothing is registered, but every kernel was captured
    report = (tmp_path / "audit" / "report.md").read_text()
    assert all(kernel in report for kernel in KERNELS)


def test_kernels_of_the_script_itself_and_of_an_installed_copy(tmp_path: Path) -> None:
    """A kernel defined in the script the command runs is named, not imported (that would run the script);
    a kernel of the project's own module run from a copy elsewhere (an installed package) is the project's."""
    project = copy_project("capture", tmp_path)
    (project / "script.py").write_text(textwrap.dedent("""\
        import torch, triton, triton.language as tl

        @triton.jit
        def local_kernel(x, BLOCK: tl.constexpr):
            tl.store(x + tl.arange(0, BLOCK), 1.0)

        local_kernel[(1,)](torch.zeros(64), BLOCK=64)
        """))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "script.py", cwd=project)
    assert run.code == 2 and "__main__:local_kernel: defined in the script the command ran" in run.stderr
    installed = tmp_path / "site"
    installed.mkdir()
    (installed / "ops.py").write_bytes((project / "ops.py").read_bytes())
    code = f"import sys; sys.path.insert(0, {str(installed)!r}); import ops; assert ops.__file__.startswith(" \
           f"{str(installed)!r}); ops.launch_all(4096)"
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", code, cwd=project)
    assert run.code == 0, run.stderr
    assert {e.spec.kernel for e in entries(project)} == KERNELS
    # A library's kernel (its module is nowhere in the project) is left out, with one note.
    (installed / "ops.py").rename(installed / "libops.py")
    code = code.replace("import ops", "import libops as ops")
    run = kgate("capture", "--device", "cpu", "-o", "other.toml", "--", sys.executable, "-c", code, cwd=project)
    assert run.code == 2 and "defined outside the project were not recorded (libops:" in run.stderr


def test_a_launcher_entering_the_cpu_tensors_device_is_captured_offline(tmp_path: Path) -> None:
    """`with torch.cuda.device(x.device.index):` (or `(x.device)`) around a launch, as many launchers write it, is
    entered on the CPU tensors of an offline capture: torch refuses a CPU device there, and the launch never ran."""
    project = copy_project("capture", tmp_path)
    (project / "ctx_ops.py").write_text(textwrap.dedent("""\
        import torch, triton, triton.language as tl

        @triton.jit
        def fill_kernel(x, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x + offs, 1.0, mask=offs < n)

        def fill(x, by_index):
            with torch.cuda.device(x.device.index if by_index else x.device):
                fill_kernel[(triton.cdiv(x.numel(), 128),)](x, x.numel(), BLOCK=128)

        def fill_of(x):
            with torch.cuda.device_of(x):
                fill_kernel[(1,)](x, x.numel(), BLOCK=64)
        """))
    code = "import torch, ctx_ops; ctx_ops.fill(torch.zeros(4096), True); ctx_ops.fill(torch.zeros(4096), False); " \
           "ctx_ops.fill_of(torch.zeros(64))"
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", code, cwd=project)
    assert run.code == 0, run.stderr
    assert sorted(e.spec.constexprs["BLOCK"] for e in entries(project)) == [64, 128]
    # A CUDA device is still torch's to refuse (there is none here): the command fails as it would without kgate.
    code = "import torch\nwith torch.cuda.device(0): torch.zeros(1, device='cuda')"
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", code, cwd=project)
    assert run.code != 0 and "Traceback" in run.stderr
