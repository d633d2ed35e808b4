"""PTX parsing: target, entries, MMA opcodes, and the PDL control-flow check.

The PDL question ("does every path from the entry execute
`griddepcontrol.wait` before its first global memory access?") is answered
on the control-flow graph of each entry: basic blocks split at labels and
branches, then a forward may-analysis of "not yet waited" to a fixpoint.
Text order is not enough: a wait under a branch that some path skips does
not protect the access after the join.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import pairwise

from kgate.core.errors import ParseError
from kgate.facts.numbers import count
from kgate.facts.ptx_text import BRANCH_TARGETS, LOC, QUOTED, Label, body_items, code, label_names, resolve, unquoted

_TARGET = re.compile(r"^\s*\.target\s+([\w.]+)", re.MULTILINE)
_FUNC_HEAD = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)", re.MULTILINE)
FILE = re.compile(r'^\s*\.file\s+(\d+)\s+' + QUOTED, re.MULTILINE)
# A module's dynamic shared memory: `.extern .shared .align 16 .b8 smem[];`.
_EXTERN_SHARED = re.compile(r"^\s*\.extern\s+\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)\s*\[\s*\]", re.MULTILINE)
_PRED = re.compile(r"^@(!?)(%?[\w]+)\s+")
_BRACE = re.compile(r"[{}]")
_MMA_PREFIXES = ("mma.", "wgmma.mma_async", "tcgen05.mma")

# State spaces that are never global memory.
_NOT_GLOBAL = {"param", "shared", "local", "const", "reg", "sreg", "tex"}
_SPACES = ("global", "shared", "local", "const", "param")


@dataclass(frozen=True)
class SourceLoc:
    file: str
    line: int
    col: int


@dataclass(frozen=True)
class Instruction:
    opcode: str  # full dotted opcode, e.g. "ld.global.nc.v4.b32"
    predicated: bool
    text: str
    ptx_line: int
    loc: SourceLoc | None


@dataclass(frozen=True)
class GlobalAccess:
    opcode: str
    ptx_line: int  # in the entry: the call's line where the access is in a function it calls
    loc: SourceLoc | None  # likewise
    # The functions the access is reached through, the entry's callee first ((): in the entry itself).
    via: tuple[str, ...] = ()
    # A call whose code is not in the PTX (an extern function, a function pointer): assumed to touch memory.
    opaque: bool = False
    # Whether it writes global memory (a store, an atomic, a reduction, a copy into it; an opaque call may): what
    # can race the kernel before a PDL kernel, where a load only may read what it has not written yet.
    writes: bool = True
    # The entry's parameters its address may point into, by index (`kgate.facts.dataflow`): one where it is traced
    # to one; none where it is traced to none (a pointer read from memory, a global variable).
    arguments: tuple[int, ...] = ()


@dataclass(frozen=True)
class PtxEntry:
    """What one kernel does: its entry and every function it calls, directly or not (`calls`)."""

    name: str
    mma: dict[str, int]
    has_wait: bool
    has_launch_dependents: bool
    global_accesses: int
    # Global accesses that some path from the entry reaches without a wait (where `traced`).
    unwaited_accesses: tuple[GlobalAccess, ...]
    calls: tuple[str, ...] = ()  # the `.func`s it reaches, in the order it first calls them
    opaque_calls: tuple[str, ...] = ()  # what it calls whose code the PTX lacks (extern names, a function pointer)
    looped_calls: tuple[str, ...] = ()  # of `calls`, those reached through a call made inside a loop
    # Global loads that run on every trip of a loop (inside a cycle of the entry or of a function it reaches, or in a
    # function called from inside one), by opcode (`ld.global.nc.u8`, `ld.global.v4.b32`).
    looped_loads: dict[str, int] = field(default_factory=dict)
    # Whether `unwaited_accesses` were traced: only of the entries a PDL analysis may read (`parse_ptx`'s `traced`).
    traced: bool = True
    # Whether it or a function it reaches names a `.extern .shared` array of the module (`extern __shared__`): shared
    # memory whose size the launch gives, not the cubin.
    dynamic_shared: bool = False


@dataclass(frozen=True)
class PtxFunction:
    kind: str  # "entry" | "func"
    name: str
    items: tuple[Instruction | str, ...]  # instructions and labels, in order
    mentions: int = 1  # how often its name is written in headers (definition and declarations)

    @cached_property
    def instructions(self) -> list[Instruction]:
        """The function's instructions in order (one list, asked of often: read it, never change it)."""
        return [i for i in self.items if isinstance(i, Instruction)]


