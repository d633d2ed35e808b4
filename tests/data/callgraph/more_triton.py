"""More call-graph cases in Triton: inline asm that comments or labels its wait, helpers called in unrolled
loops, waits in one program only, cache-modified loads and scoped atomics. tests/test_held_out_call_graph_more.py
compiles each kernel for sm_120a with PDL (`x` and `out` fp32 pointers, `n` an i32)."""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit(noinline=True)
def _load(x, i):
    return tl.load(x + i)


@triton.jit(noinline=True)
def _wait():
    gdc_wait()


@triton.jit
def _asm_wait(i, ASM: tl.constexpr):
    return tl.inline_asm_elementwise(ASM, "=r,r", [i], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def asm_comment_then_wait(x, out, n):
    i = _asm_wait(tl.program_id(0), "/* the producer's results */ griddepcontrol.wait; mov.b32 $0, $1;")
    tl.store(out + i, tl.load(x + i))


@triton.jit
def asm_label_then_wait(x, out, n):
    i = _asm_wait(tl.program_id(0), "{ WAITED: griddepcontrol.wait; mov.b32 $0, $1; }")
    tl.store(out + i, tl.load(x + i))


@triton.jit
def asm_wait_commented_out(x, out, n):
    i = _asm_wait(tl.program_id(0), "/*\n griddepcontrol.wait;\n */ mov.b32 $0, $1;")
    tl.store(out + i, tl.load(x + i))


@triton.jit
def helper_in_a_static_range_before_wait(x, out, n):
    acc = 0.0
    for k in tl.static_range(3):
        acc += _load(x, k)
    gdc_wait()
    tl.store(out, acc)


@triton.jit
def wait_in_program_zero_only(x, out, n):
    if tl.program_id(0) == 0:
        gdc_wait()
    tl.store(out, tl.load(x))


WAIT_FIRST = tl.constexpr(True)


@triton.jit
def waiting_helper_under_a_constexpr_if(x, out, n):
    if WAIT_FIRST:
        _wait()
    tl.store(out, tl.load(x))


@triton.jit
def launch_dependents_then_wait(x, out, n):
    gdc_launch_dependents()
    gdc_wait()
    tl.store(out, tl.load(x))


@triton.jit
def stores_in_a_loop_after_wait(x, out, n):
    gdc_wait()
    for k in tl.range(0, n):
        tl.store(out + k, _load(x, k))


@triton.jit
def cache_modified_load_before_wait(x, out, n):
    v = tl.load(x, cache_modifier=".cg")
    gdc_wait()
    tl.store(out, v)


@triton.jit
def cta_scoped_atomic_before_wait(x, out, n):
    tl.atomic_add(out, 1.0, sem="relaxed", scope="cta")
    gdc_wait()
    tl.store(out + 1, tl.load(x))
