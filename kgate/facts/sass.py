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
_ADDRESSED = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)")
# A branch or return taken only sometimes: a guard on it, or a predicate among its operands (`BRA.U !UP0, 0x3c0`).
_CONDITION = re.compile(r"^@|(?:^|[\s,!])U?P[0-6]\b")
_BRANCH_TARGET = re.compile(r"\b0x([0-9a-f]+)\b")
_GUARD = re.compile(r"^\s*@!?U?P\w+\s+")
_REGISTER = re.compile(r"U?R\d+|URZ|RZ")

INDIRECT = ("BRX", "BRXU", "JMX", "JMXU")  # jumps through a register: the cubin lists their targets
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


@dataclass(frozen=True)
class LocalUse:
    """A function's local-memory instructions: (LDL, STL) inside a loop of its listing, and in all of it."""

    in_loops: tuple[int, int]
    total: tuple[int, int]


def local_in_loops(text: str, indirect: dict[str, dict[int, tuple[int, ...]]] | None = None
                   ) -> dict[str, LocalUse]:
    """Per function, how many local-memory loads (`LDL`) and stores (`STL`) sit inside a loop.

    A loop is the span from a branch's target back up to the branch (a jump to a lower address); a branch to
    itself is the idle loop after `EXIT`, not a loop. A `BRA` names its target; an indirect branch (`BRX R8
    -0x200`, `BRXU`, `JMX`: through a jump table) goes to each address the cubin lists for it (`indirect`:
    function -> {its address: the targets}, `kgate.facts.cubin.indirect_branches`). A subroutine of the
    listing (a `__noinline__` function ptxas placed after the kernel's `EXIT`) that a `CALL.REL` inside a loop
    calls runs on every trip too: everything from its start to its `RET`. An instruction inside any of these
    runs once per iteration (or more): local memory there is paid on every trip, not once.
    """
    found: dict[str, LocalUse] = {}
    for name, body in _functions(text).items():
        looped = _looped(body, (indirect or {}).get(name, {}))
        inside = Counter(op.split(".")[0] for address, op, _operands in body if address in looped)
        every = Counter(op.split(".")[0] for _address, op, _operands in body)
        found[name] = LocalUse((inside["LDL"], inside["STL"]), (every["LDL"], every["STL"]))
    return found


@dataclass(frozen=True)
class GlobalLoad:
    """A global load (`LDG`) of a loop's body: its opcode, the bits it reads per thread, its address as a register
    and a byte offset (`[R2.64+0x10]`: "R2", 16; the register "" where the address is not that simple), and whether
    every trip reaches it (False where a branch of the loop's body, before it, jumps past it: one side of an `if`)."""

    opcode: str
    bits: int
    base: str
    offset: int
    every_trip: bool = True


@dataclass(frozen=True)
class LoopLoads:
    """The global loads that one trip of a loop of a function's listing makes: those inside the loop's span (from
    the backward branch's target to the branch) and inside no loop nested in it."""

    first: int  # the address of the loop's first instruction
    last: int  # the address of its backward branch
    loads: tuple[GlobalLoad, ...]


# An LDG's modifiers that say how many bits it reads (LDG.E = 32); U8/S8 and U16/S16 load one narrow element.
_LOAD_BITS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}
# An address: a register (or uniform register) of 32 or 64 bits and an optional immediate byte offset, the last
# bracketed operand (`desc[UR4][R2.64+0x10]`, `[R4+-0x8]`), before the scoreboard an older cuobjdump prints
# (`&wr=0x2 ?trans4`).
_ADDRESS = re.compile(r"\[(U?R\d+)(?:\.64)?(?:\+(-?)(0x[0-9a-f]+|\d+))?\](?:\s+[&?][^\[\]]*)?\s*$")


def load_width(opcode: str) -> int:
    """The bits an `LDG` reads per thread, from its modifiers (`LDG.E.U8`: 8, `LDG.E.128`: 128, `LDG.E`: 32)."""
    return next((_LOAD_BITS[part] for part in reversed(opcode.split(".")[1:]) if part in _LOAD_BITS), 32)


