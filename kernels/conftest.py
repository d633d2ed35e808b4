"""Fixtures of the bundled kernels' precision tests (the `ulp` fixture comes from kgate's pytest plugin)."""

from __future__ import annotations

import os

import pytest

from .common import interpreter_incompatibility
from .runner import DEVICE_ENV, Backend, backend_for


@pytest.fixture(scope="session")
def backend() -> Backend:
    """A GPU when torch sees one (or `KGATE_ULP_DEVICE=gpu`), else Triton's interpreter in a child process."""
    pytest.importorskip("torch", reason="the precision tests need torch (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")
    try:
        chosen = backend_for(os.environ.get(DEVICE_ENV, "auto"))
    except (RuntimeError, ValueError) as exc:
        pytest.fail(str(exc), pytrace=False)
    problem = interpreter_incompatibility() if chosen.interpreted else None
    if problem:
        pytest.skip(problem)
    return chosen
