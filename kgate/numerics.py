"""Precision in true ULP of the output format, against a high-precision reference.

`ulp_error(got, ref, dtype)` is the largest `|got - ref| / spacing(ref)`, where
`spacing(x)` is the gap between adjacent values of the OUTPUT format at `|x|`
(fp16: 10 mantissa bits, bf16: 7, fp8 e4m3: 3), floored at the format's
subnormal spacing (fp16 2^-24, bf16 2^-133, e4m3 2^-9).

What the numbers mean:

- **0.5 ULP**: correctly rounded. The result is the representable value
  nearest to the exact answer; no kernel can do better, since the output
  format cannot hold the exact answer.
- **1 ULP**: faithfully rounded. The result is one of the two representable
  values around the exact answer, possibly the farther one (one neighbour
  off). A kernel that truncates instead of rounding lands here.
- More: the kernel lost precision before the final rounding (a low-precision
  accumulator, a missing scale, catastrophic cancellation).

Two modes:

- `elementwise`: each element is judged at its own magnitude. Right for
  elementwise kernels, where every output is a value computed on its own.
- `rms`: one scale for the whole tensor, the spacing at `sqrt(mean(ref^2))`.
  Right for GEMMs and reductions: an output near zero there is the
  cancellation of large terms, and judging it at its own tiny magnitude
  reports thousands of ULP for a numerically perfect kernel.

Inputs are torch tensors (any device, any dtype) or anything numpy accepts.
Importing this module imports neither torch nor numpy; numpy is loaded on the
first call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MODES = ("elementwise", "rms")


@dataclass(frozen=True)
class Format:
    """A binary floating-point output format: what spacing() needs to know."""

    name: str
    mantissa_bits: int  # stored bits after the binary point
    min_exponent: int  # exponent of the smallest normal value
    max_exponent: int  # exponent of the largest finite value
    max_finite: float
    has_inf: bool

    @property
    def subnormal_spacing(self) -> float:
        return math.ldexp(1.0, self.min_exponent - self.mantissa_bits)


FORMATS = {
    "fp16": Format("fp16", 10, -14, 15, 65504.0, True),
    "bf16": Format("bf16", 7, -126, 127, float.fromhex("0x1.fep127"), True),
    # OCP e4m3 ("fn": no infinities, one NaN encoding), the element type of MXFP8.
    "e4m3": Format("e4m3", 3, -6, 8, 448.0, False),
}
_ALIASES = {
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "e4m3": "e4m3", "fp8e4m3": "e4m3", "fp8_e4m3": "e4m3", "float8_e4m3fn": "e4m3", "fp8e4nv": "e4m3",
}


class NonFiniteMismatch(ValueError):
    """A NaN or infinity in the result where the reference has none (or the reverse)."""

    def __init__(self, message: str, index: tuple[int, ...], got: float, ref: float) -> None:
        super().__init__(message)
        self.index = index
        self.got = got
        self.ref = ref


class UlpMismatch(AssertionError):
    """`assert_ulp` failed: the message names the worst element, its value, the reference and the ULP."""


@dataclass(frozen=True)
class UlpReport:
    """The worst element of a comparison."""

    ulp: float  # worst |got - ref| / spacing, in ULP of `dtype`
    index: tuple[int, ...]  # of the worst element
    got: float
    ref: float
    spacing: float  # one ULP where the worst element was judged
    dtype: str
    mode: str
    size: int  # elements compared

    def describe(self) -> str:
        where = "at the tensor's rms scale" if self.mode == "rms" else "at the reference"
        return (f"element {format_index(self.index)}: got {self.got!r}, reference {self.ref!r}, "
                f"{self.ulp:.4g} ULP of {self.dtype} (one ULP {where} = {self.spacing!r})")


def format_of(dtype: Any) -> Format:
    """The Format named by a string ("bf16", "float16", "e4m3", ...) or a torch/numpy dtype."""
    name = str(dtype).lower()
    name = name.split(".")[-1] if name.startswith("torch.") else name
    try:
        return FORMATS[_ALIASES[name]]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise ValueError(f"unsupported output dtype {dtype!r} (known: {known}, and their torch names)") from None


def spacing(values: Any, dtype: Any) -> np.ndarray:
    """The gap between adjacent `dtype` values at |values|, floored at the subnormal spacing."""
    import numpy as np

    fmt = format_of(dtype)
    magnitude = np.abs(np.asarray(values, dtype=np.float64))
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2**exponent, 0.5 <= m < 1
    binade = np.where(magnitude > 0, exponent.astype(np.int64) - 1, fmt.min_exponent)
    binade = np.clip(binade, fmt.min_exponent, fmt.max_exponent)
    return np.ldexp(1.0, binade - fmt.mantissa_bits)


def round_to(values: Any, dtype: Any) -> np.ndarray:
    """`values` correctly rounded (to nearest, ties to even) to `dtype`, returned as float64.

    The best any kernel can do: `ulp_error(round_to(ref, dtype), ref, dtype)`
    is the floor a test's threshold is measured against.
    """
    import numpy as np

    fmt = format_of(dtype)
    x = np.asarray(values, dtype=np.float64)
    step = spacing(x, fmt.name)
    with np.errstate(invalid="ignore"):
        rounded = np.round(x / step) * step  # exact scaling by a power of two; np.round ties to even
    overflow = np.abs(rounded) > fmt.max_finite
    if fmt.has_inf:
        return np.where(overflow, np.copysign(np.inf, x), rounded)
    return np.where(overflow, np.nan, rounded)


def ulp_report(got: Any, ref: Any, dtype: Any, mode: str = "elementwise") -> UlpReport:
    """The worst element of `got` against `ref`, in ULP of the output format `dtype`.

    Raises ValueError for different shapes (no broadcasting), empty tensors and
    unknown modes, and NonFiniteMismatch for a NaN or infinity that the
    reference does not have. Matching NaNs and matching infinities count as
    exact; an infinity where the reference overflows `dtype` is correct rounding.
    """
    import numpy as np

    fmt = format_of(dtype)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    g, r = _as_float64(got), _as_float64(ref)
    if g.shape != r.shape:
        raise ValueError(f"shape mismatch: got {tuple(g.shape)}, reference {tuple(r.shape)} (no broadcasting)")
    if g.size == 0:
        raise ValueError("cannot judge an empty tensor: a precision test must compare at least one element")
    _check_non_finite(g, r, fmt)
    finite = np.isfinite(r) & np.isfinite(g)
    if mode == "rms":
        scale = math.sqrt(float(np.mean(np.square(r[np.isfinite(r)])))) if np.isfinite(r).any() else 0.0
        step = np.full(r.shape, float(spacing(scale, fmt.name)))
    else:
        step = spacing(np.where(np.isfinite(r), r, 0.0), fmt.name)
    with np.errstate(invalid="ignore"):
        error = np.where(finite, np.abs(g - r) / step, 0.0)
    flat = int(np.argmax(error))
    index = tuple(int(i) for i in np.unravel_index(flat, r.shape))
    return UlpReport(float(error.flat[flat]), index, float(g.flat[flat]), float(r.flat[flat]),
                     float(step.flat[flat]), fmt.name, mode, int(r.size))


def ulp_error(got: Any, ref: Any, dtype: Any, mode: str = "elementwise") -> float:
    """The largest error of `got` against `ref` in true ULP of the output dtype (see module docs)."""
    return ulp_report(got, ref, dtype, mode).ulp


def neighbour_ulp(ref: Any, dtype: Any, mode: str = "elementwise") -> float:
    """What a result one neighbour off at every element scores in `mode`.

    1 in elementwise mode. In rms mode it is one ULP of the largest element in
    units of the rms spacing: the allowance that "one more ULP per element"
    (a truncating conversion instead of a rounding one) is worth there.
    """
    import numpy as np

    r = _as_float64(ref)
    r = r[np.isfinite(r)]
    if r.size == 0 or mode == "elementwise":
        return 1.0
    scale = math.sqrt(float(np.mean(np.square(r))))
    return float(np.max(spacing(r, dtype)) / spacing(scale, dtype))


def rounding_floor(ref: Any, dtype: Any, mode: str = "elementwise") -> float:
    """The score of the correctly rounded reference: what a perfect kernel gets."""
    return ulp_error(round_to(_as_float64(ref), dtype), ref, dtype, mode)


def assert_ulp(got: Any, ref: Any, dtype: Any, max_ulp: float, mode: str = "elementwise") -> UlpReport:
    """Fail with UlpMismatch naming the worst element unless every error is within `max_ulp`.

    Returns the report when it passes, so a test can print or record it.
    """
    __tracebackhide__ = True  # pytest: report the failure at the caller's line
    try:
        report = ulp_report(got, ref, dtype, mode)
    except NonFiniteMismatch as exc:
        raise UlpMismatch(f"ULP check ({format_of(dtype).name}, {mode}): {exc}") from None
    if report.ulp <= max_ulp:
        return report
    over = _count_over(_as_float64(got), _as_float64(ref), report, max_ulp)
    raise UlpMismatch(
        f"ULP check ({report.dtype}, {mode}) failed: {report.ulp:.4g} ULP > {max_ulp:g} allowed; "
        f"{over} of {report.size} element(s) over; worst {report.describe()}"
    )


# --------------------------------------------------------------------------- helpers


def format_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def _as_float64(value: Any) -> np.ndarray:
    """A float64 numpy copy of a torch tensor (any device, any float dtype) or an array-like."""
    import numpy as np

    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def _check_non_finite(got: np.ndarray, ref: np.ndarray, fmt: Format) -> None:
    import numpy as np

    bad = ~(np.isfinite(got) & np.isfinite(ref))
    if not bad.any():
        return
    # Round to nearest gives an infinity from half a top-binade ULP above the largest finite value.
    overflow = fmt.max_finite + math.ldexp(1.0, fmt.max_exponent - fmt.mantissa_bits - 1)
    for flat in np.flatnonzero(bad):
        g, r = float(got.flat[flat]), float(ref.flat[flat])
        index = tuple(int(i) for i in np.unravel_index(int(flat), ref.shape))
        where = f"element {format_index(index)}"
        if math.isnan(r) and math.isnan(g):
            continue
        if math.isinf(r) and g == r:
            continue
        if math.isinf(g) and math.isfinite(r) and fmt.has_inf and abs(r) >= overflow \
                and math.copysign(1.0, r) == math.copysign(1.0, g):
            continue  # correctly rounded overflow
        if math.isnan(g):
            raise NonFiniteMismatch(f"{where}: got nan where the reference is {r!r}", index, g, r)
        if math.isnan(r):
            raise NonFiniteMismatch(f"{where}: got {g!r} where the reference is nan", index, g, r)
        if math.isinf(g):
            raise NonFiniteMismatch(f"{where}: got {g!r} where the reference is {r!r} "
                                    f"({fmt.name} overflows only at |x| >= {overflow!r})", index, g, r)
        raise NonFiniteMismatch(f"{where}: got {g!r} where the reference is {r!r}", index, g, r)


def _count_over(got: np.ndarray, ref: np.ndarray, report: UlpReport, max_ulp: float) -> int:
    import numpy as np

    if report.mode == "rms":
        step = np.full(ref.shape, report.spacing)
    else:
        step = spacing(np.where(np.isfinite(ref), ref, 0.0), report.dtype)
    with np.errstate(invalid="ignore"):
        error = np.where(np.isfinite(ref) & np.isfinite(got), np.abs(got - ref) / step, 0.0)
    return int(np.count_nonzero(error > max_ulp))
