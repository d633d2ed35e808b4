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


def interpreter_incompatibility() -> str | None:
    """Why Triton's CPU interpreter cannot run these kernels in this environment, or None.

    Triton 3.6's interpreter turns a one-element array into a loop bound with `int()`, which NumPy 2.4
    refuses ("only 0-dimensional arrays can be converted to Python scalars"); Triton 3.7 and later do not.
    """
    import numpy
    import triton

    def release(text: str) -> tuple[int, ...]:
        return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in text.split(".")[:2])

    if release(triton.__version__) < (3, 7) and release(numpy.__version__) >= (2, 4):
        return (f"Triton {triton.__version__}'s interpreter cannot run a loop over a run-time bound with NumPy "
                f"{numpy.__version__} (it needs NumPy < 2.4, or Triton 3.7 or later); the precision tests run on "
                f"a GPU, or on the CPU with either")
    return None


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
