"""SASS from `cuobjdump -sass`: opcode counts per function.

    Function : NAME
    ...
        /*0120*/                   ACQBULK ;    /* 0x... */
        /*00e0*/              @!P0 LDG.E R9, desc[UR4][R2.64] ;

The opcode is the first token after an optional predicate, with its dotted
modifiers (`LDG.E.128`, `HMMA.16816.F32.BF16`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# An instruction's text: an optional predicate, then its opcode with its dotted modifiers (read so of nvdisasm's
# listing too, `kgate.facts.listing`). An addressed line: its address, the instruction, its operands; and the
# target of a branch (`BRA 0x1d0`, `@!P0 BRA 0x1d0 ;`).
_INSTRUCTION = r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)"
_OPCODE = re.compile(_INSTRUCTION)
_ADDRESSED = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+" + _INSTRUCTION + r"([^;]*)")
_BRANCH_TARGET = re.compile(r"\b0x([0-9a-f]+)\b")

MMA_HEADS = ("HMMA", "QMMA", "OMMA", "IMMA", "UTCQMMA", "UTCOMMA", "UTCHMMA", "HGMMA", "QGMMA", "UTCMMA")


@dataclass(frozen=True)
class SassSummary:
    """Opcode counts of one function: what rules and reports read of its SASS."""

    opcodes: dict[str, int]

    def count(self, prefix: str) -> int:
        return sum(n for op, n in self.opcodes.items() if op == prefix or op.startswith(prefix + "."))

    @property
    def mma(self) -> dict[str, int]:
        """Tensor-core instructions (HMMA, QMMA, OMMA, HGMMA, ...) by full opcode."""
        return {op: n for op, n in self.opcodes.items() if op.split(".")[0] in MMA_HEADS}

    def family(self, head: str) -> dict[str, int]:
        """Every form of one instruction (`LDG` -> LDG.E, LDG.E.128, ...) by full opcode."""
        return {op: n for op, n in self.opcodes.items() if op.split(".")[0] == head}

    @property
    def global_loads(self) -> dict[str, int]:
        """Global load widths: LDG forms by modifier (LDG.E = 32 bit, LDG.E.128, ...)."""
        return self.family("LDG")

    @property
    def spill_instructions(self) -> int:
        return self.count("STL") + self.count("LDL")


@dataclass(frozen=True)
class SassFunction(SassSummary):
    name: str = ""


def opcode(instruction: str) -> str | None:
    """The opcode of an instruction's text without its address (`@!P0 LDG.E R9, ...` -> `LDG.E`), as
    `parse_sass` counts it."""
    found = _OPCODE.match(instruction)
    return found.group(1) if found else None


def parse_sass(text: str) -> dict[str, SassFunction]:
    return {name: SassFunction(dict(sorted(Counter(op for _, op, _ in body).items())), name)
            for name, body in _functions(text).items()}


def local_in_loops(text: str) -> dict[str, tuple[int, int]]:
    """Per function, how many local-memory loads (`LDL`) and stores (`STL`) sit inside a loop.

    A loop is the span from a branch's target back up to the branch (`BRA` to a lower address); a branch to
    itself is the idle loop after `EXIT`, not a loop. An instruction inside any such span runs once per
    iteration (or more): local memory there is paid on every trip, not once.
    """
    found: dict[str, tuple[int, int]] = {}
    for name, body in _functions(text).items():
        loops = [(target, address) for address, op, operands in body if op.split(".")[0] == "BRA"
                 for target in _branch_targets(operands) if target < address]
        inside = Counter(op.split(".")[0] for address, op, _ in body
                         if op.split(".")[0] in ("LDL", "STL") and any(lo <= address <= hi for lo, hi in loops))
        found[name] = (inside["LDL"], inside["STL"])
    return found


def _functions(text: str) -> dict[str, list[tuple[int, str, str]]]:
    functions: dict[str, list[tuple[int, str, str]]] = {}
    current: list[tuple[int, str, str]] | None = None
    for line in text.splitlines():
        head = _FUNCTION.match(line)
        if head:
            current = functions.setdefault(head.group(1), [])
            continue
        instr = _ADDRESSED.match(line) if current is not None else None
        if instr and current is not None:
            current.append((int(instr.group(1), 16), instr.group(2), instr.group(3)))
    return functions


def _branch_targets(operands: str) -> list[int]:
    return [int(m.group(1), 16) for m in _BRANCH_TARGET.finditer(operands)]
