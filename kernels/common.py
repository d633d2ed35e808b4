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


def interpreter_runs_dot_scaled() -> bool:
    """Whether this Triton's CPU interpreter implements `tl.dot_scaled` (3.9 does; 3.6 does not)."""
    from triton.runtime.interpreter import InterpreterBuilder

    return hasattr(InterpreterBuilder, "create_dot_scaled")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
