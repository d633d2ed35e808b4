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
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")

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


def parse_sass(text: str) -> dict[str, SassFunction]:
    functions: dict[str, Counter[str]] = {}
    current: Counter[str] | None = None
    for line in text.splitlines():
        head = _FUNCTION.match(line)
        if head:
            current = functions.setdefault(head.group(1), Counter())
            continue
        if current is None:
            continue
        instr = _INSTR.match(line)
        if instr:
            current[instr.group(1)] += 1
    return {name: SassFunction(dict(sorted(ops.items())), name) for name, ops in functions.items()}
