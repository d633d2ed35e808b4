"""Registering Triton kernels: configuration and decorator give the same thing; autotune configs become variants."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import kgate

from kgate.core.errors import ConfigError

KERNEL = textwrap.dedent('''\
    import triton
    import triton.language as tl
    {imports}

    {decorators}
    @triton.jit
    def scale(x, out, n, BLOCK: tl.constexpr, FACTOR: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * FACTOR, mask=offs < n)
''')

TABLE = '''
[[triton]]
kernel = "ops:scale"
signature = { x = "*fp16", out = "*fp16", n = "i32" }
constexprs = { BLOCK = 1024, FACTOR = 2 }
num_warps = 4
kind = "elementwise"
variants = [{ BLOCK = 512, num_warps = 8 }]
'''

DECORATOR = ('@kgate.register(signature={"x": "*fp16", "out": "*fp16", "n": "i32"}, constexprs={"BLOCK": 1024, '
             '"FACTOR": 2},\n                num_warps=4, kind="elementwise", variants=[{"BLOCK": 512, "num_warps": 8}])')


def project(root: Path, config: str, source: str) -> Path:
    root.mkdir()
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n' + config)
    (root / "ops.py").write_text(source)
    return root


def kernels(root: Path) -> list[dict]:
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 0, run.stdout + run.stderr
    return run.json()["kernels"]


def readable(record: dict) -> str:
    """A variant's name without the tag of its specialisation."""
    name, sep, tag = record["variant"].rpartition("#")
    assert sep and len(tag) == 8, record["variant"]
    return name


def test_configuration_and_decorator_register_the_same_kernel(tmp_path: Path) -> None:
    by_table = project(tmp_path / "table", TABLE, KERNEL.format(imports="", decorators=""))
    by_decorator = project(tmp_path / "decorator", "", KERNEL.format(imports="import kgate", decorators=DECORATOR))
    table, decorated = kernels(by_table), kernels(by_decorator)
    assert [readable(k) for k in table] == ["BLOCK=1024,FACTOR=2,warps=4,stages=3,fp16",
                                             "BLOCK=512,FACTOR=2,warps=8,stages=3,fp16"]
    # The same kernel, variants and compiled numbers; only the definition line differs (the decorator adds lines).
    strip = [{k: v for k, v in record.items() if k != "line"} for record in table]
    assert strip == [{k: v for k, v in record.items() if k != "line"} for record in decorated]


def test_an_autotuned_kernel_expands_into_one_variant_per_config(tmp_path: Path) -> None:
    autotune = ('@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4),\n'
                '                          triton.Config({"BLOCK": 256}, num_warps=8, num_stages=2)], key=["FACTOR"])')
    config = TABLE.replace("constexprs = { BLOCK = 1024, FACTOR = 2 }", "constexprs = { FACTOR = 2 }").replace(
        "variants = [{ BLOCK = 512, num_warps = 8 }]\n", "")
    root = project(tmp_path / "tuned", config, KERNEL.format(imports="", decorators=autotune))
    assert [readable(k) for k in kernels(root)] == ["BLOCK=128,FACTOR=2,warps=4,stages=3,fp16",
                                                     "BLOCK=256,FACTOR=2,warps=8,stages=2,fp16"]


def test_a_damaged_expansion_record_is_rebuilt(tmp_path: Path) -> None:
    """An autotuned kernel is expanded by importing it, and what the import told is kept in the cache
    (v1/expand/): a record replaced by other JSON, or by one whose envelope is whole and whose value is not an
    expansion, is imported again, never trusted; the facts it keys are still the cache's."""
    import json

    from kgate.support.jsondoc import content_hash

    autotune = '@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["FACTOR"])'
    config = TABLE.replace("constexprs = { BLOCK = 1024, FACTOR = 2 }", "constexprs = { FACTOR = 2 }").replace(
        "variants = [{ BLOCK = 512, num_warps = 8 }]\n", "")
    root = project(tmp_path / "tuned", config, KERNEL.format(imports="", decorators=autotune))
    clean = kgate("check", "-v", cwd=root)
    assert clean.code == 0, clean.stdout + clean.stderr
    (record,) = (root / ".kgate-cache" / "v1" / "expand").glob("*.json")
    wrapped = json.loads(record.read_text())
    for damaged in ({"x": 1}, {**wrapped, "value": {"x": 1}, "sha256": content_hash({"x": 1})}):
        record.write_text(json.dumps(damaged))
        run = kgate("check", "-v", cwd=root)
        assert run.code == 0 and run.stdout == clean.stdout.replace("1 compiled, 0 from cache",
                                                                    "0 compiled, 1 from cache"), run.stderr
        assert json.loads(record.read_text()) == wrapped  # rebuilt as it was


