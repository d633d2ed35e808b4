"""The global loads inside loops, as the facts read them from the PTX (`PtxEntry.looped_loads`) and from the SASS
(`KernelFacts.loop_loads`): what one trip of each loop loads, how wide, and from which address.

Hand-written listings pin the parsing; nvcc's and cuobjdump's own output on a small file pins the reading of
real code, each figure compared with the listing itself, never with a number written here.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from kgate.facts.ptx import load_bits, parse_ptx
from kgate.facts.sass import GlobalLoad, load_width, local_in_loops, loop_loads
from kgate.support import tools

SOURCE = r"""
#include <cstdint>
extern "C" __global__ void bytes(const uint8_t* __restrict__ data, unsigned* out, int n) {
    unsigned sum = 0;
    for (int i = threadIdx.x * 16; i < n; i += blockDim.x * 16) {
#pragma unroll
        for (int j = 0; j < 16; ++j) sum += data[i + j];
    }
    atomicAdd(out, sum);
}
extern "C" __global__ void words(const uint4* __restrict__ data, unsigned* out, int n) {
    unsigned sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { uint4 v = data[i]; sum += v.x ^ v.y ^ v.z ^ v.w; }
    atomicAdd(out, sum);
}
extern "C" __global__ void once(const uint8_t* __restrict__ data, unsigned* out) {
    out[threadIdx.x] = data[threadIdx.x] + data[threadIdx.x + 1];
}
// A warp reduction that may run on a diverged warp: ptxas places its fallback after EXIT, and the fallback
// branches back to where it left. No loop: the bytes after it, and the stack array, are read once.
__device__ __forceinline__ float reduced(float v, int n) {
    if (threadIdx.x < n) {
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
    }
    return v;
}
extern "C" __global__ void shuffled_bytes(const uint8_t* __restrict__ data, const float* __restrict__ x, float* out,
                                          unsigned* sums, int n) {
    float v = reduced(x[threadIdx.x], n);
    unsigned sum = 0;
#pragma unroll
    for (int j = 0; j < 16; ++j) sum += data[blockIdx.x * 16 + j];
    out[threadIdx.x] = v;
    sums[threadIdx.x] = sum;
}
extern "C" __global__ void shuffled_stack(const float* __restrict__ x, const int* __restrict__ idx, float* out, int n) {
    float v = reduced(x[threadIdx.x], n);
    float a[256];
#pragma unroll
    for (int j = 0; j < 256; ++j) a[j] = x[j * 32 + threadIdx.x] * v;
    a[idx[threadIdx.x] & 255] = v;
    out[threadIdx.x] = a[idx[threadIdx.x + 32] & 255] + a[idx[threadIdx.x + 64] & 255];
}
// A shuffle inside the loop: its fallback after EXIT branches back into the trip, and every trip still reads the
// bytes after it.
extern "C" __global__ void shuffled_trip(const uint8_t* __restrict__ data, const float* __restrict__ x, float* out,
                                         unsigned* sums, int n) {
    float v = 0.f;
    unsigned sum = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        v += reduced(x[i], n - 32 - i);
#pragma unroll
        for (int j = 0; j < 16; ++j) sum += data[i * 16 + j];
    }
    out[threadIdx.x] = v;
    sums[threadIdx.x] = sum;
}
// A loop that calls a function ptxas keeps apart (after the kernel's EXIT): its loads are made on every trip.
__device__ __noinline__ unsigned sixteen(const uint8_t* p) {
    unsigned s = 0;
#pragma unroll
    for (int j = 0; j < 16; ++j) s += p[j];
    return s;
}
extern "C" __global__ void called_bytes(const uint8_t* __restrict__ data, unsigned* out, int n) {
    unsigned sum = 0;
    for (int i = threadIdx.x * 16; i < n; i += blockDim.x * 16) sum += sixteen(data + i);
    atomicAdd(out, sum);
}
// The same reduction inside a real loop, then bytes read once after the loop.
extern "C" __global__ void shuffled_loop(const uint8_t* __restrict__ data, const float* __restrict__ x, float* out,
                                         unsigned* sums, int n) {
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += reduced(x[i], n - i);
    unsigned sum = 0;
#pragma unroll
    for (int j = 0; j < 16; ++j) sum += data[blockIdx.x * 16 + j];
    out[threadIdx.x] = v;
    sums[threadIdx.x] = sum;
}
"""


def test_load_widths_from_the_opcode() -> None:
    assert [load_width(op) for op in ("LDG.E.U8", "LDG.E.S16.CONSTANT", "LDG.E", "LDG.E.64", "LDG.E.128",
                                      "LDG.E.LTC128B.128", "LDG.E.EL.CONSTANT")] == [8, 16, 32, 64, 128, 128, 32]
    assert [load_bits(op) for op in ("ld.global.nc.u8", "ld.global.v4.b32", "ld.global.v2.f32", "ld.global.b16",
                                     "ld.global.nc.L1::no_allocate.v4.u32", "ld.global.v2.b64")] == [
        8, 128, 64, 16, 128, 128]


def test_each_load_belongs_to_the_innermost_loop_around_it() -> None:
    text = "\n".join([
        "        Function : k",
        "        /*0000*/                   LDG.E.U8 R1, desc[UR4][R2.64] ;",  # before any loop
        "        /*0010*/                   LDG.E.U8 R3, desc[UR4][R2.64+0x1] ;",  # outer loop's body
        "        /*0020*/              @!P0 LDG.E.U16 R5, desc[UR4][R6.64+-0x4] ;",  # inner loop: a negative offset
        "        /*0028*/              @P5 BRA 0x80 ;",  # an exit from both loops: the trips that go on read what follows
        "        /*0030*/                   LDG.E R7, [R8+0x10] ;",  # a 32-bit address
        "        /*0040*/                   LDG.E.128 R12, desc[UR4][R2.64+UR5] ;",  # not a register and an offset
        "        /*0048*/              @P4 BRA 0x50 ;",  # one side of an `if`: jumps past the next load
        "        /*004c*/                   LDG.E R9, [R8+0x14] ;",
        "        /*0050*/              @P1 BRA 0x20 ;",  # the inner loop's first back edge
        "        /*0060*/              @P2 BRA 0x20 ;",  # its second: one loop, to the later one
        "        /*0070*/              @P3 BRA 0x10 ;",  # the outer loop
        "        /*0080*/                   EXIT ;",
        "        /*0090*/                   BRA 0x90;",  # the idle loop after EXIT: no loop
    ])
    loops = loop_loads(text)["k"]
    assert [(loop.first, loop.last) for loop in loops] == [(0x10, 0x70), (0x20, 0x60)]
    assert loops[0].loads == (GlobalLoad("LDG.E.U8", 8, "R2", 1),)
    assert loops[1].loads == (GlobalLoad("LDG.E.U16", 16, "R6", -4), GlobalLoad("LDG.E", 32, "R8", 16),
                              GlobalLoad("LDG.E.128", 128, "", 0), GlobalLoad("LDG.E", 32, "R8", 20, every_trip=False))


def test_a_subroutine_that_starts_with_a_loop_is_read_as_a_call_and_as_a_loop() -> None:
    text = "\n".join([
        "        Function : k",
        "        /*0000*/                   LDG.E.U8 R1, desc[UR4][R2.64] ;",
        "        /*0010*/                   CALL.REL.NOINC 0x60 ;",  # called on every trip of the kernel's loop
        "        /*0020*/              @P0 BRA 0x0 ;",
        "        /*0030*/                   EXIT ;",
        "        /*0060*/                   LDG.E.U8 R3, desc[UR4][R8.64] ;",  # the subroutine's loop starts here
        "        /*0070*/              @P1 BRA 0xa0 ;",  # out of its loop: that trip ends, the call goes on
        "        /*0080*/                   LDG.E.U8 R4, desc[UR4][R8.64+0x1] ;",  # every trip of it
        "        /*0090*/              @P2 BRA 0x60 ;",
        "        /*00a0*/                   LDG.E.U8 R5, desc[UR4][R9.64] ;",  # after it: the kernel's trip
        "        /*00b0*/                   LDG.E.U8 R6, desc[UR4][R9.64+0x1] ;",
        "        /*00c0*/                   RET.REL.NODEC R20 0x0 ;",
    ])
    outer, inner = loop_loads(text)["k"]
    assert (outer.first, outer.last, inner.first, inner.last) == (0x0, 0x20, 0x60, 0x90)
    assert [(load.base, load.offset, load.every_trip) for load in outer.loads] == [
        ("R2", 0, True), ("R9", 0, True), ("R9", 1, True)]
    assert [(load.base, load.offset, load.every_trip) for load in inner.loads] == [("R8", 0, True), ("R8", 1, True)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(PTX, SASS listing) of SOURCE for sm_120a, as nvcc and the bundled cuobjdump write them."""
    cuobjdump = tools.bundled_tool("cuobjdump")
    if shutil.which("nvcc") is None or cuobjdump is None:
        pytest.skip("nvcc and cuobjdump are needed")
    folder = tmp_path_factory.mktemp("loads")
    (folder / "loads.cu").write_text(SOURCE, encoding="utf-8")
    for kind in ("ptx", "cubin"):
        subprocess.run(["nvcc", f"-{kind}", "-arch=sm_120a", "-o", str(folder / f"loads.{kind}"),
                        str(folder / "loads.cu")], check=True, capture_output=True, timeout=300)
    sass = subprocess.run([str(cuobjdump), "-sass", str(folder / "loads.cubin")], check=True, capture_output=True,
                          text=True).stdout
    return (folder / "loads.ptx").read_text(encoding="utf-8"), sass


