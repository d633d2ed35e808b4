"""Triton GPU IR: the shared-memory buffers of a software pipeline.

A pipelined load is staged through `ttg.local_alloc` of a mutable memdesc
whose leading dimension is the number of buffers:

    %x = ttg.local_alloc : () -> !ttg.memdesc<4x64x128xbf16, #shared, #smem, mutable>

How many buffers a given `num_stages` gets depends on the target (sm_120a
keeps num_stages - 1 with cp.async, sm_90a keeps num_stages), so the budget
rule reads it here instead of guessing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from kgate.core.errors import ParseError
from kgate.facts.numbers import count

_ALLOC = re.compile(r"ttg\.local_alloc\s*:\s*\(\)\s*->\s*!ttg\.memdesc<([0-9x]+)x([a-zA-Z][\w]*)\s*,[^>]*mutable")


@dataclass(frozen=True)
class Pipeline:
    buffers: int  # how many copies of each staged tile
    bytes_per_buffer: int  # shared memory of one stage of all staged operands


def element_bytes(type_name: str) -> float:
    if type_name == "i1":
        return 1
    bits = re.search(r"([0-9]{1,4})", type_name)
    return int(bits.group(1)) / 8 if bits else 4


def parse_pipeline(ttgir: str) -> Pipeline | None:
    """The multi-buffered allocations of a kernel, or None when it has no pipeline."""
    allocs = []
    for dims, type_name in _ALLOC.findall(ttgir):
        try:
            shape = [count(d) for d in dims.split("x") if d]
        except ParseError:
            continue  # not a shape Triton writes: this allocation says nothing
        if len(shape) >= 3:  # buffers x tile
            size = element_bytes(type_name)
            for d in shape:
                size *= d
            if math.isfinite(size) and size < 2**63:  # a number of bytes, not an overflow to inf
                allocs.append((shape[0], int(size)))
    if not allocs:
        return None
    buffers = Counter(lead for lead, _size in allocs).most_common(1)[0][0]
    if buffers < 2:
        return None
    per_buffer = sum(size // lead for lead, size in allocs if lead == buffers)
    return Pipeline(buffers, per_buffer)
