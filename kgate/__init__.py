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
    from kgate.core.config import parse_triton_entry

    if "kernel" in fields:
        raise TypeError("kgate.register takes no 'kernel': it is the decorated function")

    def decorate(fn: F) -> F:
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "kernel")
        module = getattr(fn, "__module__", None) or "module"
        entry = parse_triton_entry({**fields, "kernel": f"{module}:{name}"}, f"kgate.register on {name}")
        registrations = list(getattr(fn, "__kgate__", ()))
        registrations.append(entry)
        try:
            setattr(fn, "__kgate__", tuple(registrations))  # noqa: B010 - fn is any decorated object
        except (AttributeError, TypeError):
            pass
        return fn

    return decorate
