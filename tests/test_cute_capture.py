"""`kgate capture` records the CuTe DSL calls a project makes (`cute.compile` on fake tensors), and `kgate check` gates
each captured call as a registration of the same call is gated: fixtures/cute/capture compiles its kernel from a
script, and registers one of those calls (its symbol named otherwise, so it is a variant of its own)."""

from __future__ import annotations

import sys

import pytest
from conftest import Run, copy_project, kgate

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]', or "
                                           "nvidia-cutlass-dsl)")

FACTS = ("registers", "spill_bytes", "spill_loads", "stack_bytes", "smem_bytes", "warps_per_subcore", "num_warps",
         "instructions")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Run]:
    project = copy_project("cute/capture", tmp_path_factory.mktemp("cute-capture"))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "compile_ops.py", cwd=project, process=True)
    return project, run


def test_each_cute_compile_call_is_one_captured_entry_and_an_inexpressible_one_is_named(captured) -> None:
    """Two distinct calls of `scale` (the third repeats one) are two `[[cute]]` entries, the shared symbol of the
    call named in both tensors; a class kernel's call carries its constructor's arguments; a class whose arguments
    cannot be read back and a call with a symbolic scalar argument are problem lines, not dropped silently."""
    project, run = captured
    assert run.code == 0, run.stderr
    text = (project / "kgate-capture.toml").read_text(encoding="utf-8")
    assert text.count("[[cute]]") == 3 and 'kernel = "pkg.ops:scale"' in text
    assert 'init = { dtype = "cutlass.Float32", factor = 4.0 }' in text  # a class kernel's constructor arguments
    assert 'shape = ["?s0:128"]' in text and "align = 16" in text and 'captured = ["cpu sm_120a"]' in text
    assert "3 specialisation(s) of 2 kernel(s)" in run.stderr
    assert "pkg.ops:Renamed: cute.compile call not recorded: Renamed keeps no attribute 'factor'" in run.stderr
    assert "pkg.ops:scale: cute.compile call not recorded: argument 'out' is a builtins.object" in run.stderr
    # The DSL's own error for that call still points at the project's line, not at kgate's recorder.
    assert "compile_ops.py" in run.stdout and "cute_record" not in run.stdout, run.stdout
    assert "pkg.ops:scale_first: cute.compile call not recorded: argument 'count' is a " in run.stderr


def test_a_captured_call_is_gated_with_the_facts_of_the_equivalent_registration(captured) -> None:
    """`kgate check` compiles the captured calls offline; the one the registration also describes compiles to the
    same registers, spills, shared memory and instructions as the registration's row of the same run."""
    project, _run = captured
    run = kgate("check", "--format", "json", "--no-cache", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    rows = run.json()["kernels"]
    by_source = {(k["source"], k["kernel"], k["constexprs"].get("factor")): k for k in rows}
    assert sorted(by_source) == [("captured", "pkg.ops:Scaled", 4.0), ("captured", "pkg.ops:scale", 2.0),
                                 ("captured", "pkg.ops:scale", 3.0), ("registered", "pkg.ops:scale", 2.0)]
    registered, twin = by_source[("registered", "pkg.ops:scale", 2.0)], by_source[("captured", "pkg.ops:scale", 2.0)]
    assert registered["variant"] != twin["variant"]  # the symbol is named otherwise: a call of its own
    assert {fact: twin[fact] for fact in FACTS} == {fact: registered[fact] for fact in FACTS}
    assert twin["captured"] == ["cpu sm_120a"] and twin["language"] == "cute"


def test_a_capture_that_never_imports_the_cute_dsl_does_not_import_it(tmp_path) -> None:
    """The recorder hooks the CuTe DSL when the command imports it, and never imports it itself."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n', encoding="utf-8")
    probe = "import sys, triton; print('cutlass' in sys.modules, 'cutlass.cute' in sys.modules)"
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", probe, cwd=tmp_path, process=True)
    assert run.stdout.split() == ["False", "False"], run.stdout + run.stderr
    assert "nothing captured" in run.stderr
    assert "Triton or the CuTe DSL" not in run.stderr  # the process imported Triton: the recorder ran


SCALARS = '''
from dataclasses import dataclass

import cutlass
from cutlass import cute


@cute.kernel
def _shift_kernel(x: cute.Tensor, out: cute.Tensor, offset: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 128 + tidx
    out[i] = x[i] + offset


@cute.jit
def shift(x: cute.Tensor, out: cute.Tensor, offset: cutlass.Float32):
    _shift_kernel(x, out, offset).launch(grid=(cute.size(x) // 128, 1, 1), block=(128, 1, 1))


@dataclass(frozen=True)
class Tile:
    threads: int


class Shifted:
    """A class kernel whose constructor derives a configuration object when given none."""

    def __init__(self, dtype, config=None):
        self.dtype = dtype
        self.config = config if config is not None else Tile(128)

    @cute.jit
    def __call__(self, x: cute.Tensor, out: cute.Tensor, offset: cutlass.Float32):
        threads = self.config.threads
        _shift_kernel(x, out, offset).launch(grid=(cute.size(x) // threads, 1, 1), block=(threads, 1, 1))
'''

SCALARS_SCRIPT = '''
import cutlass
from cutlass import cute
from shifts import Shifted, shift

n = cute.sym_int(divisibility=128)
x = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
out = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
cute.compile(shift, x, out, cutlass.Float32(0.5))
cute.compile(Shifted(cutlass.Float32), x, out, cutlass.Float32(1.0))
'''


def test_a_dsl_scalar_argument_and_a_derived_constructor_default_are_captured_and_compiled(tmp_path) -> None:
    """QuACK compiles RMSNorm with `Float32(0)` for eps and CrossEntropy with `Int32(0)` for ignore_index, and builds
    RMSNorm with `config=None`, which its constructor replaces by a configuration object. Neither call was
    recorded ("argument 'eps' is a cutlass...Float32", "constructor argument 'config' is a ...Config"): a DSL scalar
    is now kept as its type and value, and a constructor argument left to its default where the object built again
    from the others is the one compiled. `kgate check` compiles both calls from the capture."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n', encoding="utf-8")
    (tmp_path / "shifts.py").write_text(SCALARS, encoding="utf-8")
    (tmp_path / "compile_shifts.py").write_text(SCALARS_SCRIPT, encoding="utf-8")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "compile_shifts.py", cwd=tmp_path, process=True)
    assert run.code == 0 and "not recorded" not in run.stderr, run.stderr
    text = (tmp_path / "kgate-capture.toml").read_text(encoding="utf-8")
    assert 'offset = { dtype = "cutlass.Float32", value = 0.5 }' in text, text
    assert 'init = { dtype = "cutlass.Float32" }' in text, text
    check = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    assert check.code == 0, check.stdout + check.stderr
    rows = check.json()["kernels"]
    assert sorted((k["kernel"], k["constexprs"]["offset"]["value"]) for k in rows) == [
        ("shifts:Shifted", 1.0), ("shifts:shift", 0.5)], rows


