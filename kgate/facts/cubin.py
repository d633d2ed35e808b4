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

_MAGIC = b"\x7fELF"


_SYMTAB = 2  # SHT_SYMTAB; its link is the section of the symbols' names
_SYMBOL_SIZE = 24  # an Elf64_Sym: name offset, info, other, section index, value, size
_FUNC = 2  # STT_FUNC, the low four bits of a symbol's info
_INDIRECT_BRANCH_TARGETS = 0x34  # EIATTR_INDIRECT_BRANCH_TARGETS
_SIZED = 0x04  # EIFMT_SVAL: a 16-bit size and that many bytes follow; every other format is 4 bytes in all


def text_sections(data: bytes) -> dict[str, bytes]:
    """Function name -> code bytes; empty when `data` is not a little-endian ELF64 file it can read."""
    return _sections(data, ".text.")


def function_symbols(data: bytes) -> dict[str, int] | None:
    """Function name -> the index of its symbol in the symbol table (what `nvdisasm -fun` takes); None when `data`
    is not a little-endian ELF64 file with a symbol table this reads."""
    headers = _headers(data)
    table = next((h for h in headers or () if h[1] == _SYMTAB), None)
    if headers is None or table is None:
        return None
    try:
        names_at, names_size = headers[table[6]][4], headers[table[6]][5]
        names = data[names_at:names_at + names_size]
        out: dict[str, int] = {}
        for index in range(table[5] // _SYMBOL_SIZE):
            name_offset, info = struct.unpack_from("<IB", data, table[4] + index * _SYMBOL_SIZE)
            if info & 0xF == _FUNC:
                out.setdefault(names[name_offset:names.find(b"\0", name_offset)].decode("utf-8", "replace"), index)
        return out
    except (struct.error, IndexError):
        return None


def indirect_branches(data: bytes) -> dict[str, dict[int, tuple[int, ...]]]:
    """Function name -> {address of an indirect branch: the addresses it may jump to}; empty where the cubin
    records none (or is not one this reads)."""
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for function, info in _sections(data, ".nv.info.").items():
        tables = dict(_branch_tables(info))
        if tables:
            out[function] = tables
    return out


def _branch_tables(info: bytes) -> list[tuple[int, tuple[int, ...]]]:
    """The indirect branches an `.nv.info.<function>` section lists: (offset, its targets) each."""
    out = []
    at = 0
    try:
        while at + 4 <= len(info):
            form, attribute = info[at], info[at + 1]
            if form != _SIZED:
                at += 4
                continue
            (size,) = struct.unpack_from("<H", info, at + 2)
            value, at = info[at + 4:at + 4 + size], at + 4 + size
            if attribute != _INDIRECT_BRANCH_TARGETS:
                continue
            cursor = 0
            while cursor + 12 <= len(value):  # offset, two 16-bit fields, a count, then the targets
                offset, _kind, _unused, count = struct.unpack_from("<IHHI", value, cursor)
                targets = struct.unpack_from(f"<{count}I", value, cursor + 12)
                out.append((offset, tuple(targets)))
                cursor += 12 + 4 * count
    except struct.error:  # a record cut short: what was read before it stands
        pass
    return out


def _headers(data: bytes) -> list[tuple[int, ...]] | None:
    """Each section's header (name offset, type, flags, address, offset, size, link); None when `data` is not a
    little-endian ELF64 file."""
    if len(data) < 64 or data[:4] != _MAGIC or data[4] != 2 or data[5] != 1:
        return None
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        return [struct.unpack_from("<IIQQQQI", data, shoff + n * shentsize) for n in range(shnum)]
    except struct.error:
        return None


def _sections(data: bytes, prefix: str) -> dict[str, bytes]:
    """The bytes of each section whose name starts with `prefix`, by the rest of its name."""
    headers = _headers(data)
    if headers is None:
        return {}
    try:
        (shstrndx,) = struct.unpack_from("<H", data, 0x3E)
        names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
        names = data[names_at:names_at + names_size]
        out = {}
        for name_offset, _type, _flags, _addr, offset, size, _link in headers:
            end = names.find(b"\0", name_offset)
            name = names[name_offset:end].decode("utf-8", "replace")
            if name.startswith(prefix) and offset + size <= len(data):
                out[name[len(prefix):]] = data[offset:offset + size]
        return out
    except (struct.error, IndexError):
        return {}
