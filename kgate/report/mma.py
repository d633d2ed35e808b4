"""Short names for MMA opcodes, for tables: the shape and the operand kind."""

from __future__ import annotations

import re

_SHAPE = re.compile(r"\.(m\d+n\d+k\d+)")
_KIND = re.compile(r"kind::(\w+)")
_TYPES = ("e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "bf16", "f16", "tf32", "s8", "u8", "s4", "f64")


def short_mma(opcode: str) -> str:
    """`mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale...` -> `mma m16n8k32 mxf8f6f4.block_scale`."""
    head = opcode.split(".")[0]
    if opcode.startswith("wgmma"):
        head = "wgmma"
    elif opcode.startswith("tcgen05"):
        head = "tcgen05.mma"
    shape = _SHAPE.search(opcode)
    kind = _KIND.search(opcode)
    parts = [head]
    if shape:
        parts.append(shape.group(1))
    if kind:
        parts.append(kind.group(1) + (".block_scale" if "block_scale" in opcode else ""))
    else:
        types = [t for t in opcode.split(".") if t in _TYPES]
        if types:
            parts.append(types[0])
    return " ".join(parts)
