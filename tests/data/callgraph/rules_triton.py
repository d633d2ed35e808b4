"""Call-graph cases in Triton for the rules that read it: tests/test_held_out_call_graph_rules.py compiles each
kernel for sm_120a with PDL (`x` and `out` fp32 pointers, `n` an i32)."""

import triton
import triton.language as tl
from tri import loads, waits
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit(noinline=True)
def _load(x, i):
    return tl.load(x + i)


@triton.jit(noinline=True)
def _wait_then_load(x, i):
    gdc_wait()
    return tl.load(x + i)


@triton.jit(noinline=True)
def _maybe_wait(WAIT: tl.constexpr):
    if WAIT:
        gdc_wait()


@triton.jit(noinline=True)
def _square(v):
    return v * v


@triton.jit(noinline=True)
def _atomic(out, v):
    tl.atomic_add(out, v)


@triton.jit(noinline=True)
def _two_loads(x, i):
    return tl.load(x + i), tl.load(x + i + 1)


@triton.jit(noinline=True)
def _launch_and_load(x, i):
    gdc_launch_dependents()
    return tl.load(x + i)


@triton.jit(noinline=True)
def _d6(x, i):
    return tl.load(x + i)


@triton.jit(noinline=True)
def _d5(x, i):
    return _d6(x, i) + 1.0


@triton.jit(noinline=True)
def _d4(x, i):
    return _d5(x, i) + 1.0


@triton.jit(noinline=True)
def _d3(x, i):
    return _d4(x, i) + 1.0


@triton.jit(noinline=True)
def _d2(x, i):
    return _d3(x, i) + 1.0


@triton.jit(noinline=True)
def _d1(x, i):
    return _d2(x, i) + 1.0


@triton.jit(noinline=True)
def _load__fast(x, i):
    return tl.load(x + i + 2)


@triton.jit(noinline=True)
def _charger_données(x, i):
    return tl.load(x + i + 3)


@triton.jit
def helper_in_a_loop_before_wait(x, out, n):
    acc = 0.0
    for i in range(n):
        acc += _load(x, i)
    gdc_wait()
    tl.store(out, acc)


@triton.jit
def helper_waits_then_loads_called_first(x, out, n):
    v = _wait_then_load(x, n)
    tl.store(out, v)


@triton.jit
def constexpr_helper_that_does_not_wait(x, out, n):
    _maybe_wait(False)
    v = tl.load(x + n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def constexpr_helper_that_waits(x, out, n):
    _maybe_wait(True)
    tl.store(out, tl.load(x + n))


@triton.jit
def both_specialisations_of_one_helper(x, out, n):
    _maybe_wait(False)
    _maybe_wait(True)
    tl.store(out, tl.load(x + n))


@triton.jit
def pure_helper_before_wait(x, out, n):
    v = _square(n * 1.0)
    gdc_wait()
    tl.store(out, v + tl.load(x))


@triton.jit
def atomic_helper_before_wait(x, out, n):
    _atomic(out, 1.0)
    gdc_wait()
    tl.store(out + 1, tl.load(x))


@triton.jit
def helper_under_a_run_time_if_before_wait(x, out, n):
    v = 0.0
    if n > 0:
        v = _load(x, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def helper_returning_two_loads_before_wait(x, out, n):
    a, b = _two_loads(x, n)
    gdc_wait()
    tl.store(out, a + b)


@triton.jit
def six_levels_down_before_wait(x, out, n):
    v = _d1(x, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def launch_dependents_then_load_before_wait(x, out, n):
    v = _launch_and_load(x, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def same_name_waiting_module_first(x, out, n):
    i = waits._helper(x, n)
    tl.store(out, loads._helper(x, i))


@triton.jit
def same_name_loading_module_first(x, out, n):
    v = loads._helper(x, n)
    i = waits._helper(x, n)
    tl.store(out + i, v)


@triton.jit
def double_underscore_in_the_name_before_wait(x, out, n):
    v = _load__fast(x, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def non_ascii_name_before_wait(x, out, n):
    v = _charger_données(x, n)
    gdc_wait()
    tl.store(out, v)


@triton.jit
def helper_inlined_after_wait(x, out, n):
    gdc_wait()
    tl.store(out, _load(x, n))


@triton.jit
def device_assert_before_wait(x, out, n):
    tl.device_assert(n > 0, "n must be positive")
    gdc_wait()
    tl.store(out, tl.load(x))


@triton.jit
def device_print_before_wait(x, out, n):
    tl.device_print("n", n)
    gdc_wait()
    tl.store(out, tl.load(x))
