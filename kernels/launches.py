"""Every launch of the bundled kernels at the shapes and dtypes of their precision tests, for `kgate capture`.

The repository's gate covers what these launchers really launch. On a machine without a GPU:

    kgate capture --replace -- python -m kernels.launches

Triton's launcher binds each launch for the configured target and nothing runs (the outputs are
never read). On a GPU the precision tests themselves can be captured instead:
`kgate capture -- python -m pytest kernels`. Under Triton's interpreter (how the tests run on a
CPU) there is no launcher to capture.
"""

from __future__ import annotations


def main() -> None:
    from . import test_gemm, test_mxfp8, test_rmsnorm, test_softmax, test_swiglu
    from .gemm import matmul_backward, matmul_forward
    from .mxfp8 import mxfp8_matmul, mxfp8_quantize
    from .precision import DTYPES, randn
    from .rmsnorm import rmsnorm_backward, rmsnorm_forward
    from .softmax import softmax_backward, softmax_forward
    from .swiglu import swiglu_backward, swiglu_forward

    for dtype in DTYPES:
        a, b = randn((test_gemm.M, test_gemm.K), dtype, 1), randn((test_gemm.K, test_gemm.N), dtype, 2)
        matmul_forward(a, b)
        matmul_backward(a, b, randn((test_gemm.M, test_gemm.N), dtype, 3))
        for (qa, sa), (qb, sb) in test_mxfp8.gemm_operands(dtype).values():
            mxfp8_matmul(qa, sa, qb, sb, out_dtype=dtype)
        mxfp8_quantize(randn((48, 320), dtype, 4))
        for shape in test_rmsnorm.SHAPES:
            x, w = randn(shape, dtype, 5), randn(shape[1:], dtype, 6)
            out = rmsnorm_forward(x, w)
            rmsnorm_backward(x, w, randn(shape, dtype, 7), out["rstd"])
        for shape in test_softmax.SHAPES:
            y = softmax_forward(randn(shape, dtype, 8))["y"]
            softmax_backward(y, randn(shape, dtype, 9))
        a, b = randn(test_swiglu.SHAPE, dtype, 10), randn(test_swiglu.SHAPE, dtype, 11)
        swiglu_forward(a, b)
        swiglu_backward(a, b, randn(test_swiglu.SHAPE, dtype, 12))


if __name__ == "__main__":
    main()
