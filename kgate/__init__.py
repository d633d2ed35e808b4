"""kgate: gates GPU kernel repositories on what the compiler produced.

Importing kgate is cheap: it loads neither Triton nor torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__version__ = "0.1.0"
__all__ = ["__version__", "register"]

F = TypeVar("F")


def register(**fields: Any) -> Callable[[F], F]:
    """Register a `@triton.jit` or `@gluon.jit` (or autotuned) kernel with kgate.

    Takes the same fields as a `[[tool.kgate.triton]]` table, minus `kernel`:

        @kgate.register(signature={"x": "*fp16", "n": "i32"}, constexprs={"BLOCK": 1024},
                        kind="elementwise")
        @triton.jit
        def scale(x, n, BLOCK: tl.constexpr): ...

    kgate reads these arguments from the source without running it, so they
    must be literals. At import time they are validated and the kernel is
    returned unchanged.
    """
    from kgate.core.config import parse_cute_entry, parse_triton_entry
    from kgate.core.cute_dsl import decorator_kind

    if "kernel" in fields:
        raise TypeError("kgate.register takes no 'kernel': it is the decorated function")

    def decorate(fn: F) -> F:
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "kernel")
        module = getattr(fn, "__module__", None) or "module"
        where = f"kgate.register on {name}"
        if decorator_kind(fn) == "jit":  # a @cute.jit function: a CuTe DSL registration
            entry: Any = parse_cute_entry({**_cute_written(fields), "kernel": f"{module}:{name}"}, where)
        else:
            entry = parse_triton_entry({**fields, "kernel": f"{module}:{name}"}, where)
        registrations = list(getattr(fn, "__kgate__", ()))
        registrations.append(entry)
        try:
            setattr(fn, "__kgate__", tuple(registrations))  # noqa: B010 - fn is any decorated object
        except (AttributeError, TypeError):
            pass
        return fn

    return decorate


def _cute_written(value: Any) -> Any:
    """A CuTe DSL registration's values as kgate's files hold them: a dtype (`cutlass.BFloat16`) as its name."""
    if isinstance(value, dict):
        return {k: _cute_written(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cute_written(v) for v in value]
    if isinstance(value, type) and getattr(value, "__module__", "").startswith("cutlass"):
        return f"cutlass.{value.__name__}"
    return value
