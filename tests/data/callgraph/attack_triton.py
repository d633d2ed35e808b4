"""Call-graph edge cases in Triton: tests/test_ptx_call_graph.py compiles each kernel for sm_120a with PDL."""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit(noinline=True)
def _load(x, i):
    return tl.load(x + i)


@triton.jit(noinline=True)
def _store(out, i, v):
    tl.store(out + i, v)


@triton.jit(noinline=True)
def _add(out, v):
    tl.atomic_add(out, v)


@triton.jit(noinline=True)
def _wait_if(c):
    if c > 0:
        gdc_wait()


@triton.jit(noinline=True)
def _wait():
    gdc_wait()


@triton.jit(noinline=True)
def _launch():
    gdc_launch_dependents()


@triton.jit(noinline=True)
def _via(x, i):
    return _load(x, i) + 1.0


@triton.jit
def called_twice_first_before(x, out):
    pid = tl.program_id(0)
    v = _load(x, pid)
    gdc_wait()
    tl.store(out + pid, v + _load(x, pid + 1))


@triton.jit
def called_twice_after_wait(x, out):
    pid = tl.program_id(0)
    gdc_wait()
    tl.store(out + pid, _load(x, pid) + _load(x, pid + 1))


@triton.jit
def store_in_helper_before_wait(x, out):
    pid = tl.program_id(0)
    _store(out, pid, 1.0)
    gdc_wait()


@triton.jit
def atomic_in_helper_after_wait(x, out):
    gdc_wait()
    _add(out, 1.0)


@triton.jit
def wait_under_if_in_helper(x, out):
    pid = tl.program_id(0)
    _wait_if(pid)
    tl.store(out + pid, tl.load(x + pid))


@triton.jit
def wait_and_launch_in_helpers(x, out):
    pid = tl.program_id(0)
    _wait()
    v = _via(x, pid)
    _launch()
    tl.store(out + pid, v)


@triton.jit
def shared_helper_before_wait(x, out):
    pid = tl.program_id(0)
    v = _via(x, pid)
    gdc_wait()
    tl.store(out + pid, v)


@triton.jit
def inlined_load_before_wait(x, out):
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    gdc_wait()
    tl.store(out + pid, v)
