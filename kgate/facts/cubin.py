"""What a cubin (ELF64) holds besides its listing: each function's machine code, and its jump tables.

The bytes of the `.text.<function>` sections: two builds of the same code differ in their line tables (file
paths, line numbers) and so in their cubin files, but not in these bytes: equal bytes are the same
instruction stream, encodings and scheduling bits included (branches are relative), so `kgate diff` needs no
disassembly to call such variants identical.

The targets of each indirect branch (`BRX R8 -0x200`: a jump through a table, from a `switch` or a PTX
`brx.idx`), which the SASS listing does not print: ptxas records them in the function's `.nv.info.<function>`
section (`EIATTR_INDIRECT_BRANCH_TARGETS`), and a loop whose back edge is such a jump is a loop all the same.
"""

from __future__ import annotations

import struct

from kgate.compile.elf import nv_info_attributes, sections

_INDIRECT_BRANCH_TARGETS = 0x34  # EIATTR_INDIRECT_BRANCH_TARGETS


def text_sections(data: bytes) -> dict[str, bytes]:
    """Function name -> code bytes; empty when `data` is not a little-endian ELF64 file it can read."""
    return sections(data, ".text.")


def indirect_branches(data: bytes) -> dict[str, dict[int, tuple[int, ...]]]:
    """Function name -> {address of an indirect branch: the addresses it may jump to}; empty where the cubin
    records none (or is not one this reads)."""
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for function, info in sections(data, ".nv.info.").items():
        tables = dict(_branch_tables(info))
        if tables:
            out[function] = tables
    return out


def _branch_tables(info: bytes) -> list[tuple[int, tuple[int, ...]]]:
    """The indirect branches an `.nv.info.<function>` section lists: (offset, its targets) each."""
    out = []
    for attribute, value in nv_info_attributes(info):
        if attribute != _INDIRECT_BRANCH_TARGETS:
            continue
        cursor = 0
        try:
            while cursor + 12 <= len(value):  # offset, two 16-bit fields, a count, then the targets
                offset, _kind, _unused, count = struct.unpack_from("<IHHI", value, cursor)
                targets = struct.unpack_from(f"<{count}I", value, cursor + 12)
                out.append((offset, tuple(targets)))
                cursor += 12 + 4 * count
        except struct.error:  # a record cut short: what was read before it stands
            break
    return out
