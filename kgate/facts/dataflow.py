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
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from functools import lru_cache

from kgate.facts.ptx import Instruction, PtxFunction, writes_global

WINDOW = "window"  # a generic address of the shared window
STACK = "stack"  # an address of the thread's stack (generic, `cvta.local`, or its `__local_depot`)
SYMBOL = "@"  # `@name`: the address of the module variable `name` (`mov.u64 %rd1, table`); untraced to an argument
UNTRACED = "untraced"  # a value read from memory or made some way the dataflow does not follow
Source = int | str  # a parameter's index (`index+offset`: a field of one), WINDOW, STACK, `@symbol` or UNTRACED
Sources = dict[str, frozenset[Source]]  # register -> where its value may come from
Returned = dict[str, frozenset[Source]]  # `r+offset` of a return value -> where it may point (`return_sources`)
Returns = Callable[[str], "Returned | None"]  # a called function's name -> its return summary, None if not known

_BRACKET = re.compile(r"\[([^\]]*)\]")
_FIRST_TOKEN = re.compile(r"\s*([%$\w.]+)")
_RETVAL = re.compile(r"^func_retval(\d+)$")
_DEPOT = "__local_depot"
_SYMBOL = re.compile(r"^[A-Za-z_$][\w$]*$")
_STACK_NODE = "<stack>"  # what stores at offsets not known put on the stack
_ANY_SLOT = "<stack@any>"  # what stores at known offsets put there, for a load at an offset not known
_WIDEST = 16  # bytes of the widest element one store moves
_FLOAT = re.compile(r"^0[fFdD][0-9a-fA-F]+$")
_PARAM = re.compile(r"^(?P<function>[\w$.]+)_param_(?P<index>\d+)$")
# Pointer arithmetic: the operands (after the destination) that carry a pointer to the result.
CARRIES: dict[str, tuple[int, ...]] = {"mov": (1,), "cvta": (1,), "add": (1, 2), "sub": (1,), "mad": (3,),
                                        "selp": (1, 2), "and": (1, 2), "or": (1, 2)}
_WIDE = (".u64", ".b64", ".s64")
# What makes an offset from numbers, never a pointer: a wide result of one of these is an index or a size.
_OFFSETS = frozenset({"mul", "mul24", "shl", "shr", "cvt", "div", "rem", "neg", "min", "max", "abs", "sad", "bfe",
                      "not", "xor", "popc", "clz", "brev", "setp", "set", "mad24", "madc", "addc", "subc", "prmt",
                      "shf", "bfi", "copysign", "testp", "fma", "sqrt", "rcp"})


def operands(instr: Instruction) -> list[str]:
    """The operands of an instruction, split at the commas outside braces, brackets and parentheses."""
    return list(_operands(instr.text, instr.predicated))


@lru_cache(maxsize=1 << 16)  # asked of one instruction by several analyses (sources, frame, calls, constant data)
def _operands(text: str, predicated: bool) -> tuple[str, ...]:
    body = text.split(None, 1)[1] if predicated else text
    parts = body.split(None, 1)
    if len(parts) < 2:
        return ()
    if not any(ch in parts[1] for ch in "{[("):
        return tuple(op.strip() for op in parts[1].split(",") if op.strip())
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
    return tuple(op for op in out if op)


def parameter_index(function: str, token: str) -> int | None:
    """The index of `function`'s parameter a token names (`k_param_2`, `k_param_2+8`: a field of a struct), or
    None."""
    found = _PARAM.match(token.split("+", 1)[0].strip())
    if found is None or found.group("function") != function:
        return None
    return int(found.group("index"))