def _listed_loads(sass: str, function: str) -> list[str]:
    """The LDG lines of one function of a listing."""
    body = sass.split(f"Function : {function}", 1)[1].split("Function :", 1)[0]
    return [line for line in body.splitlines() if re.search(r"\bLDG\b", line)]


def test_the_ptx_counts_the_loads_inside_loops(built: tuple[str, str]) -> None:
    ptx, _sass = built
    entries = {entry.name: entry for entry in parse_ptx(ptx).entries}
    bytes_loads = entries["bytes"].looped_loads
    assert bytes_loads and all(load_bits(op) == 8 for op in bytes_loads)
    assert sum(bytes_loads.values()) == sum(line.count("ld.global") for line in ptx.split(".entry bytes", 1)[1]
                                            .split(".entry", 1)[0].splitlines())
    assert all(load_bits(op) == 128 for op in entries["words"].looped_loads)
    assert entries["once"].looped_loads == {}  # its loads run once: no loop


def test_the_sass_holds_one_trip_of_each_loop(built: tuple[str, str]) -> None:
    _ptx, sass = built
    found = loop_loads(sass)
    (trip,) = found["bytes"]
    listed = _listed_loads(sass, "bytes")
    # Every byte load of the listing is in the loop, from one register, at consecutive offsets.
    assert len(trip.loads) == len(listed) > 1
    assert {load.bits for load in trip.loads} == {8} and len({load.base for load in trip.loads}) == 1
    assert all(load.every_trip for load in trip.loads)
    offsets = sorted(load.offset for load in trip.loads)
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    assert [load.bits for trip in found["words"] for load in trip.loads] == [128] * len(_listed_loads(sass, "words"))
    assert found["once"] == ()  # loads, but no loop


