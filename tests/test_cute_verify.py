"""`kgate capture --verify` for CuTe DSL calls: kgate's offline compile of each captured `cute.compile` call next to
what the driver reports of the kernels the GPU loaded for it.

fixtures/cute/verify compiles kernels of every figure compared (registers, static and dynamic shared memory, local
memory) and a call that launches two kernels. On this CPU-only machine the comparison runs on a real offline compile
for the H100's target, with the driver's figures planted (equal to the compile's, then one of them off); the recorder's
records are written and read back as a capture writes them; the figures of a compiled call read on a machine without
a driver are an error in the record, never an exception in the command. On a machine with a CUDA GPU (marker `gpu`)
the whole command runs, and every figure must be equal.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_project, kgate

from kgate.capture import cute_live, cute_record, session
from kgate.capture.runtime import Recorder
from kgate.capture.session import Recorded, live_key
from kgate.collect import captures
from kgate.commands.capture import _captured_facts
from kgate.core import cute_dsl
from kgate.core.config import load_config
from kgate.pipeline.capture_verify import verify

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]', or "
                                           "nvidia-cutlass-dsl)")

TWO = "pkg.ops:scale_then_stage"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = copy_project("cute/verify", tmp_path_factory.mktemp("cute-verify"))
    run = kgate("capture", "--device", "cpu", "--target", "sm_90a", "--", sys.executable, "compile_ops.py",
                cwd=project, process=True)
    assert run.code == 0, run.stderr
    return project


@pytest.fixture(scope="module")
def compiled(project: Path) -> Any:
    """The captured calls compiled offline for sm_90a, as `--verify` compiles them for an H100's or H200's kernels."""
    config = load_config(start=project)
    run = _captured_facts(config, list(_calls(project)), "sm_90a", 2)
    assert not run.failures and len(run.facts) == 6, run.failures
    return run


def _calls(project: Path) -> list[Any]:
    return captures.load(project / "kgate-capture.toml", "kgate-capture.toml").cute


def _driver_figures(run: Any, change: tuple[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """What the driver would report of each call's kernels, as the recorder writes it: each kernel's figures equal
    to kgate's compile, but `change`'s (kernel row, figure), 8 more."""
    out: dict[str, dict[str, Any]] = {}
    for facts in run.facts:
        res = facts.resources
        own = {"n_regs": res.registers, "shared": res.smem_bytes, "local": res.stack_bytes}
        if change is not None and change[0] == facts.kernel:
            own[change[1]] += 8
        call = out.setdefault(live_key(facts.kernel.split("/", 1)[0], facts.variant), {"arch": 90, "kernels": {}})
        call["kernels"][facts.entry.name] = own
    return out


def _recorded(project: Path, live: dict[str, dict[str, Any]]) -> Recorded:
    made = Recorded(file=captures.CaptureFile(cute=_calls(project)))
    made.live.update(live)
    return made


def _verdicts(out: str) -> dict[str, str]:
    """Each row's verdict, by kernel and variant ("pkg.ops:staged buffers=4,...")."""
    return {" ".join(line.split()[:2]): line.rstrip().rsplit("  ", 1)[-1].strip() for line in out.splitlines()
            if line.startswith("pkg.ops:")}


def _of(verdicts: dict[str, str], kernel: str) -> str:
    """The verdict of a kernel's one row."""
    (found,) = [verdict for row, verdict in verdicts.items() if row.split()[0] == kernel]
    return found


def test_each_kernel_of_a_call_launches_with_the_shared_memory_its_own_launch_asks_for(compiled: Any) -> None:
    """A call that launches two kernels with different shared memory (none, and two 32 KB buffers) gates each with its
    own: for sm_90a the host code's check names no size, and the second kernel was gated with none."""
    smem = {f.kernel: f.resources.smem_dynamic for f in compiled.facts}
    assert smem[f"{TWO}/_staged_kernel"] == 2 * 8192 * 4 and smem[f"{TWO}/_scale_kernel"] == 0
    assert smem["pkg.ops:scale"] == 0 and smem["pkg.ops:staged"] in (8192 * 4, 4 * 8192 * 4)