def address_sources(function: PtxFunction, returns: Returns | None = None) -> Sources:
    """Where the value of each register of the function may come from, over every definition of it: the function's
    parameters it may point into (`parameter_key`), the shared window (`WINDOW`: a generic address made by
    `cvta.shared`), the thread's stack (`STACK`: `cvta.local`, the function's `__local_depot`), or something not
    traced (`UNTRACED`: a 64-bit value read from global or shared memory, packed from halves, returned by a call
    whose code is not known). A register with no sources is an offset (a product, a shift, a narrow value widened),
    never a pointer.

    A value read back from the thread's stack is any value the function stores there (a pointer spilled, a small
    array of pointers indexed at run time), unless a stack address leaves the function's registers (stored into
    memory, passed to a call, returned): then something else may have written there, and it is `UNTRACED`. A value
    a call returns is what the callee returns (`returns`: its return summary, `return_sources`), its parameters
    replaced by what this call passes."""
    seeds: dict[str, set[Source]] = defaultdict(set)
    edges: dict[str, set[str]] = defaultdict(set)
    memory: list[tuple[Instruction, list[str]]] = []  # loads and stores whose space depends on their address
    returned: dict[str, str] | None = None  # the last call's return parameters -> their nodes (`_returns_of_call`)
    for instr in function.instructions:
        ops = operands(instr)
        if is_call_instruction(instr):
            returned = _returns_of_call(function, instr, returns, seeds, edges)
            continue
        head = instr.opcode.split(".", 1)[0]
        if head in ("st", "atom", "red"):
            memory.append((instr, ops))
            continue
        if not ops or not (ops[0].startswith("%") or ops[0].startswith("{")):
            continue
        targets = _registers(ops[0])
        if instr.opcode.startswith(("cvta.shared", "cvta.local")):
            for target in targets:
                seeds[target].add(WINDOW if instr.opcode.startswith("cvta.shared") else STACK)
        elif head == "ld" and ".param" in instr.opcode:
            text = _bracket_text(ops[1]) if len(ops) > 1 else ""
            name = text.partition("+")[0].strip()
            width = _width(instr.opcode)
            for position, target in enumerate(targets if instr.opcode.endswith(_WIDE) else ()):
                key = parameter_key(function, text, position * width)
                if key is not None:
                    seeds[target].add(key)
                elif returned is not None and name in returned:
                    node = _node(returned, name, _offset(ops[1]) + position * width)
                    if node not in seeds:  # the callee returns nothing traced there
                        seeds[node].add(UNTRACED)
                    edges[node].add(target)
                else:
                    seeds[target].add(UNTRACED)
        elif head in ("ld", "ldu"):
            memory.append((instr, ops))
        elif head in CARRIES:
            target = targets[0] if targets else ops[0]
            for position in CARRIES[head]:
                if position >= len(ops):
                    continue
                source = ops[position]
                key = parameter_key(function, source)  # `mov.b64 %rd1, k_param_0`: the parameter's address
                if key is not None:
                    seeds[target].add(key)
                elif source.startswith("%"):
                    edges[source].add(target)
                elif source.startswith(_DEPOT):
                    seeds[target].add(STACK)
                elif _SYMBOL.match(source) and instr.opcode.endswith(_WIDE):
                    seeds[target].add(SYMBOL + source)  # a module variable's address
                elif not _IMMEDIATE.match(source) and instr.opcode.endswith(_WIDE):
                    seeds[target].add(UNTRACED)  # a `{lo, hi}` pack
        elif instr.opcode.endswith(_WIDE) and head not in _OFFSETS:
            for target in targets:
                seeds[target].add(UNTRACED)
        for target in targets:
            seeds.setdefault(target, set())
    return _with_memory(seeds, edges, memory, _frame(function))


