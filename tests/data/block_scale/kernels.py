"""Kernels whose block-scale expectation follows what each specialisation compiles: a `tl.dot_scaled` in a
branch a constexpr removes expects nothing there, whatever kind of kernel holds it and however it is reached.
tests/test_held_out_block_scale_expectation.py states each variant's expectation."""
import pkg.tiles
import tiles
import tiles as t
import triton
import triton.language as tl
import tt
from pkg import tiles as pt
from pkg.sub import deep
from tiles import either_tile, plain_tile, scaled_alias, scaled_tile, scaled_under_if
from tiles import scaled_tile as renamed
from triton.language import dot_scaled as ds

import kgate

SIG = {"a": "*fp8e4nv", "a_scale": "*u8", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*fp32"}
OFF = {"USE_SCALED": False}
ON = {"USE_SCALED": True}


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@kgate.register(signature=SIG, constexprs=ON, kind="gemm")
@triton.jit
def plain_branch(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.autotune(configs=[triton.Config(OFF, num_warps=4), triton.Config(ON, num_warps=4)], key=[])
@triton.jit
def autotuned_branch(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(args=[{**SIG, "mode": 1}, {**SIG, "mode": 2}], kind="gemm")
@triton.heuristics({"USE_SCALED": lambda args: args["mode"] == 2})
@triton.jit
def heuristics_branch(a, a_scale, b, b_scale, c, mode, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


def traced(kernel):
    kernel.traced = True
    return kernel


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@kgate.register(signature=SIG, constexprs=ON, kind="gemm")
@traced
@triton.jit
def wrapped_branch(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@kgate.register(signature=SIG, constexprs=ON, kind="gemm")
@triton.jit
def branch_in_a_helper(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    either_tile(a, a_scale, b, b_scale, c, USE_SCALED)


@triton.jit(noinline=True)
def either_noinline(a, a_scale, b, b_scale, c, SCALED: tl.constexpr):
    if SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@kgate.register(signature=SIG, constexprs=ON, kind="gemm")
@triton.jit
def branch_in_a_noinline_helper(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    either_noinline(a, a_scale, b, b_scale, c, USE_SCALED)


@kgate.register(signature=SIG, constexprs={"PLAIN": True}, kind="gemm")
@kgate.register(signature=SIG, constexprs={"PLAIN": False}, kind="gemm")
@triton.jit
def negated_branch(a, a_scale, b, b_scale, c, PLAIN: tl.constexpr):
    if not PLAIN:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs={"FMT": "bf16"}, kind="gemm")
@kgate.register(signature=SIG, constexprs={"FMT": "mx"}, kind="gemm")
@triton.jit
def string_constexpr_branch(a, a_scale, b, b_scale, c, FMT: tl.constexpr):
    if FMT == "mx":
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs={"MODE": 1}, kind="gemm")
@kgate.register(signature=SIG, constexprs={"MODE": 2}, kind="gemm")
@triton.jit
def constexpr_computed_in_the_kernel(a, a_scale, b, b_scale, c, MODE: tl.constexpr):
    scaled = MODE * 2 > 2
    if scaled:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs={"OUTER": True, "INNER": False}, kind="gemm")
@kgate.register(signature=SIG, constexprs={"OUTER": True, "INNER": True}, kind="gemm")
@triton.jit
def nested_branches(a, a_scale, b, b_scale, c, OUTER: tl.constexpr, INNER: tl.constexpr):
    if OUTER:
        if INNER:
            scaled_tile(a, a_scale, b, b_scale, c)
        else:
            plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@kgate.register(signature=SIG, constexprs=ON, kind="gemm")
@triton.jit
def ternary_on_a_constexpr(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    rs = tl.arange(0, 2)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    sx = tl.load(a_scale + rm[:, None] * 2 + rs[None, :])
    sy = tl.load(b_scale + rm[:, None] * 2 + rs[None, :])
    acc = tl.dot_scaled(x, sx, "e4m3", y, sy, "e4m3") if USE_SCALED else tl.dot(x, y)
    tl.store(c + rm[:, None] * 64 + rm[None, :], acc)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def dead_under_if_false(a, a_scale, b, b_scale, c):
    if False:
        scaled_tile(a, a_scale, b, b_scale, c)
    plain_tile(a, a_scale, b, b_scale, c)


USE_MX = tl.constexpr(False)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def module_constexpr_off(a, a_scale, b, b_scale, c):
    if USE_MX:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs={"TILE": "jit:tiles:scaled_tile"}, kind="gemm")
@kgate.register(signature=SIG, constexprs={"TILE": "jit:tiles:plain_tile"}, kind="gemm")
@triton.jit
def tile_passed_as_a_constexpr(a, a_scale, b, b_scale, c, TILE: tl.constexpr):
    TILE(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm", expect=["block_scale"])
@triton.jit
def registration_expects_it_anyway(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=ON, kind="gemm", expect=[])
@triton.jit
def registration_drops_it(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs=OFF, kind="gemm", expect=[])
@kgate.register(signature=SIG, constexprs=OFF, kind="gemm")
@triton.jit
def two_registrations_of_the_plain_launch(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, args={**SIG, "flag": 1}, kind="gemm")
@triton.jit
def branch_on_a_run_time_value(a, a_scale, b, b_scale, c, flag):
    if flag > 0:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, constexprs={"SKIP": True}, kind="gemm")
@triton.jit
def constexpr_return_before_it(a, a_scale, b, b_scale, c, SKIP: tl.constexpr):
    plain_tile(a, a_scale, b, b_scale, c)
    if SKIP:
        return
    scaled_tile(a, a_scale, b, b_scale, c)


MIXED = {"a": "*bf16", "a_scale": "*u8", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*fp32"}


@triton.jit
def mixed_tile(a, a_scale, b, b_scale, c):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    rs = tl.arange(0, 2)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    sy = tl.load(b_scale + rm[:, None] * 2 + rs[None, :])
    tl.store(c + rm[:, None] * 64 + rm[None, :], tl.dot_scaled(x, None, "bf16", y, sy, "e4m3"))


@kgate.register(signature=MIXED, constexprs=OFF, kind="gemm")
@kgate.register(signature=MIXED, constexprs=ON, kind="gemm")
@triton.jit
def fallback_only_where_compiled(a, a_scale, b, b_scale, c, USE_SCALED: tl.constexpr):
    if USE_SCALED:
        mixed_tile(a, a_scale, b, b_scale, c)
    else:
        rm = tl.arange(0, 64)
        tl.store(c + rm, tl.load(a + rm).to(tl.float32))


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def project_function_named_dot_scaled(a, a_scale, b, b_scale, c):
    tt.dot_scaled(a, a_scale, b, b_scale, c)


# Helpers reached in every way a module can name them (block-scaled wherever reached).
@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_module_alias(a, a_scale, b, b_scale, c):
    t.scaled_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_module(a, a_scale, b, b_scale, c):
    tiles.scaled_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_renamed_import(a, a_scale, b, b_scale, c):
    renamed(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_an_alias_in_the_helper_module(a, a_scale, b, b_scale, c):
    scaled_alias(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_renamed_builtin(a, a_scale, b, b_scale, c):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    rs = tl.arange(0, 2)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    sx = tl.load(a_scale + rm[:, None] * 2 + rs[None, :])
    sy = tl.load(b_scale + rm[:, None] * 2 + rs[None, :])
    tl.store(c + rm[:, None] * 64 + rm[None, :], ds(x, sx, "e4m3", y, sy, "e4m3"))


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_package_module_alias(a, a_scale, b, b_scale, c):
    pt.scaled_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_dotted_package_path(a, a_scale, b, b_scale, c):
    pkg.tiles.scaled_tile(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_relative_package_import(a, a_scale, b, b_scale, c):
    deep(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_a_def_under_if(a, a_scale, b, b_scale, c):
    scaled_under_if(a, a_scale, b, b_scale, c)


local_alias = scaled_tile


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def via_a_local_alias(a, a_scale, b, b_scale, c):
    local_alias(a, a_scale, b, b_scale, c)


@kgate.register(signature=SIG, kind="gemm")
@triton.jit
def names_it_in_a_string_only(a, a_scale, b, b_scale, c):
    "t.scaled_tile ds tl.dot_scaled"  # and tl.dot_scaled in a comment
    plain_tile(a, a_scale, b, b_scale, c)
