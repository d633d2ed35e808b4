"""Addresses through Triton helpers for tests/test_held_out_attack_dataflow.py (PDL; `x` and `out` fp32 pointers, `n` an
i32)."""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait


@triton.jit(noinline=True)
def _at(p, i):
    return p + i


@triton.jit(noinline=True)
def _ld_pair(pair, i):
    return tl.load(pair[0] + i)


@triton.jit(noinline=True)
def _bump(p):
    tl.atomic_add(p, 1.0)


@triton.jit(noinline=True)
def _inner(q, i):
    return tl.load(q + i)


@triton.jit(noinline=True)
def _outer(q, r, i):
    return _inner(q, i + 1)


@triton.jit
def where_pointer_store(x, out, n):
    p = tl.where(n > 0, x, out)
    tl.store(p + 1, 1.0)
    gdc_wait()
    tl.store(out, tl.load(x))


@triton.jit
def returned_pointer_load(x, out, n):
    v = tl.load(_at(x, n))
    gdc_wait()
    tl.store(out, v)


@triton.jit
def returned_pointer_store(x, out, n):
    tl.store(_at(out, n), 1.0)
    gdc_wait()
    tl.store(out, tl.load(x))


@triton.jit
def tuple_of_pointers_load(x, out, n):
    v = _ld_pair((x, out), n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def loop_advancing_pointer(x, out, n):
    s = 0.0
    p = x
    for i in range(n):
        s += tl.load(p)
        p += 1
    gdc_wait()
    tl.store(out, s)


@triton.jit
def atomic_in_helper(x, out, n):
    _bump(out)
    gdc_wait()
    tl.store(out + 1, tl.load(x))


@triton.jit
def asm_load(x, out, n):
    v = tl.inline_asm_elementwise("ld.global.b32 $0, [$1];", "=r,l", [x + n], dtype=tl.int32, is_pure=False, pack=1)
    gdc_wait()
    tl.store(out, v.to(tl.float32, bitcast=True))


@triton.jit
def all_after_wait(x, out, n):
    gdc_wait()
    tl.store(_at(out, n), tl.load(_at(x, n)))


@triton.jit
def two_levels_of_two(x, out, n):
    v = _outer(x, out, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def no_memory_before_wait(x, out, n):
    v = tl.sin(n.to(tl.float32)) * 3.0
    gdc_wait()
    tl.store(out, v + tl.load(x))
