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


def _holds(condition, n: int) -> bool:  # type: ignore[no-untyped-def]
    lo, hi, bits, residues = next(s for s in condition.segments if s[0] <= n <= s[1])
    return n % (1 << bits) in residues


def _s32(v: int) -> int:
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


_OPS = {
    "add.s32": lambda a, b: _s32(a + b), "sub.s32": lambda a, b: _s32(a - b),
    "min.s32": min, "max.s32": max,
    "min.u32": lambda a, b: _s32(min(a % (1 << 32), b % (1 << 32))),
    "max.u32": lambda a, b: _s32(max(a % (1 << 32), b % (1 << 32))),
}
_CMPS = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
         "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
EDGES = [-(1 << 31), -(1 << 31) + 1, -(1 << 31) + 7, -9, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13,
         (1 << 31) - 9, (1 << 31) - 2, (1 << 31) - 1]


def test_each_condition_read_agrees_with_the_arithmetic_it_stands_for() -> None:
    """Random chains of the instructions read, compared with 32-bit arithmetic at the range's edges and elsewhere."""
    import random

    rng = random.Random(30)
    for _ in range(300):
        lines = ["ld.param.u32 %r1, [f_param_0];"]
        steps = []
        for index in range(2, 2 + rng.randint(1, 4)):
            op = rng.choice([*_OPS, "neg.s32", "mul.lo.s32"])
            left = f"%r{rng.randint(1, index - 1)}"
            constant = rng.choice([-7, -3, -1, 0, 1, 2, 3, 4, 5, 100, (1 << 31) - 1, -(1 << 31)])
            right = rng.choice([f"%r{rng.randint(1, index - 1)}", str(constant)])
            if op == "neg.s32":
                lines.append(f"neg.s32 %r{index}, {left};")
            elif op == "mul.lo.s32":
                right = str(rng.choice([-3, -1, 2, 3]))
                lines.append(f"mul.lo.s32 %r{index}, {left}, {right};")
            else:
                lines.append(f"{op} %r{index}, {left}, {right};")
            steps.append((op, left, right))
        last = f"%r{len(steps) + 1}"
        masked = rng.random() < 0.3
        if masked:
            lines.append(f"and.b32 %r99, {last}, 3;")
            last = "%r99"
        cmp, kind = rng.choice(list(_CMPS)), rng.choice(["s32", "u32"])
        bound = rng.choice([-1, 0, 1, 2, 3, 4, 100])
        lines.append(f"setp.{cmp}.{kind} %p1, {last}, {bound};")
        condition = _conditions("\n".join(lines)).of("%p1")
        if condition is None:
            continue

        def concrete(n: int) -> bool:
            regs = {"%r1": n}
            for index, (op, left, right) in enumerate(steps, 2):
                a = regs[left]
                b = regs[right] if right.startswith("%") else _s32(int(right))
                regs[f"%r{index}"] = (_s32(-a) if op == "neg.s32" else _s32(a * b) if op == "mul.lo.s32"
                                      else _OPS[op](a, b))
            value = regs[f"%r{len(steps) + 1}"]
            if masked:
                value = value & 3
            if kind == "u32":
                return _CMPS[cmp](value % (1 << 32), bound % (1 << 32))
            return _CMPS[cmp](value, bound)

        for n in EDGES + [rng.randint(-(1 << 31), (1 << 31) - 1) for _ in range(40)]:
            assert _holds(condition, n) == concrete(n), ("\n".join(lines), n)
