"""Which paths through a PTX function can run: branch conditions that no value of the function's arguments makes
true together.

nvcc unrolls a loop by four and keeps a remainder loop beside it; a `do { wait; } while (--n > 0);` becomes two
loops, each entered under its own condition on `n`, and the path that skips both (`max(n, 1) % 4 == 0` and `n - 1 <
3`) is one no `n` takes. A path-insensitive reading of the control flow follows it anyway and finds a return that
never waited. This module decides such conjunctions exactly, for the conditions it can read and no others:

- a predicate (`setp.<cmp>.<s32|u32|b32>`) written once in the function, whose operands are, through registers
  each written once, integer expressions of one 32-bit argument of the function (`ld.param` of its own parameter)
  and constants: `mov`, `add`, `sub`, `neg`, `mul.lo` and `shl` by a constant, signed and unsigned `min` / `max`,
  with 32-bit wrap-around; and `and` with a mask `2^k - 1`, which may then only be compared with a constant.
- A register or predicate written once and read from the arguments only has one value in a call, so the branches
  that test it agree on every path, in loops too.

Each such expression is a piecewise-linear function of the argument (segments of the 32-bit range on which it is
`a * n + b` exactly); a comparison is true on segments, a masked comparison on residues of `n` modulo a power of
two. A conjunction is unsatisfiable when no segment of the common refinement holds an `n` with an allowed residue.
Anything else (two arguments in one condition, 64-bit values, loads, a predicate written twice) is no condition:
the path stays, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kgate.facts.ptx import Block, Instruction

_MIN, _MAX = -(1 << 31), (1 << 31) - 1
_WRAP = 1 << 32
_MAX_SLOPE = 64  # a coefficient past this is not followed (nvcc's index arithmetic, not a trip count)
_MAX_MASK_BITS = 8  # residues modulo at most 256
_MAX_SEGMENTS = 64
_STATES = 16  # sets of conditions kept per block; past it, the block keeps the path-insensitive answer
_LITERALS = 8  # conditions one path keeps
_BUDGET = 1 << 16  # blocks visited in one function's flow
_BRANCHES = 64  # branches on conditions read, in one function: past it, the path-insensitive answer
_ALL = frozenset({0})  # every n (residues modulo 1)
_TYPES = ("s32", "u32", "b32")
_GUARD = re.compile(r"^@(!?)(%[\w]+)\s+")
_QUALIFIED = frozenset({("mul", "lo"), ("ld", "param")})
_PARAMETER = re.compile(r"[\w$]+_param_\d+")


class _Unknown(Exception):
    """A value or condition this reading does not follow."""


@dataclass(frozen=True)
class _Linear:
    """Segments (lo, hi, a, b) covering the argument's range: the value is `a * n + b`, a signed 32-bit integer."""

    segments: tuple[tuple[int, int, int, int], ...]
    variable: str | None  # the argument; None for a constant


@dataclass(frozen=True)
class _Masked:
    """`(a * n + b) mod 2^bits` on each segment (lo, hi, a, b)."""

    segments: tuple[tuple[int, int, int, int], ...]
    bits: int
    variable: str | None


@dataclass(frozen=True)
class Condition:
    """Where a predicate is true: segments (lo, hi, bits, residues) covering the argument's range, true for the `n`
    of the segment with `n mod 2^bits` in `residues` (bits 0: residues {0}, every `n`; or empty, none)."""

    segments: tuple[tuple[int, int, int, frozenset[int]], ...]
    variable: str | None

    def negated(self) -> Condition:
        return Condition(tuple((lo, hi, bits, frozenset(range(1 << bits)) - residues)
                               for lo, hi, bits, residues in self.segments), self.variable)


def satisfiable(conditions: Iterable[Condition]) -> bool:
    """Whether some value of each argument makes every condition true (conditions on different arguments are
    independent)."""
    met: dict[str | None, Condition] = {}
    for condition in conditions:
        known = met.get(condition.variable)
        met[condition.variable] = condition if known is None else meet(known, condition)
    return all(_inhabited(c) for c in met.values())


