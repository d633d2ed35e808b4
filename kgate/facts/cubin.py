"""The machine code of a cubin's functions: the bytes of its `.text.<function>` sections (ELF64).

Two builds of the same code differ in their line tables (file paths, line numbers) and so in their cubin
files, but not in these bytes: equal bytes are the same instruction stream, encodings and scheduling bits
included (branches are relative), so `kgate diff` needs no disassembly to call such variants identical.
"""

from __future__ import annotations

import struct

_MAGIC = b"\x7fELF"


def text_sections(data: bytes) -> dict[str, bytes]:
    """Function name -> code bytes; empty when `data` is not a little-endian ELF64 file it can read."""
    if len(data) < 64 or data[:4] != _MAGIC or data[4] != 2 or data[5] != 1:
        return {}
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + n * shentsize) for n in range(shnum)]
        names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
        names = data[names_at:names_at + names_size]
        out = {}
        for name_offset, _type, _flags, _addr, offset, size in headers:
            end = names.find(b"\0", name_offset)
            name = names[name_offset:end].decode("utf-8", "replace")
            if name.startswith(".text.") and offset + size <= len(data):
                out[name[len(".text."):]] = data[offset:offset + size]
        return out
    except (struct.error, IndexError):
        return {}
