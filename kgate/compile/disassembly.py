"""The SASS of some functions of a cubin, as `cuobjdump -sass` lists them, without the encoding words.

`nvdisasm -fun` disassembles only the code sections of the functions named (by their symbols' indices): about
half a second for a cubin, where the whole of a template-heavy file's cubin takes three seconds of `cuobjdump`
and its listing (28 MB for 183 functions) has to be read through for the few functions a run wants.
`cuobjdump -fun` gives the same instructions but costs about a quarter of a second per function named.

nvdisasm names a branch's target by a label (`` BRA `(.L_x_3) ``) where cuobjdump prints its address
(`BRA 0x350`): each label is replaced by the address of the instruction it stands before, so that the text is
cuobjdump's, byte for byte. Where that cannot be done (no nvdisasm, a symbol table this does not read, a target
outside the function's own section, a listing in columns) the whole cubin is listed by `cuobjdump -sass` instead.

Older tools (CUDA 12's, which Triton 3.6 ships) print each instruction's scheduling fields after it, padded into
columns whose widths both tools take from the longest text of everything they list: cuobjdump's from the whole
cubin, nvdisasm's from the functions named, its labels counted at their own length. No text of some functions can
be made the whole listing's there; an nvdisasm found to write columns is not run again (`_COLUMNS`, by its
identity: its path and file state), and its cubins are listed by cuobjdump alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from kgate.compile.elf import function_symbols
from kgate.support import tools

# cuobjdump's listing: a function's header, an instruction line (its address first), an encoding comment.
_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_SASS_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/")
_SASS_ENCODING = re.compile(r"/\*\s*0x[0-9a-f]+\s*\*/")
# nvdisasm's listing: a code section's start, a label on its own line, a label named as an operand.
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_LABEL = re.compile(r"^\s*([.$\w]+):\s*$")
_TARGET = re.compile(r"`\(([^)`]*)\)")
# An instruction padded into columns: its text, then spaces up to a scheduling field (`&wr=0x1`, `?trans5`).
_COLUMNED = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S(?:.*?\S)? {2,}[&?]\w", re.MULTILINE)

# The nvdisasm builds met in this process, by their identity: whether their listing is in columns.
_COLUMNS: dict[str, bool] = {}


def disassemble_functions(cubin: Path, symbols: list[str]) -> str:
    """The SASS of `symbols` (those the cubin defines, in its order): each function's `Function :` line and its
    instruction lines, as `sass_functions` takes them from the whole cubin's `cuobjdump -sass` listing."""
    listed = _nvdisasm_functions(cubin, symbols)
    if listed is not None:
        return listed
    cuobjdump = tools.require_tool("cuobjdump")
    return sass_functions(tools.run([str(cuobjdump), "-sass", str(cubin)], timeout=600).stdout, symbols)


def sass_functions(listing: str, symbols: list[str]) -> str:
    """The parts of a `cuobjdump -sass` listing that belong to `symbols`: each function's `Function :` line and its
    instruction lines, without the encoding words (`/* 0x... */`, half of the listing's bytes), which no rule reads."""
    wanted = set(symbols)
    out: list[str] = []
    keep = False
    for line in listing.splitlines():
        head = _SASS_FUNCTION.match(line)
        if head:
            keep = head.group(1) in wanted
            if keep:
                out.append(line.strip())
        elif keep and _SASS_INSTRUCTION.match(line):
            out.append(_SASS_ENCODING.sub("", line).strip())
    return "\n".join(out) + "\n" if out else ""


def _nvdisasm_functions(cubin: Path, symbols: list[str]) -> str | None:
    """`disassemble_functions` by `nvdisasm -fun`; None where it cannot give cuobjdump's text."""
    nvdisasm = tools.bundled_tool("nvdisasm")
    try:
        indices = function_symbols(cubin.read_bytes())
        identity = tools.file_identity(nvdisasm) if nvdisasm is not None else ""
    except OSError:
        return None
    if nvdisasm is None or indices is None or _COLUMNS.get(identity):
        return None
    wanted = sorted({indices[name] for name in symbols if name in indices})
    if not wanted:
        return ""
    try:
        done = tools.run([str(nvdisasm), "-c", "-fun", ",".join(map(str, wanted)), str(cubin)], timeout=600)
    except tools.ToolFailed:
        return None
    _COLUMNS[identity] = in_columns(done.stdout)
    return None if _COLUMNS[identity] else _as_cuobjdump(done.stdout, set(symbols))


def in_columns(listing: str) -> bool:
    """Whether a listing pads its instructions into columns (the scheduling fields older tools print after each):
    widths taken over all that was listed, which the text of some functions cannot give."""
    return _COLUMNED.search(listing) is not None


def _as_cuobjdump(listing: str, wanted: set[str]) -> str | None:
    """An nvdisasm listing of code sections as `sass_functions` gives cuobjdump's: the wanted functions' headers and
    instructions, each label an operand names replaced by its address; None where a label is not in its section."""
    out: list[str] = []
    for name, lines in _sections(listing):
        if name not in wanted:
            continue
        out.append(f"Function : {name}")
        resolved = _resolved(lines)
        if resolved is None:
            return None
        out.extend(resolved)
    return "\n".join(out) + "\n" if out else ""


def _sections(listing: str) -> list[tuple[str, list[str]]]:
    """(function, its lines) of each code section of an nvdisasm listing, in its order."""
    out: list[tuple[str, list[str]]] = []
    for line in listing.splitlines():
        section = _SECTION.match(line)
        if section:
            out.append((section.group(1), []))
        elif out:
            out[-1][1].append(line)
    return out


def _resolved(lines: list[str]) -> list[str] | None:
    """A section's instruction lines (stripped), each label an operand names replaced by its address."""
    at: dict[str, str] = {}
    pending: list[str] = []
    instructions: list[str] = []
    for line in lines:
        label = _LABEL.match(line)
        if label:
            pending.append(label.group(1))
            continue
        found = _SASS_INSTRUCTION.match(line)
        if found:
            for name in pending:
                at[name] = hex(int(found.group(1), 16))
            pending = []
            instructions.append(line.strip())
    try:
        return [_TARGET.sub(lambda m: at[m.group(1)], text) if "`(" in text else text for text in instructions]
    except KeyError:
        return None