def meet(first: Condition, second: Condition) -> Condition:
    """Where both conditions (on one argument) hold."""
    out: list[tuple[int, int, int, frozenset[int]]] = []
    i = j = 0
    a, b = first.segments, second.segments
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        bits = max(a[i][2], b[j][2])
        if not (a[i][3] and b[j][3]):
            residues: frozenset[int] = frozenset()
        elif not bits:
            residues = _ALL
        else:
            residues = frozenset(r for r in range(1 << bits)
                                 if r % (1 << a[i][2]) in a[i][3] and r % (1 << b[j][2]) in b[j][3])
        if not residues:
            bits = 0
        if out and out[-1][1] + 1 == lo and out[-1][2:] == (bits, residues):
            out[-1] = (out[-1][0], hi, bits, residues)
        else:
            out.append((lo, hi, bits, residues))
        if a[i][1] == hi:
            i += 1
        if b[j][1] == hi:
            j += 1
    return Condition(tuple(out), first.variable or second.variable)


def _inhabited(condition: Condition) -> bool:
    """Whether some `n` of a segment has a residue the segment allows."""
    for lo, hi, bits, residues in condition.segments:
        period = 1 << bits
        if residues and (hi - lo + 1 >= period or any(lo + ((r - lo) % period) <= hi for r in residues)):
            return True
    return False


# ------------------------------------------------------------------------------------------- values of registers


