"""Softmax precision against fp64, fp16 and bf16, forward and backward (rms-mode ULP).

Each kernel is judged on its own inputs: the backward reference uses the saved
(low-precision) y the kernel receives. Thresholds, as (mode, t) for the exact
GPU run (precision.py: what t means, and the interpreter's bf16 allowance):

- forward, y: elementwise 0.6. Every term is positive, so nothing cancels:
  a tiny probability is computed to fp32 relative precision (exp of x - max,
  then one division by the fp32 sum) and is held to its own ULP. A fast
  exp2 on the GPU adds about 2^-21 relative, far below a 16-bit ULP.
- backward, dx = y * (dy - sum(dy * y)): rms 0.6. The bracket cancels
  wherever dy is close to the row's weighted mean; fp32 throughout, one
  rounding.
"""

from __future__ import annotations

from typing import Any

import pytest

from .precision import DTYPES, check, randn
from .runner import Backend
from .softmax import softmax_backward, softmax_forward

SHAPES = ((29, 200), (5, 2000))  # the 1024-wide and the 4096-wide configuration
THRESHOLDS = {"y": ("elementwise", 0.6), "dx": ("rms", 0.6)}


@pytest.fixture(scope="module")
def runs(backend: Backend) -> dict[tuple[str, tuple[int, int]], Any]:
    cases = {(dtype, shape): {"x": randn(shape, dtype, 31), "dy": randn(shape, dtype, 32)}
             for dtype in DTYPES for shape in SHAPES}
    for key, out in zip(cases, backend.run([(softmax_forward, {"x": case["x"]}) for case in cases.values()])):
        cases[key].update(out)
    calls = [(softmax_backward, {"y": case["y"], "dy": case["dy"]}) for case in cases.values()]
    for key, out in zip(cases, backend.run(calls)):
        cases[key]["dx"] = out["dx"]
    return cases


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """fp64 softmax of x, and the fp64 backward from the y and dy the backward kernel was given."""
    import torch

    x, y, dy = (case[name].double() for name in ("x", "y", "dy"))
    return {"y": torch.softmax(x, dim=1), "dx": y * (dy - (y * dy).sum(dim=1, keepdim=True))}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str, shape: tuple[int, int]) -> None:
    case = runs[dtype, shape]
    check(ulp, backend, case["y"], reference(case)["y"], dtype, THRESHOLDS["y"],
          kernel="softmax", direction="forward", output="y")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward(runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str, shape: tuple[int, int]) -> None:
    case = runs[dtype, shape]
    check(ulp, backend, case["dx"], reference(case)["dx"], dtype, THRESHOLDS["dx"],
          kernel="softmax", direction="backward", output="dx")