@dataclass(frozen=True)
class PtxFacts:
    target: str
    version: str
    entries: tuple[PtxEntry, ...] = field(default=())

    def entry(self, name: str | None = None) -> PtxEntry:
        if name is None:
            if len(self.entries) != 1:
                raise ParseError(f"expected one .entry in PTX, found {len(self.entries)}")
            return self.entries[0]
        found = self._by_name.get(name)
        if found is None:
            raise ParseError(f"no .entry {name!r} in PTX")
        return found

    @cached_property
    def _by_name(self) -> dict[str, PtxEntry]:
        """Entries by name (the first of a name): asked once per fact of every kernel of a file."""
        out: dict[str, PtxEntry] = {}
        for entry in self.entries:
            out.setdefault(entry.name, entry)
        return out


@lru_cache(maxsize=4096)
def is_mma(opcode: str) -> bool:
    return opcode.startswith(_MMA_PREFIXES) and not opcode.startswith(("wgmma.fence", "wgmma.commit", "wgmma.wait"))


@lru_cache(maxsize=4096)  # asked of every instruction, again for each entry that reaches it; opcodes repeat
def is_global_access(opcode: str) -> bool:
    """Whether an instruction reads or writes global memory (or may: generic).

    The state space may come after other qualifiers (`ld.volatile.shared`, `ld.relaxed.gpu.global`,
    `st.async.shared::cluster`, `atom.acq_rel.cta.shared::cta`): every part of the opcode is read, and a
    sub-space (`shared::cta`) counts as its space. A `cp` form touches global memory when it names it as one of
    its spaces (`cp.async.ca.shared.global`, `cp.async.bulk.tensor...global`); its bookkeeping forms
    (`cp.async.wait_all`, `commit_group`), shared-to-shared copies and prefetches into the L2 cache
    (`cp.async.bulk.prefetch...`, which read nothing into the program, like `prefetch` itself) do not. Texture
    and surface instructions read and write global memory, and so do `wmma.load` and `wmma.store` from a global or
    generic address, `discard` (the lines' values become indeterminate: a write) and the tensor-map writes
    (`tensormap.replace`, `tensormap.cp_fenceproxy` into global memory).
    """
    parts = opcode.split(".")
    head = parts[0]
    spaces = [part.split("::")[0] for part in parts[1:]]
    if head in ("ld", "st", "atom", "red", "ldu", "discard", "tensormap"):
        # `ld.global...`, or a generic `ld.u32` (which may be global); not shared, local, param...
        return "global" in spaces or not any(space in _NOT_GLOBAL for space in spaces)
    if head == "cp":
        return "global" in spaces and "prefetch" not in spaces
    if head == "wmma" and len(parts) > 1 and parts[1] in ("load", "store"):
        return "global" in spaces or not any(space in _NOT_GLOBAL for space in spaces)
    return head in ("multimem", "tex", "tld4", "suld", "sust", "sured")


def is_global_load(opcode: str) -> bool:
    """Whether an instruction loads from global memory (or may: a generic `ld`), not a store, atomic or copy."""
    return opcode.split(".")[0] in ("ld", "ldu") and is_global_access(opcode)


