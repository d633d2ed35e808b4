"""SASS listings from `nvdisasm -g -c -hex`: each function's instruction stream, ready to compare.

    //--------------------- .text.matmul_kernel --------------------------
    ...
        //## File "/src/kernels/gemm.py", line 58
        /*0100*/              @!P0 BRA `(.L_x_3) ;       /* 0x0000000400b48947 */
                                                         /* 0x000fea0003800000 */

An instruction is kept as its text (predicate, opcode, operands, constant-bank offsets included) and its
encoding words (which also hold the scheduling bits), with the source line the line table gives it. Only
what differs between two builds of the same code is left out: the instruction's address, and the names of
labels and symbols (numbered in order of first use), so two revisions whose machine code is the same
compare equal however the code around them moved.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from kgate.facts.ptx_text import QUOTED, unquoted
from kgate.facts.sass import MMA_HEADS, SassSummary, opcode

_SECTION = re.compile(r"^//-+\s+\.text\.(\S+)\s+-+")
_LOCATION = re.compile(r'^\s*//## File ' + QUOTED + r', line (\d+)')
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(.*?;)\s*(?:/\*\s*(0x[0-9a-f]+)\s*\*/)?\s*$")
_MORE_ENCODING = re.compile(r"^\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
_SYMBOL = re.compile(r"`\(([^)]*)\)|@(lo|hi)\(([^)]*)\)")
_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


@dataclass(frozen=True)
class Instruction:
    text: str  # "@!P0 BRA `(L1) ;": whitespace collapsed, labels and symbols numbered
    encoding: str  # the instruction's words, "0x...:0x..."
    file: str = ""  # the source file the line table names ("" where it names none)
    line: int = 0

    @property
    def opcode(self) -> str:
        return _PREDICATE.sub("", self.text).split(" ", 1)[0].rstrip(";")

    def same_code(self, other: Instruction) -> bool:
        return self.text == other.text and self.encoding == other.encoding

    def to_json(self) -> list[object]:
        return [self.text, self.encoding, self.file, self.line]

    @classmethod
    def from_json(cls, data: list[object]) -> Instruction:
        text, encoding, file, line = data
        if not (isinstance(text, str) and isinstance(encoding, str) and isinstance(file, str)
                and isinstance(line, int)):
            raise TypeError("an instruction record with the wrong types")
        return cls(text, encoding, file, line)


def opcode_counts(instructions: tuple[Instruction, ...]) -> SassSummary:
    """What `parse_sass` reads of a function's `cuobjdump -sass` text, from its listing: the opcode counts, each
    opcode read as `parse_sass` reads it (the two tools disassemble the same machine code alike)."""
    found = (opcode(i.text) for i in instructions)
    return SassSummary(dict(sorted(Counter(op for op in found if op).items())))


def parse_listing(text: str) -> dict[str, tuple[Instruction, ...]]:
    """Every function of a listing, by its symbol, as its normalised instruction stream."""
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    names: dict[str, str] = {}
    location = ("", 0)
    for raw in text.splitlines():
        section = _SECTION.match(raw)
        if section:
            current = functions.setdefault(section.group(1), [])
            names, location = {}, ("", 0)
            continue
        if current is None:
            continue
        found = _LOCATION.match(raw)
        if found:
            location = (unquoted(found.group(1)), int(found.group(2)))
            continue
        instr = _INSTRUCTION.match(raw)
        if instr:
            current.append(Instruction(_normalised(instr.group(1), names), instr.group(2) or "", *location))
            continue
        more = _MORE_ENCODING.match(raw)
        if more and current:
            last = current[-1]
            current[-1] = Instruction(last.text, f"{last.encoding}:{more.group(1)}", last.file, last.line)
    return {name: tuple(instrs) for name, instrs in functions.items()}


def same_code(a: tuple[Instruction, ...], b: tuple[Instruction, ...]) -> bool:
    """Whether two instruction streams are the same machine code (source lines aside)."""
    return len(a) == len(b) and all(x.same_code(y) for x, y in zip(a, b))


def _normalised(text: str, names: dict[str, str]) -> str:
    def number(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return f"`({names.setdefault(match.group(1), f'L{len(names)}')})"
        return f"@{match.group(2)}({names.setdefault(match.group(3), f'L{len(names)}')})"

    return _SYMBOL.sub(number, " ".join(text.split()))


# The families a change of machine code is summarised by: what moves a kernel's performance.
_LOADS_STORES = ("LDG", "STG", "LDS", "STS", "LDGSTS", "LDC")
_GRID_DEPENDENCE = ("ACQBULK", "PREEXIT")


def family(opcode: str) -> str | None:
    """The histogram family of an opcode: an MMA by its whole opcode (`HMMA.16816.F32.BF16`: the kind of MMA is
    what a toolchain change moves), `LDG.128`, `LDS.64`, `LDL`, `BAR`, ...; None for the rest."""
    parts = opcode.split(".")
    head = parts[0]
    if head in MMA_HEADS:
        return opcode
    if head in ("LDL", "STL"):
        return head
    if head in ("BAR", "SYNCS", "MEMBAR", "DEPBAR", "LDGDEPBAR"):
        return "BAR" if head == "BAR" else head
    if head in _GRID_DEPENDENCE:
        return "griddepcontrol"
    if head in ("LDSM", "STSM", "UTMALDG", "UTMASTG", "UBLKCP"):
        return head
    if head in _LOADS_STORES and head != "LDC":
        return f"{head}.{_width(parts[1:])}"
    return None


def _width(modifiers: list[str]) -> int:
    for modifier in modifiers:
        if modifier in ("128", "64", "32", "16"):
            return int(modifier)
        if modifier in ("U8", "S8"):
            return 8
        if modifier in ("U16", "S16"):
            return 16
    return 32


def histogram(instructions: tuple[Instruction, ...]) -> dict[str, int]:
    """Instructions per family, and `total`."""
    counts: Counter[str] = Counter()
    for instr in instructions:
        name = family(instr.opcode)
        if name is not None:
            counts[name] += 1
    counts["total"] = len(instructions)
    return dict(sorted(counts.items()))
