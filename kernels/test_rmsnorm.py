"""RMSNorm precision against fp64, fp16 and bf16, forward and backward (rms-mode ULP).

Thresholds, as (mode, t) for the exact GPU run (precision.py: what t means, and
the interpreter's bf16 allowance):

- forward, y = x * rstd * w: elementwise 0.6. A product, not a sum: a small
  y is a small x, computed to fp32 relative precision like any other, so
  each element is held to its own ULP. fp32 reduction, rsqrt and products
  move y by about 2^-22 relative before the one rounding.
- backward, dx = rstd * dy * w - x * rstd^3 * mean(dy * w * x): rms 0.6. A
  difference of two terms of similar size: an element near zero is
  cancellation, so errors are judged at the tensor's scale. fp32 throughout,
  one rounding.
- backward, dw = sum over rows of dy * x * rstd: rms 0.6. A sum of
  mixed-sign terms (fp32 partial sums per program, summed in fp32 by the
  launcher, one rounding).
"""

from __future__ import annotations

from typing import Any

import pytest

from .precision import DTYPES, check, randn
from .rmsnorm import rmsnorm_backward, rmsnorm_forward
from .runner import Backend

# (37, 300) runs the 1024-wide configuration, (9, 1500) the 4096-wide one; neither is a power of two.
SHAPES = ((37, 300), (9, 1500))
EPS = 1e-6
THRESHOLDS = {"y": ("elementwise", 0.6), "dx": ("rms", 0.6), "dw": ("rms", 0.6)}


@pytest.fixture(scope="module")
def runs(backend: Backend) -> dict[tuple[str, tuple[int, int]], Any]:
    cases = {}
    calls = []
    for dtype in DTYPES:
        for shape in SHAPES:
            case = {"x": randn(shape, dtype, 21), "w": randn(shape[1:], dtype, 22, scale=0.5).add_(1.0),
                    "dy": randn(shape, dtype, 23)}
            cases[dtype, shape] = case
            calls.append((rmsnorm_forward, {"x": case["x"], "w": case["w"], "eps": EPS}))
    for (dtype, shape), out in zip(cases, backend.run(calls)):
        cases[dtype, shape].update(out)
    calls = [(rmsnorm_backward, {name: case[name] for name in ("x", "w", "dy", "rstd")}) for case in cases.values()]
    for key, out in zip(cases, backend.run(calls)):
        cases[key].update(out)
    return cases


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """fp64 RMSNorm and its gradients from the same low-precision inputs."""
    x, w, dy = (case[name].double() for name in ("x", "w", "dy"))
    r = (x.square().mean(dim=1, keepdim=True) + EPS).rsqrt()
    c = (dy * w * x).mean(dim=1, keepdim=True)
    return {"y": x * r * w, "dx": r * dy * w - x * r**3 * c, "dw": (dy * x * r).sum(dim=0)}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str, shape: tuple[int, int]) -> None:
    case = runs[dtype, shape]
    check(ulp, backend, case["y"], reference(case)["y"], dtype, THRESHOLDS["y"],
          kernel="rmsnorm", direction="forward", output="y")


@pytest.mark.parametrize("output", ["dx", "dw"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward(runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str, shape: tuple[int, int],
                  output: str) -> None:
    case = runs[dtype, shape]
    check(ulp, backend, case[output], reference(case)[output], dtype, THRESHOLDS[output],
          kernel="rmsnorm", direction="backward", output=output)
