"""GEMM precision against fp64, fp16 and bf16, forward and backward (rms-mode ULP).

Thresholds, as (mode, t) for the exact GPU run (precision.py: what t means, and
the interpreter's bf16 allowance):

- forward c = a @ b, backward da = dc @ b^T and db = a^T @ dc: rms 0.6 each.
  An output near zero is the cancellation of K products, so it is judged at
  the tensor's scale. bf16 and fp16 products are exact in fp32; the fp32
  accumulation over K = 200 errs by at most about K * 2^-24 relative to the
  sum of |products|, about 2^-16.5 of an output's typical size: under 0.01
  ULP of a 16-bit result. What is left is the one rounding of each element.
"""

from __future__ import annotations

from typing import Any

import pytest

from .gemm import matmul_backward, matmul_forward
from .precision import DTYPES, check, randn
from .runner import Backend

# Not multiples of the 128 x 128 x 64 tile: the M, N and K masks are all exercised, and the
# backward products contract over N = 136 and M = 150.
M, N, K = 150, 136, 200
THRESHOLDS = {"c": ("rms", 0.6), "da": ("rms", 0.6), "db": ("rms", 0.6)}


@pytest.fixture(scope="module")
def runs(backend: Backend) -> dict[str, Any]:
    cases = {dtype: {"a": randn((M, K), dtype, 41), "b": randn((K, N), dtype, 42), "dc": randn((M, N), dtype, 43)}
             for dtype in DTYPES}
    calls = []
    for case in cases.values():
        calls += [(matmul_forward, {"a": case["a"], "b": case["b"]}),
                  (matmul_backward, {"a": case["a"], "b": case["b"], "dc": case["dc"]})]
    outputs = backend.run(calls)
    for i, case in enumerate(cases.values()):
        case.update(outputs[2 * i])
        case.update(outputs[2 * i + 1])
    return cases


def reference(case: dict[str, Any]) -> dict[str, Any]:
    a, b, dc = (case[name].double() for name in ("a", "b", "dc"))
    return {"c": a @ b, "da": dc @ b.T, "db": a.T @ dc}


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(runs: dict[str, Any], backend: Backend, ulp: Any, dtype: str) -> None:
    check(ulp, backend, runs[dtype]["c"], reference(runs[dtype])["c"], dtype, THRESHOLDS["c"],
          kernel="gemm", direction="forward", output="c")


@pytest.mark.parametrize("output", ["da", "db"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward(runs: dict[str, Any], backend: Backend, ulp: Any, dtype: str, output: str) -> None:
    check(ulp, backend, runs[dtype][output], reference(runs[dtype])[output], dtype, THRESHOLDS[output],
          kernel="gemm", direction="backward", output=output)