def _with_memory(seeds: dict[str, set[Source]], edges: dict[str, set[str]],
                 memory: list[tuple[Instruction, list[str]]], frame: dict[str, int]) -> Sources:
    """`_propagate` with the thread's stack as memory that holds values: what is stored into a slot of it flows to
    what is loaded from that slot (a slot is a byte range at a known offset of the frame, `frame`; a store at an
    offset not known may fill any slot, a load at one not known may read any). Which generic access reaches the
    stack depends on the sources found, so this runs until they settle."""
    found = _propagate(seeds, edges)
    # Seeds and edges only grow from one round to the next (each an over-approximation), so the rounds end.
    more_seeds: dict[str, set[Source]] = defaultdict(set, {k: set(v) for k, v in seeds.items()})
    more_edges: dict[str, set[str]] = defaultdict(set, {k: set(v) for k, v in edges.items()})
    more_seeds.setdefault(_STACK_NODE, set())
    slots: dict[int, dict[str, int]] = {}  # a slot's offset -> its nodes (one per width stored there) -> bytes
    while True:
        escaped = False
        loads: list[tuple[list[str], int | None, int]] = []
        for instr, ops in memory:
            head = instr.opcode.split(".", 1)[0]
            space_local = ".local" in instr.opcode
            generic = not any(f".{space}" in instr.opcode for space in ("global", "shared", "local", "const",
                                                                          "param"))
            address_at = 1 if head in ("ld", "ldu", "atom") else 0
            operand = ops[address_at] if address_at < len(ops) else ""
            where = found.get(_first_token(operand), frozenset())
            slot = _slot(operand, frame)
            width = _width(instr.opcode)
            if head in ("st", "atom", "red"):
                values = [v for op in ops[address_at + 1:] for v in _values(op)]
                escaped = escaped or any(STACK in found.get(v, frozenset()) for v in values)
                if head == "st" and (space_local or (generic and STACK in where)):
                    for position, value in enumerate(values):
                        node = _STACK_NODE
                        if slot is not None:
                            at = slot + position * width
                            node = f"<stack@{at}:{width}>"
                            slots.setdefault(at, {})[node] = width
                            more_edges[node].add(_ANY_SLOT)  # what a load at an unknown offset may read
                        if value.startswith("%"):
                            more_edges[value].add(node)
                        elif not (_IMMEDIATE.match(value) or _FLOAT.match(value)):
                            more_seeds[node].add(UNTRACED)
                        else:
                            more_seeds.setdefault(node, set())
                if head != "st" and instr.opcode.endswith(_WIDE):
                    for target in _registers(ops[0]):
                        more_seeds[target].add(UNTRACED)
                continue
            if not instr.opcode.endswith(_WIDE):
                continue
            if space_local or (generic and bool(where) and where <= {STACK}):
                loads.append((_registers(ops[0]), slot, width))
            else:
                for target in _registers(ops[0]):
                    more_seeds[target].add(UNTRACED)
        for targets, slot, width in loads:
            for position, target in enumerate(targets):
                more_edges[_STACK_NODE].add(target)
                if slot is None:
                    more_edges[_ANY_SLOT].add(target)
                    continue
                at = slot + position * width
                for start in range(at - _WIDEST + 1, at + width):  # the slots that overlap [at, at + width)
                    for node, size in slots.get(start, {}).items():
                        if start + size > at:
                            more_edges[node].add(target)
        if escaped:
            more_seeds[_STACK_NODE].add(UNTRACED)
        again = _propagate(more_seeds, more_edges)
        if again == found:
            return {name: sources for name, sources in again.items() if not name.startswith("<")}
        found = again


def _frame(function: PtxFunction) -> dict[str, int]:
    """The registers that hold the thread's frame at a known offset (`mov.u64 %SPL, __local_depot0`, `cvta.local`
    of it, `add` of a number to it), each defined once: a stack access through one of them is at a known slot."""
    defined: Counter[str] = Counter()
    for instr in function.instructions:
        ops = operands(instr)
        if ops and ops[0].startswith("%") and not instr.opcode.startswith(("st.", "red.", "call")):
            defined[ops[0]] += 1
    frame: dict[str, int] = {}
    for instr in function.instructions:
        ops = operands(instr)
        if len(ops) < 2 or defined[ops[0]] != 1 or instr.predicated:
            continue
        head = instr.opcode.split(".", 1)[0]
        if head == "mov" and ops[1].startswith(_DEPOT):
            frame[ops[0]] = 0
        elif head in ("mov", "cvta") and ops[1] in frame and (head == "mov" or instr.opcode.startswith("cvta.local")):
            frame[ops[0]] = frame[ops[1]]
        elif head == "add" and len(ops) > 2 and ops[1] in frame and _IMMEDIATE.match(ops[2]):
            frame[ops[0]] = frame[ops[1]] + int(ops[2].rstrip("U"), 0)
    return frame


def _slot(operand: str, frame: dict[str, int]) -> int | None:
    """The frame offset a memory operand (`[%SP+8]`) addresses, where its register holds the frame at a known
    offset."""
    text = _bracket_text(operand)
    register, _, offset = text.partition("+")
    register = register.strip()
    if register not in frame:
        return None
    offset = offset.strip()
    if not offset:
        return frame[register]
    return frame[register] + int(offset, 0) if _IMMEDIATE.match(offset) else None


def off_global(sources: frozenset[Source]) -> bool:
    """Whether an address with these sources is into the shared window or the thread's stack on every path: a
    generic access through it never touches global memory."""
    return bool(sources) and sources <= {WINDOW, STACK}


