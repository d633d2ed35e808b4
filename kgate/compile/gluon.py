"""Gluon kernels (`@gluon.jit`, `triton.experimental.gluon`): what differs in compiling them offline.

A Gluon kernel is launched through the same launcher as a Triton kernel (its `GluonJITFunction` is a
`JITFunction`), so it is captured, registered and specialised the same way. Its compile differs: the source is
Gluon's own class, which puts the layout attributes on the module before the front end runs, and its first IR is
Gluon's, not TTIR. A Gluon kernel often takes its layouts as constexprs: kgate's files hold one as the call that
makes it (`kgate.core.constexpr.gluon_call`), read back here. Runs in compile workers only (Triton is imported
when asked).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import math
import re
from typing import Any

from kgate.core.constexpr import GLUON

GLUON_SINCE = "3.4"  # the first Triton release with Gluon


def lacks_gluon(exc: BaseException) -> str | None:
    """What to say when a module cannot import Gluon because this Triton has none (a release before 3.4): the
    release and where Gluon begins, instead of Python's "No module named 'triton.experimental'"."""
    missing = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or missing not in (GLUON, GLUON.rsplit(".", 1)[0]):
        return None
    import triton

    version = getattr(triton, "__version__", "?")
    return (f"it uses Gluon ({GLUON}), which Triton {version} does not have (Gluon came with Triton {GLUON_SINCE}): "
            f"its Gluon kernels cannot be compiled with this Triton")


def is_gluon(fn: Any) -> bool:
    """Whether a JITFunction is a Gluon kernel, as its launcher tells (`GluonJITFunction.is_gluon`)."""
    asked = getattr(fn, "is_gluon", None)
    return bool(callable(asked) and asked())


def num_stages(fn: Any, launched: int | None) -> int | None:
    """The software pipeline's stages a compile of `fn` had: the launch's `num_stages` for a Triton kernel, none
    for a Gluon kernel, whose compile runs no pipeliner (its shared-memory buffers are the ones its source
    allocates): a budget is then never said in stages the option does not make."""
    return None if is_gluon(fn) else launched


def source_class(fn: Any) -> Any:
    """The class Triton's launcher compiles `fn` through: Gluon's `GluonASTSource` for a `@gluon.jit` kernel (its
    launcher's binder says so in every release with Gluon, 3.4 on), `ASTSource` for any other. A Gluon kernel
    compiled as Triton source fails in the parser: Gluon's ops need the layout attributes its source class puts
    on the module first."""
    if is_gluon(fn):
        from triton.experimental.gluon._runtime import GluonASTSource

        return GluonASTSource
    from triton.compiler import ASTSource

    return ASTSource


def first_ir(asm: dict[str, Any]) -> str:
    """The front end's first IR of a compile: Triton's TTIR, or Gluon's GLIR (a Gluon kernel has no TTIR: its
    source is lowered with its layouts, straight to TritonGPU; releases before 3.9 name that stage `ttgir` too, and
    their first is the module the front end made, kept as `source`)."""
    for stage in ("ttir", "glir", "source"):
        text = asm.get(stage)
        if isinstance(text, str) and text:
            return text
    return ""


# A tensor descriptor's type as Triton's launcher names it: "tensordesc<fp16[64, 128]>" (Triton's) or
# "tensordesc<fp16[64, 128],NVMMASharedLayout(swizzle_byte_width=128, ...)>" (Gluon's, with its shared layout).
_DESCRIPTOR = re.compile(r"tensordesc<(\w+)\[([0-9, ]+)\](?:,(.+))?>")


def is_descriptor(ty: str) -> bool:
    return ty.startswith("tensordesc<")


def example_descriptor(ty: str, dtype: Any, base: Any) -> Any:
    """A tensor descriptor Triton's launcher specialises as `ty`: Gluon's `TensorDescriptor` where the type names a
    shared layout, Triton's otherwise, over `base` (a stand-in tensor of `dtype`), its global shape the block's and
    its rows 16-byte aligned. ValueError where `ty` is not such a type."""
    found = _DESCRIPTOR.fullmatch(ty)
    if found is None:
        raise ValueError(f"{ty!r} is not a tensor descriptor type (\"tensordesc<fp16[64, 64]>\")")
    block = [int(size) for size in found.group(2).split(",")]
    element = _Element(dtype)
    row = 16 // math.gcd(16, element.itemsize)  # elements per 16 bytes
    strides: list[int] = []
    step = 1
    for size in reversed(block):
        strides.insert(0, step)
        step *= -(-size // row) * row
    if found.group(3) is None:
        from triton.tools.tensor_descriptor import TensorDescriptor

        return TensorDescriptor(base(element), list(block), strides, list(block))
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    return GluonDescriptor(base(element), list(block), strides, list(block), gluon_object("gl." + found.group(3)))


class _Element:
    """An element type as both descriptors read their base's: its name (`str`) and its size (`itemsize`)."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.itemsize = max(1, int(dtype.primitive_bitwidth) // 8)
        self.is_floating_point = bool(dtype.is_floating())

    def __str__(self) -> str:
        return str(self.dtype)


class NotGluon(ValueError):
    """A constexpr written as a Gluon call that does not make a Gluon object."""


def is_gluon_call(text: str) -> bool:
    """Whether a constexpr as kgate's files hold it is written as a Gluon object's call (`gl.BlockedLayout(...)`)."""
    return text.startswith(("gl.", GLUON + ".")) and text.endswith(")")


def gluon_object(text: str) -> Any:
    """The Gluon object a call written by `kgate.core.constexpr.gluon_call` makes. Read, never run: only Gluon's own
    dataclasses are called, with fields given by name, each a literal, a list, a tuple or another such call; anything
    else raises NotGluon."""
    try:
        node = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise NotGluon(f"{text!r} is not a call kgate can read") from None
    return _made(node)


def _made(node: ast.expr) -> Any:
    if isinstance(node, ast.Call):
        cls = _gluon_class(ast.unparse(node.func))
        if node.args or any(keyword.arg is None for keyword in node.keywords):
            raise NotGluon(f"{cls.__name__}'s fields are given by name")
        try:
            return cls(**{str(keyword.arg): _made(keyword.value) for keyword in node.keywords})
        except (TypeError, ValueError, AssertionError) as exc:
            raise NotGluon(f"{cls.__name__} refused its fields: {exc}") from None
    if isinstance(node, ast.List):
        return [_made(element) for element in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_made(element) for element in node.elts)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise NotGluon(f"`{ast.unparse(node)}` is not a literal") from None


def _gluon_class(name: str) -> Any:
    """The Gluon dataclass a written name stands for: `gl.Name` (Gluon's language module) or its module's path."""
    module, _, attr = (f"{GLUON}.language.{name[3:]}" if name.startswith("gl.") else name).rpartition(".")
    if not module.startswith(GLUON + "."):
        raise NotGluon(f"{name} is not Gluon's")
    try:
        cls = getattr(importlib.import_module(module), attr, None)
    except ImportError:
        cls = None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__.startswith(GLUON + ".")):
        raise NotGluon(f"{name} is not a layout or another dataclass of Gluon's")
    return cls
