"""The capture rule (recompile-per-shape, KG108) as a pure function of captured specialisations.

tests/test_capture.py plants it in a real capture; these pin its edges: what counts as "the same
specialisation otherwise", powers of two, autotune configs, booleans and the `ignore` option.
"""

from __future__ import annotations

from typing import Any

from kgate import rules as registry
from kgate.collect.specialization import Specialization
from kgate.core.rule import CaptureContext, CapturedKernel

RULE = registry.load("KG108")
BASE = {"kernel": "pkg.ops:norm_bwd", "signature": {"x": "*bf16", "n_rows": "i32"},
        "options": {"num_warps": 8, "num_stages": 3}}


def spec(constexprs: dict[str, Any], **changes: Any) -> Specialization:
    return Specialization.from_record({**BASE, "constexprs": constexprs, **changes})


def reports(*specs: Specialization, tuned: frozenset[str] = frozenset(), keys: frozenset[str] = frozenset(),
            **options: Any) -> list[str]:
    ctx = CaptureContext(options=RULE.resolve_options(options))
    return [r.message for r in RULE.check(CapturedKernel(BASE["kernel"], specs, tuned, keys), ctx)]


def test_a_constexpr_that_follows_the_row_count_is_reported_once() -> None:
    found = reports(spec({"ROWS_PER_PROGRAM": 32, "BLOCK": 4096}), spec({"ROWS_PER_PROGRAM": 33, "BLOCK": 4096}),
                    spec({"ROWS_PER_PROGRAM": 31, "BLOCK": 4096}))
    assert len(found) == 1 and "`ROWS_PER_PROGRAM` took 3 values (31, 32, 33)" in found[0]


def test_divisibility_moves_with_the_shape_and_does_not_hide_it() -> None:
    aligned = spec({"ROWS": 4096}, divisible=["n_rows", "x"])
    odd = spec({"ROWS": 4097}, divisible=["x"])
    assert len(reports(aligned, odd)) == 1


def test_good_twins_are_not_reported() -> None:
    # Powers of two (BLOCK = next_power_of_2(n)): a bounded number of compiles.
    assert reports(spec({"BLOCK": 1024}), spec({"BLOCK": 2048}), spec({"BLOCK": 4096})) == []
    # One value only; booleans; a value that differs along with another constexpr or the dtypes.
    assert reports(spec({"ROWS": 33}), spec({"ROWS": 33})) == []
    assert reports(spec({"EVEN": True}), spec({"EVEN": False})) == []
    assert reports(spec({"ROWS": 33, "MODE": 1}), spec({"ROWS": 35, "MODE": 2})) == []
    assert reports(spec({"ROWS": 33}), spec({"ROWS": 35}, signature={"x": "*fp32", "n_rows": "i32"})) == []


def test_autotune_configs_and_ignored_names_are_left_alone() -> None:
    tuned = (spec({"BLOCK_N": 96}), spec({"BLOCK_N": 192}))
    assert len(reports(*tuned)) == 1
    assert reports(*tuned, tuned=frozenset({"BLOCK_N"})) == []
    assert reports(*tuned, ignore=["BLOCK_N"]) == []
    assert reports(*tuned, min_values=3) == []


def test_an_autotune_key_is_left_to_runtime_autotune_and_the_other_constexprs_are_not() -> None:
    """A weight's `N` and `K` keyed by the autotuner (DeepSeek-V3's fp8 GEMM: `key=["N", "K"]`, both constexprs) take
    one value per weight shape, re-tuned by design; KG201 judges from the source whether a key follows the tokens."""
    weights = (spec({"N": 2112, "K": 7168, "ROWS": 3}), spec({"N": 24576, "K": 7168, "ROWS": 3}))
    assert len(reports(*weights)) == 1
    assert reports(*weights, keys=frozenset({"N", "K"})) == []
    rows = (spec({"N": 2112, "ROWS": 3}), spec({"N": 2112, "ROWS": 5}))
    assert len(reports(*rows, keys=frozenset({"N"}))) == 1
