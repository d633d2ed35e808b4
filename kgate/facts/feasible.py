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
    by_variable: dict[str | None, list[Condition]] = {}
    for condition in conditions:
        by_variable.setdefault(condition.variable, []).append(condition)
    return all(_together(group) for group in by_variable.values())


def _together(conditions: list[Condition]) -> bool:
    cuts = sorted({lo for c in conditions for lo, _hi, _bits, _r in c.segments} | {_MAX + 1})
    for lo, next_lo in zip(cuts, cuts[1:]):
        hi = next_lo - 1
        bits = 0
        parts = []
        for condition in conditions:
            part = next(s for s in condition.segments if s[0] <= lo <= s[1])
            parts.append(part)
            bits = max(bits, part[2])
        period = 1 << bits
        allowed = [r for r in range(period) if all(r % (1 << p[2]) in p[3] for p in parts)]
        if not allowed:
            continue
        if hi - lo + 1 >= period or any((lo + ((r - lo) % period)) <= hi for r in allowed):
            return True
    return False


# ------------------------------------------------------------------------------------------- values of registers


class Conditions:
    """The conditions of one function's branches that this reading follows, by predicate register."""

    def __init__(self, instrs: list[Instruction]) -> None:
        self.definitions: dict[str, list[Instruction]] = {}
        for instr in instrs:
            dest = _destination(instr)
            for register in dest:
                self.definitions.setdefault(register, []).append(instr)
        self._values: dict[str, _Linear | _Masked | None] = {}
        self._conditions: dict[str, Condition | None] = {}

    def of(self, predicate: str) -> Condition | None:
        if predicate not in self._conditions:
            try:
                self._conditions[predicate] = self._condition(predicate)
            except _Unknown:
                self._conditions[predicate] = None
        return self._conditions[predicate]

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


def feasible_flow(blocks: list[Block], kills: list[bool], conditions: Conditions) -> list[bool]:
    """Per block, whether a path that can run reaches it from the start with no kill on the way (`kills`: whether a
    block ends the state: a wait in it). Branches on conditions `conditions` reads carry them along the path; a
    path whose conditions no argument value meets together is dropped."""
    states: list[set[frozenset[tuple[str, bool]]]] = [set() for _ in blocks]
    states[0].add(frozenset())
    work = [0]
    while work:
        index = work.pop()
        if kills[index]:
            continue
        block = blocks[index]
        last = block.instrs[-1] if block.instrs else None
        guard = _GUARD.match(last.text) if last is not None and last.predicated and \
            last.opcode.split(".")[0] == "bra" else None
        target = blocks_target = None
        if guard is not None and len(block.succ) == 2:
            blocks_target = block.succ[1] if block.succ[0] == index + 1 else block.succ[0]
            target = (guard.group(2), guard.group(1) != "!")
        for succ in block.succ:
            for state in list(states[index]):
                grown = state
                if target is not None and conditions.of(target[0]) is not None:
                    grown = state | {(target[0], target[1] if succ == blocks_target else not target[1])}
                    if not _possible(grown, conditions):
                        continue
                if _add(states[succ], grown):
                    work.append(succ)
    return [bool(s) for s in states]


def _possible(state: frozenset[tuple[str, bool]], conditions: Conditions) -> bool:
    if any((name, not value) in state for name, value in state):
        return False
    found = []
    for name, value in state:
        condition = conditions.of(name)
        if condition is not None:
            found.append(condition if value else condition.negated())
    return satisfiable(found)


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
