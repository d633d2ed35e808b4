"""SwiGLU precision against fp64, fp16 and bf16, forward and backward (elementwise ULP).

Thresholds, as (mode, t) for the exact GPU run (precision.py: what t means, and
the interpreter's bf16 allowance):

- forward, y: elementwise 0.6. fp32 arithmetic, then one rounding to the output: a
  correctly rounded result is 0.5; fp32 errors (and a fast exp on the GPU)
  move the pre-rounding value by about 2^-21 relative, far below a 16-bit
  ULP, so only a double rounding at a near-tie can go past 0.5.
- backward, db = dy * silu(a): elementwise 0.6, the same reasoning.
- backward, da = dy * b * silu'(a): elementwise 3. silu'(a) crosses zero at
  a = -1.2785; near it the fp32 evaluation of 1 + a(1 - s) keeps its
  absolute error while the result shrinks, so the relative error grows. At
  the fp16 input nearest the root (-1.27832, silu' = 3.1e-5) the fp32 formula
  is 3.1e-4 off relative to fp64 with an exact sigmoid, 5.2e-4 with the
  sigmoid 4 fp32 ULP off, 1.13e-3 at 8 ULP (a GPU's fast exp2 and division
  stay within that): at most 0.5 + 1.13e-3 * 2^11 = 2.82 ULP.
  `test_da_threshold_covers_every_fp16_input` recomputes that bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from .precision import DTYPES, check, randn
from .runner import Backend
from .swiglu import swiglu_backward, swiglu_forward

SHAPE = (48, 130)  # 6240 elements: not a multiple of the 1024-element block, so the mask is exercised
# (mode, t): see precision.py. Elementwise: no output of SwiGLU is a cancellation of larger terms.
THRESHOLDS = {"y": ("elementwise", 0.6), "da": ("elementwise", 3.0), "db": ("elementwise", 0.6)}


@pytest.fixture(scope="module")
def runs(backend: Backend) -> dict[str, Any]:
    cases = {dtype: {name: randn(SHAPE, dtype, seed) for seed, name in enumerate(("a", "b", "dy"), 11)}
             for dtype in DTYPES}
    calls = []
    for dtype in DTYPES:
        a, b, dy = cases[dtype]["a"], cases[dtype]["b"], cases[dtype]["dy"]
        calls += [(swiglu_forward, {"a": a, "b": b}), (swiglu_backward, {"a": a, "b": b, "dy": dy})]
    outputs = backend.run(calls)
    for i, dtype in enumerate(DTYPES):
        cases[dtype].update(outputs[2 * i])
        cases[dtype].update(outputs[2 * i + 1])
    return cases


def reference(case: dict[str, Any]) -> dict[str, Any]:
    """fp64 SwiGLU and its gradients from the same low-precision inputs."""
    import torch

    a, b, dy = (case[name].double() for name in ("a", "b", "dy"))
    s = torch.sigmoid(a)
    return {"y": a * s * b, "da": dy * b * s * (1 + a * (1 - s)), "db": dy * a * s}


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(runs: dict[str, Any], backend: Backend, ulp: Any, dtype: str) -> None:
    ref = reference(runs[dtype])
    check(ulp, backend, runs[dtype]["y"], ref["y"], dtype, THRESHOLDS["y"],
          kernel="swiglu", direction="forward", output="y")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("output", ["da", "db"])
def test_backward(runs: dict[str, Any], backend: Backend, ulp: Any, dtype: str, output: str) -> None:
    ref = reference(runs[dtype])
    check(ulp, backend, runs[dtype][output], ref[output], dtype, THRESHOLDS[output],
          kernel="swiglu", direction="backward", output=output)


def test_da_threshold_covers_every_fp16_input() -> None:
    """The da threshold bounds the fp32 formula at every fp16 input, with the sigmoid up to 8 fp32 ULP off."""
    import numpy as np

    a = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    a = a[np.isfinite(a) & (np.abs(a) <= 8)].astype(np.float32)
    a64 = a.astype(np.float64)
    s64 = 1 / (1 + np.exp(-a64))
    exact = s64 * (1 + a64 * (1 - s64))
    worst = 0.0
    for ulps in (-8, -4, -1, 0, 1, 4, 8):
        s = (s64 * (1 + ulps * 2.0**-24)).astype(np.float32)
        fp32 = s * (np.float32(1) + a * (np.float32(1) - s))
        worst = max(worst, float(np.max(np.abs(fp32 - exact) / np.abs(exact))))
    # A relative error e is at most e * 2^11 ULP of fp16 (11 bits of significand), plus the final rounding.
    bound = 0.5 + worst * 2**11
    assert 2.0 < bound <= THRESHOLDS["da"][1], bound
