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
from dataclasses import dataclass, field

from kgate.core.errors import ParseError
from kgate.facts.numbers import count

_TARGET = re.compile(r"^\s*\.target\s+([\w.]+)", re.MULTILINE)
_FUNC_HEAD = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)", re.MULTILINE)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.MULTILINE)
_LABEL = re.compile(r"^\s*([$%\w]+):(?!:)")
_PRED = re.compile(r"^@(!?)(%?[\w]+)\s+")
_MMA_PREFIXES = ("mma.", "wgmma.mma_async", "tcgen05.mma")

# State spaces that are never global memory.
_NOT_GLOBAL = {"param", "shared", "local", "const", "reg", "sreg", "tex"}


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
    ptx_line: int
    loc: SourceLoc | None


@dataclass(frozen=True)
class PtxEntry:
    name: str
    mma: dict[str, int]
    has_wait: bool
    has_launch_dependents: bool
    global_accesses: int
    # Global accesses that some path from the entry reaches without a wait.
    unwaited_accesses: tuple[GlobalAccess, ...]


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
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise ParseError(f"no .entry {name!r} in PTX")


def is_mma(opcode: str) -> bool:
    return opcode.startswith(_MMA_PREFIXES) and not opcode.startswith(("wgmma.fence", "wgmma.commit", "wgmma.wait"))


def is_global_access(opcode: str) -> bool:
    """Whether an instruction reads or writes global memory (or may: generic)."""
    parts = opcode.split(".")
    head = parts[0]
    if head in ("ld", "st", "atom", "red", "ldu"):
        space = parts[1] if len(parts) > 1 else ""
        # `ld.global...`, or a generic `ld.u32` (which may be global); not shared, local, param...
        return space not in _NOT_GLOBAL
    if head == "cp":
        # cp.async.* copies from global memory (also the bulk tensor forms).
        return len(parts) > 1 and parts[1] in ("async", "reduce")
    return head == "multimem"


def parse_ptx(text: str) -> PtxFacts:
    """Parse a PTX module. Raises ParseError when it is not PTX at all."""
    target_match = _TARGET.search(text)
    if target_match is None:
        raise ParseError("no .target directive: not a PTX module")
    version_match = re.search(r"^\s*\.version\s+([\d.]+)", text, re.MULTILINE)
    files = {count(n): name for n, name in _FILE.findall(text)}
    funcs = _split_functions(text)
    func_bodies = {name: _instructions(body, first_line, files) for kind, name, body, first_line in funcs}
    callee_access = {
        name: any(isinstance(i, Instruction) and is_global_access(i.opcode) for i in instrs)
        for name, instrs in func_bodies.items()
    }
    entries = []
    for kind, name, _body, _first in funcs:
        if kind != "entry":
            continue
        entries.append(_analyse_entry(name, func_bodies[name], callee_access))
    return PtxFacts(
        target=target_match.group(1).split(",")[0].strip(),
        version=version_match.group(1) if version_match else "",
        entries=tuple(entries),
    )


def _split_functions(text: str) -> list[tuple[str, str, str, int]]:
    """(kind, name, body text, line number of the body's first line) per function."""
    out = []
    for match in _FUNC_HEAD.finditer(text):
        kind, name = match.group(1), match.group(2)
        # Find the body: the first '{' after the parameter list, matched to its '}'.
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if start < 0 or (0 <= semi < start):
            continue  # a declaration (prototype) without a body
        depth = 0
        end = start
        for end in range(start, len(text)):
            ch = text[end]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
        first_line = text.count("\n", 0, start) + 1
        out.append((kind, name, text[start + 1 : end], first_line))
    return out


def _instructions(body: str, first_line: int, files: dict[int, str]) -> list[Instruction | str]:
    """Instructions and label names (str) of a function body, in order."""
    items: list[Instruction | str] = []
    loc: SourceLoc | None = None
    # Inside an inline asm block the backend numbers the block's own lines on from the statement's line
    # (`.loc 1 17 9`, `.loc 1 18 9`, ...): the statement's place is the first `.loc` of the block.
    in_asm = asm_located = False
    pending = ""
    pending_line = first_line
    for offset, raw in enumerate(body.split("\n")):
        lineno = first_line + offset
        line, _, comment = raw.partition("//")
        line = line.strip()
        if not line:
            marker = comment.strip()
            if marker in ("begin inline asm", "end inline asm"):
                in_asm, asm_located = marker == "begin inline asm", False
            continue
        loc_match = _LOC.match(line)
        if loc_match:
            file_no, src_line, col = (count(g) for g in loc_match.groups())
            if src_line and not (in_asm and asm_located):
                loc = SourceLoc(files.get(file_no, str(file_no)), src_line, col)
                asm_located = in_asm
            continue
        if line.startswith("."):
            continue  # .reg, .local, .shared and other declarations
        label = _LABEL.match(line)
        if label and not pending:
            items.append(label.group(1))
            line = line[label.end():].strip()
            if not line:
                continue
        line = line.strip("{} \t")
        if not line:
            continue
        if not pending:
            pending_line = lineno
        pending = f"{pending} {line}".strip()
        while ";" in pending:
            stmt, pending = pending.split(";", 1)
            pending = pending.strip()
            stmt = stmt.strip("{} \t")
            if stmt:
                items.append(_instruction(stmt, pending_line, loc))
    return items