class Conditions:
    """The conditions of one function's branches that this reading follows, by predicate register."""

    def __init__(self, instrs: list[Instruction]) -> None:
        self.instrs = instrs
        self._definitions: dict[str, list[Instruction]] | None = None
        self._values: dict[str, _Linear | _Masked | None] = {}
        self._conditions: dict[str, Condition | None] = {}
        self._literals: dict[tuple[str, bool], Condition | None] = {}

    def literal(self, predicate: str, value: bool) -> Condition | None:
        """Where the predicate has `value`."""
        key = (predicate, value)
        if key not in self._literals:
            condition = self.of(predicate)
            self._literals[key] = condition if value or condition is None else condition.negated()
        return self._literals[key]

    def of(self, predicate: str) -> Condition | None:
        if predicate not in self._conditions:
            try:
                self._conditions[predicate] = self._condition(predicate)
            except _Unknown:
                self._conditions[predicate] = None
        return self._conditions[predicate]

    @property
    def definitions(self) -> dict[str, list[Instruction]]:
        """Each register's writes (read once a branch asks)."""
        if self._definitions is None:
            self._definitions = {}
            for instr in self.instrs:
                for register in _destination(instr):
                    self._definitions.setdefault(register, []).append(instr)
        return self._definitions

    def _single(self, register: str) -> Instruction:
        found = self.definitions.get(register, [])
        if len(found) != 1 or found[0].predicated:
            raise _Unknown(register)
        return found[0]

    def _condition(self, predicate: str) -> Condition:
        instr = self._single(predicate)
        parts = instr.opcode.split(".")
        ops = _operands(instr)
        if parts[0] != "setp" or len(parts) != 3 or parts[2] not in _TYPES or len(ops) != 3 or "|" in ops[0]:
            raise _Unknown(predicate)
        left, right = self._value(ops[1]), self._value(ops[2])
        return _compare(parts[1], parts[2] == "u32", left, right)

    def _value(self, operand: str) -> _Linear | _Masked:
        if not operand.startswith("%"):
            return _constant(_immediate(operand))
        if operand in self._values:
            value = self._values[operand]
            if value is None:
                raise _Unknown(operand)
            return value
        self._values[operand] = None  # a cycle of definitions is unknown
        value = self._evaluate(operand)
        self._values[operand] = value
        return value

    def _evaluate(self, register: str) -> _Linear | _Masked:
        instr = self._single(register)
        parts = instr.opcode.split(".")
        ops = _operands(instr)
        head, kind = parts[0], parts[-1]
        if kind not in _TYPES or not (len(parts) == 2 or (len(parts) == 3 and (head, parts[1]) in _QUALIFIED)):
            raise _Unknown(register)
        if head == "ld":  # the function's own parameter (`<name>_param_<i>`), not a callee's return value
            name = ops[1].strip("[] ") if len(ops) == 2 else ""
            if not _PARAMETER.fullmatch(name):
                raise _Unknown(register)
            return _Linear(((_MIN, _MAX, 1, 0),), name)
        if head == "mov" and len(ops) == 2:
            return self._value(ops[1])
        if len(ops) != 3 and not (head == "neg" and len(ops) == 2):
            raise _Unknown(register)
        if head == "neg":
            return _scaled(self._linear(ops[1]), -1)
        if head in ("add", "sub"):
            left, right = self._linear(ops[1]), self._linear(ops[2])
            return _sum(left, right if head == "add" else _scaled(right, -1))
        if head == "mul":
            left, right = self._linear(ops[1]), self._linear(ops[2])
            if right.variable is None:
                return _scaled(left, _constant_of(right))
            if left.variable is None:
                return _scaled(right, _constant_of(left))
            raise _Unknown(register)
        if head == "shl":
            shift = _constant_of(self._linear(ops[2]))
            if not 0 <= shift < 8:
                raise _Unknown(register)
            return _scaled(self._linear(ops[1]), 1 << shift)
        if head in ("min", "max"):
            return _extreme(head, kind == "u32", self._linear(ops[1]), self._linear(ops[2]))
        if head == "and":
            value, mask = self._linear(ops[1]), self._linear(ops[2])
            if value.variable is None:
                value, mask = mask, value
            low = _constant_of(mask)
            bits = (low + 1).bit_length() - 1 if low > 0 else 0
            if value.variable is None or low != (1 << bits) - 1 or not 0 < bits <= _MAX_MASK_BITS:
                raise _Unknown(register)
            return _Masked(value.segments, bits, value.variable)
        raise _Unknown(register)

    def _linear(self, operand: str) -> _Linear:
        value = self._value(operand)
        if not isinstance(value, _Linear):
            raise _Unknown(operand)
        return value


def _destination(instr: Instruction) -> list[str]:
    """The registers an instruction may write: those of its first operand (a vector's parts, `p|q`). A store's address
    is counted too: counting a register written twice makes it unknown, never known wrongly."""
    text = _GUARD.sub("", instr.text).strip()
    parts = text.split(None, 1)
    if len(parts) < 2:
        return []
    first = parts[1].lstrip()
    written = first[:first.find("}") + 1] if first.startswith("{") else first.split(",", 1)[0]
    return re.findall(r"%[\w.]+", written)


def _operands(instr: Instruction) -> list[str]:
    text = _GUARD.sub("", instr.text).strip().rstrip(";")
    parts = text.split(None, 1)
    return [op.strip() for op in parts[1].split(",")] if len(parts) == 2 and "{" not in parts[1] else []


def _immediate(text: str) -> int:
    text = text.strip()
    try:
        value = int(text[:-1] if text.endswith("U") else text, 0)
    except ValueError:
        raise _Unknown(text) from None
    return ((value + (1 << 31)) % _WRAP) - (1 << 31)


def _constant(value: int) -> _Linear:
    return _Linear(((_MIN, _MAX, 0, value),), None)


def _constant_of(value: _Linear) -> int:
    if value.variable is not None:
        raise _Unknown("not a constant")
    return value.segments[0][3]


def _variable(*values: _Linear | _Masked) -> str | None:
    named = {v.variable for v in values if v.variable is not None}
    if len(named) > 1:
        raise _Unknown("two arguments")
    return next(iter(named), None)


