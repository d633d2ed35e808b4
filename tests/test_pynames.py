"""What a name stands for through a project's own modules (kgate.collect.pynames): the one answer the source rules
(`pysource.qualified`, `pysource.kernel_decorator`) and the planner's static expansion read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgate.collect import depends, pyindex
from kgate.collect.pynames import Resolver

TRY_IMPORT = """\
try:
    import triton
    import triton.language as tl
except ImportError:
    class _Stand:
        pass
    triton = _Stand()
    tl = _Stand()
"""
IF_INSTALLED = """\
from .importing import HAS_TRITON

if HAS_TRITON:
    import triton
    from triton import language as tl
else:
    triton = None
    tl = None
"""

RENAMED = """\
import vendor_triton as triton
import vendor_triton.experimental.gluon.language as gl
from vendor_triton import language as tl
from vendor_triton.runtime import autotune
"""


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture(autouse=True)
def fresh_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyindex, "_INDEX", pyindex._Index())


def qualify(root: Path, module: str, dotted: str) -> str | None:
    return Resolver([str(root)]).qualify(str(root / module), dotted)


@pytest.mark.parametrize(("files", "dotted", "expected"), [
    # The stand-in of a failed import, in an `except ImportError` or an `else`, is not what the name is.
    ({"pkg/tu.py": TRY_IMPORT, "pkg/k.py": "from pkg.tu import tl, triton\n"}, "triton.jit", "triton.jit"),
    ({"pkg/tu.py": TRY_IMPORT, "pkg/k.py": "from pkg.tu import tl, triton\n"}, "tl.constexpr",
     "triton.language.constexpr"),
    ({"pkg/tu.py": IF_INSTALLED, "pkg/importing.py": "HAS_TRITON = True\n", "pkg/k.py": "from .tu import tl\n"},
     "tl.constexpr", "triton.language.constexpr"),
    # Through a module bound by `import ... as`, by `import a.b`, by `from . import`.
    ({"pkg/tu.py": TRY_IMPORT, "pkg/k.py": "import pkg.tu as tu\n"}, "tu.triton.jit", "triton.jit"),
    ({"pkg/__init__.py": "", "pkg/tu.py": TRY_IMPORT, "pkg/k.py": "import pkg.tu\n"}, "pkg.tu.triton.jit",
     "triton.jit"),
    ({"pkg/__init__.py": "", "pkg/tu.py": TRY_IMPORT, "pkg/k.py": "from . import tu as t\n"}, "t.tl.load",
     "triton.language.load"),
    # Aliases in the re-exporting module, and a package that passes names on with a star import.
    ({"pkg/tu.py": TRY_IMPORT, "pkg/utils.py": "from .tu import triton\njit = triton.jit\n",
      "pkg/k.py": "from .utils import jit\n"}, "jit", "triton.jit"),
    ({"pkg/__init__.py": "from .tu import *\n", "pkg/tu.py": TRY_IMPORT, "k.py": "from pkg import triton\n"},
     "triton.autotune", "triton.autotune"),
    # `__all__` decides what the star passes on (a name it does not pass on keeps the spelling of its import).
    ({"pkg/__init__.py": "from .tu import *\n", "pkg/tu.py": TRY_IMPORT + "__all__ = ['tl']\n",
      "k.py": "from pkg import triton\n"}, "triton.jit", "pkg.triton.jit"),
    ({"pkg/__init__.py": "from .tu import *\n", "pkg/tu.py": TRY_IMPORT + "__all__ = ['tl']\n",
      "k.py": "from pkg import tl\n"}, "tl.constexpr", "triton.language.constexpr"),
    # What the project binds itself is not Triton's: a wrapper bound last, a module of stand-ins only.
    ({"pkg/tu.py": TRY_IMPORT + "triton = _Stand()\n", "pkg/k.py": "from .tu import triton\n"}, "triton.jit", None),
    ({"pkg/tu.py": "class R:\n    pass\ntriton = R()\n", "pkg/k.py": "from .tu import triton\n"}, "triton.jit",
     None),
    ({"pkg/tu.py": "def jit(fn):\n    return fn\n", "pkg/k.py": "from .tu import jit\n"}, "jit", None),
    # Two modules that import a name from each other lead nowhere, and end.
    ({"pkg/a.py": "from .b import jit\n", "pkg/b.py": "from .a import jit\n", "pkg/k.py": "from .a import jit\n"},
     "jit", None),
    # A module outside the project keeps the name its import spells.
    ({"k.py": "import triton.language as tl\n"}, "tl.dot", "triton.language.dot"),
    # A Triton distribution under another name, bound as `triton` where the project imports it: its names are
    # Triton's, in that module and in those that take them from it; a module that never binds it so keeps its name.
    ({"pkg/tu.py": RENAMED, "pkg/k.py": "from pkg.tu import tl, triton\n"}, "triton.jit", "triton.jit"),
    ({"pkg/tu.py": RENAMED, "pkg/k.py": "from pkg.tu import tl, triton\n"}, "tl.constexpr",
     "triton.language.constexpr"),
    ({"pkg/tu.py": RENAMED, "pkg/k.py": "from pkg.tu import gl\n"}, "gl.constexpr",
     "triton.experimental.gluon.language.constexpr"),
    ({"pkg/tu.py": RENAMED, "pkg/k.py": "import pkg.tu as tu\n"}, "tu.autotune", "triton.runtime.autotune"),
    ({"k.py": RENAMED}, "triton.jit", "triton.jit"),
    ({"k.py": "import vendor_triton\nfrom vendor_triton import language as tl\n"}, "tl.constexpr",
     "vendor_triton.language.constexpr"),
    ({"k.py": "import vendor_triton as tr\n"}, "tr.jit", "vendor_triton.jit"),
])
def test_a_name_is_followed_through_the_projects_modules(tmp_path: Path, files: dict[str, str], dotted: str,
                                                         expected: str | None) -> None:
    write(tmp_path, files)
    module = next(rel for rel in files if rel.endswith("k.py"))
    assert qualify(tmp_path, module, dotted) == expected


def test_a_subpackage_named_like_triton_is_not_triton(tmp_path: Path) -> None:
    """`import triton` in a package that has a `triton` subpackage (fla/modules/conv/triton/) is Triton: absolute
    imports are found from the package root, never beside the importing module."""
    write(tmp_path, {"fla/__init__.py": "", "fla/conv/__init__.py": "", "fla/conv/triton/__init__.py": "jit = 1\n",
                     "fla/conv/triton/ops.py": "import triton\n", "fla/conv/ops.py": "import triton\n"})
    assert qualify(tmp_path, "fla/conv/triton/ops.py", "triton.jit") == "triton.jit"
    assert qualify(tmp_path, "fla/conv/ops.py", "triton.jit") == "triton.jit"


def test_the_modules_read_are_noted(tmp_path: Path) -> None:
    """What a question read of the project's modules (their top-level bindings) is noted as a verdict's reads."""
    write(tmp_path, {"pkg/tu.py": TRY_IMPORT, "pkg/k.py": "from .tu import triton\nimport os\n"})
    resolver = Resolver([str(tmp_path)])

    def exports_read(dotted: str) -> tuple[str | None, set[str]]:
        with depends.collecting() as reads:
            found = resolver.qualify(str(tmp_path / "pkg/k.py"), dotted)
        return found, {key[len(depends.EXPORTS):] for key in reads if key.startswith(depends.EXPORTS)}

    assert exports_read("os.path") == ("os.path", {str(tmp_path / "pkg/k.py")})
    assert exports_read("triton.jit") == ("triton.jit", {str(tmp_path / "pkg/k.py"), str(tmp_path / "pkg/tu.py")})


def test_a_name_is_followed_to_the_project_definition_it_stands_for(tmp_path: Path) -> None:
    """`definition` answers where `qualify` has nothing to say: the module and name of the project's own definition,
    through relative and absolute imports, aliases, re-exports and module attributes; None for a name outside."""
    write(tmp_path, {
        "pkg/__init__.py": "from .kernels import fwd as exported\n",
        "pkg/kernels.py": "import triton\n\n@triton.jit\ndef fwd(x):\n    pass\n\nalias = fwd\n",
        "pkg/ops.py": "import triton\nfrom . import kernels\nfrom .kernels import fwd as f, alias\n"
                      "from pkg import exported\n",
    })
    resolver = Resolver([str(tmp_path)])
    ops, kernels = str(tmp_path / "pkg/ops.py"), str(tmp_path / "pkg/kernels.py")
    assert resolver.definition(ops, "f") == (kernels, "fwd")
    assert resolver.definition(ops, "kernels.fwd") == (kernels, "fwd")
    assert resolver.definition(ops, "alias") == (kernels, "fwd")
    assert resolver.definition(ops, "exported") == (kernels, "fwd")
    assert resolver.definition(ops, "triton.jit") is None and resolver.definition(ops, "kernels") is None
    # `qualify` and `target` still say nothing of the project's own definitions.
    assert resolver.qualify(ops, "f") is None and resolver.target(ops, "f") is None


def test_an_absolute_import_of_the_importers_own_package_is_found_past_a_namespace_package(tmp_path: Path) -> None:
    """`sglang.srt.lora.ops` imported from inside python/sglang/srt/, where srt/ has no `__init__.py` (a namespace
    package): the package root of the importer is below it, the folder that holds `sglang` is python/."""
    write(tmp_path, {"python/sglang/__init__.py": "", "python/sglang/srt/lora/__init__.py": "",
                     "python/sglang/srt/lora/ops.py": "def expand(x):\n    pass\n",
                     "python/sglang/srt/lora/runner.py": "from sglang.srt.lora.ops import expand\n",
                     "scripts/use.py": "from sglang.srt.lora.ops import expand\n"})
    resolver = Resolver([str(tmp_path)])
    ops = str(tmp_path / "python/sglang/srt/lora/ops.py")
    assert resolver.definition(str(tmp_path / "python/sglang/srt/lora/runner.py"), "expand") == (ops, "expand")
    # A module outside the package is not helped: neither its folder nor the roots hold `sglang`.
    assert resolver.definition(str(tmp_path / "scripts/use.py"), "expand") is None
