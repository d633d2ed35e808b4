"""The PDL analysis drops paths no argument value can take (`kgate.facts.feasible`): nvcc unrolls a do-while that
waits by four and keeps a remainder loop; the path that skips both is not one any `n` takes, so a wait in (or
before) a do-while body counts in order. Conditions it cannot read keep their paths: a loop that may run no trip
still reaches its access unwaited."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kgate.facts.feasible import Conditions, satisfiable
from kgate.facts.ptx import functions, parse_ptx

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

KERNELS = r"""
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
__device__ __noinline__ void wait_at_least_once(int n) { do { WAIT(); } while (--n > 0); }
__device__ __noinline__ void wait_maybe_never(int n) { while (n-- > 0) WAIT(); }
__device__ __noinline__ void wait_unless_negative(int n) { do { WAIT(); } while (--n > 0); if (n < -5) return; }
__global__ void do_while_in_the_kernel(const float* x, float* o, int n) { do { WAIT(); } while (--n > 0); o[0] = x[0]; }
__global__ void do_while_in_a_callee(const float* x, float* o, int n) { wait_at_least_once(n); o[0] = x[0]; }
__global__ void while_in_the_kernel(const float* x, float* o, int n) { while (n-- > 0) WAIT(); o[0] = x[0]; }
__global__ void while_in_a_callee(const float* x, float* o, int n) { wait_maybe_never(n); o[0] = x[0]; }
__global__ void for_in_the_kernel(const float* x, float* o, int n) { for (int i = 0; i < n; i += 3) WAIT(); o[0] = x[0]; }
__global__ void do_while_then_a_branch(const float* x, float* o, int n) { wait_unless_negative(n); o[0] = x[0]; }
"""

# kernel -> whether a path reaches its load before a wait
EXPECTED = {
    "do_while_in_the_kernel": False,
    "do_while_in_a_callee": False,
    "do_while_then_a_branch": False,
    "while_in_the_kernel": True,  # n <= 0: no trip, no wait
    "while_in_a_callee": True,
    "for_in_the_kernel": True,
}


@needs_nvcc
@pytest.mark.parametrize("flags", [(), ("-lineinfo",)])
def test_a_do_while_that_waits_waits_on_every_path_and_a_loop_of_no_trips_does_not(tmp_path: Path,
                                                                                   flags: tuple[str, ...]) -> None:
    source = tmp_path / "loops.cu"
    source.write_text(KERNELS)
    ptx = tmp_path / "loops.ptx"
    subprocess.run(["nvcc", "-arch=sm_120a", "-O3", *flags, "-ptx", str(source), "-o", str(ptx)], check=True,
                   capture_output=True)
    facts = parse_ptx(ptx.read_text())
    found = {name: bool(entry.unwaited_accesses) for entry in facts.entries
             for name in EXPECTED if name in entry.name}
    assert found == EXPECTED


HEAD = ".version 8.8\n.target sm_120a\n.address_size 64\n"


def _conditions(body: str) -> Conditions:
    text = HEAD + ".func f(.param .b32 f_param_0, .param .b32 f_param_1)\n{\n" + body + "\nret;\n}\n"
    return Conditions(functions(text)[0].instructions)


def test_conjunctions_are_decided_exactly_on_the_argument_range() -> None:
    c = _conditions("ld.param.u32 %r1, [f_param_0];\nsetp.gt.s32 %p1, %r1, 5;\nsetp.lt.s32 %p2, %r1, 3;\n"
                    "and.b32 %r2, %r1, 3;\nsetp.eq.s32 %p3, %r2, 0;\nsetp.eq.s32 %p4, %r1, 6;\n"
                    "setp.eq.s32 %p5, %r1, 8;\nadd.s32 %r3, %r1, 1;\nsetp.gt.s32 %p6, %r3, %r1;\n"
                    "setp.lt.u32 %p7, %r1, 3;\nsetp.gt.s32 %p8, %r1, -1;")
    p = {name: c.of(name) for name in ("%p1", "%p2", "%p3", "%p4", "%p5", "%p6", "%p7", "%p8")}
    assert all(v is not None for v in p.values()), p
    assert not satisfiable([p["%p1"], p["%p2"]])  # n > 5 and n < 3
    assert not satisfiable([p["%p3"], p["%p4"]])  # n % 4 == 0 and n == 6
    assert satisfiable([p["%p3"], p["%p5"]])  # n == 8
    assert satisfiable([p["%p6"].negated()])  # n + 1 > n fails at INT_MAX only, where it wraps
    assert not satisfiable([p["%p6"].negated(), p["%p2"]])
    assert not satisfiable([p["%p7"], p["%p8"].negated()])  # unsigned n < 3 holds for no negative n
    assert satisfiable([p["%p7"], p["%p8"]])


@pytest.mark.parametrize("body", [
    # Two arguments in one condition.
    "ld.param.u32 %r1, [f_param_0];\nld.param.u32 %r2, [f_param_1];\nsetp.lt.s32 %p1, %r1, %r2;",
    # A register written twice (a loop's counter) has no one value.
    "ld.param.u32 %r1, [f_param_0];\nadd.s32 %r1, %r1, 1;\nsetp.lt.s32 %p1, %r1, 3;",
    # A predicate written twice.
    "ld.param.u32 %r1, [f_param_0];\nsetp.lt.s32 %p1, %r1, 3;\nsetp.gt.s32 %p1, %r1, 9;",
    # A value loaded from memory, a callee's return value, a thread index.
    "ld.global.u32 %r1, [%rd1];\nsetp.lt.s32 %p1, %r1, 3;",
    "ld.param.b32 %r1, [retval0];\nsetp.lt.s32 %p1, %r1, 3;",
    "mov.u32 %r1, %tid.x;\nsetp.lt.s32 %p1, %r1, 3;",
    # A masked value compared with the argument itself.
    "ld.param.u32 %r1, [f_param_0];\nand.b32 %r2, %r1, 3;\nsetp.lt.s32 %p1, %r2, %r1;",
])
def test_a_condition_it_cannot_read_is_none(body: str) -> None:
    assert _conditions(body).of("%p1") is None