def load_bits(opcode: str) -> int | None:
    """How many bits a load reads per thread, from its type and vector (`ld.global.v4.b32`: 128,
    `ld.global.nc.u8`: 8); None where the opcode names no type."""
    parts = opcode.split(".")
    width = next((int(p[1:]) for p in reversed(parts) if p[:1] in "busf" and p[1:].isdigit()), None)
    lanes = next((int(p[1:]) for p in parts if p[:1] == "v" and p[1:].isdigit()), 1)
    return None if width is None else width * lanes


def writes_global(opcode: str) -> bool:
    """Whether a global access (`is_global_access`) writes: a store, an atomic or a reduction (which read too),
    a surface store, `wmma.store`, `multimem.st`/`red`, or a copy whose destination is global memory
    (`cp.async.bulk.global.shared::cta`); a load, a texture or surface read, and a copy from global memory into
    shared memory (`cp.async.ca.shared.global`, a TMA load) read only."""
    parts = opcode.split(".")
    head = parts[0]
    if head in ("st", "atom", "red", "sust", "sured"):
        return True
    if head in ("wmma", "multimem"):
        return len(parts) > 1 and parts[1] in ("store", "st", "red")
    if head == "cp":
        spaces = [space for space in (part.split("::")[0] for part in parts[1:]) if space in _SPACES]
        return bool(spaces) and spaces[0] == "global" and len(spaces) > 1
    return False


def parse_ptx(text: str, traced: Callable[[list[str]], Collection[str]] | None = None) -> PtxFacts:
    """Parse a PTX module. Raises ParseError when it is not PTX at all.

    `traced`: given the entries' names, those whose accesses before a wait are wanted (the PDL analysis, the
    costliest reading of the PTX: it traces every address to the parameters); the others have none. None: every
    entry's."""
    from kgate.facts.callgraph import CallGraph, entry_facts  # it reads this module's types

    text = code(text)
    target_match = _TARGET.search(text)
    if target_match is None:
        raise ParseError("no .target directive: not a PTX module")
    version_match = re.search(r"^\s*\.version\s+([\d.]+)", text, re.MULTILINE)
    graph = CallGraph(functions(text), text)
    dynamic = frozenset(_EXTERN_SHARED.findall(text))
    names = [f for f in graph.order if graph.functions[f].kind == "entry"]
    wanted = set(names if traced is None else traced(names))
    graph.traced = None if traced is None else wanted
    return PtxFacts(
        target=target_match.group(1).split(",")[0].strip(),
        version=version_match.group(1) if version_match else "",
        entries=tuple(entry_facts(graph, f, traced=f in wanted, dynamic=dynamic) for f in names),
    )


def functions(text: str) -> list[PtxFunction]:
    """Every `.entry` and `.func` with a body, in text order (a name defined twice: its last definition)."""
    text = code(text)
    files = {count(n): unquoted(name) for n, name in FILE.findall(text)}
    mentions = Counter(match.group(2) for match in _FUNC_HEAD.finditer(text))
    found = {name: PtxFunction(kind, name, tuple(_items(body, first_line, files)), mentions[name])
             for kind, name, body, first_line in _split_functions(text)}
    return list(found.values())


def _split_functions(text: str) -> list[tuple[str, str, str, int]]:
    """(kind, name, body text, line number of the body's first line) per function of a module whose comments are
    blanked (`ptx_text.code`: a brace in a comment is no brace).

    A body is the first `{` after the header (none before a `;`: a prototype) to its matching `}` (to the end of
    the text when it has none). Linear in the text: every brace is matched in one pass, and lines are counted on
    from the previous body's start, not from the top each time (a CUDA file's PTX has thousands of functions).
    """
    closing = _matching_braces(text)
    out = []
    counted, line = 0, 1
    for match in _FUNC_HEAD.finditer(text):
        kind, name = match.group(1), match.group(2)
        start = text.find("{", match.end())
        semi = text.find(";", match.end(), start if start >= 0 else len(text))
        if start < 0 or semi >= 0:
            continue  # a declaration (prototype) without a body
        end = closing.get(start, len(text) - 1)
        line += text.count("\n", counted, start)
        counted = start
        out.append((kind, name, text[start + 1 : end], line))
    return out


