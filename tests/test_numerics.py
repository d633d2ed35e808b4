"""kgate.numerics: true ULP of the output format, with hand-computed values."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from kgate.numerics import (
    NonFiniteMismatch,
    UlpMismatch,
    assert_ulp,
    format_of,
    neighbour_ulp,
    round_to,
    rounding_floor,
    spacing,
    ulp_error,
    ulp_report,
)

torch = pytest.importorskip("torch")


# ----------------------------------------------------------------------------- spacing


@pytest.mark.parametrize(("dtype", "value", "expected"), [
    ("fp16", 1.0, 2.0**-10), ("fp16", 1.999, 2.0**-10), ("fp16", 2.0, 2.0**-9), ("fp16", -3.0, 2.0**-9),
    ("fp16", 65504.0, 32.0), ("fp16", 2.0**-14, 2.0**-24), ("fp16", 2.0**-20, 2.0**-24), ("fp16", 0.0, 2.0**-24),
    ("bf16", 1.0, 2.0**-7), ("bf16", 300.0, 2.0), ("bf16", 2.0**-126, 2.0**-133), ("bf16", 1e-40, 2.0**-133),
    ("e4m3", 1.0, 0.125), ("e4m3", 448.0, 32.0), ("e4m3", 2.0**-6, 2.0**-9), ("e4m3", 2.0**-8, 2.0**-9),
])
def test_spacing_is_the_gap_of_the_output_format(dtype: str, value: float, expected: float) -> None:
    assert float(spacing(value, dtype)) == expected


def test_dtype_names_and_torch_dtypes() -> None:
    assert format_of(torch.float16).name == format_of("half").name == "fp16"
    assert format_of(torch.bfloat16).name == format_of("bfloat16").name == "bf16"
    assert format_of(torch.float8_e4m3fn).name == format_of("fp8e4nv").name == "e4m3"
    with pytest.raises(ValueError, match="unsupported output dtype"):
        format_of(torch.float32)


# ----------------------------------------------------------------------------- elementwise


@pytest.mark.parametrize(("dtype", "ref", "got", "ulps"), [
    ("fp16", 1.0, 1.0 + 2.0**-10, 1.0),  # the next fp16 after 1
    ("fp16", 1.0, 1.0 + 2.0**-11, 0.5),  # half way: what correct rounding can cost
    ("fp16", 1.0, 1.0 - 2.0**-11, 0.5),  # just below 1 the gap halves, but the reference's binade decides
    ("fp16", 1000.0, 1000.5, 1.0),  # [512, 1024): spacing 2^-1
    ("bf16", 1.0, 1.0 + 2.0**-7, 1.0),
    ("bf16", -256.0, -258.0, 1.0),  # [256, 512): spacing 2
    ("e4m3", 1.0, 1.125, 1.0),
    ("e4m3", 448.0, 416.0, 1.0),  # top binade of e4m3: spacing 32
])
def test_elementwise_ulp_by_hand(dtype: str, ref: float, got: float, ulps: float) -> None:
    assert ulp_error(np.array([got]), np.array([ref]), dtype) == ulps


@pytest.mark.parametrize(("dtype", "ref", "got", "ulps"), [
    ("fp16", 2.0**-24, 0.0, 1.0),  # the smallest subnormal, flushed to zero: one ULP
    ("fp16", 0.0, 2.0**-24, 1.0),  # an exact zero judged at the subnormal spacing, not at 0
    ("fp16", 3 * 2.0**-24, 2.0**-22, 1.0),  # deep in the subnormals the spacing stays 2^-24
    ("fp16", 1e-10, 0.0, 1e-10 / 2.0**-24),  # below half the smallest subnormal: rounding to 0 is right
    ("bf16", 2.0**-133, 0.0, 1.0),
    ("e4m3", 2.0**-9, 0.0, 1.0),
    ("e4m3", 2.0**-7, 2.0**-7 + 2.0**-9, 1.0),
])
def test_subnormals_are_floored_at_the_subnormal_spacing(dtype: str, ref: float, got: float, ulps: float) -> None:
    assert ulp_error([got], [ref], dtype) == pytest.approx(ulps, rel=1e-12)


def test_torch_tensors_of_any_float_dtype() -> None:
    ref = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    got = torch.tensor([1.0 + 2.0**-7, -2.0, 0.5], dtype=torch.bfloat16)
    assert ulp_error(got, ref, torch.bfloat16) == 1.0
    assert ulp_error(ref.to(torch.float8_e4m3fn), ref, "e4m3") == 0.0


def test_report_names_the_worst_element() -> None:
    ref = np.ones((3, 4))
    got = ref.copy()
    got[2, 1] = 1.0 + 3 * 2.0**-10
    got[0, 0] = 1.0 + 2.0**-10
    report = ulp_report(got, ref, "fp16")
    assert (report.index, report.got, report.ref, report.ulp, report.spacing, report.size) == \
        ((2, 1), 1.0 + 3 * 2.0**-10, 1.0, 3.0, 2.0**-10, 12)


# ----------------------------------------------------------------------------- rms


def test_rms_mode_judges_cancellation_at_the_tensor_scale() -> None:
    # The middle element is what is left of cancelling terms; its absolute error is tiny
    # next to the tensor, and huge next to its own magnitude.
    ref = np.array([1.0, 1e-3, -1.0])
    got = ref + np.array([0.0, 1e-4, 0.0])
    # elementwise: 1e-3 lies in [2^-10, 2^-9), fp16 spacing 2^-20
    assert ulp_error(got, ref, "fp16") == pytest.approx(1e-4 / 2.0**-20)  # 104.9 ULP
    # rms: sqrt((1 + 1e-6 + 1) / 3) = 0.8165 lies in [2^-1, 1), spacing 2^-11
    assert ulp_error(got, ref, "fp16", mode="rms") == pytest.approx(1e-4 / 2.0**-11)  # 0.2048 ULP


def test_rms_of_a_zero_tensor_uses_the_subnormal_spacing() -> None:
    assert ulp_error([2.0**-24, 0.0], [0.0, 0.0], "fp16", mode="rms") == 1.0


def test_neighbour_ulp_is_one_ulp_of_the_largest_element_in_rms_units() -> None:
    ref = np.array([1.0, 1.0, 1.0, 4.0])  # rms sqrt(19/4) = 2.18: binade 2^1; largest: binade 2^2
    assert neighbour_ulp(ref, "bf16", "elementwise") == 1.0
    assert neighbour_ulp(ref, "bf16", "rms") == 2.0


# ----------------------------------------------------------------------------- rounding floor


def test_round_to_matches_torch_conversions_including_ties() -> None:
    # fp32-representable inputs: torch converts through fp32, which is then exact.
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(20000, generator=gen) * 100).double()
    exact_ties = torch.tensor([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 2049.0, 2051.0], dtype=torch.float64)
    for values in (x, exact_ties):
        assert np.array_equal(round_to(values.numpy(), "fp16"), values.to(torch.float16).double().numpy())
        scaled = values / 1000  # within e4m3's range
        assert np.array_equal(round_to(scaled.numpy(), "e4m3"), scaled.to(torch.float8_e4m3fn).double().numpy())
    assert round_to(65520.0, "fp16") == math.inf  # half a top ULP above the largest value rounds up
    assert round_to(65519.0, "fp16") == 65504.0


def test_round_to_rounds_once_from_float64() -> None:
    # 3e-9 above the fp16 midpoint 109.15625: correct rounding goes up. A conversion through
    # fp32 would land exactly on the midpoint first and then round to even, down (109.125).
    value = 109.15625338510324
    assert round_to(value, "fp16") == 109.1875 == float(np.float16(value))


def test_rounding_floor_is_at_most_half_an_ulp_elementwise() -> None:
    x = np.random.default_rng(1).normal(size=5000) * 7
    for dtype in ("fp16", "bf16", "e4m3"):
        assert 0.45 < rounding_floor(x, dtype) <= 0.5


# ----------------------------------------------------------------------------- NaN, inf, shapes, empty


def test_nan_where_the_reference_is_finite_is_an_error_naming_the_element() -> None:
    with pytest.raises(NonFiniteMismatch, match=r"element \[1\]: got nan where the reference is 2.5"):
        ulp_error([1.0, math.nan], [1.0, 2.5], "fp16")


@pytest.mark.parametrize(("got", "ref"), [
    ([1.0, math.nan], [1.0, math.nan]),  # matching NaNs
    ([math.inf, -math.inf], [math.inf, -math.inf]),  # matching infinities
    ([math.inf], [70000.0]),  # fp16 overflow is the correctly rounded result
])
def test_matching_non_finite_values_are_exact(got: list[float], ref: list[float]) -> None:
    assert ulp_error(got, ref, "fp16") == 0.0


@pytest.mark.parametrize(("got", "ref", "message"), [
    ([math.inf], [100.0], r"got inf where the reference is 100.0 \(fp16 overflows only at \|x\| >= 65520.0\)"),
    ([-math.inf], [70000.0], r"got -inf where the reference is 70000.0"),
    ([1.0], [math.inf], r"got 1.0 where the reference is inf"),
    ([1.0], [math.nan], r"got 1.0 where the reference is nan"),
    ([-math.inf], [math.inf], r"got -inf where the reference is inf"),
])
def test_non_finite_mismatches(got: list[float], ref: list[float], message: str) -> None:
    with pytest.raises(NonFiniteMismatch, match=message):
        ulp_error(got, ref, "fp16")


def test_e4m3_has_no_infinity_to_overflow_into() -> None:
    with pytest.raises(NonFiniteMismatch, match="got inf"):
        ulp_error([math.inf], [1000.0], "e4m3")


@pytest.mark.parametrize(("got_shape", "ref_shape"), [((2, 3), (3, 2)), ((3,), (1, 3)), ((1,), (4,))])
def test_shapes_must_match_exactly(got_shape: tuple[int, ...], ref_shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"shape mismatch: got .* \(no broadcasting\)"):
        ulp_error(torch.zeros(got_shape), torch.zeros(ref_shape, dtype=torch.float64), "fp16")


def test_empty_tensors_are_rejected() -> None:
    with pytest.raises(ValueError, match="empty tensor"):
        ulp_error(torch.zeros(0), torch.zeros(0), "bf16")


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown mode 'max'"):
        ulp_error([1.0], [1.0], "fp16", mode="max")


# ----------------------------------------------------------------------------- assert_ulp


def test_assert_ulp_passes_and_returns_the_report() -> None:
    assert assert_ulp([1.0 + 2.0**-11], [1.0], "fp16", 0.5).ulp == 0.5


def test_assert_ulp_message_names_index_value_reference_ulp_and_count() -> None:
    ref = torch.ones(2, 3, dtype=torch.float64)
    got = ref.clone()
    got[1, 2] = 1.0 + 4 * 2.0**-10
    got[0, 1] = 1.0 + 2 * 2.0**-10
    with pytest.raises(UlpMismatch) as info:
        assert_ulp(got, ref, "fp16", 1.0)
    assert str(info.value) == (
        "ULP check (fp16, elementwise) failed: 4 ULP > 1 allowed; 2 of 6 element(s) over; worst element [1, 2]: "
        "got 1.00390625, reference 1.0, 4 ULP of fp16 (one ULP at the reference = 0.0009765625)")


def test_assert_ulp_reports_non_finite_values_as_a_failure() -> None:
    with pytest.raises(UlpMismatch, match=r"ULP check \(bf16, rms\): element \[0\]: got nan"):
        assert_ulp([math.nan], [1.0], "bf16", 1.0, mode="rms")


# ----------------------------------------------------------------------------- imports


def test_importing_kgate_numerics_and_the_plugin_loads_neither_torch_nor_numpy() -> None:
    code = ("import sys, kgate, kgate.numerics, kgate.pytest_plugin; "
            "print(sorted(m for m in ('torch', 'numpy', 'triton') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
