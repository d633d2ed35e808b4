"""Call-graph paths for tests/test_held_out_call_graph_paths.py (PDL, `x` and `out` fp32 pointers, `n` an i32)."""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait


@triton.jit(noinline=True)
def producer(x, out, n):
    gdc_wait()
    i = tl.program_id(0)
    tl.store(out + i, tl.load(x + i) * 2)


@triton.jit
def consumer_calls_the_producer_body(x, out, n):
    producer(x, out, n)
    tl.store(out + n, tl.load(x + n))


@triton.jit
def consumer_loads_then_calls_the_producer_body(x, out, n):
    v = tl.load(x + n)
    producer(x, out, n)
    tl.store(out + n, v)


@triton.jit(noinline=True)
def _sum(x, n):
    s = 0.0
    for i in range(n):
        s += tl.load(x + i)
    return s


@triton.jit
def waits_after_a_loop_in_a_helper(x, out, n):
    s = _sum(x, n)
    gdc_wait()
    tl.store(out, s)


@triton.jit
def waits_before_a_loop_in_a_helper(x, out, n):
    gdc_wait()
    tl.store(out, _sum(x, n))