def is_parameter(source: Source) -> bool:
    """Whether a source is one of the function's parameters (an index, or `index+offset`: a field of one)."""
    return isinstance(source, int) or "+" in source


def parameter_key(function: PtxFunction, text: str, extra: int = 0) -> Source | None:
    """The source a read of `function`'s parameter stands for (`k_param_2`, `k_param_2+8`, the bracket's text;
    `extra` bytes further: an element of a vector read), or None where the text names no parameter of it. A
    kernel's parameter is its index whatever the field (a message names the argument); a called function's field of
    a structure passed by value is `index+offset`, so that a structure holding a shared and a global pointer keeps
    them apart from the caller's stores (`call_arguments`) to the callee's reads."""
    name, _, offset = text.strip().partition("+")
    index = parameter_index(function.name, name)
    if index is None:
        return None
    at = (int(offset) if offset.strip().isdigit() else 0) + extra
    return index if function.kind == "entry" or at == 0 else f"{index}+{at}"


def return_sources(function: PtxFunction, sources: Sources) -> Returned:
    """Where what a function returns may point, per return value and byte offset (`r+offset`), in its own terms
    (its parameters, `WINDOW`, `STACK`, `UNTRACED`): the values it stores into `func_retval<r>`."""
    out: dict[str, set[Source]] = defaultdict(set)
    for name, at, value in _param_stores(function.instructions):
        found = _RETVAL.match(name)
        if found is not None:
            out[f"{found.group(1)}+{at}"] |= _value_sources(value, sources)
    return {key: frozenset(value) for key, value in out.items()}


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
    key = parameter_key(function, where)
    if key is not None:
        return frozenset({key})
    if _SYMBOL.match(where):
        return frozenset({SYMBOL + where})  # `ld.global.u32 %r1, [table+4]`
    return sources.get(where) or frozenset({UNTRACED})


def symbol_of(source: Source) -> str | None:
    """The module variable a source is the address of (`SYMBOL`), or None."""
    return source[len(SYMBOL):] if isinstance(source, str) and source.startswith(SYMBOL) else None


def call_arguments(function: PtxFunction, call: Instruction, sources: Sources) -> dict[Source, frozenset[Source]]:
    """Per parameter of the called function (its index, or `index+offset` for a field of a structure passed by
    value), where the value the caller passes there may point (`address_sources`): what the caller stored
    (`st.param`) into each parameter the call names, before the call. A parameter missing here is one it stored
    nothing into at that offset: `UNTRACED` to whoever asks (`passed`)."""
    out: dict[Source, set[Source]] = defaultdict(set)
    for key, values in _stored(call, function.instructions).items():
        for value in values:
            out[key] |= _value_sources(value, sources)
    return {key: frozenset(value) for key, value in out.items()}


def passed(source: Source, arguments: dict[Source, frozenset[Source]]) -> frozenset[Source]:
    """A callee's address source as its caller sees it: for a parameter (or a field of one), what the call passes
    there (`call_arguments`); `UNTRACED` where the call stored nothing there."""
    if not is_parameter(source):
        return frozenset({source})
    return arguments.get(source, frozenset({UNTRACED}))


def _stored(call: Instruction, instructions: list[Instruction]) -> dict[Source, list[str]]:
    """Per parameter key of the callee (`index`, `index+offset`), the operands the caller stores there before the
    call: registers, immediates or symbols."""
    names = _argument_names(call)
    out: dict[Source, list[str]] = defaultdict(list)
    if not names:
        return out
    for name, at, value in _param_stores(_before(instructions, call)):
        if name in names:
            index = names.index(name)
            out[index if at == 0 else f"{index}+{at}"].append(value)
    return out


def _param_stores(instructions: list[Instruction]) -> Iterator[tuple[str, int, str]]:
    """Each value a `st.param` stores: the parameter's name, the byte offset in it (a vector store's elements one
    after another) and the operand stored."""
    for instr in instructions:
        if not instr.opcode.startswith("st.param"):
            continue
        ops = operands(instr)
        if len(ops) < 2:
            continue
        name = _bracket_text(ops[0]).partition("+")[0].strip()
        base, width = _offset(ops[0]), _width(instr.opcode)
        for position, value in enumerate(_values(ops[1])):
            yield name, base + position * width, value