LAUNCHES = """\
import cutlass
from cutlass import cute
from pkg.ops import scale

n = cute.sym_int(divisibility=128)
x = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
out = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
for factor in (2.0, 5.0):
    compiled = cute.compile(scale, x, out, factor)
    assert compiled(x, out) is None  # an op launches what it compiled: offline, nothing
    assert callable(compiled.__call__)
print("launched both")
"""


def test_offline_a_compiled_function_is_called_and_launches_nothing(tmp_path) -> None:
    """An op calls what `cute.compile` returned (QuACK's ops do, on the CPU tensors of an offline capture, which a
    TVM-FFI function refuses): offline the call launches nothing, so the script goes on to its next shape."""
    project = copy_project("cute/capture", tmp_path)
    (project / "launch_ops.py").write_text(LAUNCHES)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "launch_ops.py", cwd=project, process=True)
    assert run.code == 0, run.stdout + run.stderr
    assert "launched both" in run.stdout
    text = (project / "kgate-capture.toml").read_text(encoding="utf-8")
    assert text.count("[[cute]]") == 2 and "factor = 5.0" in text, text


def test_a_command_that_imports_the_dsl_and_compiles_nothing_is_told_of_a_project_cache(tmp_path) -> None:
    """QuACK keeps what it compiled on disk and loads it on the next run without `cute.compile`: a capture then
    records nothing, and says what to turn off."""
    project = copy_project("cute/capture", tmp_path)
    (project / "cached.py").write_text("import pkg.ops  # a cache of the project's own answers every call\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "cached.py", cwd=project, process=True)
    assert run.code == 2, run.stdout + run.stderr
    assert "it imported the CuTe DSL: a compile cache of the project's own" in run.stderr, run.stderr
    assert not (project / "kgate-capture.toml").exists()


HANDLED = """\
import copy
import cutlass
from cutlass import cute
from cutlass.base_dsl.jit_executor import JitCompiledFunction
from pkg.ops import scale

n = cute.sym_int(divisibility=128)
x = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
out = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
compiled = cute.compile(scale, x, out, 2.0)
assert isinstance(compiled, JitCompiledFunction)
assert compiled.to(0)(x, out) is None  # bound to a device, as multi-GPU code does: nothing launched
assert copy.copy(compiled)(x, out) is None
print("handled")
"""


def test_offline_a_compiled_function_is_bound_copied_and_checked_as_it_is_online(tmp_path) -> None:
    """What a project does with a compiled function besides calling it: `isinstance`, `.to(device)` (which loads
    its modules on a GPU), `copy.copy`."""
    project = copy_project("cute/capture", tmp_path)
    (project / "handled.py").write_text(HANDLED)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "handled.py", cwd=project, process=True)
    assert run.code == 0 and "handled" in run.stdout, run.stdout + run.stderr
