"""MXFP8 precision against fp64: the block-scaled GEMM (fp16 and bf16 outputs, forward and
backward) and the quantizer (e4m3 outputs from fp16 and bf16 inputs).

The GEMM is judged on its own inputs: operands quantized in torch
(`quantize_reference`), reference = fp64 product of the dequantized operands.
Thresholds, as (mode, t) for the exact GPU run (precision.py: what t means, and
the interpreter's bf16 allowance):

- forward c = A @ W^T, backward dA = dC @ W and dW = dC^T @ A (each operand
  requantized along the new reduction dimension): rms 0.6. e4m3 products
  with power-of-two scales are exact in fp32; the fp32 accumulation over
  at most K = 320 terms errs by well under 0.01 ULP of a 16-bit output, so
  what is left is the one rounding of each element.
- quantizer, q: elementwise 0.5 in e4m3. x / 2^s is exact in fp32 and the
  conversion to e4m3 is one round-to-nearest-even: exactly correct rounding.
  The scales must equal the reference's choice exactly.
"""

from __future__ import annotations

from typing import Any

import pytest
import triton

from .common import interpreter_runs_dot_scaled
from .mxfp8 import dequantize, mxfp8_matmul, mxfp8_quantize, quantize_reference, reference_scales
from .precision import DTYPES, check, randn
from .runner import Backend

# Multiples of 32 (one scale per 32 along every reduction dimension), not of the 128-wide tile:
# the forward's K tail, and the backward's reductions over N = 96 and M = 160, are all masked.
M, N, K = 160, 96, 320
THRESHOLDS = {"c": ("rms", 0.6), "da": ("rms", 0.6), "dw": ("rms", 0.6), "q": ("elementwise", 0.5)}
INTERPRETER_E4M3 = ("Triton's interpreter converts fp32 to e4m3 wrongly: ties round away from zero, and a "
                    "round-up that carries into the exponent is dropped (31.5 becomes 16, not 32); the e4m3 "
                    "values are checked on a GPU only")


def gemm_operands(dtype: str) -> dict[str, tuple[Any, Any]]:
    """(q, scale) pairs for the forward and both backward products, quantized along each reduction dimension."""
    a, w, dc = randn((M, K), dtype, 51), randn((N, K), dtype, 52), randn((M, N), dtype, 53)
    return {
        "c": (quantize_reference(a), quantize_reference(w)),
        "da": (quantize_reference(dc), quantize_reference(w.t().contiguous())),
        "dw": (quantize_reference(dc.t().contiguous()), quantize_reference(a.t().contiguous())),
    }


@pytest.fixture(scope="module")
def gemm_runs(backend: Backend) -> dict[Any, Any]:
    if backend.interpreted and not interpreter_runs_dot_scaled():
        pytest.skip(f"this Triton's interpreter (triton {triton.__version__}) has no tl.dot_scaled; "
                    f"Triton 3.9's has: the MXFP8 GEMM runs on a GPU only here")
    cases: dict[Any, Any] = {}
    calls = []
    for dtype in DTYPES:
        for output, ((qa, sa), (qb, sb)) in gemm_operands(dtype).items():
            cases[dtype, output] = {"a": (qa, sa), "b": (qb, sb)}
            calls.append((mxfp8_matmul, {"a": qa, "a_scale": sa, "b": qb, "b_scale": sb, "out_dtype": dtype}))
    for key, out in zip(cases, backend.run(calls)):
        cases[key].update(out)
    return cases


@pytest.fixture(scope="module")
def quantize_runs(backend: Backend) -> dict[str, Any]:
    cases = {dtype: {"x": randn((48, 320), dtype, 54, scale=3.0)} for dtype in DTYPES}
    for dtype, out in zip(DTYPES, backend.run([(mxfp8_quantize, case) for case in cases.values()])):
        cases[dtype].update(out)
    return cases


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(gemm_runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str) -> None:
    case = gemm_runs[dtype, "c"]
    ref = dequantize(*case["a"]) @ dequantize(*case["b"]).T
    check(ulp, backend, case["c"], ref, dtype, THRESHOLDS["c"], kernel="mxfp8_gemm", direction="forward",
          output="c")


@pytest.mark.parametrize("output", ["da", "dw"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward(gemm_runs: dict[Any, Any], backend: Backend, ulp: Any, dtype: str, output: str) -> None:
    case = gemm_runs[dtype, output]
    ref = dequantize(*case["a"]) @ dequantize(*case["b"]).T
    check(ulp, backend, case["c"], ref, dtype, THRESHOLDS[output], kernel="mxfp8_gemm", direction="backward",
          output=output)


@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_scales_are_exact(quantize_runs: dict[str, Any], dtype: str) -> None:
    case = quantize_runs[dtype]
    expected = (reference_scales(case["x"]) + 127).to(case["scale"].dtype)
    mismatch = (case["scale"] != expected).nonzero()
    assert mismatch.numel() == 0, f"scale {mismatch[0].tolist()}: got {case['scale'][tuple(mismatch[0])]}, " \
                                  f"expected {expected[tuple(mismatch[0])]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_values(quantize_runs: dict[str, Any], backend: Backend, ulp: Any, dtype: str) -> None:
    if backend.interpreted:
        pytest.skip(INTERPRETER_E4M3)
    import torch

    case = quantize_runs[dtype]
    s = reference_scales(case["x"]).double()
    ref = (case["x"].double().reshape(case["x"].shape[0], -1, 32) * torch.exp2(-s)[..., None]).reshape(case["x"].shape)
    check(ulp, backend, case["q"], ref, "e4m3", THRESHOLDS["q"], kernel="mxfp8_quantize", direction="forward",
          output=f"q<-{dtype}")
