"""The PTX call graph, and what each entry does through it.

A kernel is its `.entry` and every `.func` it calls, directly or not: a load in a `__noinline__` helper two
calls down is the kernel's load, a `griddepcontrol.wait` in a helper called first is the kernel's wait, a
block-scaled MMA or a spill in a callee is the kernel's. This module is the one place that walks the calls
(`call` sites to `.func` definitions, transitively, each function once, so recursion and mutual recursion end);
every fact about an entry that its callees can change is read through it.

What it cannot see it says: a call through a register (a function pointer) may reach any function whose address
the module takes, unless every value the register may hold is the address of a function defined here (`mov.u64 %rd1,
f`, a `selp` of two such: the call is then a call of each of them), and a callee with no body in this PTX (`.extern .func`, a prototype only) may do anything, unless
it is one of the device runtime's functions whose effect is known (`RUNTIME`: printf, a failed assert, the heap).
Both are listed in the entry's `opaque_calls`; for the PDL analysis such a call writes global memory and does not
wait.

The PDL question ("which global memory accesses does some path from the entry reach before
`griddepcontrol.wait`?") is answered on the control-flow graph of each function (basic blocks split at labels and branches, a
forward may-analysis of "not yet waited" to a fixpoint) with a summary per callee: whether every path through it
that returns has waited, and which of its accesses some path reaches before a wait. A call is then an access (each
of the callee's unwaited accesses, reported at the call) followed, when the callee always waits, by a wait.
Summaries are fixpoints too (least ones: a function that waits only through its own recursion is taken not to
wait), so recursion is safe. Each access keeps whether it writes and the parameters its address may point into
(`kgate.facts.dataflow`): a callee's parameters become the caller's through what the call passes, so an access in a
helper is traced to the kernel's own arguments, one per call that reaches it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial

from kgate.collect.cuda_names import short_name
from kgate.facts.dataflow import (
    CARRIES,
    Returned,
    Source,
    Sources,
    access_sources,
    address_sources,
    call_arguments,
    off_global,
    operands,
    passed,
    return_sources,
    symbol_of,
)
from kgate.facts.feasible import Conditions, feasible_flow
from kgate.facts.ptx import (
    Block,
    GlobalAccess,
    Instruction,
    PtxEntry,
    PtxFunction,
    build_cfg,
    in_cycles,
    is_global_access,
    is_global_load,
    is_mma,
    writes_global,
)

# A call's operands: an optional return list in parentheses, then the target (a function's name, or a register).
_CALL_TARGET = re.compile(r"^\s*(?:\([^)]*\)\s*,\s*)?([%$\w]+)")
_TOKEN = re.compile(r"[A-Za-z_$%][\w$]*")
# What every MMA, call, wait and launch of dependents starts with: `entry_facts` looks closer only at these.
_FLOW_PREFIXES = ("mma.", "wgmma.mma_async", "tcgen05.mma", "call", "griddepcontrol.")
# A module variable with an initializer that only this module sees (no `.visible`, `.extern` or `.weak`).
_PRIVATE_DATA = re.compile(r"^[ \t]*\.global\b[^;={}\n]*?([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\])?\s*=", re.MULTILINE)
# The CUDA math library's constant tables (`__cudart_i2opi_f`, `__cudart_i2opi_d`: the bits of 2/pi that sinf, cosf,
# tanf and their double forms reduce large arguments with), which libdevice and the CUDA headers define in every module
# that calls them. A project's own table cannot be told read-only from the PTX: the host may hand its address
# (cudaGetSymbolAddress) to a kernel that writes it through a pointer argument.
_MATH_TABLES = ("__cudart_",)
INDIRECT = "(a function pointer)"  # the callee named for a call through a register
# The CUDA device runtime's functions that every kernel may call without their code in the PTX, and whose effect
# is known: they print (into the printf buffer), stop the kernel on a failed assert (CUDA's `assert`, Triton's
# `tl.device_assert`) or take and give back heap memory; none reads or writes what the program's kernels share,
# and none waits.
RUNTIME = frozenset({"vprintf", "__assertfail", "malloc", "free"})
_COPY = re.compile(r"\$\d+$")
_TYPES = re.compile(r"__(?=P*(?:[iu]|fp|bf)\d)")
_SANITIZED = "_$_"  # how a PTX symbol writes a character it cannot hold (Triton's `.` between module and name)
_FILE_SCOPE = re.compile(r"_INTERNAL_[0-9a-f]+_\d+_\w*?_[0-9a-f]+::|\(anonymous namespace\)::")


def function_name(symbol: str, home: str | None = None) -> str:
    """How a message names a called function: a C++ one demangled, without its parameters and without the
    scopes nvcc gives a file's internal functions (`_INTERNAL_1ed2f173_4_s_cu_0b947eae::`, from the file's path,
    and `(anonymous namespace)::`), and without the `$1` of a copy nvcc makes under `-rdc=true`.

    A Triton one (`module_$_name__argument-types`: the full name `module.name`, each character a PTX symbol
    cannot hold written `_$_`, then the argument types) by its Python name: bare when it is in `home` (the
    kernel's module), else with its module (`helpers.tile`), so two functions of one name in two modules are
    told apart; a name's own `__` is kept (the argument types follow the last one)."""
    symbol = _COPY.sub("", symbol)
    if symbol.startswith("_Z"):
        text = _FILE_SCOPE.sub("", short_name(symbol))
        head, sep, tail = text.partition("<")
        # A template function's demangled name starts with its return type (`float tload<3>`).
        if sep and " " in head.replace("(anonymous namespace)", ""):
            head = head.rsplit(" ", 1)[1]
        return head + sep + tail
    # The argument types start at the first `__` before a type (`Pfp32`, `i32`, `bf16`): Triton 3.6 writes the
    # constexprs after them (`__Pfp32___$_1_$__...`), 3.9 nothing; a function without arguments ends in `__`.
    typed = _TYPES.search(symbol)
    qualified, sep = (symbol[:typed.start()], "__") if typed else symbol.rpartition("__")[:2]
    if _SANITIZED not in symbol or not sep or _SANITIZED not in qualified:
        return symbol
    prefix = f"{home.replace('.', _SANITIZED)}{_SANITIZED}" if home else None
    if prefix and qualified.startswith(prefix):
        return qualified[len(prefix):].replace(_SANITIZED, "?")  # no dot in a name: a character PTX cannot hold
    return qualified.replace(_SANITIZED, ".")


def is_wait(instr: Instruction) -> bool:
    return instr.opcode.startswith("griddepcontrol.wait")


def is_call(instr: Instruction) -> bool:
    return instr.opcode == "call" or instr.opcode.startswith("call.")


def call_target(instr: Instruction) -> str | None:
    """The name a call instruction calls, or None for a call through a register."""
    found = _CALL_TARGET.match(_call_operands(instr))
    if found is None or found.group(1).startswith("%"):
        return None
    return found.group(1)


def _call_operands(instr: Instruction) -> str:
    rest = instr.text.split(None, 1)[1] if instr.predicated else instr.text
    parts = rest.split(None, 1)
    return parts[1] if len(parts) > 1 else ""


@dataclass(frozen=True)
class _Found:
    """An access some path reaches before a wait: its opcode, the instruction, the functions it is reached
    through (the callee first), whether it stands for a call whose code is not in the PTX, whether it writes, and
    the parameters its address may point into, of the function whose summary holds it."""

    opcode: str
    instr: Instruction
    via: tuple[str, ...]
    opaque: bool = False
    site: Instruction | None = None  # the call that reaches it, in the function whose summary holds it
    writes: bool = True
    sources: frozenset[Source] = frozenset()

    @property
    def place(self) -> Instruction:
        return self.site or self.instr

    @property
    def origins(self) -> frozenset[int]:
        return frozenset(s for s in self.sources if isinstance(s, int))


# An access in a function's summary: the function and PTX line of the instruction, and where its address may point
# there (one instruction of a helper called with two pointers is two accesses of its caller).
_Key = tuple[str, int, frozenset[Source]]


class CallGraph:
    """The `.entry` and `.func` definitions of one PTX module and the calls between them (`text`: the module as
    the assembler reads it, comments blanked: `kgate.facts.ptx_text.code`)."""

    def __init__(self, functions: list[PtxFunction], text: str) -> None:
        self.functions = {f.name: f for f in functions}
        self.order = [f.name for f in functions]  # text order
        self.address_taken = _address_taken(self.functions, text)
        self._text = text
        self._read_only: frozenset[str] | None = None
        self._blocks: dict[str, list[Block]] = {}
        self._callees: dict[str, list[str]] = {}
        self._must_wait: dict[str, bool] | None = None
        self._unwaited: dict[str, dict[_Key, _Found]] | None = None
        # The entries whose accesses before a wait will be asked for (None: every function's): their summaries, and
        # those of what they reach, are computed together, once.
        self.traced: Collection[str] | None = None
        self._sources: dict[str, Sources] = {}
        self._computing: set[str] = set()
        self._returns: dict[str, Returned] = {}
        self._kills: dict[str, list[list[Instruction]]] = {}
        self._conditions: dict[str, Conditions] = {}
        self._pointed: dict[tuple[str, int], tuple[str, ...]] = {}

    def callees(self, name: str) -> list[str]:
        """What one function calls, in text order, each once: a name, or INDIRECT."""
        if name not in self._callees:
            out: dict[str, None] = {}
            for instr in self.functions[name].instructions:
                if is_call(instr):
                    out.update(dict.fromkeys(self.called_by(name, instr)))
            self._callees[name] = list(out)
        return self._callees[name]

    def called_by(self, caller: str, call: Instruction) -> tuple[str, ...]:
        """What one call instruction may call: the function it names; for a call through a register, the functions
        of this module whose addresses are every value the register may hold in the caller (`mov.u64 %rd1, f`, a
        `selp` of two such), else INDIRECT (a pointer read from memory or passed in may reach anything)."""
        target = call_target(call)
        if target is not None:
            return (target,)
        key = (caller, call.ptx_line)
        if key not in self._pointed:
            found = _CALL_TARGET.match(_call_operands(call))
            held = self.sources(caller).get(found.group(1), frozenset()) if found else frozenset()
            names = sorted({symbol_of(source) or "" for source in held})
            pointed = bool(names) and all(self.functions.get(n) is not None and self.functions[n].kind == "func"
                                          for n in names)
            self._pointed[key] = tuple(names) if pointed else (INDIRECT,)
        return self._pointed[key]

    def bottom_up(self) -> list[str]:
        """Every function, callees before their callers (a cycle in some order): summaries computed in this order
        settle in one pass where there is no recursion."""
        order: list[str] = []
        seen: set[str] = set()
        for root in self.order:  # post-order: a function after everything it calls
            self._post_order(root, seen, order)
        return order

    def _targets_of(self, name: str) -> list[str]:
        return [t for callee in self.callees(name) for t in self.targets(callee)]

    def _post_order(self, root: str, seen: set[str], out: list[str]) -> None:
        if root in seen:
            return
        seen.add(root)
        stack = [(root, iter(self._targets_of(root)))]
        while stack:
            name, pending = stack[-1]
            step = next((t for t in pending if t not in seen), None)
            if step is None:
                stack.pop()
                out.append(name)
                continue
            seen.add(step)
            stack.append((step, iter(self._targets_of(step))))

    def opaque(self, callee: str) -> bool:
        """Whether a call may do anything: its code is not in the PTX (an extern function, a function pointer),
        and it is none of the device runtime's functions whose effect is known (`RUNTIME`)."""
        return callee == INDIRECT or (callee not in self.functions and callee not in RUNTIME)

    def targets(self, callee: str) -> list[str]:
        """The defined functions a callee may be: itself, or for INDIRECT every function whose address is taken."""
        if callee == INDIRECT:
            return sorted(self.address_taken)
        return [callee] if callee in self.functions else []

    def reached(self, entry: str) -> tuple[list[str], list[str]]:
        """(the defined functions the entry reaches, in the order it first calls them; what it calls that has no
        code here: extern names, and INDIRECT for a call through a register)."""
        reached: dict[str, None] = {}
        opaque: dict[str, None] = {}
        stack = [entry]
        seen = {entry}
        while stack:
            name = stack.pop()
            pending = []
            for callee in self.callees(name):
                if self.opaque(callee):
                    opaque.setdefault(callee, None)
                for target in self.targets(callee):
                    if target not in seen:
                        seen.add(target)
                        reached[target] = None
                        pending.append(target)
            stack.extend(reversed(pending))
        return list(reached), sorted(opaque)

    def looped(self, entry: str) -> list[str]:
        """The functions the entry reaches through a call made inside a loop (a cycle of the calling function's
        control-flow graph), and all they call: their code runs on every trip of that loop."""
        out: dict[str, None] = {}
        for name in [entry, *self.reached(entry)[0]]:
            for call in self._calls_in_cycles(name):
                for target in (t for callee in self.called_by(name, call) for t in self.targets(callee)):
                    out.setdefault(target, None)
                    for inner in self.reached(target)[0]:
                        out.setdefault(inner, None)
        return list(out)

    def _calls_in_cycles(self, name: str) -> list[Instruction]:
        return [i for i in self._in_cycles(name) if is_call(i)]

    def _in_cycles(self, name: str) -> list[Instruction]:
        """The instructions of a function that lie on a cycle of its control-flow graph (inside a loop)."""
        blocks = self._cfg(name)
        return [i for index in sorted(in_cycles(blocks)) for i in blocks[index].instrs]

    def looped_loads(self, entry: str) -> dict[str, int]:
        """The global loads that run on every trip of some loop of the entry: inside a cycle of the entry or of a
        function it reaches, and every one of a function it calls from inside a loop; by opcode."""
        everywhere = set(self.looped(entry))
        found: Counter[str] = Counter()
        for name in [entry, *self.reached(entry)[0]]:
            instrs = self.functions[name].instructions if name in everywhere else self._in_cycles(name)
            found.update(i.opcode for i in instrs if is_global_load(i.opcode))
        return dict(sorted(found.items()))

    def sources(self, name: str) -> Sources:
        """Where each register of a function may point: its parameters, the shared window or its stack, or
        somewhere untraced (`kgate.facts.dataflow.address_sources`)."""
        if name not in self._sources:
            self._computing.add(name)
            try:
                self._sources[name] = address_sources(self.functions[name], self._returned)
            finally:
                self._computing.discard(name)
        return self._sources[name]

    def _returned(self, callee: str) -> Returned | None:
        """Where what a called function returns may point, in its own terms (`kgate.facts.dataflow.return_sources`);
        None for a function not defined here, or one whose sources are being found (recursion)."""
        if callee not in self.functions or callee in self._computing:
            return None
        if callee not in self._returns:
            self._returns[callee] = return_sources(self.functions[callee], self.sources(callee))
        return self._returns[callee]

    def _cfg(self, name: str) -> list[Block]:
        if name not in self._blocks:
            self._blocks[name] = build_cfg(self.functions[name].items)
        return self._blocks[name]

    def _constant(self, sources: frozenset[Source]) -> bool:
        """Whether an address points only into the module's read-only data (`read_only`)."""
        if not sources:
            return False
        names = [symbol_of(s) for s in sources]
        return all(n is not None for n in names) and set(names) <= self.read_only()

    def read_only(self) -> frozenset[str]:
        """The CUDA math library's constant tables in this module that nothing can write (`_MATH_TABLES`: the table
        `sinf` reduces large arguments with): a `.global` with an initializer that is not visible outside the module
        (no `.visible`, `.extern`, `.weak`), whose address is only ever loaded through (after pointer arithmetic or a
        comparison): never stored, passed to a call, returned, written through, or named in another variable's
        initializer. A load of one before the wait reads nothing the kernel before can have written."""
        if self._read_only is None:
            self._read_only = self._find_read_only()
        return self._read_only

    def _find_read_only(self) -> frozenset[str]:
        candidates = {m.group(1) for m in _PRIVATE_DATA.finditer(self._text) if m.group(1).startswith(_MATH_TABLES)}
        if not candidates:
            return frozenset()
        mentions = Counter(t for t in _TOKEN.findall(self._text) if t in candidates)
        leaked: set[str] = set()
        for name, function in self.functions.items():
            sources = self.sources(name)
            for instr in function.instructions:
                head = instr.opcode.split(".", 1)[0]
                for position, operand in enumerate(operands(instr)):
                    for token in _TOKEN.findall(operand):
                        if token in candidates:
                            mentions[token] -= 1
                            held = {token}
                        else:
                            held = {n for s in sources.get(token, ()) if (n := symbol_of(s)) in candidates}
                        if held and not _reads_through(instr, head, position, operand):
                            leaked |= held
        # A mention left over is outside every function: its declaration, and another variable's initializer.
        leaked |= {n for n, count in mentions.items() if count > 1}
        return frozenset(candidates - leaked)

    # ----------------------------------------------------------------------------------------- PDL summaries

    def must_wait(self, name: str) -> bool:
        """Whether every path through a function that returns to its caller has executed a wait."""
        if self._must_wait is None:
            self._must_wait = self._wait_summaries()
        return self._must_wait.get(name, False)

    def _wait_summaries(self) -> dict[str, bool]:
        """The greatest fixpoint: every function is taken to wait until a path that returns without a wait shows it
        does not. A recursive call then counts as the waits its own returning paths make (`if (n == 0) { wait;
        return; } f(n - 1); store;` stores after a wait on every path that returns: a recursion returns only
        through its base case), where starting from "no function waits" would never credit the recursive call."""
        order = self.bottom_up()
        summary = {name: True for name in order}
        changed = True
        while changed:
            changed = False
            for name in order:
                if summary[name] and not self._returns_waited(name, summary):
                    summary[name] = False
                    changed = True
        return summary

    def _call_waits(self, caller: str, instr: Instruction, summary: dict[str, bool]) -> bool:
        """Whether a call always waits: each function it may call does (a call through a pointer to one of this
        module's functions, which of them decided at run time, waits where all of them do)."""
        if instr.predicated:
            return False
        return all(summary.get(target, False) for target in self.called_by(caller, instr))

    def _returns_waited(self, name: str, summary: dict[str, bool]) -> bool:
        waits = partial(self._call_waits, name, summary=summary)
        blocks, unwaited_in = self._flow(name, waits)
        for index, block in enumerate(blocks):
            state = unwaited_in[index] and not _waits_in(self._waits_or_calls(name)[index], waits)
            last = block.instrs[-1].opcode.split(".")[0] if block.instrs else ""
            returns = last == "ret" or (index == len(blocks) - 1 and last not in ("exit", "trap", "bra", "brx"))
            if returns and state:
                return False
        return True

    def _flow(self, name: str, waits: Callable[[Instruction], bool]) -> tuple[list[Block], list[bool]]:
        """The function's blocks and, per block, whether some path reaches it before any wait (`waits`: whether
        a call instruction is one that always waits)."""
        blocks = self._cfg(name)
        unwaited_in = [False] * len(blocks)
        unwaited_in[0] = True
        work = [0]
        kills = self._waits_or_calls(name)
        while work:
            index = work.pop()
            state = unwaited_in[index] and not _waits_in(kills[index], waits)
            for succ in blocks[index].succ:
                if state and not unwaited_in[succ]:
                    unwaited_in[succ] = True
                    work.append(succ)
        waited = [_waits_in(k, waits) for k in kills]
        if any(waited) and any(unwaited_in):
            # A path the arguments cannot take (the one that skips both of an unrolled loop's parts) is no path.
            if name not in self._conditions:
                self._conditions[name] = Conditions(self.functions[name].instructions)
            unwaited_in = feasible_flow(blocks, waited, self._conditions[name], unwaited_in)
        return blocks, unwaited_in

    def _waits_or_calls(self, name: str) -> list[list[Instruction]]:
        """Per block of a function, its waits and calls: what may end a path's unwaited state there."""
        if name not in self._kills:
            self._kills[name] = [[i for i in block.instrs if is_wait(i) or is_call(i)] for block in self._cfg(name)]
        return self._kills[name]

    def unwaited(self, name: str) -> list[_Found]:
        """The accesses some path from the function's start reaches before a wait, in the order it makes them (a
        callee's where it is called), each once."""
        if self._unwaited is None:
            self._unwaited = self._access_summaries()
        return list(self._unwaited.get(name, {}).values())

    def _access_summaries(self) -> dict[str, dict[_Key, _Found]]:
        if self._must_wait is None:
            self._must_wait = self._wait_summaries()
        order = self.bottom_up()
        if self.traced is not None:
            scope = {f for entry in self.traced for f in (entry, *self.reached(entry)[0])}
            order = [name for name in order if name in scope]  # what is outside reads nothing inside
        summary: dict[str, dict[_Key, _Found]] = {name: {} for name in order}
        changed = True
        while changed:
            changed = False
            for name in order:
                found = self._accesses_before_wait(name, summary)
                if found.keys() != summary[name].keys():
                    summary[name] = {**summary[name], **{k: v for k, v in found.items() if k not in summary[name]}}
                    changed = True
        return summary

    def _accesses_before_wait(self, name: str, summary: dict[str, dict[_Key, _Found]]) -> dict[_Key, _Found]:
        waits = self._must_wait or {}
        blocks, unwaited_in = self._flow(name, lambda i: self._call_waits(name, i, waits))
        out: dict[_Key, _Found] = {}
        for index, block in enumerate(blocks):
            state = unwaited_in[index]
            for instr in block.instrs:
                if is_wait(instr) and not instr.predicated:
                    state = False
                elif is_call(instr):
                    if state:
                        for key, found in self._called(name, instr, summary):
                            out.setdefault(key, found)
                    if self._call_waits(name, instr, waits):
                        state = False
                elif state and is_global_access(instr.opcode):
                    sources = access_sources(self.functions[name], instr, self.sources(name))
                    if off_global(sources):  # a generic access to the shared window or the stack
                        continue
                    if not writes_global(instr.opcode) and self._constant(sources):
                        continue  # a read of the module's own constant data
                    out.setdefault((name, instr.ptx_line, sources),
                                   _Found(instr.opcode, instr, (), writes=writes_global(instr.opcode), sources=sources))
        return out

    def _called(self, caller: str, call: Instruction, summary: dict[str, dict[_Key, _Found]]
                ) -> list[tuple[_Key, _Found]]:
        """What a call made before any wait adds: each unwaited access of what it may call, its address traced on
        to the caller's parameters through what the call passes, or the call itself where its code is not here. An
        access whose address is only what this call passes into the shared window or the stack (a helper that stores
        through its pointer argument, given a shared tile's address here) is not global memory at this call."""
        callees = self.called_by(caller, call)
        out: list[tuple[_Key, _Found]] = []
        for callee in callees:
            if self.opaque(callee):
                out.append((("", call.ptx_line, frozenset()), _Found(call.opcode, call, (callee,), opaque=True,
                                                                    site=call)))
        targets = [t for callee in callees for t in self.targets(callee)]
        arguments = call_arguments(self.functions[caller], call, self.sources(caller)) if targets else {}
        for target in targets:
            for (function, line, _inner), found in summary.get(target, {}).items():
                sources = frozenset(s for k in found.sources for s in passed(k, arguments))
                if off_global(sources) or (not found.writes and not found.opaque and self._constant(sources)):
                    continue
                out.append(((function, line, sources), _Found(found.opcode, found.instr, (target, *found.via),
                                                             found.opaque, call, found.writes, sources)))
        return out


# Instructions that write memory or hand a value on (to a call, back to a caller): an address there may be written.
_WRITES = frozenset({"st", "atom", "red", "cp", "multimem", "sust", "sured", "tensormap", "discard", "wmma", "call",
                     "ret"})


def _reads_through(instr: Instruction, head: str, position: int, operand: str) -> bool:
    """Whether an operand that holds a module variable's address is used only to read it: a load's address, an
    operand pointer arithmetic carries into its result (followed by the dataflow), a comparison."""
    if head in _WRITES or operand.startswith("{"):
        return False
    if head in ("ld", "ldu") and ".param" not in instr.opcode:
        return position == 1 and operand.startswith("[")
    if position == 0:
        return not operand.startswith("[")  # the register an instruction defines
    if head == "setp":
        return position > 0
    return position > 0 and position in CARRIES.get(head, ())


def _waits_in(instrs: list[Instruction], waits: Callable[[Instruction], bool]) -> bool:
    """Whether one of a block's waits and calls waits (`waits`: whether a call instruction is one that always
    waits)."""
    return any((is_wait(i) and not i.predicated) or (is_call(i) and waits(i)) for i in instrs)


def _address_taken(functions: dict[str, PtxFunction], text: str) -> set[str]:
    """The `.func`s named anywhere but in their own header and as a direct call's target: a function pointer
    (an operand of `mov`, a table in `.global` memory) may call them."""
    if not any(f.kind == "func" for f in functions.values()):
        return set()  # only a `.func`'s address can be taken: a module of kernels alone need not be read for one
    uses = Counter(_TOKEN.findall(text))
    direct = Counter(call_target(i) for f in functions.values() for i in f.instructions if is_call(i))
    return {name for name, f in functions.items()
            if f.kind == "func" and uses[name] > f.mentions + direct[name]}


def entry_facts(graph: CallGraph, name: str, *, traced: bool = True, dynamic: frozenset[str] = frozenset()
                ) -> PtxEntry:
    """What an entry does, its callees' instructions counted where it calls them; its accesses before a wait where
    `traced`; `dynamic`: the names of the module's `.extern .shared` arrays (whether it names one is told)."""
    reached, opaque = graph.reached(name)
    functions = [graph.functions[name], *(graph.functions[f] for f in reached)]
    mma: Counter[str] = Counter()
    total = 0
    has_wait = has_launch_dependents = shared = False
    for function in functions:  # one pass over the instructions (a module has hundreds of thousands)
        called_by = partial(graph.called_by, function.name)
        for i in function.instructions:
            opcode = i.opcode
            if dynamic and not shared and any(n in i.text for n in dynamic):
                shared = any(re.search(r"(?<![\w$])" + re.escape(n) + r"(?![\w$])", i.text) for n in dynamic)
            if is_global_access(opcode):
                total += 1
            elif opcode.startswith(_FLOW_PREFIXES):
                if is_mma(opcode):
                    mma[opcode] += 1
                elif is_call(i):
                    total += any(callee in opaque for callee in called_by(i))
                elif is_wait(i):
                    has_wait = True
                elif opcode.startswith("griddepcontrol.launch_dependents"):
                    has_launch_dependents = True
    # An access reached through a call is placed where the entry makes that call: its PTX line and source place
    # are the call's (the access itself may sit in another file, or in none the project has).
    # One access per call, its kind and its parameters: the first one some path reaches through it.
    placed: dict[tuple[int, str, bool, frozenset[int]], GlobalAccess] = {}
    for found in graph.unwaited(name) if traced else ():
        key = (found.place.ptx_line, found.via[0] if found.via else found.opcode, found.writes, found.origins)
        placed.setdefault(key, GlobalAccess(found.opcode, found.place.ptx_line, found.place.loc, found.via,
                                            found.opaque, found.writes, tuple(sorted(found.origins))))
    unwaited = tuple(placed.values())
    return PtxEntry(
        name=name,
        mma=dict(sorted(mma.items())),
        has_wait=has_wait,
        has_launch_dependents=has_launch_dependents,
        global_accesses=total,
        unwaited_accesses=unwaited,
        calls=tuple(reached),
        opaque_calls=tuple(opaque),
        looped_calls=tuple(graph.looped(name)),
        looped_loads=graph.looped_loads(name),
        traced=traced,
        dynamic_shared=shared,
    )

