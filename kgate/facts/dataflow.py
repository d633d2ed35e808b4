"""Which parameter a global access's address points into: the PTX dataflow from `ld.param` to an address.

A function of PTX reads each pointer parameter once (`ld.param.u64 %rd1, [k_param_0]`) and builds its addresses
from it by pointer arithmetic: `cvta.to.global`, `add` and `sub` of an offset, `mad` (whose addend is the pointer),
`mov` and `selp`, and `and`/`or` of an alignment. Each register gets the parameters whose pointer its value may be,
over every definition of it (a may-analysis: a pointer advanced in a loop keeps its parameter), and an access's
address register the set of its own. A product, a shift or a widening conversion makes an offset, not a pointer, so
`x + i * stride` is `x`'s alone. A 64-bit value read from memory, returned by a call or packed from halves is
`UNTRACED` (an address loaded from a table of pointers is traced to no parameter, and says so); `cvta.shared` and
`cvta.local` make `WINDOW`, a generic address that never reaches global memory.

A parameter of a called function is what its caller stored into the call's parameter (`st.param [param0], %rd5`
before `call f, (param0, ...)`): `call_arguments` gives, per position, where that value may point, so that an
access in a callee is traced to the kernel's own parameters through every call on the way, and one through a
pointer the call passes into the shared window is known not to touch global memory there (`kgate.facts.callgraph`).
"""

from __future__ import annotations

import re
from collections import defaultdict

from kgate.facts.ptx import Instruction, PtxFunction, writes_global

WINDOW = "window"  # a generic address of the shared window or the thread's stack
UNTRACED = "untraced"  # a value read from memory or made some way the dataflow does not follow
Source = int | str  # a parameter's index, WINDOW or UNTRACED
Sources = dict[str, frozenset[Source]]  # register -> where its value may come from

_BRACKET = re.compile(r"\[([^\]]*)\]")
_FIRST_TOKEN = re.compile(r"\s*([%$\w.]+)")
_PARAM = re.compile(r"^(?P<function>[\w$.]+)_param_(?P<index>\d+)$")
# Pointer arithmetic: the operands (after the destination) that carry a pointer to the result.
_CARRIES: dict[str, tuple[int, ...]] = {"mov": (1,), "cvta": (1,), "add": (1, 2), "sub": (1,), "mad": (3,),
                                        "selp": (1, 2), "and": (1, 2), "or": (1, 2)}
_WIDE = (".u64", ".b64", ".s64")
# What makes an offset from numbers, never a pointer: a wide result of one of these is an index or a size.
_OFFSETS = frozenset({"mul", "mul24", "shl", "shr", "cvt", "div", "rem", "neg", "min", "max", "abs", "sad", "bfe",
                      "not", "xor", "popc", "clz", "brev", "setp", "set", "mad24", "madc", "addc", "subc", "prmt",
                      "shf", "bfi", "copysign", "testp", "fma", "sqrt", "rcp"})


def operands(instr: Instruction) -> list[str]:
    """The operands of an instruction, split at the commas outside braces, brackets and parentheses."""
    body = instr.text.split(None, 1)[1] if instr.predicated else instr.text
    parts = body.split(None, 1)
    if len(parts) < 2:
        return []
    if not any(ch in parts[1] for ch in "{[("):
        return [op.strip() for op in parts[1].split(",") if op.strip()]
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in parts[1]:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    out.append("".join(current).strip())
    return [op for op in out if op]


def parameter_index(function: str, token: str) -> int | None:
    """The index of `function`'s parameter a token names (`k_param_2`, `k_param_2+8`: a field of a struct), or
    None."""
    found = _PARAM.match(token.split("+", 1)[0].strip())
    if found is None or found.group("function") != function:
        return None
    return int(found.group("index"))


def address_sources(function: PtxFunction) -> Sources:
    """Where the value of each register of the function may come from, over every definition of it: the function's
    parameters it may point into (their indices), the shared window or the thread's stack (`WINDOW`: a generic
    address made by `cvta.shared` or `cvta.local`, moved or offset), or something not traced (`UNTRACED`: a 64-bit
    value read from memory, returned by a call, packed from halves). A register with no sources is an offset (a
    product, a shift, a narrow value widened), never a pointer."""
    seeds: dict[str, set[Source]] = defaultdict(set)
    edges: dict[str, set[str]] = defaultdict(set)
    for instr in function.instructions:
        ops = operands(instr)
        if not ops or not ops[0].startswith("%") or instr.opcode.startswith(("st.", "red.", "call")):
            continue
        head = instr.opcode.split(".", 1)[0]
        target = ops[0]
        if instr.opcode.startswith(("cvta.shared", "cvta.local")):
            seeds[target].add(WINDOW)
        elif head == "ld" and ".param" in instr.opcode:
            index = parameter_index(function.name, _first_token(ops[1]) if len(ops) > 1 else "")
            if instr.opcode.endswith(_WIDE):
                seeds[target].add(index if index is not None else UNTRACED)
        elif head in _CARRIES:
            for position in _CARRIES[head]:
                if position >= len(ops):
                    continue
                source = ops[position]
                index = parameter_index(function.name, source)  # `mov.b64 %rd1, k_param_0`: the parameter's address
                if index is not None:
                    seeds[target].add(index)
                elif source.startswith("%"):
                    edges[source].add(target)
                elif not _IMMEDIATE.match(source) and instr.opcode.endswith(_WIDE):
                    seeds[target].add(UNTRACED)  # a symbol's address, a `{lo, hi}` pack
        elif instr.opcode.endswith(_WIDE) and head not in _OFFSETS:
            seeds[target].add(UNTRACED)
        seeds.setdefault(target, set())
    return _propagate(seeds, edges)