def test_autotune_applied_without_a_literal_decorator_is_planned_from_its_configs(tmp_path: Path) -> None:
    """`k = triton.autotune(...)(k)` after the definition, or a project's own decorator around autotune: the
    configs that run are gated, not the bare kernel with the registration's constexprs."""
    rebound = KERNEL.format(imports="", decorators="") + (
        '\nscale = triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2)], key=[])(scale)\n')
    wrapper = ('def tuned(fn):\n'
               '    return triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=8)], key=[])(fn)\n')
    wrapped = KERNEL.format(imports="", decorators=wrapper + "\n\n@tuned").replace("def scale(", "def wrapped(")
    config = TABLE.replace("variants = [{ BLOCK = 512, num_warps = 8 }]\n", "")
    config += config.replace('"ops:scale"', '"ops:wrapped"')
    root = project(tmp_path / "tuned", config, rebound + "\n\n" + wrapped.split("\n", 3)[3])
    assert sorted((k["kernel"], readable(k)) for k in kernels(root)) == [
        ("ops:scale", "BLOCK=128,FACTOR=2,warps=2,stages=3,fp16"),
        ("ops:wrapped", "BLOCK=256,FACTOR=2,warps=8,stages=3,fp16")]


def test_the_decorator_checks_its_fields_when_the_module_is_imported() -> None:
    import kgate

    def kernel(x):  # stands for a @triton.jit function
        return x

    with pytest.raises(ConfigError, match="kind: must be one of"):
        kgate.register(signature={"x": "*fp16"}, kind="gemv")(kernel)
    with pytest.raises(TypeError, match="takes no 'kernel'"):
        kgate.register(kernel="a:b", signature={})
    fn = kgate.register(signature={"x": "*fp16"}, kind="gemm")(kernel)
    assert fn is kernel and fn.__kgate__[0].kind == "gemm"


SPECIALISED = textwrap.dedent('''\
    import triton
    import triton.language as tl
    import kgate

    @kgate.register(args={"x": "*bf16", "out": "*bf16", "bias": None, "n": 4096, "stride": 1},
                    constexprs={"BLOCK": 1024, "DT": tl.bfloat16})
    @triton.jit
    def axpy(x, out, bias, n, stride, BLOCK: tl.constexpr, DT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x + offs * stride, mask=offs < n, other=0.0).to(tl.float32)
        if bias is not None:
            v += tl.load(bias + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.store(out + offs, v.to(DT), mask=offs < n)
''')

SPECIALISED_TABLES = '''
[[triton]]
kernel = "ops:axpy"
constexprs = { BLOCK = 1024, DT = "tl.float16" }
args = [
  { x = "*fp16", out = "*fp16", bias = "*fp16", n = 4097, stride = 2 },
  { x = { type = "*fp16", align = 8 }, out = "*fp16", bias = "None", n = 4096, stride = 1 },
]
'''