def _instruction(stmt: str, ptx_line: int, loc: SourceLoc | None) -> Instruction:
    predicated = False
    pred = _PRED.match(stmt)
    if pred:
        predicated = True
        stmt_body = stmt[pred.end():]
    else:
        stmt_body = stmt
    opcode = stmt_body.split(None, 1)[0] if stmt_body else ""
    return Instruction(opcode=opcode, predicated=predicated, text=stmt, ptx_line=ptx_line, loc=loc)


@dataclass
class _Block:
    instrs: list[Instruction]
    succ: list[int]


def _build_cfg(items: list[Instruction | str]) -> list[_Block]:
    """Basic blocks: a label starts one, a branch or return ends one."""
    blocks: list[_Block] = [_Block([], [])]
    falls_through = [True]
    label_block: dict[str, int] = {}
    branches: list[tuple[int, str]] = []
    for item in items:
        if isinstance(item, str):
            if blocks[-1].instrs:
                blocks.append(_Block([], []))
                falls_through.append(True)
            label_block[item] = len(blocks) - 1
            continue
        blocks[-1].instrs.append(item)
        head = item.opcode.split(".")[0]
        if head in ("bra", "brx", "ret", "exit", "trap"):
            if head in ("bra", "brx"):
                branches.append((len(blocks) - 1, item.text.split()[-1].strip(";, ")))
            falls_through[-1] = item.predicated
            blocks.append(_Block([], []))
            falls_through.append(True)
    for index in range(len(blocks) - 1):
        if falls_through[index]:
            blocks[index].succ.append(index + 1)
    for index, target in branches:
        if target in label_block:
            blocks[index].succ.append(label_block[target])
    return blocks


def _analyse_entry(name: str, items: list[Instruction | str], callee_access: dict[str, bool]) -> PtxEntry:
    instrs = [i for i in items if isinstance(i, Instruction)]
    mma = Counter(i.opcode for i in instrs if is_mma(i.opcode))
    waits = [i for i in instrs if i.opcode.startswith("griddepcontrol.wait")]
    has_launch = any(i.opcode.startswith("griddepcontrol.launch_dependents") for i in instrs)

    def accesses(instr: Instruction) -> bool:
        if is_global_access(instr.opcode):
            return True
        if instr.opcode.startswith("call"):
            return any(callee_access.get(tok.strip("(),;"), False) for tok in instr.text.split())
        return False

    blocks = _build_cfg(items)
    # Forward may-analysis: unwaited_in[b] is True when some path reaches b without a wait.
    unwaited_in = [False] * len(blocks)
    unwaited_in[0] = True
    work = [0]
    while work:
        index = work.pop()
        state = unwaited_in[index]
        for instr in blocks[index].instrs:
            if instr.opcode.startswith("griddepcontrol.wait") and not instr.predicated:
                state = False
        for succ in blocks[index].succ:
            if state and not unwaited_in[succ]:
                unwaited_in[succ] = True
                work.append(succ)
    unwaited: list[GlobalAccess] = []
    total = 0
    for index, block in enumerate(blocks):
        state = unwaited_in[index]
        for instr in block.instrs:
            if instr.opcode.startswith("griddepcontrol.wait") and not instr.predicated:
                state = False
            elif accesses(instr):
                total += 1
                if state:
                    unwaited.append(GlobalAccess(instr.opcode, instr.ptx_line, instr.loc))
    return PtxEntry(
        name=name,
        mma=dict(sorted(mma.items())),
        has_wait=bool(waits),
        has_launch_dependents=has_launch,
        global_accesses=total,
        unwaited_accesses=tuple(unwaited),
    )


@dataclass(frozen=True)
class EntryHeader:
    """What an entry's directives say about it: where it starts in the source, its launch bounds."""

    name: str
    first_loc: SourceLoc | None  # the first `.loc` of the body: the kernel's definition in the source
    max_threads: int | None  # `.maxntid` / `.reqntid` (from `__launch_bounds__`), threads per CTA


_NTID = re.compile(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def entry_headers(text: str) -> dict[str, EntryHeader]:
    """Per `.entry`: its first source location and its threads-per-CTA bound, if any."""
    files = {count(n): name for n, name in _FILE.findall(text)}
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
        first = None
        for line in text[start:].split("\n", 400)[:400]:
            loc = _LOC.match(line)
            if loc:
                file_no, src_line, col = (count(g) for g in loc.groups())
                if src_line:
                    first = SourceLoc(files.get(file_no, str(file_no)), src_line, col)
                    break
        out[match.group(2)] = EntryHeader(match.group(2), first, threads)
    return out
