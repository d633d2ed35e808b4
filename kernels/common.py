"""Launch-time helpers shared by the bundled kernels. Imports neither torch nor Triton."""

from __future__ import annotations

from typing import Any


def interpreted(kernel: Any) -> bool:
    """Whether `kernel` was decorated under Triton's CPU interpreter.

    The interpreter is chosen when a kernel is decorated, not when it runs, so
    the decorated object is the one reliable witness.
    """
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernel, InterpretedFunction)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
