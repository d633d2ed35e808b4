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
from collections.abc import Iterable, Mapping
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

    A loop is the code on a cycle through a branch back to a lower address (`_Flow.loops`: a branch back that closes
    no cycle, from a warp shuffle's fallback after `EXIT`, makes none); a branch to itself is the idle loop after
    `EXIT`, not a loop. A `BRA` names its target; an indirect branch (`BRX R8
    -0x200`, `BRXU`, `JMX`: through a jump table) goes to each address the cubin lists for it (`indirect`:
    function -> {its address: the targets}, `kgate.facts.cubin.indirect_branches`). A subroutine of the
    listing (a `__noinline__` function ptxas placed after the kernel's `EXIT`) that a `CALL.REL` inside a loop
    calls runs on every trip too: everything from its start to its `RET`. An instruction inside any of these
    runs once per iteration (or more): local memory there is paid on every trip, not once.
    """
    found: dict[str, LocalUse] = {}
    for name, body in _functions(text).items():
        looped = _Flow(body, (indirect or {}).get(name, {})).looped()
        inside = Counter(op.split(".")[0] for address, op, _operands in body if address in looped)
        every = Counter(op.split(".")[0] for _address, op, _operands in body)
        found[name] = LocalUse((inside["LDL"], inside["STL"]), (every["LDL"], every["STL"]))
    return found


@dataclass(frozen=True)
class GlobalLoad:
    """A global load (`LDG`) of a loop's body: its opcode, the bits it reads per thread, its address as a register
    and a byte offset (`[R2.64+0x10]`: "R2", 16; the register "" where the address is not that simple), and whether
    every trip reaches it (False where a path of a trip passes it by: one side of an `if`)."""

    opcode: str
    bits: int
    base: str
    offset: int
    every_trip: bool = True


@dataclass(frozen=True)
class LoopLoads:
    """The global loads that one trip of a loop of a function's listing makes: those inside the loop (`_Flow.loops`: on
    a cycle through its backward branches) and inside no loop nested in it. `first` and `last` are the lowest and
    the highest address of the loop."""

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

    A loop is the code on a cycle through the branches back to one address (`_Flow.loops`; a `BRX` through a jump table
    goes where the cubin says, `indirect`). Each load belongs to the innermost loop around it: what one trip of
    that loop reads; so does each load of a subroutine of the listing (a `__noinline__` function ptxas placed after
    the kernel's `EXIT`) that a `CALL.REL` of the loop calls, outside the subroutine's own loops. A load that a
    path of a trip passes by (one side of an `if`; a trip that leaves the loop ends there) is not read on every trip
    (`GlobalLoad.every_trip`), nor is one of a call that such a path passes by, or one a path through the
    subroutine passes by."""
    found: dict[str, tuple[LoopLoads, ...]] = {}
    for name, body in _functions(text).items():
        flow = _Flow(body, (indirect or {}).get(name, {}))
        loops = sorted(flow.loops().items(), key=lambda item: len(item[1]))
        trips: dict[frozenset[int], list[GlobalLoad]] = {}
        for address, op, operands in body:
            head, loop = next(((head, loop) for head, loop in loops if address in loop), (0, None))
            if loop is None:
                continue
            # A jump out of the loop ends the trip that takes it: what follows is not one side of an `if`.
            every = address in flow.every_trip(head)
            if op.split(".")[0] == "LDG":
                trips.setdefault(loop, []).append(_global_load(op, operands, every_trip=every))
            elif address in flow.calls:
                trips.setdefault(loop, []).extend(flow.called_loads(flow.calls[address], every))
        found[name] = tuple(sorted((LoopLoads(min(loop), max(loop), tuple(loads)) for loop, loads in trips.items()
                                    if loads), key=lambda trip: (trip.first, trip.last)))
    return found


class _Flow:
    """The control flow of one function of a listing: where each instruction goes, its loops, its calls."""

    def __init__(self, body: list[tuple[int, str, str]], tables: dict[int, tuple[int, ...]]) -> None:
        self.body = body
        self.code = {address: (op, operands) for address, op, operands in body}
        self.edges = _successors(body, tables)
        self.branches = [(address, target) for address, op, operands in body
                         for target in _jump_targets(address, op, operands, tables)]
        # The calls to a subroutine of the listing, by their address: where each goes (`CALL.REL 0x200`).
        self.calls = {address: target for address, op, operands in body if op.startswith("CALL.REL")
                      and not _through_register(operands) for target in _jump_targets(address, "BRA", operands, tables)[:1]}
        self._reached: dict[int, set[int]] = {}
        self._loops: dict[int, frozenset[int]] | None = None
        self._ends: dict[int, set[int]] = {}
        self._every: dict[int, frozenset[int]] = {}  # by loop head
        self._every_call: dict[int, frozenset[int]] = {}  # by subroutine entry (which may be a loop head too)
        self._in_loops: frozenset[int] | None = None

    def reached(self, start: int) -> set[int]:
        """The addresses a walk from `start` reaches before it returns: through branches and past calls."""
        if start not in self._reached:
            self._reached[start] = _walk(self.edges, [start]) & self.edges.keys()
        return self._reached[start]

    def loops(self) -> dict[int, frozenset[int]]:
        """The loops, by the address their backward branches go to: the addresses on a cycle through those branches
        (reached from the target, and reaching one of the branches without passing the target). A branch back that
        closes no cycle is no loop: the out-of-line code ptxas places after `EXIT` (a warp shuffle's fallback for a
        diverged warp, `BRA.DIV`) jumps back to where it left, and what lies between is run once."""
        if self._loops is None:
            backs: dict[int, set[int]] = {}
            for address, target in self.branches:
                if target < address:
                    backs.setdefault(target, set()).add(address)
            before: dict[int, set[int]] = {}
            if backs:
                for address, following in self.edges.items():
                    for after in following:
                        before.setdefault(after, set()).add(address)
            self._loops = {}
            for target, ends in backs.items():
                cycle = self.reached(target) & _walk(before, sorted(ends), stop=target)
                if ends & cycle:
                    self._loops[target] = frozenset(cycle)
                    self._ends[target] = ends & cycle
        return self._loops

    def every_trip(self, head: int) -> frozenset[int]:
        """The addresses of the loop at `head` that every trip runs: on every path from its head to one of its
        branches back to it (a trip that leaves the loop ends there). Not those on one side of an `if`, nor those
        a branch jumps past to the out-of-line code ptxas placed after `EXIT`."""
        if head not in self._every:
            self._every[head] = _on_every_path(self.edges, head, self.loops()[head], self._ends[head])
        return self._every[head]

    def every_call(self, entry: int) -> frozenset[int]:
        """The addresses of the subroutine at `entry` that each call of it runs: on every path to its returns."""
        if entry not in self._every_call:
            region = self.reached(entry)
            returns = {address for address in region if self.code[address][0].split(".")[0] in ("RET", "EXIT")}
            self._every_call[entry] = _on_every_path(self.edges, entry, frozenset(region), returns)
        return self._every_call[entry]

    def called_loads(self, start: int, every: bool) -> list[GlobalLoad]:
        """The global loads a call of the subroutine at `start` makes outside the listing's loops (those of its own
        loops are their trips'), and of the subroutines it calls in turn; `every`: whether the trip reaches the
        call."""
        looping = self.in_loops()
        loads: list[GlobalLoad] = []
        done: set[int] = set()
        pending = [(start, every)]
        while pending:
            entry, reached = pending.pop()
            if entry in done:
                continue
            done.add(entry)
            region = self.reached(entry)
            every_call = self.every_call(entry)
            for address in sorted(region - looping):
                op, operands = self.code[address]
                every_trip = reached and address in every_call
                if op.split(".")[0] == "LDG":
                    loads.append(_global_load(op, operands, every_trip=every_trip))
                elif address in self.calls:
                    pending.append((self.calls[address], every_trip))
        return loads

    def in_loops(self) -> frozenset[int]:
        """The addresses inside some loop."""
        if self._in_loops is None:
            self._in_loops = frozenset().union(*self.loops().values())
        return self._in_loops

    def looped(self) -> set[int]:
        """The addresses that run once per trip of some loop: inside a loop (`loops`), or in a subroutine called
        from there. A call through a register (`CALL.REL.NOINC R2 0x0`: a function pointer) may reach any
        subroutine: all that the function's own code, walked from its start, does not reach."""
        looped = set(self.in_loops())
        if any(address in looped and op.startswith("CALL") and _through_register(operands)
               for address, op, operands in self.body):
            own = self.reached(self.body[0][0])
            looped |= {address for address, _op, _operands in self.body if address not in own}
        pending = [target for address, target in self.calls.items() if address in looped]
        while pending:
            for address in self.reached(pending.pop()):
                if address not in looped:
                    looped.add(address)
                    if address in self.calls:
                        pending.append(self.calls[address])
        return looped


def _on_every_path(edges: Mapping[int, Iterable[int]], root: int, region: frozenset[int], ends: set[int]
                   ) -> frozenset[int]:
    """The addresses of a region on every path from `root` to each of `ends` inside it: those that dominate all the
    ends (Cooper, Harvey and Kennedy's iterative dominators over the region's flow from `root`)."""
    order: list[int] = []  # reverse postorder from the root
    seen = {root}
    stack = [(root, iter(edges.get(root, ())))]
    while stack:
        node, following = stack[-1]
        after = next((a for a in following if a in region and a not in seen), None)
        if after is None:
            order.append(node)
            stack.pop()
        else:
            seen.add(after)
            stack.append((after, iter(edges.get(after, ()))))
    order.reverse()
    index = {node: at for at, node in enumerate(order)}
    before: dict[int, list[int]] = {}
    for node in order:
        for after in edges.get(node, ()):
            if after in index:
                before.setdefault(after, []).append(node)
    idom = {root: root}
    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            done = [p for p in before.get(node, ()) if p in idom]
            new = done[0]
            for other in done[1:]:
                new = _meet(idom, index, other, new)
            if idom.get(node) != new:
                idom[node] = new
                changed = True
    every: set[int] | None = None
    for end in ends:
        if end not in idom:
            continue
        chain = {end}
        while end != root:
            end = idom[end]
            chain.add(end)
        every = chain if every is None else every & chain
    return frozenset(every or ())


def _meet(idom: dict[int, int], index: dict[int, int], a: int, b: int) -> int:
    while a != b:
        while index[a] > index[b]:
            a = idom[a]
        while index[b] > index[a]:
            b = idom[b]
    return a


def _walk(edges: Mapping[int, Iterable[int]], starts: list[int], stop: int | None = None) -> set[int]:
    """The addresses a walk along `edges` from `starts` reaches (the starts included), going no further than
    `stop`."""
    seen: set[int] = set()
    work = list(starts)
    while work:
        address = work.pop()
        if address not in seen:
            seen.add(address)
            work.extend(edges.get(address, ()) if address != stop else ())
    return seen


def _successors(body: list[tuple[int, str, str]], tables: dict[int, tuple[int, ...]]) -> dict[int, list[int]]:
    """Where control goes after each instruction of a listing: through branches, past calls, nowhere after an
    `EXIT` or a `RET` that is always taken."""
    found = {}
    for index, (address, op, operands) in enumerate(body):
        head = op.split(".")[0]
        after = [body[index + 1][0]] if index + 1 < len(body) else []
        conditional = _conditional(op, operands)
        if head in ("RET", "EXIT"):
            found[address] = after if conditional else []
        elif head == "BRA" or head in INDIRECT:
            found[address] = _jump_targets(address, op, operands, tables) + (after if conditional else [])
        else:
            found[address] = after
    return found


def _conditional(op: str, operands: str) -> bool:
    """Whether a branch or return is taken only sometimes: a guard, a predicate among its operands, or a branch
    taken where the warp diverged (`BRA.DIV UR4, 0x3b0`)."""
    return _CONDITION.search(operands) is not None or "DIV" in op.split(".")[1:]


def _global_load(op: str, operands: str, *, every_trip: bool) -> GlobalLoad:
    address = _ADDRESS.search(operands.strip())
    if address is None:
        return GlobalLoad(op, load_width(op), "", 0, every_trip)
    sign, offset = address.group(2), address.group(3) or "0"
    value = int(offset, 16) if offset.startswith("0x") else int(offset)
    return GlobalLoad(op, load_width(op), address.group(1), -value if sign else value, every_trip)


def _through_register(operands: str) -> bool:
    """Whether a call's target is a register's value (its first operand, after any guard)."""
    words = _GUARD.sub("", operands).split()
    return bool(words) and _REGISTER.fullmatch(words[0].rstrip(",")) is not None


def _functions(text: str) -> dict[str, list[tuple[int, str, str]]]:
    """Each function's instructions: (address, opcode, guard and operands). Read, never changed, by its callers:
    a listing's readers ask in turn (its opcodes, its local memory in loops, its loads in loops), and the last
    listing's answer is kept for them (by the text's identity: strings are immutable)."""
    global _LAST_LISTING
    last = _LAST_LISTING  # one read: another thread may replace it meanwhile
    if text is last[0]:
        return last[1]
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
    _LAST_LISTING = (text, functions)
    return functions


_LAST_LISTING: tuple[str, dict[str, list[tuple[int, str, str]]]] = ("", {})


def _jump_targets(address: int, op: str, operands: str, tables: dict[int, tuple[int, ...]]) -> list[int]:
    """Where a branch goes: a `BRA`'s target, an indirect branch's listed targets (its operand is a register and
    an offset, no address), nothing for any other instruction."""
    head = op.split(".")[0]
    if head == "BRA":
        return [int(m.group(1), 16) for m in _BRANCH_TARGET.finditer(operands)]
    if head in INDIRECT:
        return list(tables.get(address, ()))
    return []