def test_a_branch_back_that_closes_no_cycle_is_no_loop(built: tuple[str, str]) -> None:
    _ptx, sass = built
    # The shuffle's fallback, which a newer ptxas (Triton 3.9's) places after EXIT, branches back to where it left:
    # a jump to a lower address, no loop. An older ptxas (Triton 3.6's) places it inline: no loop either way.
    assert _listed_loads(sass, "shuffled_bytes")
    assert loop_loads(sass)["shuffled_bytes"] == ()
    use = local_in_loops(sass)["shuffled_stack"]
    assert use.total[1] > 0
    assert use.in_loops == (0, 0)


def test_a_loop_with_a_shuffle_holds_its_own_loads_only(built: tuple[str, str]) -> None:
    _ptx, sass = built
    (trip,) = loop_loads(sass)["shuffled_loop"]
    assert [load.bits for load in trip.loads] == [32]  # x[i]; the bytes after the loop are read once
    assert sum(load.bits == 8 for load in _parsed_loads(sass, "shuffled_loop")) == 16


def _parsed_loads(sass: str, function: str) -> list[GlobalLoad]:
    """Every LDG of one function of a listing, as the facts read it."""
    return [_global(line) for line in _listed_loads(sass, function)]


def _global(line: str) -> GlobalLoad:
    op = re.search(r"\bLDG[A-Z0-9_.]*", line)
    assert op is not None
    return GlobalLoad(op.group(0), load_width(op.group(0)), "", 0)


def test_a_trip_makes_the_loads_of_the_functions_its_loop_calls(built: tuple[str, str]) -> None:
    _ptx, sass = built
    listing = sass.split("Function : called_bytes", 1)[1].split("Function :", 1)[0]
    assert "CALL.REL" in listing  # the helper is a subroutine of the kernel's listing, not inlined
    (trip,) = loop_loads(sass)["called_bytes"]
    listed = _listed_loads(sass, "called_bytes")
    assert len(trip.loads) == len(listed) > 1 and all(load.every_trip for load in trip.loads)
    offsets = sorted(load.offset for load in trip.loads)
    assert {load.bits for load in trip.loads} == {8} and offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_every_trip_reads_what_follows_a_shuffle_in_its_loop(built: tuple[str, str]) -> None:
    _ptx, sass = built
    listing = sass.split("Function : shuffled_trip", 1)[1].split("Function :", 1)[0]
    assert "BRA.DIV" in listing  # the fallback for a diverged warp, placed after EXIT
    (trip,) = loop_loads(sass)["shuffled_trip"]
    narrow = [load for load in trip.loads if load.bits == 8]
    assert len(narrow) == 16 and all(load.every_trip for load in narrow)