def test_verify_says_equal_only_when_every_figure_of_every_kernel_is_the_compiles(
        project: Path, compiled: Any, capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(start=project)
    assert verify(config, _recorded(project, _driver_figures(compiled)), jobs=1, compile_facts=_captured_facts) is False
    out = capsys.readouterr().out
    assert "6 specialisation(s): 6 equal to the live kernel, 0 different, 0 not compiled offline" in out
    assert len(_verdicts(out)) == 6 and set(_verdicts(out).values()) == {"equal"}

    for figure, key in (("registers", "n_regs"), ("shared", "shared"), ("local", "local")):
        live = _driver_figures(compiled, (f"{TWO}/_staged_kernel", key))
        assert verify(config, _recorded(project, live), jobs=1, compile_facts=_captured_facts) is True, figure
        out = capsys.readouterr().out
        verdicts = _verdicts(out)
        assert _of(verdicts, f"{TWO}/_staged_kernel") == f"DIFFERENT: {figure}", out
        assert sorted(verdicts.values()).count("equal") == 5 and "5 equal to the live kernel, 1 different" in out, out


def test_a_call_the_gpu_did_not_load_is_never_equal(project: Path, compiled: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A call whose figures the recorder could not read, a kernel its library lacks, a call it reported nothing of:
    each said, none counted equal, and the command fails."""
    config = load_config(start=project)
    live = _driver_figures(compiled)
    scale = next(key for key in live if key.startswith("pkg.ops:scale|"))
    live[scale] = {"arch": 90, "error": "CUDA_ERROR_OUT_OF_MEMORY"}
    two = next(key for key in live if key.startswith(f"{TWO}|"))
    live[two]["kernels"] = {name: figures for name, figures in live[two]["kernels"].items() if "_staged_" in name}
    del live[next(key for key in live if key.startswith("pkg.ops:accumulate|"))]
    assert verify(config, _recorded(project, live), jobs=1, compile_facts=_captured_facts) is True
    captured = capsys.readouterr()
    verdicts = _verdicts(captured.out)
    assert _of(verdicts, "pkg.ops:scale").startswith("not loaded: CUDA_ERROR_OUT_OF_MEMORY")
    assert _of(verdicts, f"{TWO}/_scale_kernel").startswith("not loaded: the library the GPU loaded has no kernel")
    assert _of(verdicts, f"{TWO}/_staged_kernel") == "equal" and len(verdicts) == 5
    assert "pkg.ops:accumulate acc_len=512" in captured.err and "the GPU reported nothing of it" in captured.err
    assert "3 equal to the live kernel, 0 different, 0 not compiled offline, 3 not loaded on the GPU" in captured.out


def test_the_recorders_figures_of_a_call_are_read_back_under_its_identity(
        project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder names a `cute.compile` call's record, then writes the driver's figures of its kernels under that
    name; the capture reads them back as the figures of the call's variant. Without a driver (this machine) the
    figures of a real compiled call are an error in the record, not an exception in the command."""
    monkeypatch.syspath_prepend(str(project))
    import cutlass
    from cutlass import cute
    from pkg.ops import scale, staged

    x = cute.runtime.make_fake_tensor(cutlass.Float32, (1048576,), stride=(1,), assumed_align=16)
    recorder = Recorder(str(tmp_path), offline=False, live=True, counts=False)
    calls = [((staged, x, x, 4), 4), ((scale, x, x, 2.0), None)]
    ids = [recorder.cute(cute_record.call_record(args, {}, None)) for args, _ in calls]
    assert recorder.cute(cute_record.call_record(calls[0][0], {}, None)) == ids[0]  # the same call: one record
    made = cute.compile(staged, x, x, 4, options="--gpu-arch sm_90a")
    recorder.cute_live(ids[0], made)
    recorder.cute_live(ids[0], made)  # once a call
    planted = {"arch": 90, "kernels": {"kernel_x": {"n_regs": 10, "shared": 0, "local": 0}}}
    recorder._write({"type": "live", "id": ids[1], **planted})

    read = session.read_records(load_config(start=project), tmp_path)
    assert not read.problems and len(read.file.cute) == 2
    by_kernel = {entry.kernel: live_key(entry.kernel, entry.calls()[0].variant) for entry in read.file.cute}
    assert read.live[by_kernel["pkg.ops:scale"]] == planted
    measured = read.live[by_kernel["pkg.ops:staged"]]
    if session.gpu_present():  # the driver's own figures: the four 32 KB buffers the launch asks for, at least
        (figures,) = measured["kernels"].values()
        assert measured["arch"] >= 90 and figures["shared"] >= 4 * 8192 * 4, measured
    else:
        assert set(measured) == {"error"} and measured["error"], measured
    assert (tmp_path / next(p.name for p in tmp_path.iterdir())).read_text().count('"type": "live"') == 2


def test_the_dynamic_shared_memory_of_a_compiled_call_is_what_kgate_gates(
        project: Path, compiled: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the recorder adds to a kernel's static shared memory is read from the project's own compiled object, as
    kgate's compile reads it from its own: the same for the same call."""
    monkeypatch.syspath_prepend(str(project))
    import cutlass
    from cutlass import cute
    from pkg.ops import scale_then_stage

    x = cute.runtime.make_fake_tensor(cutlass.Float32, (1048576,), stride=(1,), assumed_align=16)
    made = cute.compile(scale_then_stage, x, x, options="--gpu-arch sm_90a")
    _every, own = cute_live.dynamic_shared(made, cute_dsl)
    assert own == {f.entry.name: f.resources.smem_dynamic for f in compiled.facts if f.kernel.startswith(f"{TWO}/")}


@pytest.mark.skipif(session.gpu_present(), reason="this machine has a GPU")
def test_verify_without_a_gpu_is_refused(project: Path) -> None:
    run = kgate("capture", "--verify", "--", sys.executable, "compile_ops.py", cwd=project)
    assert run.code == 2 and "--verify compares kgate's compile with the kernels a GPU loaded: it needs a GPU" \
        in run.stderr, run.stderr


@pytest.mark.skipif(session.gpu_present(), reason="this machine has a GPU")
def test_each_call_is_measured_where_it_compiled_and_a_call_without_a_driver_is_said(tmp_path: Path) -> None:
    """`--device gpu` on this machine: the captured process hands each compiled call to the recorder, which finds no
    driver to ask; each call is one line, none is compared, and the command fails."""
    project = copy_project("cute/verify", tmp_path)
    run = kgate("capture", "--device", "gpu", "--verify", "--", sys.executable, "compile_ops.py", cwd=project,
                process=True)
    assert run.code == 1, run.stdout + run.stderr
    assert run.stderr.count(": not loaded on the GPU: ") == 5, run.stderr
    assert "the GPU reported nothing of it" not in run.stderr  # each call's record says why: measured, not lost
    assert "0 equal to the live kernel, 0 different, 0 not compiled offline, 5 not loaded on the GPU" in run.stdout


@pytest.mark.gpu
def test_on_a_gpu_every_captured_cute_call_equals_the_kernels_it_loaded(tmp_path: Path) -> None:
    if not session.gpu_present():
        pytest.skip("needs a CUDA GPU")
    project = copy_project("cute/verify", tmp_path)
    calls = 6
    if importlib.util.find_spec("tvm_ffi") is not None:
        # A TVM-FFI function (QuACK's and FlashAttention's compiles) keeps the library it launches from in its host
        # code: every one of its calls was "not loaded: the compiled object holds no loaded kernel".
        with (project / "compile_ops.py").open("a") as script:
            script.write('cute.compile(scale, x, out, 3.0, options="--enable-tvm-ffi")\n')
        calls += 1
    run = kgate("capture", "--verify", "--", sys.executable, "compile_ops.py", cwd=project, process=True)
    assert run.code == 0, run.stdout + run.stderr
    assert " 0 different, 0 not compiled offline" in run.stdout.rstrip().splitlines()[-1], run.stdout + run.stderr
    verdicts = _verdicts(run.stdout)
    assert len(verdicts) == calls and set(verdicts.values()) == {"equal"}, run.stdout + run.stderr


def test_a_tvm_ffi_function_is_measured_by_the_binary_its_host_code_loads(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call compiled with `--enable-tvm-ffi` (QuACK's and FlashAttention's) keeps no library the recorder can ask
    for, keeps no cubin, and its IR holds no `gpu.binary` once lowered: on an H100 every QuACK call was "not loaded:
    the compiled object holds no loaded kernel". The device binary its host code loads is a constant of the lowered
    IR; that is what the recorder loads and asks the driver about."""
    pytest.importorskip("tvm_ffi", reason="TVM-FFI functions need apache-tvm-ffi")
    monkeypatch.syspath_prepend(str(project))
    import cutlass
    from cutlass import cute
    from pkg.ops import scale_then_stage

    x = cute.runtime.make_fake_tensor(cutlass.Float32, (1048576,), stride=(1,), assumed_align=16)
    made = cute.compile(scale_then_stage, x, x, options="--gpu-arch sm_90a --enable-tvm-ffi")
    assert getattr(made, "jit_module", None) is None and getattr(made.artifacts, "CUBIN", None) is None
    (binary,) = cute_live._cubins(made)
    assert binary.startswith(b"\x50\xed\x55\xba") and b"\x7fELF" in binary  # a fatbinary holding the cubin
    assert made.kernel_info and all(symbol.encode() in binary for symbol in made.kernel_info)