def test_example_arguments_are_specialised_by_tritons_launcher(tmp_path: Path) -> None:
    """A dtype constexpr, None, 1, sizes that are and are not multiples of 16, a misaligned pointer; the same
    kernel registered by decorator and by two tables of the configuration: every launch is its own row."""
    root = project(tmp_path / "specialised", SPECIALISED_TABLES, SPECIALISED)
    rows = {(r["constexprs"]["DT"], r["variant"]): r for r in kernels(root)}
    assert len(rows) == 3
    by_dtype: dict[str, list[dict]] = {}
    for (dtype, _variant), row in sorted(rows.items()):
        by_dtype.setdefault(dtype, []).append(row)
    (decorated,) = by_dtype["tl.bfloat16"]
    assert decorated["specialization"] == {"divisible_by_16": ["n", "out", "x"], "equal_to_1": ["stride"],
                                           "none": ["bias"]}
    assert decorated["signature"] == {"n": "i32", "out": "*bf16", "x": "*bf16"}
    specs = sorted((r["specialization"] for r in by_dtype["tl.float16"]), key=str)
    assert specs == [{"divisible_by_16": ["bias", "out", "x"], "equal_to_1": [], "none": []},
                     {"divisible_by_16": ["n", "out"], "equal_to_1": ["stride"], "none": ["bias"]}]
    assert all(r["source"] == "registered" for r in rows.values())


def test_do_not_specialize_is_honoured_because_the_binder_is_tritons(tmp_path: Path) -> None:
    source = KERNEL.format(imports="", decorators="").replace(
        "@triton.jit\n", '@triton.jit(do_not_specialize=["n"], do_not_specialize_on_alignment=["out"])\n')
    config = '''
[[triton]]
kernel = "ops:scale"
args = { x = "*fp16", out = "*fp16", n = 4096 }
constexprs = { BLOCK = 1024, FACTOR = 2 }
'''
    (row,) = kernels(project(tmp_path / "dns", config, source))
    assert row["specialization"]["divisible_by_16"] == ["x"]  # n and out were not specialised
    assert row["signature"] == {"n": "i32", "out": "*fp16", "x": "*fp16"}


def test_a_constexpr_the_specialisation_leaves_out_is_compiled_with_its_default() -> None:
    """Never as None: `DOUBLE: tl.constexpr = False` given to Triton as None fails in its code generator."""
    import triton
    import triton.language as tl

    from kgate.collect.specialization import Specialization
    from kgate.compile.triton_backend import KernelError, triton_inputs

    @triton.jit
    def kernel(x, bias, BLOCK: tl.constexpr, DOUBLE: tl.constexpr = False, SCALE: tl.constexpr = 1.5):
        pass

    spec = Specialization("ops:kernel", {"x": "*fp32"}, {"BLOCK": 64}, none=("bias",))
    signature, constants, _attrs = triton_inputs(kernel, spec)
    assert signature == {"x": "*fp32", "bias": "constexpr", "BLOCK": "constexpr", "DOUBLE": "constexpr",
                         "SCALE": "constexpr"}
    assert constants == {(1,): None, (2,): 64, (3,): False, (4,): 1.5}
    with pytest.raises(KernelError, match="'BLOCK' has no value"):
        triton_inputs(kernel, Specialization("ops:kernel", {"x": "*fp32"}, none=("bias",)))


def test_a_registration_is_built_only_for_the_targets_it_names(tmp_path: Path) -> None:
    """A kernel written for one architecture names it; on the run's other targets it is neither imported nor
    compiled, so it cannot fail there, and where it is built its failure is reported whatever the selection."""
    root = project(tmp_path / "targets", TABLE.replace('kind = "elementwise"\n', 'kind = "elementwise"\n'
                                                       'targets = ["sm_120a"]\n').replace(
        "variants = [{ BLOCK = 512, num_warps = 8 }]\n", "") + '''
[[triton]]
kernel = "hopper:kernel"
signature = { x = "*fp32" }
targets = ["sm_90a"]
''', KERNEL.format(imports="", decorators=""))
    (root / "kgate.toml").write_text((root / "kgate.toml").read_text().replace('["sm_120a"]', '["sm_120a", "sm_90a"]', 1))
    (root / "hopper.py").write_text('raise RuntimeError("built for sm_90a only")\n')
    run = kgate("check", "--format", "json", "--select", "KG1", "--target", "sm_120a", cwd=root)
    assert run.code == 0, run.stdout + run.stderr
    assert [(k["kernel"], k["target"]) for k in run.json()["kernels"]] == [("ops:scale", "sm_120a")]
    run = kgate("check", "--format", "json", "--select", "KG1", cwd=root)
    assert run.code == 1, run.stdout + run.stderr
    assert [(k["kernel"], k["target"]) for k in run.json()["kernels"]] == [("ops:scale", "sm_120a")]
    assert [(f["code"], f["kernel"]) for f in run.json()["findings"]] == [("KG001", "hopper:kernel")]


