"""A cubin's ELF64 structure: its sections by name, and its function symbols' indices.

The compile stage reads the symbol table to name the functions it disassembles (`nvdisasm -fun` takes symbol
indices, `kgate.compile.disassembly`); the facts stage reads sections' bytes (`kgate.facts.cubin`: each function's
code and its jump tables). Only little-endian ELF64 files are read, as every cubin is.
"""

from __future__ import annotations

import struct

_MAGIC = b"\x7fELF"
_SYMTAB = 2  # SHT_SYMTAB; its link is the section of the symbols' names
_SYMBOL_SIZE = 24  # an Elf64_Sym: name offset, info, other, section index, value, size
_FUNC = 2  # STT_FUNC, the low four bits of a symbol's info
_SIZED = 0x04  # EIFMT_SVAL: an `.nv.info` attribute with a 16-bit size and that many bytes; others are 4 bytes in all
_REGCOUNT = 0x2F  # EIATTR_REGCOUNT: a function's symbol index and its registers per thread


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


def sections(data: bytes, prefix: str) -> dict[str, bytes]:
    """The bytes of each section whose name starts with `prefix`, by the rest of its name; empty when `data` is not
    a little-endian ELF64 file it can read."""
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


def register_counts(data: bytes) -> dict[str, int]:
    """Function name -> the registers per thread ptxas gave it, as the cubin records them (`EIATTR_REGCOUNT` in its
    `.nv.info` section: the function's symbol index and its count); empty when `data` is not a cubin this reads."""
    symbols = function_symbols(data)
    info = sections(data, ".nv.info").get("")
    if not symbols or info is None:
        return {}
    by_index = {index: name for name, index in symbols.items()}
    out = {}
    for attribute, value in nv_info_attributes(info):
        if attribute == _REGCOUNT and len(value) == 8:
            index, count = struct.unpack_from("<II", value)
            if index in by_index:
                out[by_index[index]] = count
    return out


def nv_info_attributes(info: bytes) -> list[tuple[int, bytes]]:
    """The sized attributes (`EIFMT_SVAL`: a 16-bit size and that many bytes) of an `.nv.info` section, each as its
    attribute number and value, in order; the others (4 bytes in all) are passed over. What follows bytes that do
    not read as an attribute is left out."""
    out = []
    at = 0
    try:
        while at + 4 <= len(info):
            form, attribute = info[at], info[at + 1]
            if form != _SIZED:
                at += 4
                continue
            (size,) = struct.unpack_from("<H", info, at + 2)
            out.append((attribute, info[at + 4:at + 4 + size]))
            at += 4 + size
    except struct.error:
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
