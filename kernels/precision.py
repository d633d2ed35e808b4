"""What the precision tests share: dtypes, inputs, and how a threshold becomes a limit.

A threshold is written per output as (mode, t):

- elementwise: every element within t ULP at its own magnitude.
- rms: every error within t ULP of the LARGEST element's magnitude,
  reported on the rms scale. A kernel that rounds each element correctly
  scores up to 0.5 ULP at that element's magnitude, which is up to 0.5 x 2^k
  ULP at the rms scale when the largest elements are 2^k times the rms; so
  the limit in rms units is t x 2^k (`neighbour_ulp`), read from the
  reference. t = 0.6 then says: as good as correct rounding of every
  element, with a tenth of a ULP for fp32 arithmetic.

Every t is for the exact (GPU) run. Under Triton's CPU interpreter one ULP
per element is added for bf16 outputs, and the record says so: the
interpreter converts fp32 to bf16 by truncation instead of rounding to
nearest even, so a result can land on the other neighbour of the exact
value. fp16 conversion is exact under the interpreter; its limits are the
same everywhere.
"""

from __future__ import annotations

from typing import Any

from kgate.numerics import format_of, neighbour_ulp

from .runner import Backend

DTYPES = ("fp16", "bf16")
INTERPRETER_BF16 = "interpreter: fp32->bf16 truncates instead of rounding, +1 ULP per element allowed"


def torch_dtype(name: str) -> Any:
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}[name]


def randn(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0) -> Any:
    """Deterministic normal inputs in `dtype` (generated in fp32 on the CPU)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen) * scale).to(torch_dtype(dtype))


def limit(backend: Backend, ref: Any, dtype: str, mode: str, t: float) -> tuple[float, str]:
    """(the largest error allowed, in `mode`'s units; why it was widened, or "")."""
    reason = ""
    if backend.interpreted and format_of(dtype).name == "bf16":
        t, reason = t + 1.0, INTERPRETER_BF16
    return t * neighbour_ulp(ref, dtype, mode), reason


def check(ulp: Any, backend: Backend, got: Any, ref: Any, dtype: str, threshold: tuple[str, float], *,
          kernel: str, direction: str, output: str) -> float:
    """Assert and record one output against its (mode, t) threshold."""
    mode, t = threshold
    max_ulp, reason = limit(backend, ref, dtype, mode, t)
    result: float = ulp(got, ref, dtype, max_ulp, mode=mode, kernel=kernel, direction=direction, output=output,
                        where=backend.where, reason=reason)
    return result