def _matching_braces(text: str) -> dict[int, int]:
    """Position of each `{` -> position of the `}` that closes it (a `{` never closed is left out)."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for brace in _BRACE.finditer(text):
        if brace.group() == "{":
            open_at.append(brace.start())
        elif open_at:
            closing[open_at.pop()] = brace.start()
    return closing


def _items(body: str, first_line: int, files: dict[int, str]) -> list[Instruction | str]:
    """Instructions and label names (str) of a function body, in order; a label of an inner scope is named after
    it, and a branch names the label it reaches (`ptx_text.resolve`)."""
    parsed = body_items(body, first_line)
    names = label_names(parsed)
    scoped = any(len(item.scopes) > 1 for item in parsed if isinstance(item, Label))
    out: list[Instruction | str] = []
    locs: dict[tuple[int, int, int], SourceLoc] = {}  # one place, one (immutable) SourceLoc: most lines share one
    for item in parsed:
        if isinstance(item, Label):
            out.append(names[(item.name, item.scopes[-1])])
            continue
        place = item.place
        if place is None:
            loc = None
        else:
            loc = locs.get(place)
            if loc is None:
                loc = locs[place] = SourceLoc(files.get(place[0], str(place[0])), place[1], place[2])
        instr = _instruction(item.text, item.line, loc)
        out.append(_retargeted(instr, item.scopes, names) if scoped else instr)
    return out


def _retargeted(instr: Instruction, scopes: tuple[int, ...], names: dict[tuple[str, int], str]) -> Instruction:
    """A branch, or a jump table, naming the labels it reaches by the names `_items` gives them."""
    head = instr.opcode.split(".")[0]
    if head in ("bra", "brx"):
        before, _, target = instr.text.rstrip().rpartition(" ")
        text = f"{before} {resolve(target.strip(',;'), scopes, names)}"
    elif instr.opcode == BRANCH_TARGETS:
        listed = instr.text[len(BRANCH_TARGETS):].split(",")
        text = BRANCH_TARGETS + " " + ", ".join(resolve(n.strip(), scopes, names) for n in listed if n.strip())
    else:
        return instr
    return Instruction(instr.opcode, instr.predicated, text, instr.ptx_line, instr.loc)


def _instruction(stmt: str, ptx_line: int, loc: SourceLoc | None) -> Instruction:
    pred = _PRED.match(stmt) if stmt[:1] == "@" else None
    if pred:
        stmt_body = stmt[pred.end():]
        opcode = stmt_body.split(None, 1)[0] if stmt_body else ""
        return Instruction(opcode=opcode, predicated=True, text=stmt, ptx_line=ptx_line, loc=loc)
    opcode = stmt.split(None, 1)[0] if stmt else ""
    return Instruction(opcode=opcode, predicated=False, text=stmt, ptx_line=ptx_line, loc=loc)


@dataclass
class Block:
    instrs: list[Instruction]
    succ: list[int]


def build_cfg(items: tuple[Instruction | str, ...] | list[Instruction | str]) -> list[Block]:
    """Basic blocks: a label starts one, a branch or return ends one. A `brx.idx` goes to every label of the
    `.branchtargets` table it names (to every label of the function where it names no table here)."""
    blocks: list[Block] = [Block([], [])]
    falls_through = [True]
    label_block: dict[str, int] = {}
    branches: list[tuple[int, str]] = []
    tables = branch_tables(items)
    labels = [item for item in items if isinstance(item, str) and item not in tables]
    for item in items:
        if isinstance(item, str):
            if blocks[-1].instrs:
                blocks.append(Block([], []))
                falls_through.append(True)
            label_block[item] = len(blocks) - 1
            continue
        if item.opcode == BRANCH_TARGETS:
            continue  # the table itself, data the jump reads
        blocks[-1].instrs.append(item)
        head = item.opcode.split(".")[0]
        if head in ("bra", "brx", "ret", "exit", "trap"):
            target = item.text.split()[-1].strip(";, ")
            if head == "bra":
                branches.append((len(blocks) - 1, target))
            elif head == "brx":
                branches.extend((len(blocks) - 1, label) for label in tables.get(target, labels))
            falls_through[-1] = item.predicated
            blocks.append(Block([], []))
            falls_through.append(True)
    for index in range(len(blocks) - 1):
        if falls_through[index]:
            blocks[index].succ.append(index + 1)
    for index, target in branches:
        if target in label_block and label_block[target] not in blocks[index].succ:
            blocks[index].succ.append(label_block[target])
    return blocks


def branch_tables(items: tuple[Instruction | str, ...] | list[Instruction | str]) -> dict[str, list[str]]:
    """A function's jump tables: the label of each `.branchtargets` directive -> the labels it lists."""
    tables: dict[str, list[str]] = {}
    for before, item in pairwise(items):
        if isinstance(before, str) and isinstance(item, Instruction) and item.opcode == BRANCH_TARGETS:
            listed = item.text[len(BRANCH_TARGETS):]
            tables[before] = [name.strip() for name in listed.split(",") if name.strip()]
    return tables