def _value_sources(value: str, sources: Sources) -> set[Source]:
    """Where a stored operand may point: a register's sources, nothing for a number, `UNTRACED` for a symbol."""
    if value.startswith("%"):
        return set(sources.get(value, frozenset()))
    if _IMMEDIATE.match(value) or _FLOAT.match(value):
        return set()
    return {UNTRACED}


def _before(instructions: list[Instruction], call: Instruction) -> list[Instruction]:
    """The instructions from the last call before `call` up to it: where the call's parameters are stored."""
    position = _position(instructions, call)
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


def is_call_instruction(instr: Instruction) -> bool:
    return instr.opcode == "call" or instr.opcode.startswith("call.")


def _call_parts(call: Instruction) -> tuple[list[str], str | None]:
    """(the return parameters a call names, its target: None for a call through a register)."""
    ops = operands(call)
    returns: list[str] = []
    if ops and ops[0].startswith("("):
        returns = [name.strip() for name in ops[0].strip("()").split(",") if name.strip()]
        ops = ops[1:]
    target = _first_token(ops[0]) if ops else ""
    return returns, (target if target and not target.startswith("%") else None)


def _returns_of_call(function: PtxFunction, call: Instruction, returns: Returns | None,
                     seeds: dict[str, set[Source]], edges: dict[str, set[str]]) -> dict[str, str] | None:
    """Wire what a call returns into the caller's graph: per return parameter and offset a node (`_node`) that the
    `ld.param`s reading it after the call take their sources from. The callee's return summary (`returns`) names its
    own parameters; each becomes the operands this call stores there. None where the callee is not known (a
    function pointer, an extern function, recursion): its return values are `UNTRACED`."""
    names, target = _call_parts(call)
    summary = returns(target) if returns is not None and target is not None and names else None
    if summary is None:
        return None
    stored = _stored(call, function.instructions)
    tag = f"<{call.ptx_line}:"
    for key, found in summary.items():
        position, _, offset = key.partition("+")
        if not position.isdigit() or int(position) >= len(names):
            continue
        node = f"{tag}{names[int(position)]}+{offset}>"
        seeds.setdefault(node, set())
        for source in found:
            if not is_parameter(source):
                seeds[node].add(source)
                continue
            values = stored.get(source)
            if not values:
                seeds[node].add(UNTRACED)
            for value in values or ():
                if value.startswith("%"):
                    edges[value].add(node)
                elif not (_IMMEDIATE.match(value) or _FLOAT.match(value)):
                    seeds[node].add(UNTRACED)
    return {name: f"{tag}{name}" for name in names}


def _node(returned: dict[str, str], name: str, offset: int) -> str:
    """The node of one return value at one offset (`_returns_of_call`): a value the callee's summary does not
    hold there has no seed but `UNTRACED`."""
    return f"{returned[name]}+{offset}>"


def _registers(operand: str) -> list[str]:
    """The registers an operand names: one, or each of a vector's `{%r1, %r2}`; none for a memory operand."""
    operand = operand.strip()
    if operand.startswith("["):
        return []
    return [part for part in _values(operand) if part.startswith("%")]


def _values(operand: str) -> list[str]:
    operand = operand.strip()
    if operand.startswith("{"):
        return [part.strip() for part in operand.strip("{}").split(",") if part.strip()]
    return [operand]


def _bracket_text(operand: str) -> str:
    inner = _BRACKET.search(operand)
    return inner.group(1).strip() if inner else operand.strip()


def _offset(operand: str) -> int:
    _, _, offset = _bracket_text(operand).partition("+")
    return int(offset) if offset.strip().isdigit() else 0


def _width(opcode: str) -> int:
    """The bytes of one element an opcode moves (`st.param.v2.b64`: 8), 8 where it names no type."""
    for part in reversed(opcode.split(".")):
        if part[:1] in "busf" and part[1:].isdigit():
            return max(int(part[1:]) // 8, 1)
    return 8


_POSITIONS: dict[int, tuple[list[Instruction], dict[int, int]]] = {}


def _position(instructions: list[Instruction], call: Instruction) -> int | None:
    """Where `call` stands in `instructions` (by identity), from an index built once per list."""
    held = _POSITIONS.get(id(instructions))
    if held is None or held[0] is not instructions:
        if len(_POSITIONS) > 64:
            _POSITIONS.clear()
        held = _POSITIONS[id(instructions)] = (instructions, {id(i): n for n, i in enumerate(instructions)})
    return held[1].get(id(call))