def off_global(sources: frozenset[Source]) -> bool:
    """Whether an address with these sources is into the shared window or the thread's stack on every path: a
    generic access through it never touches global memory."""
    return sources == {WINDOW}


_IMMEDIATE = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$")


def _propagate(seeds: dict[str, set[Source]], edges: dict[str, set[str]]) -> Sources:
    found: dict[str, set[Source]] = defaultdict(set)
    for register, sources in seeds.items():
        found.setdefault(register, set())  # a register defined only as an offset has no sources
        for source in sources:
            stack = [register]
            while stack:
                name = stack.pop()
                if source in found[name]:
                    continue
                found[name].add(source)
                stack.extend(edges.get(name, ()))
    return {name: frozenset(sources) for name, sources in found.items()}


def _first_token(operand: str) -> str:
    inner = _BRACKET.search(operand)
    match = _FIRST_TOKEN.match(inner.group(1) if inner else operand)
    return match.group(1) if match else ""


def address(instr: Instruction) -> str:
    """The register (or symbol) that holds the global address an access reads or writes: its first bracket, or
    for a copy whose destination is not global memory, its second (the source)."""
    body = instr.text.split(None, 1)[1] if instr.predicated else instr.text
    brackets = _BRACKET.findall(body)
    if not brackets:
        return ""
    chosen = brackets[0]
    if instr.opcode.startswith("cp.") and not writes_global(instr.opcode) and len(brackets) > 1:
        chosen = brackets[1]
    match = _FIRST_TOKEN.match(chosen)
    return match.group(1) if match else ""


def access_sources(function: PtxFunction, instr: Instruction, sources: Sources) -> frozenset[Source]:
    """Where a global access's address may point: the function's parameters, `WINDOW`, `UNTRACED` (an address
    traced nowhere, a symbol's, is `UNTRACED`)."""
    where = address(instr)
    index = parameter_index(function.name, where)
    if index is not None:
        return frozenset({index})
    return sources.get(where) or frozenset({UNTRACED})


def call_arguments(function: PtxFunction, call: Instruction, sources: Sources) -> list[frozenset[Source]]:
    """Per parameter of the called function, where the value the caller passes there may point (`address_sources`):
    what the caller stored (`st.param`) into each parameter the call names, before the call; `UNTRACED` for a
    parameter it stored nothing into here."""
    names = _argument_names(call)
    if not names:
        return []
    stored: dict[str, set[Source]] = {name: set() for name in names}
    seen: set[str] = set()
    for instr in _before(function.instructions, call):
        if instr.opcode.startswith("st.param"):
            ops = operands(instr)
            target = _first_token(ops[0]) if ops else ""
            if target in stored and len(ops) > 1:
                seen.add(target)
                value = ops[1].strip()
                if value.startswith("%"):
                    stored[target] |= sources.get(value, frozenset())
                elif not _IMMEDIATE.match(value):
                    stored[target].add(UNTRACED)
    return [frozenset(stored[name]) if name in seen else frozenset({UNTRACED}) for name in names]


def _before(instructions: list[Instruction], call: Instruction) -> list[Instruction]:
    """The instructions from the last call before `call` up to it: where the call's parameters are stored."""
    position = next((i for i, instr in enumerate(instructions) if instr is call), None)
    if position is None:
        return []
    start = position
    while start > 0 and not instructions[start - 1].opcode.startswith("call"):
        start -= 1
    return instructions[start:position]


def _argument_names(call: Instruction) -> list[str]:
    """The parameters a call passes: its last parenthesised list (`call.uni (retval0), f, (param0, param1)`)."""
    ops = operands(call)
    if len(ops) < 2 or not ops[-1].startswith("("):
        return []
    return [name.strip() for name in ops[-1].strip("()").split(",") if name.strip()]
