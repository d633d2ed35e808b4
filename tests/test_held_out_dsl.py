"""Held-out CuTe DSL registrations and Gluon kernels as a user writes them: bad registrations (a missing function or
module, dtypes, shapes and symbols, strides, alignments, arguments missing or extra, keys misspelt, a kernel of the
other front end), a module that fails to import, layouts written as calls of anything, and a change of the DSL's
release or its libraries. Each is a refusal that names the problem (exit 2), a KG001 that says why (exit 1), or a
gated kernel; never a run that gates nothing and passes, nor a traceback. Real compiles (the CuTe DSL, Triton)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import FIXTURES, kgate

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]')")

OPS = (FIXTURES / "cute" / "register_ops.txt").read_text(encoding="utf-8")
PLAIN = OPS.replace('@kgate.register(args={"a": F32, "c": F32}, kind="elementwise")\n', "").replace("import kgate\n", "")
HEAD = 'targets = ["sm_120a"]\npython-path = ["."]\n'
F = '{ dtype = "cutlass.Float32", shape = [4096] }'


def cute(args: str = f"{{ a = {F}, c = {F} }}", extra: str = "", kernel: str = "ops:double") -> str:
    return HEAD + f'\n[[cute]]\nkernel = "{kernel}"\n{extra}args = {args}\n'


def tensor(**fields: str) -> str:
    """`args` whose `a` is a tensor of these fields (TOML values) and `c` the plain one."""
    return "{ a = { " + ", ".join(f"{k} = {v}" for k, v in fields.items()) + f" }}, c = {F} }}"


FLOAT = '"cutlass.Float32"'

# (name, kgate.toml, ops.py, exit code, a piece of the refusal or of the KG001 message: None for a passing run)
CUTE = [
    ("missing-function", cute(kernel="ops:missing"), PLAIN, 1, "missing"),
    ("missing-module", cute(kernel="nomod:double"), PLAIN, 1, "nomod"),
    ("import-fails", cute(), PLAIN + "\nraise RuntimeError('boom at import')\n", 1, "boom at import"),
    ("dtype-unknown", cute(tensor(dtype='"cutlass.Float99"', shape="[4096]")), PLAIN, 1, "Float99"),
    ("dtype-plain", cute(tensor(dtype='"float32"', shape="[4096]")), PLAIN, 2, "args.a.dtype"),
    ("dtype-int", cute(tensor(dtype="5", shape="[4096]")), PLAIN, 2, "args.a.dtype"),
    ("shape-empty", cute(tensor(dtype=FLOAT, shape="[]")), PLAIN, 2, "args.a.shape"),
    ("symbol-divisible-0", cute(tensor(dtype=FLOAT, shape='["?:0"]', stride="[1]")), PLAIN, 2, "'?:0'"),
    ("symbol-divisible-negative", cute(tensor(dtype=FLOAT, shape='["?:-8"]', stride="[1]")), PLAIN, 2, "'?:-8'"),
    ("symbol-divisor-word", cute(tensor(dtype=FLOAT, shape='["?:x"]', stride="[1]")), PLAIN, 2, "'?:x'"),
    ("stride-longer", cute(tensor(dtype=FLOAT, shape="[4096]", stride="[1, 1]")), PLAIN, 2, "args.a.stride"),
    ("align-3", cute(tensor(dtype=FLOAT, shape="[4096]", align="3")), PLAIN, 2, "power of two"),
    ("align-0", cute(tensor(dtype=FLOAT, shape="[4096]", align="0")), PLAIN, 2, "power of two"),
    ("negative-dimension", cute(tensor(dtype=FLOAT, shape="[-1]")), PLAIN, 2, "-1 is not a dimension"),
    ("float-dimension", cute(tensor(dtype=FLOAT, shape="[4096.0]")), PLAIN, 2, "4096.0 is not a dimension"),
    ("argument-missing", cute(f"{{ a = {F} }}"), PLAIN, 1, "c"),
    ("argument-extra", cute(f"{{ a = {F}, c = {F}, z = {F} }}"), PLAIN, 1, "z"),
    ("args-empty-array", cute("[]"), PLAIN, 2, "args"),
    ("init-on-a-function", cute(extra="init = { N = 4 }\n"), PLAIN, 1, "init"),
    ("not-jit", cute(), PLAIN.replace("@cute.jit\n", ""), 1, "@cute.jit"),
    ("a-cute-kernel-not-its-jit", cute(kernel="ops:_add_kernel"), PLAIN, 1, "_add_kernel"),
    ("a-triton-key", cute(extra='signature = { a = "*fp32" }\n'), PLAIN, 2, "signature: unknown key"),
    ("tensor-key-misspelt", cute(tensor(dtyp=FLOAT, shape="[4096]")), PLAIN, 2, "args.a.dtyp: unknown key"),
    ("a-stream-for-a-tensor", cute(f'{{ a = "stream", c = {F} }}'), PLAIN, 1, None),
    ("kind-unknown", cute(extra='kind = "bogus"\n'), PLAIN, 2, "kind"),
    ("expects-block-scale", cute(extra='expect = ["block_scale"]\n'), PLAIN, 1, None),
    ("options-unknown", cute(extra='options = "--no-such-option"\n'), PLAIN, 1, "--no-such-option"),
    ("kernel-without-colon", cute(kernel="ops.double"), PLAIN, 2, "package.module:name"),
    ("symbolic-leading-dimension", cute(tensor(dtype=FLOAT, shape='["?", 4]')), PLAIN, 0, None),
    ("registered-twice", cute() + cute()[len(HEAD):], PLAIN, 2, "registered twice"),
]

GOPS = '''import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def copy_layout(src, dst, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    gl.store(dst + offsets, gl.load(src + offsets, mask=mask), mask=mask)
'''
LAYOUT = "gl.BlockedLayout(size_per_thread=[4], threads_per_warp=[32], warps_per_cta=[4], order=[0], cga_layout=[])"
SIGNATURE = '{ src = "*fp32", dst = "*fp32", n = "i32" }'


def gluon(layout: str = LAYOUT, block: int = 512, signature: str = SIGNATURE) -> str:
    constexprs = f"{{ BLOCK = {block}, layout = {layout!r} }}" if layout else f"{{ BLOCK = {block} }}"
    return HEAD + f'\n[[triton]]\nkernel = "gops:copy_layout"\nsignature = {signature}\nconstexprs = {constexprs}\n'


GLUON = [
    ("gluon-plain", gluon(), GOPS, 0, None),
    ("gluon-pointer-type-unknown", gluon(signature=SIGNATURE.replace('src = "*fp32"', 'src = "*fp99"')), GOPS, 1,
     "*fp99"),
    ("gluon-layout-a-python-call", gluon("__import__('os').system('touch PWNED')"), GOPS, 1, None),
    ("gluon-layout-a-builtin", gluon("builtins.print(1)"), GOPS, 1, None),
    ("gluon-layout-an-attribute-chain", gluon("gl.BlockedLayout.__init__.__globals__"), GOPS, 1, None),
    ("gluon-layout-field-unknown", gluon("gl.BlockedLayout(size_per_thread=[4], bogus=[1])"), GOPS, 1,
     "refused its fields"),
    ("gluon-layout-field-computed", gluon(LAYOUT.replace("[4]", "[len([1, 2, 3, 4])]", 1)), GOPS, 1, "layout"),
    ("gluon-layout-gl-function", gluon("gl.static_print(1)"), GOPS, 1, "layout"),
    ("gluon-layout-missing", gluon(""), GOPS, 1, "layout"),
    ("gluon-block-not-power-of-two", gluon(block=1000), GOPS, 1, "power of 2"),
    ("gluon-warps-other-than-launched", gluon(LAYOUT.replace("warps_per_cta=[4]", "warps_per_cta=[8]")), GOPS, 1,
     None),
    ("gluon-in-a-cute-table", HEAD + '\n[[cute]]\nkernel = "gops:copy_layout"\nargs = { src = ' + F + " }\n", GOPS,
     1, None),
    ("gluon-import-fails", gluon(), GOPS + "\nraise ImportError('no such backend')\n", 1, "no such backend"),
    ("gluon-signature-lacks", gluon(signature='{ src = "*fp32", dst = "*fp32" }'), GOPS, 1, "lacks n"),
    ("gluon-signature-extra", gluon(signature=SIGNATURE.replace("}", ', m = "i32" }')), GOPS, 1, "m"),
    ("cute-in-a-triton-table", HEAD + '\n[[triton]]\nkernel = "ops:double"\nsignature = { a = "*fp32", c = "*fp32" }\n',
     PLAIN, 1, "@triton.jit"),
]


@pytest.mark.parametrize("toml,ops,code,says", [case[1:] for case in CUTE + GLUON],
                         ids=[case[0] for case in CUTE + GLUON])
def test_a_registration_is_gated_or_refused_with_its_reason(tmp_path: Path, toml: str, ops: str, code: int,
                                                            says: str | None) -> None:
    (tmp_path / "kgate.toml").write_text(toml, encoding="utf-8")
    module = "gops.py" if "gops:" in toml else "ops.py"
    (tmp_path / module).write_text(ops, encoding="utf-8")
    run = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    assert run.code == code, run.stdout[-2000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stderr and not (tmp_path / "PWNED").exists()
    if code == 2:
        assert says in run.stderr
        return
    report = run.json()
    if code == 0:
        assert report["kernels"] and not report["findings"]
        return
    failures = [f["message"] for f in report["findings"] if f["code"] == "KG001"]
    assert failures or any(f["code"] == "KG101" for f in report["findings"])
    if says is not None:
        assert any(says in message for message in failures), failures


def fake_distribution(folder: Path, name: str, version: str) -> None:
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")


@pytest.mark.parametrize("name,version", [("nvidia-cutlass-dsl", "99.0.0"), ("nvidia-cutlass-dsl-libs-cu13", None)],
                         ids=["release", "libraries"])
def test_a_change_of_the_dsl_compiles_again(tmp_path: Path, name: str, version: str | None) -> None:
    """The DSL's release, or its libraries (the CUDA 13 ones beside the same release), as a distribution found first
    on the path: a warm run compiles again rather than serve the record of the DSL before."""
    from importlib import metadata

    project = tmp_path / "project"
    project.mkdir()
    (project / "kgate.toml").write_text(HEAD, encoding="utf-8")
    (project / "ops.py").write_text(OPS, encoding="utf-8")
    (tmp_path / "site").mkdir()  # on the path of every run: only what it holds changes
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    first = kgate("check", "-v", cwd=project, env=env, process=True)
    assert first.code == 0 and "1 compiled" in first.stdout, first.stdout + first.stderr
    assert "0 compiled, 1 from cache" in kgate("check", "-v", "--select", "KG103", cwd=project, env=env,
                                               process=True).stdout
    fake_distribution(tmp_path / "site", name, version or metadata.version("nvidia-cutlass-dsl"))
    again = kgate("check", "-v", "--select", "KG102", cwd=project, env=env, process=True)
    assert again.code == 0 and "1 compiled, 0 from cache" in again.stdout, again.stdout + again.stderr
