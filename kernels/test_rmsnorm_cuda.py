"""The CUDA C++ RMSNorm (rmsnorm.cu) against fp64, fp16 and bf16, forward.

It is built with NVRTC for the GPU it runs on and launched through the driver
API; a CUDA C++ kernel has no CPU interpreter, so its precision runs on a GPU
only. Without one, the source is still compiled for both gated targets.

Threshold, as (mode, t) for the GPU run (precision.py: what t means):

- forward, y = x * rstd * w: elementwise 0.6, as for the Triton RMSNorm: a
  product, computed in fp32 (rsqrtf is within 2 fp32 ULP), rounded once by
  cvt.rn.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from .precision import DTYPES, check, randn
from .runner import Backend

SHAPE = (33, 1000)  # rows of 1000: four strided passes of 256 threads, the last one partial
EPS = 1e-6
THRESHOLDS = {"y": ("elementwise", 0.6)}


@pytest.mark.parametrize("arch", ["sm_120a", "sm_90a"])
def test_compiles_for_the_gated_targets(arch: str) -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs cuda-python (a kgate dependency)")
    from .cuda_rmsnorm import nvrtc_compile

    assert nvrtc_compile(arch)[:4] == b"\x7fELF"


def test_waits_before_the_first_global_load() -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs cuda-python (a kgate dependency)")
    from .cuda_rmsnorm import nvrtc_compile

    ptx = nvrtc_compile("compute_120a", ptx=True).decode()
    for entry in re.split(r"\.entry ", ptx)[1:]:
        wait, load = entry.find("griddepcontrol.wait"), entry.find("ld.global")
        assert 0 <= wait < load, entry.split("(", 1)[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward(backend: Backend, ulp: Any, dtype: str) -> None:
    if backend.interpreted:
        pytest.skip("a CUDA C++ kernel has no CPU interpreter: its precision is measured on a GPU")
    from .cuda_rmsnorm import rmsnorm_cuda_forward

    x, w = randn(SHAPE, dtype, 61), randn(SHAPE[1:], dtype, 62, scale=0.5).add_(1.0)
    (out,) = backend.run([(rmsnorm_cuda_forward, {"x": x, "w": w, "eps": EPS})])
    x64, w64 = x.double(), w.double()
    ref = x64 * (x64.square().mean(dim=1, keepdim=True) + EPS).rsqrt() * w64
    check(ulp, backend, out["y"], ref, dtype, THRESHOLDS["y"], kernel="rmsnorm_cuda", direction="forward",
          output="y")
