"""Which parameter a global access's address points into: the PTX dataflow from `ld.param` to an address.

A function of PTX reads each pointer parameter once (`ld.param.u64 %rd1, [k_param_0]`) and builds its addresses
from it by pointer arithmetic: `cvta.to.global`, `add` and `sub` of an offset, `mad` (whose addend is the pointer),
`mov` and `selp`, and `and`/`or` of an alignment. Each register gets the parameters whose pointer its value may be,
over every definition of it (a may-analysis: a pointer advanced in a loop keeps its parameter), and an access's
address register the set of its own. A product, a shift or a widening conversion makes an offset, not a pointer, so
`x + i * stride` is `x`'s alone; so does a value read from memory: an address loaded from a table of pointers is
traced to no parameter, and says so.

A parameter of a called function is what its caller stored into the call's parameter (`st.param [param0], %rd5`
before `call f, (param0, ...)`): `call_arguments` gives, per position, the caller's parameters that value points
into, so that an access in a callee is traced to the kernel's own parameters through every call on the way
(`kgate.facts.callgraph`).
"""

from __future__ import annotations

import re
from collections import defaultdict

from kgate.facts.ptx import Instruction, PtxFunction, writes_global

Origins = dict[str, frozenset[int]]  # register -> the function's parameters its value may point into

_BRACKET = re.compile(r"\[([^\]]*)\]")
_FIRST_TOKEN = re.compile(r"\s*([%$\w.]+)")
_PARAM = re.compile(r"^(?P<function>[\w$.]+)_param_(?P<index>\d+)$")
# Pointer arithmetic: the operands (after the destination) that carry a pointer to the result.
_CARRIES: dict[str, tuple[int, ...]] = {"mov": (1,), "cvta": (1,), "add": (1, 2), "sub": (1,), "mad": (3,),
                                        "selp": (1, 2), "and": (1, 2), "or": (1, 2)}
_WIDE = (".u64", ".b64", ".s64")


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


def pointer_origins(function: PtxFunction) -> Origins:
    """Each register of the function that may hold a pointer into one of its parameters, with those parameters."""
    seeds: dict[str, set[int]] = defaultdict(set)
    edges: dict[str, set[str]] = defaultdict(set)
    for instr in function.instructions:
        head = instr.opcode.split(".", 1)[0]
        if head not in _CARRIES and not (head == "ld" and ".param" in instr.opcode):
            continue
        ops = operands(instr)
        if not ops or not ops[0].startswith("%"):
            continue
        if head == "ld" and instr.opcode.endswith(_WIDE):
            index = parameter_index(function.name, _first_token(ops[1]) if len(ops) > 1 else "")
            if index is not None:
                seeds[ops[0]].add(index)
            continue
        for position in _CARRIES.get(head, ()):
            if position >= len(ops):
                continue
            source = ops[position]
            index = parameter_index(function.name, source)  # `mov.b64 %rd1, k_param_0`: the parameter's address
            if index is not None:
                seeds[ops[0]].add(index)
            elif source.startswith("%"):
                edges[source].add(ops[0])
    return _propagate(seeds, edges)


_IMMEDIATE = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)U?$")


def stack_registers(function: PtxFunction) -> frozenset[str]:
    """The registers that hold a generic address of the function's own stack, on every definition: made by
    `cvta.local` (a debug build's `%SP` over `__local_depot`), or moved or offset by a constant from one. A generic
    access through one touches the thread's local memory, never global memory."""
    defined: dict[str, list[Instruction]] = defaultdict(list)
    for instr in function.instructions:
        ops = operands(instr)
        if ops and ops[0].startswith("%") and not instr.opcode.startswith(("st.", "red.", "call")):
            defined[ops[0]].append(instr)
    local: set[str] = set()
    changed = True
    while changed:
        changed = False
        for register, definitions in defined.items():
            if register not in local and all(_onto_stack(d, local) for d in definitions):
                local.add(register)
                changed = True
    return frozenset(local)


def _onto_stack(instr: Instruction, local: set[str]) -> bool:
    """Whether an instruction makes a stack address: `cvta.local`, or `mov`/`add`/`sub` of a stack address and a
    constant."""
    if instr.predicated:
        return False
    head, ops = instr.opcode.split(".", 1)[0], operands(instr)
    if instr.opcode.startswith("cvta.local"):
        return True
    if head == "mov" and len(ops) == 2:
        return ops[1] in local
    if head in ("add", "sub") and len(ops) == 3:
        return ops[1] in local and bool(_IMMEDIATE.match(ops[2])) or head == "add" and ops[2] in local and bool(
            _IMMEDIATE.match(ops[1]))
    return False


def _propagate(seeds: dict[str, set[int]], edges: dict[str, set[str]]) -> Origins:
    found: dict[str, set[int]] = defaultdict(set)
    for register, indices in seeds.items():
        for index in indices:
            stack = [register]
            while stack:
                name = stack.pop()
                if index in found[name]:
                    continue
                found[name].add(index)
                stack.extend(edges.get(name, ()))
    return {name: frozenset(indices) for name, indices in found.items() if indices}


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


def access_origins(function: PtxFunction, instr: Instruction, origins: Origins) -> frozenset[int]:
    """The function's parameters a global access's address may point into (empty: traced to none)."""
    where = address(instr)
    index = parameter_index(function.name, where)
    if index is not None:
        return frozenset({index})
    return origins.get(where, frozenset())


def call_arguments(function: PtxFunction, call: Instruction, origins: Origins) -> list[frozenset[int]]:
    """Per parameter of the called function, the caller's parameters the value passed there points into: what the
    caller stored (`st.param`) into each parameter the call names, before the call."""
    names = _argument_names(call)
    if not names:
        return []
    stored: dict[str, set[int]] = {name: set() for name in names}
    for instr in _before(function.instructions, call):
        if instr.opcode.startswith("st.param"):
            ops = operands(instr)
            target = _first_token(ops[0]) if ops else ""
            if target in stored and len(ops) > 1:
                stored[target] |= origins.get(ops[1].strip(), frozenset())
    return [frozenset(stored[name]) for name in names]


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