def _refined(*values: Sequence[tuple[int, int, int, int]]) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """The common refinement of segment lists: (lo, hi, [(a, b) of each])."""
    cuts = sorted({s[0] for segments in values for s in segments} | {_MAX + 1})
    out = []
    for lo, next_lo in zip(cuts, cuts[1:]):
        out.append((lo, next_lo - 1, [next((a, b) for s_lo, s_hi, a, b in segments if s_lo <= lo <= s_hi)
                                      for segments in values]))
    return out


def _wrapped(lo: int, hi: int, a: int, b: int) -> list[tuple[int, int, int, int]]:
    """Segments of `a * n + b` on [lo, hi] taken to signed 32 bits: split where it passes a multiple of 2^32 off the
    signed range, each with its `b` moved by that multiple."""
    out = []
    start = lo
    while start <= hi:
        value = a * start + b
        shift = ((value - _MIN) // _WRAP) * _WRAP
        # The last n on which a * n + b - shift stays in the signed range (floor division: a * n <= bound for a > 0,
        # a * n >= bound for a < 0).
        end = hi if a == 0 else min(hi, ((_MAX if a > 0 else _MIN) + shift - b) // a)
        out.append((start, end, a, b - shift))
        start = end + 1
    return out


def _linear(segments: list[tuple[int, int, int, int]], variable: str | None) -> _Linear:
    if len(segments) > _MAX_SEGMENTS:
        raise _Unknown("too many pieces")
    return _Linear(tuple(segments), variable if any(a for _lo, _hi, a, _b in segments) else None)


def _sum(left: _Linear, right: _Linear) -> _Linear:
    variable = _variable(left, right)
    out: list[tuple[int, int, int, int]] = []
    for lo, hi, ((a1, b1), (a2, b2)) in _refined(left.segments, right.segments):
        if abs(a1 + a2) > _MAX_SLOPE:
            raise _Unknown("slope")
        out.extend(_wrapped(lo, hi, a1 + a2, b1 + b2))
    return _linear(out, variable) if variable is not None else _constant(out[0][3])


def _scaled(value: _Linear, factor: int) -> _Linear:
    out: list[tuple[int, int, int, int]] = []
    for lo, hi, a, b in value.segments:
        if abs(a * factor) > _MAX_SLOPE:
            raise _Unknown("slope")
        out.extend(_wrapped(lo, hi, a * factor, b * factor))
    return _linear(out, value.variable) if value.variable is not None else _constant(out[0][3])


def _unsigned(lo: int, hi: int, a: int, b: int) -> list[tuple[int, int, int, int]]:
    """`a * n + b` (signed 32 bits on [lo, hi]) as an unsigned value: split where it changes sign."""
    if a == 0:
        return [(lo, hi, a, b + (_WRAP if b < 0 else 0))]
    zero = _crossing(a, b, 0)  # the first n (from lo) past which the sign changes
    out = []
    for s_lo, s_hi in ((lo, min(hi, zero)), (max(lo, zero + 1), hi)):
        if s_lo <= s_hi:
            negative = a * s_lo + b < 0
            out.append((s_lo, s_hi, a, b + (_WRAP if negative else 0)))
    return out


def _crossing(a: int, b: int, c: int) -> int:
    """For a != 0, where `a * n + b < c` changes: for a > 0 the largest n with a * n + b < c; for a < 0 the
    largest n with a * n + b >= c."""
    if a > 0:
        return (c - b - 1) // a  # a*n + b < c  <=>  n <= (c - b - 1) / a
    return (b - c) // (-a)  # a*n + b >= c  <=>  -a*n <= b - c


def _pieces(value: _Linear, unsigned: bool) -> list[tuple[int, int, int, int]]:
    if not unsigned:
        return list(value.segments)
    return [piece for lo, hi, a, b in value.segments for piece in _unsigned(lo, hi, a, b)]


def _extreme(head: str, unsigned: bool, left: _Linear, right: _Linear) -> _Linear:
    variable = _variable(left, right)
    out: list[tuple[int, int, int, int]] = []
    for lo, hi, ((a1, b1), (a2, b2)) in _refined(_pieces(left, unsigned), _pieces(right, unsigned)):
        for s_lo, s_hi, smaller in _less(lo, hi, a1 - a2, b1 - b2):
            first = smaller == (head == "min")
            a, b = (a1, b1) if first else (a2, b2)
            out.extend(_wrapped(s_lo, s_hi, a, b))  # an unsigned value past the signed range wraps back
    return _linear(_merged(out), variable) if variable is not None else _constant(out[0][3])


def _less(lo: int, hi: int, a: int, b: int) -> list[tuple[int, int, bool]]:
    """[lo, hi] cut where `a * n + b < 0` changes: (lo, hi, whether it holds)."""
    if a == 0:
        return [(lo, hi, b < 0)]
    edge = _crossing(a, b, 0)
    out = []
    if lo <= min(hi, edge):
        out.append((lo, min(hi, edge), a > 0))
    if max(lo, edge + 1) <= hi:
        out.append((max(lo, edge + 1), hi, a < 0))
    return out


def _merged(segments: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    out: list[tuple[int, int, int, int]] = []
    for segment in sorted(segments):
        if out and out[-1][1] + 1 == segment[0] and out[-1][2:] == segment[2:]:
            out[-1] = (out[-1][0], segment[1], *segment[2:])
        else:
            out.append(segment)
    return out


_HOLDS = {"eq": lambda d: d == 0, "ne": lambda d: d != 0, "lt": lambda d: d < 0, "le": lambda d: d <= 0,
          "gt": lambda d: d > 0, "ge": lambda d: d >= 0}
_SIGNED = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def _compare(cmp: str, unsigned: bool, left: _Linear | _Masked, right: _Linear | _Masked) -> Condition:
    if cmp in _SIGNED:
        cmp, unsigned = _SIGNED[cmp], True
    if cmp not in _HOLDS:
        raise _Unknown(cmp)
    variable = _variable(left, right)
    if isinstance(left, _Masked) or isinstance(right, _Masked):
        return _masked_compare(cmp, unsigned, left, right, variable)
    out: list[tuple[int, int, int, frozenset[int]]] = []
    for lo, hi, ((a1, b1), (a2, b2)) in _refined(_pieces(left, unsigned), _pieces(right, unsigned)):
        out.extend(_true_on(lo, hi, a1 - a2, b1 - b2, cmp))
    return Condition(tuple(out), variable)


def _true_on(lo: int, hi: int, a: int, b: int, cmp: str) -> list[tuple[int, int, int, frozenset[int]]]:
    """[lo, hi] cut where `a * n + b <cmp> 0` changes, each part with whether it holds."""
    if a == 0:
        return [(lo, hi, 0, frozenset({0}) if _HOLDS[cmp](b) else frozenset())]
    cuts = {lo, hi + 1}
    for c in (0, 1):  # where a * n + b passes 0 and 1: every comparison with 0 is constant between them
        edge = _crossing(a, b, c) + 1
        if lo < edge <= hi:
            cuts.add(edge)
    points = sorted(cuts)  # between them the sign of a * n + b, and so the comparison, is constant
    return [(p, q - 1, 0, frozenset({0}) if _HOLDS[cmp](a * p + b) else frozenset())
            for p, q in zip(points, points[1:])]


def _masked_compare(cmp: str, unsigned: bool, left: _Linear | _Masked, right: _Linear | _Masked,
                    variable: str | None) -> Condition:
    flip = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
    if isinstance(right, _Masked):
        left, right, cmp = right, left, flip[cmp]
    if not isinstance(left, _Masked) or isinstance(right, _Masked) or right.variable is not None:
        raise _Unknown("a masked value compared with a value of the argument")
    c = _constant_of(right) % _WRAP if unsigned else _constant_of(right)
    period = 1 << left.bits
    out = []
    for lo, hi, a, b in left.segments:
        residues = frozenset(r for r in range(period) if _HOLDS[cmp](((a * r + b) % period) - c))
        out.append((lo, hi, left.bits, residues))
    return Condition(tuple(out), variable)


# ------------------------------------------------------------------------------------- the paths that can run


def feasible_flow(blocks: list[Block], kills: list[bool], conditions: Conditions, fallback: list[bool]
                  ) -> list[bool]:
    """Per block, whether a path that can run reaches it from the start with no kill on the way (`kills`: whether a
    block ends the state: a wait in it). Branches on conditions `conditions` reads carry them along the path; a
    path whose conditions no argument value meets together is dropped. Where no branch tests a condition it reads,
    or too many do, or past a budget of steps: `fallback`, the path-insensitive answer."""
    branches = {index: branch for index, block in enumerate(blocks) if (branch := _branch(index, block, conditions))}
    if not branches or len(branches) > _BRANCHES:
        return fallback
    states: list[set[frozenset[tuple[str, bool]]]] = [set() for _ in blocks]
    states[0].add(frozenset())
    work = [0]
    met: dict[frozenset[tuple[str, bool]], dict[str | None, Condition] | None] = {frozenset(): {}}
    budget = _BUDGET
    while work:
        budget -= 1
        if budget < 0:
            return fallback
        index = work.pop()
        if kills[index]:
            continue
        branch = branches.get(index)
        for succ in blocks[index].succ:
            for state in list(states[index]):
                grown = state
                if branch is not None:
                    predicate, taken, value = branch
                    literal = (predicate, value if succ == taken else not value)
                    # A long path keeps its last condition only: fewer conditions are more paths, never fewer.
                    kept = len(state) < _LITERALS
                    grown = state | {literal} if kept else frozenset({literal})
                    if grown not in met:
                        condition = conditions.literal(*literal)
                        base = met[state] if kept else {}
                        met[grown] = None if base is None or condition is None else _with(base, condition)
                    if met[grown] is None:
                        continue
                if _add(states[succ], grown):
                    work.append(succ)
    return [bool(s) for s in states]


def _branch(index: int, block: Block, conditions: Conditions) -> tuple[str, int, bool] | None:
    """(predicate, the block the branch goes to, the predicate's value there) of a block that ends in a branch on a
    condition `conditions` reads, with a fall-through beside it."""
    last = block.instrs[-1] if block.instrs else None
    if last is None or not last.predicated or last.opcode.split(".")[0] != "bra" or len(block.succ) != 2:
        return None
    guard = _GUARD.match(last.text)
    if guard is None or conditions.of(guard.group(2)) is None:
        return None
    taken = block.succ[1] if block.succ[0] == index + 1 else block.succ[0]
    return guard.group(2), taken, guard.group(1) != "!"


def _with(met: dict[str | None, Condition], condition: Condition) -> dict[str | None, Condition] | None:
    """What a path's conditions (met per argument) become with one more; None where no argument value meets
    them."""
    known = met.get(condition.variable)
    joined = condition if known is None else meet(known, condition)
    return {**met, condition.variable: joined} if _inhabited(joined) else None


def _add(states: set[frozenset[tuple[str, bool]]], state: frozenset[tuple[str, bool]]) -> bool:
    """Add a set of conditions to a block's; whether that adds paths (a set that holds another is no new path)."""
    if any(other <= state for other in states):
        return False
    for other in [o for o in states if state <= o]:
        states.discard(other)
    states.add(state)
    if len(states) > _STATES:  # too many ways in: keep the path-insensitive answer
        states.clear()
        states.add(frozenset())
    return True
