"""The per-file parse index: one parse per changed file, remembered across runs."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from kgate.collect import pyindex, pysource
from kgate.collect.modules import kernel_source_key
from kgate.collect.static_kernel import static_expansion

SOURCE = '''import triton
import triton.language as tl

SCALE = 2.0


@triton.jit
def _helper(x):
    return x * SCALE


@triton.jit
def kernel(x, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x + o, _helper(tl.load(x + o, mask=o < n)), mask=o < n)


@triton.jit
def other(x, n, BLOCK: tl.constexpr = 128):
    o = tl.arange(0, BLOCK)
    tl.store(x + o, tl.dot_scaled(x, None, "bf16", x, None, "bf16"), mask=o < n)
'''


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    parsed: list[Path] = []
    real = pyindex.parse_module

    def parse(path: Path) -> pyindex.ModuleSummary:
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(pyindex, "parse_module", parse)
    monkeypatch.setattr(pyindex, "_INDEX", pyindex._Index())
    return parsed


def test_a_second_run_reads_the_index_instead_of_parsing(tmp_path: Path, counting: list[Path]) -> None:
    module = tmp_path / "mod.py"
    module.write_text(SOURCE)
    pyindex.use_cache(tmp_path / "cache")
    first = static_expansion(module, "kernel")
    pyindex.save()
    assert len(counting) == 1
    pyindex._INDEX = pyindex._Index()  # a new process
    pyindex.use_cache(tmp_path / "cache")
    assert static_expansion(module, "kernel") == first
    assert len(counting) == 1
    time.sleep(0.01)
    module.write_text(SOURCE.replace("2.0", "3.0"))
    static_expansion(module, "kernel")
    assert len(counting) == 2


def test_static_expansion_reads_parameters(tmp_path: Path, counting: list[Path]) -> None:
    module = tmp_path / "mod.py"
    module.write_text(SOURCE)
    kernel = static_expansion(module, "kernel")
    assert kernel is not None and kernel["line"] == 13
    assert [(p["name"], p["constexpr"], p["has_default"]) for p in kernel["params"]] == [
        ("x", False, False), ("n", False, False), ("BLOCK", True, False)]
    other = static_expansion(module, "other")
    assert other is not None and other["params"][2]["has_default"]


def test_kernel_keys_follow_what_each_kernel_uses(tmp_path: Path, counting: list[Path]) -> None:
    module = tmp_path / "mod.py"
    module.write_text(SOURCE)
    before = {name: kernel_source_key(module, name, [tmp_path], tmp_path) for name in ("kernel", "other")}
    module.write_text(SOURCE.replace("tl.dot_scaled(x, None", "tl.dot_scaled(x + 0, None"))
    after = {name: kernel_source_key(module, name, [tmp_path], tmp_path) for name in ("kernel", "other")}
    assert before["kernel"] == after["kernel"] and before["other"] != after["other"]
    module.write_text(SOURCE.replace("return x * SCALE", "return x * SCALE * 1.0"))
    helper_edit = kernel_source_key(module, "kernel", [tmp_path], tmp_path)
    assert helper_edit != before["kernel"]
    assert kernel_source_key(module, "other", [tmp_path], tmp_path) == before["other"]


def test_a_file_that_does_not_parse_still_has_a_key(tmp_path: Path, counting: list[Path]) -> None:
    module = tmp_path / "broken.py"
    module.write_text("def (:\n")
    assert static_expansion(module, "kernel") is None
    assert kernel_source_key(module, "kernel", [tmp_path], tmp_path)


PLAIN = '''import triton
import triton.language as tl
{imports}

{decorators}
def kernel(x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), 1.0)
{after}
'''


@pytest.mark.parametrize(("imports", "decorators", "after", "static"), [
    ("", "@triton.jit", "", True),
    ("from triton import jit", "@jit", "", True),
    ("import kgate", "@kgate.register(signature={'x': '*fp32'})\n@triton.jit", "", True),
    # What the module exports under the name is not the definition: only an import can tell what runs.
    ("", "@triton.jit", "kernel = triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=[])(kernel)", False),
    ("from tuning import tuned", "@tuned\n@triton.jit", "", False),
    ("", "@triton.heuristics({'BLOCK': lambda a: 64})\n@triton.jit", "", False),
    ("", "@triton.jit", "for kernel in [kernel]:\n    pass", False),
    ("", "@triton.jit", "def rebind():\n    global kernel\n    kernel = None", False),
    ("", "@triton.jit", "from tuned_kernels import *", False),
    ("import mylib", "@mylib.jit", "", False),  # a project's own `jit` is not Triton's
    # Gluon's jit makes a kernel the same launcher binds: plain too.
    ("from triton.experimental import gluon", "@gluon.jit", "", True),
    ("from triton.experimental.gluon import jit as gjit\nimport kgate", "@kgate.register(kind='other')\n@gjit", "",
     True),
    ("from triton.experimental import gluon", "@gluon.jit\n@triton.jit", "", False),
])
def test_only_a_provably_plain_jit_kernel_is_planned_from_source(
        tmp_path: Path, counting: list[Path], imports: str, decorators: str, after: str, static: bool) -> None:
    module = tmp_path / "mod.py"
    module.write_text(PLAIN.format(imports=imports, decorators=decorators, after=after))
    assert (static_expansion(module, "kernel") is not None) is static


ENGINE = {
    "engine/__init__.py": "from .triton_utils import *\n",
    "engine/triton_utils.py": "try:\n    import triton\nexcept ImportError:\n    triton = object()\n",
    "engine/utils.py": "from .triton_utils import triton\njit = triton.jit\n",
    "engine/stand_in.py": "class Recorder:\n    pass\ntriton = Recorder()\n",
    "engine/vendored.py": "import vendor_triton as triton\n",  # a Triton build under another distribution name
}
ENGINE_KERNEL = '''{imports}

{decorators}
def kernel(x, BLOCK: tl.constexpr):
    pass
'''


@pytest.mark.parametrize(("imports", "decorators", "static"), [
    ("from engine.triton_utils import triton", "@triton.jit", True),
    ("import engine.triton_utils as tu", "@tu.triton.jit", True),
    ("from .utils import jit", "@jit", True),
    ("from engine import triton", "@triton.jit", True),  # through the package's star import
    ("from .stand_in import triton", "@triton.jit", False),  # a module that only ever holds a stand-in
    ("from .vendored import triton", "@triton.jit", True),
    ("from engine.triton_utils import triton", "@triton.heuristics({'BLOCK': lambda a: 64})\n@triton.jit", False),
])
def test_a_kernel_that_reaches_triton_through_the_projects_module_is_planned_from_source(
        tmp_path: Path, counting: list[Path], imports: str, decorators: str, static: bool) -> None:
    for rel, text in ENGINE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    module = tmp_path / "engine" / "kernels.py"
    module.write_text(ENGINE_KERNEL.format(imports=imports, decorators=decorators))
    assert (static_expansion(module, "kernel", [tmp_path]) is not None) is static


def test_an_index_nested_too_deeply_to_read_is_an_empty_one(tmp_path: Path, counting: list[Path]) -> None:
    module = tmp_path / "mod.py"
    module.write_text(SOURCE)
    pyindex.use_cache(tmp_path / "cache")
    first = static_expansion(module, "kernel")
    pyindex.save()
    for index in (tmp_path / "cache").rglob("*.json"):
        index.write_text("[" * 100_000)  # RecursionError in json.loads, not ValueError
    pyindex._INDEX = pyindex._Index()  # a new process
    pyindex.use_cache(tmp_path / "cache")
    assert static_expansion(module, "kernel") == first
    assert len(counting) == 2  # parsed again


@pytest.mark.parametrize(("source", "resolved", "spelled"), [
    ("import triton.language as tl\ndef k(X: tl.constexpr): pass", True, True),
    ("from triton.language import constexpr as c\ndef k(X: c): pass", True, False),  # an alias only imports reveal
    ("import triton.language as tl\ndef k(X: 'tl.constexpr'): pass", True, False),  # a string annotation
    ("import numpy as tl\ndef k(X: tl.constexpr): pass", False, True),  # not Triton's, by the imports
    ("def k(X: my.not_constexpr): pass", False, True),  # the spelling test reads the name's end only
    ("def k(X: int): pass", False, False),
])
def test_two_constexpr_tests_one_by_imports_one_by_spelling(source: str, resolved: bool, spelled: bool) -> None:
    # The source rules follow the imports (pysource.is_constexpr); the planner's remembered parse reads the
    # spelling alone (pysource.spelled_constexpr): the two meanings stay apart, under their own names.
    tree = ast.parse(source)
    annotation = tree.body[-1].args.args[0].annotation
    assert pysource.is_constexpr(annotation, pysource.import_map(tree)) is resolved
    assert pysource.spelled_constexpr(annotation) is spelled
