"""Calls for tests/test_held_out_call_graph_calls.py (PDL, `x` and `out` fp32 pointers, `n` an i32): barriers,
libdevice, a helper returning a tuple, one helper specialised on two constexpr values, printing and releasing the
dependents in helpers, two waits."""

import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit(noinline=True)
def _pair(x, n):
    return tl.load(x + n), tl.load(x + n + 1)


@triton.jit(noinline=True)
def _get(x, n, MODE: tl.constexpr):
    if MODE == 0:
        return n.to(tl.float32)
    return tl.load(x + n)


@triton.jit(noinline=True)
def _say(n):
    tl.device_print("n", n)


@triton.jit(noinline=True)
def _release():
    gdc_launch_dependents()


@triton.jit
def debug_barrier_before_the_wait(x, out, n):
    tl.debug_barrier()
    gdc_wait()
    tl.store(out + n, tl.load(x + n))


@triton.jit
def libdevice_before_the_wait(x, out, n):
    v = libdevice.exp(n.to(tl.float32))
    gdc_wait()
    tl.store(out + n, tl.load(x + n) + v)


@triton.jit
def libdevice_of_a_load_before_the_wait(x, out, n):
    v = libdevice.exp(tl.load(x + n))
    gdc_wait()
    tl.store(out + n, v)


@triton.jit
def tuple_helper_before_the_wait(x, out, n):
    a, b = _pair(x, n)
    gdc_wait()
    tl.store(out + n, a + b)


@triton.jit
def tuple_helper_after_the_wait(x, out, n):
    gdc_wait()
    a, b = _pair(x, n)
    tl.store(out + n, a + b)


@triton.jit
def loading_specialisation_after_the_wait(x, out, n):
    a = _get(x, n, 0)
    gdc_wait()
    tl.store(out + n, a + _get(x, n, 1))


@triton.jit
def loading_specialisation_before_the_wait(x, out, n):
    a = _get(x, n, 1)
    gdc_wait()
    tl.store(out + n, a + _get(x, n, 0))


@triton.jit
def printing_helper_before_the_wait(x, out, n):
    _say(n)
    gdc_wait()
    tl.store(out + n, tl.load(x + n))


@triton.jit
def helper_releases_the_dependents_then_wait(x, out, n):
    _release()
    gdc_wait()
    tl.store(out + n, tl.load(x + n))


@triton.jit
def two_waits_with_a_helper_load_between(x, out, n):
    gdc_wait()
    a, b = _pair(x, n)
    gdc_wait()
    tl.store(out + n, a + b)