HEURISTICS = KERNEL.format(imports="", decorators="") + textwrap.dedent('''

    def covering(args):
        return triton.next_power_of_2(args["n"])


    class Entry(triton.KernelInterface):
        """A project's own launcher class around a kernel."""

        def __init__(self, fn):
            self.fn = fn
            self.arg_names = fn.arg_names

        def run(self, *args, **kwargs):
            return self.fn.run(*args, **kwargs)


    sized = triton.heuristics({"BLOCK": covering})(scale)
    tuned = triton.autotune(configs=[triton.Config({"FACTOR": 1}, num_warps=2), triton.Config({"FACTOR": 4})],
                            key=[])(triton.heuristics({"BLOCK": lambda args: 64 * args["FACTOR"]})(scale))
    entry = Entry(triton.heuristics({"BLOCK": covering})(scale))
    unknown = triton.heuristics({"BLOCK": lambda args: args["ROWS"]})(scale)
''')

HEURISTICS_TABLES = '''
[[triton]]
kernel = "ops:sized"
args = { x = "*fp16", out = "*fp16", n = 300 }
constexprs = { BLOCK = 64, FACTOR = 2 }

[[triton]]
kernel = "ops:tuned"
args = { x = "*fp16", out = "*fp16", n = 4096 }

[[triton]]
kernel = "ops:entry"
args = { x = "*fp16", out = "*fp16", n = 1000 }
constexprs = { FACTOR = 2 }

[[triton]]
kernel = "ops:unknown"
args = { x = "*fp16", out = "*fp16", n = 1000 }
constexprs = { FACTOR = 2 }
'''


def test_heuristics_compute_the_constexprs_that_are_compiled(tmp_path: Path) -> None:
    """`triton.heuristics` computes its values from the registration's example arguments, as in a launch: alone
    (overriding the registration's value), inside an autotuner (seeing each config's values) and under a
    project's own wrapper; a heuristic that reads what the registration does not give is one clear finding."""
    root = project(tmp_path / "heuristics", HEURISTICS_TABLES, HEURISTICS)
    run = kgate("check", "--format", "json", "--select", "KG001", cwd=root)
    assert run.code == 1, run.stdout + run.stderr
    report = run.json()
    assert sorted((k["kernel"], k["constexprs"]["BLOCK"], k["constexprs"]["FACTOR"], k["num_warps"])
                  for k in report["kernels"]) == [("ops:entry", 1024, 2, 4), ("ops:sized", 512, 2, 4),
                                                   ("ops:tuned", 64, 1, 2), ("ops:tuned", 256, 4, 4)]
    (finding,) = report["findings"]
    assert finding["kernel"] == "ops:unknown"
    assert "heuristic for BLOCK" in finding["message"] and "'ROWS'" in finding["message"], finding["message"]


def test_a_registration_names_a_triton_dtype_through_the_projects_own_import(tmp_path: Path) -> None:
    """`tu.tl.bfloat16` after `import engine.triton_utils as tu`, where that module imports Triton (with a stand-in
    for when it is missing), is the dtype `tl.bfloat16`, read from the source as `tl.bfloat16` is."""
    from kgate.collect.registry import decorator_entries

    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "triton_utils.py").write_text(
        "try:\n    import triton.language as tl\nexcept ImportError:\n    tl = None\n")
    ops = tmp_path / "engine" / "ops.py"
    ops.write_text(textwrap.dedent('''\
        import kgate
        import engine.triton_utils as tu
        from engine.triton_utils import tl


        @kgate.register(signature={"x": "*bf16"}, constexprs={"DT": tu.tl.bfloat16, "ACC": tl.float32})
        def scale(x, DT: tl.constexpr, ACC: tl.constexpr):
            pass
        '''))
    (entry,) = decorator_entries(ops, ops.read_bytes(), tmp_path, [tmp_path])
    assert entry.kernel == "engine.ops:scale"
    assert entry.constexprs == {"DT": "tl.bfloat16", "ACC": "tl.float32"}