def loop_loads(text: str, indirect: dict[str, dict[int, tuple[int, ...]]] | None = None
               ) -> dict[str, tuple[LoopLoads, ...]]:
    """Per function, the global loads of each trip of each of its loops (the loops whose body loads anything).

    A loop is the span from a backward branch's target up to the branch (every branch back to one target is one
    loop: the latest of them ends it; a `BRX` through a jump table goes where the cubin says, `indirect`). Each
    load belongs to the innermost loop around it: what one trip of that loop reads; a load that a branch inside the
    loop, before it, jumps past (to a place inside the loop) is not read on every trip (`GlobalLoad.every_trip`)."""
    found: dict[str, tuple[LoopLoads, ...]] = {}
    for name, body in _functions(text).items():
        ends: dict[int, int] = {}
        for address, op, operands in body:
            for target in _jump_targets(address, op, operands, (indirect or {}).get(name, {})):
                if target < address:
                    ends[target] = max(ends.get(target, address), address)
        spans = sorted(ends.items(), key=lambda span: span[1] - span[0])
        forward = [(address, target) for address, op, operands in body
                   for target in _jump_targets(address, op, operands, (indirect or {}).get(name, {})) if target > address]
        trips: dict[tuple[int, int], list[GlobalLoad]] = {}
        for address, op, operands in body:
            if op.split(".")[0] != "LDG":
                continue
            span = next(((lo, hi) for lo, hi in spans if lo <= address <= hi), None)
            if span is not None:
                # A jump out of the loop (past its back edge) ends the trip that takes it: not one side of an `if`.
                skipped = any(span[0] <= at < address < target <= span[1] for at, target in forward)
                trips.setdefault(span, []).append(_global_load(op, operands, every_trip=not skipped))
        found[name] = tuple(LoopLoads(lo, hi, tuple(loads)) for (lo, hi), loads in sorted(trips.items()))
    return found


def _global_load(op: str, operands: str, *, every_trip: bool) -> GlobalLoad:
    address = _ADDRESS.search(operands.strip())
    if address is None:
        return GlobalLoad(op, load_width(op), "", 0, every_trip)
    sign, offset = address.group(2), address.group(3) or "0"
    value = int(offset, 16) if offset.startswith("0x") else int(offset)
    return GlobalLoad(op, load_width(op), address.group(1), -value if sign else value, every_trip)


def _looped(body: list[tuple[int, str, str]], tables: dict[int, tuple[int, ...]]) -> set[int]:
    """The addresses of a listing that run once per trip of some loop: inside a loop's span, or in a
    subroutine called from there. A call through a register (`CALL.REL.NOINC R2 0x0`: a function pointer) may
    reach any subroutine: all that the function's own code, walked from its start, does not reach."""
    loops = [(target, address) for address, op, operands in body
             for target in _jump_targets(address, op, operands, tables) if target < address]
    looped = {address for address, _op, _operands in body if any(lo <= address <= hi for lo, hi in loops)}
    calls = {address: target for address, op, operands in body if op.startswith("CALL.REL")
             and not _through_register(operands) for target in _jump_targets(address, "BRA", operands, tables)[:1]}
    if any(address in looped and op.startswith("CALL") and _through_register(operands)
           for address, op, operands in body):
        own = _reached(body, body[0][0], tables)
        looped |= {address for address, _op, _operands in body if address not in own}
    pending = [target for address, target in calls.items() if address in looped]
    while pending:
        for address in _reached(body, pending.pop(), tables):
            if address not in looped:
                looped.add(address)
                if address in calls:
                    pending.append(calls[address])
    return looped


def _through_register(operands: str) -> bool:
    """Whether a call's target is a register's value (its first operand, after any guard)."""
    words = _GUARD.sub("", operands).split()
    return bool(words) and _REGISTER.fullmatch(words[0].rstrip(",")) is not None


def _reached(body: list[tuple[int, str, str]], start: int, tables: dict[int, tuple[int, ...]]) -> set[int]:
    """The addresses a walk from `start` reaches before it returns: through branches and past calls."""
    position = {address: index for index, (address, _op, _operands) in enumerate(body)}
    seen: set[int] = set()
    work = [start]
    while work:
        address = work.pop()
        if address in seen or address not in position:
            continue
        seen.add(address)
        index = position[address]
        _at, op, operands = body[index]
        head = op.split(".")[0]
        after = [body[index + 1][0]] if index + 1 < len(body) else []
        conditional = _CONDITION.search(operands) is not None
        if head in ("RET", "EXIT"):
            work.extend(after if conditional else [])
        elif head == "BRA" or head in INDIRECT:
            work.extend(_jump_targets(address, op, operands, tables) + (after if conditional else []))
        else:
            work.extend(after)
    return seen


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
            # The operands keep a guard in front, so that a walk can tell a branch taken only sometimes.
            current.append((int(instr.group(1), 16), instr.group(3), (instr.group(2) or "") + instr.group(4)))
    return functions


def _jump_targets(address: int, op: str, operands: str, tables: dict[int, tuple[int, ...]]) -> list[int]:
    """Where a branch goes: a `BRA`'s target, an indirect branch's listed targets (its operand is a register and
    an offset, no address), nothing for any other instruction."""
    head = op.split(".")[0]
    if head == "BRA":
        return [int(m.group(1), 16) for m in _BRANCH_TARGET.finditer(operands)]
    if head in INDIRECT:
        return list(tables.get(address, ()))
    return []
