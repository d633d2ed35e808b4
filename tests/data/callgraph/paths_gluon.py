"""Call-graph paths for tests/test_held_out_call_graph_paths.py (PDL, `x` and `out` fp32 pointers, `n` an i32)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.extra.cuda import gdc_wait


@gluon.jit(noinline=True)
def _gload(x, i):
    return gl.load(x + i)


@gluon.jit(noinline=True)
def _gwait():
    gdc_wait()


@gluon.jit
def gluon_helper_loads_before_wait(x, out, n):
    v = _gload(x, n)
    _gwait()
    gl.store(out + n, v)


@gluon.jit
def gluon_helper_waits_first(x, out, n):
    _gwait()
    gl.store(out + n, _gload(x, n))
