"""One test says whether a function is a gated Triton kernel (kgate.collect.pysource.is_kernel, `makes_kernel` for a
decorator's qualified name): Triton's jit, autotune and heuristics and Gluon's jit, through aliases and the project's
own re-export of Triton; a decorator that only looks like one (`@numba.jit`, `@my_jit`) makes no kernel."""

from __future__ import annotations

from pathlib import Path

from kgate.collect import pysource as py
from kgate.collect.modules import import_time_defs, kernel_source_key
from kgate.collect.pyindex import module_info
from kgate.collect.source import SourceFile

KERNELS = """
import numba
import triton
import triton as tr
from triton import jit as tjit
from triton.experimental import gluon
from pkg.triton_utils import triton as reexported
from .helpers import my_jit


@triton.jit
def plain(x):
    pass


@tr.jit(debug=True)
def aliased(x):
    pass


@tjit
def imported(x):
    pass


@triton.autotune(configs=[], key=[])
@triton.heuristics({"B": lambda args: 1})
@triton.jit
def tuned(x):
    pass


@triton.heuristics({"B": lambda args: 1})
def heuristics_only(x):
    pass


@gluon.jit
def gluon_kernel(x):
    pass


@reexported.jit
def through_the_project(x):
    pass


@numba.jit
def numba_function(x):
    pass


@my_jit
def own_jit(x):
    pass


def plain_function(x):
    pass
"""

UTILS = "import triton\nimport triton.language as tl\n"


def test_the_aliases_are_kernels_and_the_lookalikes_are_not(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "triton_utils.py").write_text(UTILS)
    path = tmp_path / "pkg" / "kernels.py"
    path.write_text(KERNELS)
    source = SourceFile(str(path), "pkg/kernels.py", path.read_bytes())
    info = py.info(source)
    verdicts = {fn.name: py.is_kernel(fn, info.imports) for fn in info.functions}
    assert verdicts == {"plain": True, "aliased": True, "imported": True, "tuned": True, "heuristics_only": True,
                        "gluon_kernel": True, "through_the_project": True, "numba_function": False,
                        "own_jit": False, "plain_function": False}


def test_a_decorator_by_its_qualified_name() -> None:
    assert all(py.makes_kernel(name) for name in ("triton.jit", "triton.runtime.jit.jit", "triton.autotune",
                                                   "triton.heuristics", "triton.experimental.gluon.jit"))
    assert not any(py.makes_kernel(name) for name in ("numba.jit", "jax.jit", "my_jit", "jit", "pkg.autotune",
                                                       "functools.cache", None))


MODULE = """
import numba
import triton
import triton.language as tl


@numba.jit
def table():
    return 4


@triton.jit
def launched_later():
    return 8


BLOCK = table()
OTHER = launched_later


@triton.jit
def kernel(x, B: tl.constexpr):
    pass
"""


def test_a_numba_function_run_at_import_is_part_of_the_kernels_key(tmp_path: Path) -> None:
    """Its body runs when the module is imported (`BLOCK = table()`): an edit to it must recompile the module's
    kernels. A Triton kernel's body runs only when it is compiled."""
    module = tmp_path / "mod.py"
    module.write_text(MODULE)
    assert import_time_defs(module_info(module), module, [tmp_path]) == {"table"}
    before = kernel_source_key(module, "kernel", [tmp_path], tmp_path)
    module.write_text(MODULE.replace("return 4", "return 16"))
    assert kernel_source_key(module, "kernel", [tmp_path], tmp_path) != before
    module.write_text(MODULE.replace("return 8", "return 32"))
    assert kernel_source_key(module, "kernel", [tmp_path], tmp_path) == before