def in_cycles(blocks: list[Block]) -> set[int]:
    """The blocks that lie on a cycle of the graph (a loop): Tarjan's strongly connected components, without
    recursion, a block in a component of two or more, or one that is its own successor."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    out: set[int] = set()
    for root in range(len(blocks)):
        if root in index:
            continue
        work = [(root, iter(blocks[root].succ))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(blocks[step].succ)))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in blocks[node].succ:
                    out.update(component)
    return out


@dataclass(frozen=True)
class EntryHeader:
    """What an entry's directives say about it: where it starts in the source, its launch bounds."""

    name: str
    first_loc: SourceLoc | None  # the first `.loc` of the body: the kernel's definition in the source
    max_threads: int | None  # `.maxntid` / `.reqntid` (from `__launch_bounds__`), threads per CTA
    parameters: int = 0  # how many `.param`s the entry declares


_PARAM_DECLARATION = re.compile(r"\.param\b")
_NTID = re.compile(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def entry_headers(text: str) -> dict[str, EntryHeader]:
    """Per `.entry`: its first source location, its threads-per-CTA bound, if any, and how many parameters it
    declares."""
    text = code(text)
    files = {count(n): unquoted(name) for n, name in FILE.findall(text)}
    out = {}
    for match in _FUNC_HEAD.finditer(text):
        if match.group(1) != "entry":
            continue
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if start < 0 or 0 <= semi < start:
            continue
        ntid = _NTID.search(text, match.end(), start)
        threads = None
        if ntid:
            threads = 1
            for group in ntid.groups():
                threads *= count(group) if group else 1
        declared = len(_PARAM_DECLARATION.findall(text, match.end(), start))
        out[match.group(2)] = EntryHeader(match.group(2), _first_loc(text, start, files), threads, declared)
    return out


def _first_loc(text: str, start: int, files: dict[int, str]) -> SourceLoc | None:
    """The first `.loc` with a line in the 400 lines from `start` (read in place: a copy of the rest of the text
    for every entry would make reading a module quadratic in its size)."""
    begin = start
    for _ in range(400):
        end = text.find("\n", begin)
        loc = LOC.match(text[begin:] if end < 0 else text[begin:end])
        if loc:
            file_no, src_line, col = (count(g) for g in loc.groups())
            if src_line:
                return SourceLoc(files.get(file_no, str(file_no)), src_line, col)
        if end < 0:
            return None
        begin = end + 1
    return None
