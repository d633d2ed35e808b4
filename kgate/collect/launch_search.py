"""The launch search of `launch-guard` (KG302): every kernel launch in a C++/CUDA file that no error check covers.

A launch is a `<<<...>>>` launch or a call of the runtime's launch functions (`cudaLaunchKernelEx`,
`cudaLaunchKernel`, `cudaLaunchCooperativeKernel`), found in blanked code (comments and
string literals are spaces). It is covered by a check within `window` lines after its statement, after the
control statements that hold it, by a read of the last error later in its function on every path
(`kgate.collect.cpp_flow`), or at every call of the lambda or helper that
performs it (`kgate.collect.cuda_callers`); in a program of its own (a test or a benchmark with a `main`), by a
synchronizing call whose error is checked later in the function (`kgate.collect.cuda_checks.CheckedSyncs`); a
launch call whose returned error is kept needs no check. What is left is returned as data; the rule words the findings and the fixes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kgate.collect.cpp_flow import Flow, checked_after, first_exit, line_at, line_starts
from kgate.collect.cpp_statements import head, statement_end
from kgate.collect.cpp_text import balanced, macro_lines, macros
from kgate.collect.cuda_callers import Callers, Site, wrapped
from kgate.collect.cuda_checks import (
    CheckedSyncs,
    Checks,
    error_kept,
    is_program,
    last_error_reads,
    launch_checks,
    passes_through,
)
from kgate.collect.cuda_project import Project

_TRIPLE = re.compile(r"<<<")
# The runtime's launch calls, which return the launch's error: `cudaLaunchKernelEx` (and `ExC`), `cudaLaunchKernel`,
# `cudaLaunchCooperativeKernel` (and `MultiDevice`).
_LAUNCH_EX = re.compile(r"\bcudaLaunch(?:KernelExC?|Kernel|CooperativeKernel(?:MultiDevice)?)\s*(?:<[^;()]*>\s*)?\(")
_VOID_CAST = re.compile(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*|^reinterpret_cast\s*<[^>]*>\s*")


@dataclass(frozen=True)
class Unchecked:
    """A launch that no check covers, or a call of the lambda or helper that performs one.

    `kind` is "launch" (a `<<<...>>>` launch), "dropped" (a `cudaLaunchKernelEx` whose error is dropped),
    "call" (a call of `callee` without a check where other calls of it check: the check goes there) or
    "everywhere" (a launch that none of the calls in `sites` checks after, `checked` of the others do)."""

    offset: int  # where it is reported: the launch, or the call
    end: int  # the last character of the statement a check goes after; -1 if none
    kind: str
    kernel: str  # the launched kernel as written (`ns::scale<T>`)
    callee: str = ""
    sites: tuple[Site, ...] = ()
    checked: int = 0


@dataclass(frozen=True)
class Search:
    unchecked: tuple[Unchecked, ...]  # by offset
    in_macros: tuple[int, ...]  # lines of the launches written inside a `#define`, which are not judged
    read_beyond: bool  # whether the verdict read the project's other files


def search(code: str, rel: str, check_macros: Sequence[str], window: int,
           project: Callable[[], Project], comments: frozenset[int] = frozenset()) -> Search:
    """The launches of blanked `code` (the file `rel`) that no check covers. `project` gives the project's other
    files, asked for only when the file's own text does not settle a launch; `comments`: the lines that hold a
    comment, which the window after a launch passes over where they hold nothing else."""
    return _Search(code, rel, check_macros, window, project, comments).run()


_DIRECTIVE = re.compile(r"^[ \t]*#", re.MULTILINE)
# The head of a switch's body (`switch (k) {`), read backwards from its brace.
_SWITCH_HEAD = re.compile(r"\bswitch\s*\((?:[^(){};]|\([^(){};]*\))*\)\s*\{$")
# A label a `goto` may jump to, at the start of a statement (`fail:`; not `std::`, `case 1:` or `public:`).
_LABEL = re.compile(r"(?:^|[;{}])\s*(?!(?:case|default|public|private|protected)\b)[A-Za-z_]\w*\s*:(?!:)",
                    re.MULTILINE)


class _Search:
    """One file's search: the checks grow by the project's own once a launch needs them, and the control flow
    and the callers are read once, on the first launch that needs them."""

    def __init__(self, code: str, rel: str, check_macros: Sequence[str], window: int,
                 project: Callable[[], Project], comments: frozenset[int] = frozenset()) -> None:
        self.code, self.rel, self.check_macros, self.window, self.project = code, rel, check_macros, window, project
        self.comments = comments
        self.in_macro = macro_lines(code)
        self.defines = macros(code)
        self.passing: dict[str, bool] = {}  # macro -> whether it only runs what it is given
        self.starts = line_starts(code)
        # Before the project is read, a call whose name says it reads the last error is no check: the project may
        # define that name, and then its definition says what it does.
        self.checks, self.reads = launch_checks(check_macros, {}, None), last_error_reads(check_macros, {}, None)
        self.flow: Flow | None = None
        self.callers: dict[str, Callers] = {}
        self.beyond: Project | None = None
        self.skipped: list[int] = []
        self.found: dict[int, Unchecked] = {}  # by offset: several launches may reach the same unchecked call
        self.program: bool | None = None
        self.syncs: CheckedSyncs | None = None
        # function body -> the end of its first return on every path (-1: none), and its first preprocessor line
        self.exits: dict[int, tuple[int, int]] = {}

    def run(self) -> Search:
        for start, end, what in sorted(launches(self.code)):
            self._judge(start, end, what)
        return Search(tuple(self.found[offset] for offset in sorted(self.found)), tuple(self.skipped),
                      self.beyond is not None)

    def _judge(self, start: int, end: int, what: str) -> None:
        code = self.code
        name = launched_name(code, start, what)
        if what == "ex" and error_kept(code, start, self._passes_through):
            return
        semicolon = code.find(";", end)
        semicolon = end if semicolon < 0 else semicolon
        in_macro = line_at(self.starts, start) in self.in_macro
        if self._checked_in_macro(semicolon, what) if in_macro else self._checked_here(start, semicolon, what):
            return
        if not in_macro and self._dead(start):
            return
        follow = self._callers(what)
        if in_macro:  # written in a macro's body: its uses are where it runs
            reach = follow.expanded(start, what == "ex" and self._begins_macro(start))
            if reach is None:
                self.skipped.append(line_at(self.starts, start))
                return
            semicolon = -1  # no check is inserted into a macro's body
        else:
            reach = follow.unchecked_calls(start, semicolon)
        self._record(start, semicolon, what, name, reach)

    def _checked_here(self, start: int, semicolon: int, what: str) -> bool:
        """Whether the launch at `start` is the argument of a check (`cuda_callers.wrapped`), a check follows its
        statement or the control statements that hold it, or a read of the last error comes later in its function
        on every path (one read reports every launch since the last)."""
        if self._checked_by(start, semicolon, what) or self.beyond is None and self._grow() and self._checked_by(
                start, semicolon, what):
            return True
        self.flow = self.flow or Flow(self.code, self.starts, self.window, self.comments)
        if self.flow.checked(semicolon, self._wanted(what)) or self.flow.later(semicolon, self.reads):
            return True
        return self._program() and self.flow.later_anywhere(semicolon, self._syncs())

    def _begins_macro(self, start: int) -> bool:
        """Whether the launch call at `start` is the whole start of a macro's body (`#define LAUNCH(x)
        cudaLaunchKernelEx(...)`): a use of the macro is the call, and its value the launch's error."""
        macro = next((m for m in self.defines if m.start <= start < m.end), None)
        return macro is not None and not self.code[macro.body:start].replace("\\", " ").strip()

    def _passes_through(self, name: str) -> bool:
        """Whether the macro `name` only runs what it is given (`#define TIMED(x) x`): every definition the file holds,
        else every one the project's other files hold, and there is one."""
        if name not in self.passing:
            found = [(m.params, self.code[m.body:m.end]) for m in self.defines if m.name == name]
            if not found:
                if self.beyond is None:
                    self._grow()
                assert self.beyond is not None
                found = self.beyond.macro_definitions(name)
            self.passing[name] = bool(found) and all(passes_through(params, body) for params, body in found)
        return self.passing[name]

    def _dead(self, start: int) -> bool:
        """Whether the launch at `start` never runs: a statement that leaves (a `return`, a `throw`, `abort()`,
        `assert(false)`, `TORCH_CHECK(false, ...)`: `cpp_flow.first_exit`) stands before it on every path through one
        of the blocks that hold it, up to its function's own (`void clear(...) { return; ... k<<<g, b>>>(x); }`, `else
        { assert(false); k<<<g, b>>>(x); }`), with no preprocessor line (an `#ifndef` may hold the exit) and no label
        a `goto` may jump to in between. The body of a switch is no such block: its cases are entered apart."""
        self.flow = self.flow or Flow(self.code, self.starts, self.window, self.comments)
        brace = self.flow.around(start)
        while brace >= 0:
            opening = self.flow.opens[brace]
            if brace not in self.exits:  # one reading per block, however many launches it holds
                close = self.flow.closes[brace]
                if _SWITCH_HEAD.search(self.code, max(0, opening - 400), opening + 1):
                    self.exits[brace] = (-1, close)
                else:
                    line = _DIRECTIVE.search(self.code, opening, close)
                    self.exits[brace] = (first_exit(self.code, opening, close), close if line is None else line.start())
            after, directive = self.exits[brace]
            if 0 <= after < start < directive and not _LABEL.search(self.code, after, start):
                return True
            if head(self.code, opening)[0] == "function":
                return False
            brace = self.flow.parents[brace]
        return False

    def _checked_by(self, start: int, semicolon: int, what: str) -> bool:
        """Whether the checks known so far check the launch where it stands: around it or within the window after."""
        return wrapped(self.code, start, self._wanted(what)) or checked_after(
            self.code, semicolon, self.starts, self._wanted(what), self.window, self.comments)

    def _checked_in_macro(self, semicolon: int, what: str) -> bool:
        """Whether a check follows a launch written in a macro's body within the `window` lines after it and inside
        that body (`do { k<<<g, b>>>(x); CUDA_CHECK(cudaGetLastError()); } while (0)`): wherever the macro is used,
        the check runs right after the launch. The text after the `#define` is no part of it."""
        end = macro_end(self.code, semicolon)
        if semicolon >= end:
            return False  # the statement ends where the macro is used
        if checked_after(self.code[:end], semicolon, self.starts, self._wanted(what), self.window, self.comments):
            return True
        return self.beyond is None and self._grow() and checked_after(self.code[:end], semicolon, self.starts,
                                                                      self._wanted(what), self.window, self.comments)

    def _program(self) -> bool:
        """Whether the file is a program of its own (a test or a benchmark with a `main`), where a synchronizing
        call whose error is checked later in the launching function reports a failed launch and exits."""
        if self.program is None:
            assert self.flow is not None
            self.program = is_program(self.code, self.flow)
        return self.program

    def _syncs(self) -> CheckedSyncs:
        """What reports a failed launch in a program of its own: a synchronizing call whose error is read, or a call
        of the project's function that holds one (a `validate_result` that copies the output back under a check)."""
        if self.syncs is None:
            if self.beyond is None:
                self._grow()
            assert self.beyond is not None
            self.syncs = CheckedSyncs(self.beyond.sync_checks())
        return self.syncs

    def _grow(self) -> bool:
        """Read the project's own macros and functions that read the last error, and the names that say they read it
        which it defines, once per file, on the first launch the file's own text does not settle; whether the checks
        grew (a name that says it reads the last error counts from now on, where the project does not define it)."""
        self.beyond = self.project()
        own = self.beyond.last_error_checks(self.check_macros)
        named = self.beyond.named_definitions()
        self.checks = launch_checks(self.check_macros, own, named)
        self.reads = last_error_reads(self.check_macros, own, named)
        return True

    def _wanted(self, what: str) -> Checks:
        return self.checks if what == "<<<" else self.reads

    def _callers(self, what: str) -> Callers:
        if self.beyond is None:
            self._grow()
        self.flow = self.flow or Flow(self.code, self.starts, self.window, self.comments)
        if what not in self.callers:
            syncs = self._syncs() if self._program() else None
            self.callers[what] = Callers(self.flow, self.in_macro, self._wanted(what), self.beyond, self.rel, syncs)
        return self.callers[what]

    def _record(self, start: int, semicolon: int, what: str, name: str,
                reach: tuple[list[Site], int] | None) -> None:
        if reach is not None and not reach[0]:
            return  # every call of the lambda, helper or macro that performs it is checked
        if reach is None:
            self.found.setdefault(start, Unchecked(start, semicolon, "launch" if what == "<<<" else "dropped", name))
            return
        sites, checked = reach
        if checked and all(not site.path for site in sites):
            # Some callers check and these do not: each is where a check goes.
            for site in sites:
                self.found.setdefault(site.offset, Unchecked(site.offset, statement_end(self.code, site.offset),
                                                             "call", name, site.callee))
            return
        # No caller checks (or the unchecked ones are in other files): one finding, at the launch, where the fix puts
        # the check (after the launch's statement, inside the lambda or helper).
        self.found.setdefault(start, Unchecked(start, semicolon, "everywhere", name, sites=tuple(sorted(set(sites))),
                                               checked=checked))


def launches(code: str) -> Iterator[tuple[int, int, str]]:
    """(start, end of the statement, kind) of each launch in blanked code."""
    for match in _TRIPLE.finditer(code):
        close = code.find(">>>", match.end())
        if close < 0:
            continue
        paren = code.find("(", close + 3)
        if paren < 0 or code[close + 3:paren].strip():
            continue
        end = balanced(code, paren)
        start = name_start(code, match.start())
        yield start, end, "<<<"
    if "cudaLaunch" not in code:  # the pattern starts with `\b`: Python's engine would try every position
        return
    for match in _LAUNCH_EX.finditer(code):
        end = balanced(code, match.end() - 1)
        yield match.start(), end, "ex"


def name_start(code: str, triple: int) -> int:
    """Start of the launched expression before `<<<` (`ns::kernel<T, 4>`, `kernel<(N >> 1)>`: a template
    argument's parentheses are passed over whole, so the `<` and `>` of an expression inside them are not the
    argument list's). Where what looked like template arguments reaches the end of the statement before (a `;` or a
    brace), the launch starts after it."""
    index = triple
    while index > 0 and code[index - 1] in " \t":  # `scale <<<...>>>`: nvcc takes the space
        index -= 1
    if index == 0 or not (code[index - 1].isalnum() or code[index - 1] in "_:>)"):
        index = triple  # nothing launched before the spaces: the launch starts at its chevrons, as before
    depth = 0
    while index > 0:
        ch = code[index - 1]
        if depth and ch == ")":
            opening = _opening_paren(code, index - 1)
            if opening < 0:
                break
            index = opening
            continue
        if ch == ">":
            depth += 1
        elif ch == "<":
            if depth == 0:
                break
            depth -= 1
        elif depth and ch in ";{}":
            while index < triple and code[index].isspace():
                index += 1
            return index
        elif depth == 0 and not (ch.isalnum() or ch in "_:"):
            break
        index -= 1
    return index


def _opening_paren(code: str, close: int) -> int:
    """Offset of the `(` that the `)` at `close` closes, walking back (-1 if none)."""
    depth = 0
    for index in range(close, -1, -1):
        if code[index] == ")":
            depth += 1
        elif code[index] == "(":
            depth -= 1
            if depth == 0:
                return index
    return -1


def launched_name(code: str, start: int, what: str) -> str:
    if what == "<<<":
        return " ".join(code[start:code.find("<<<", start)].split())
    api = code[start:code.find("(", start)].split("<")[0].strip()
    args = code[code.find("(", start) + 1:balanced(code, code.find("(", start)) - 1].split(",")
    at = 1 if api.startswith("cudaLaunchKernelEx") else 0  # cudaLaunchKernelEx(&config, kernel, ...)
    return _VOID_CAST.sub("", " ".join(args[at].split())).strip("() ") if len(args) > at else api


def macro_end(code: str, at: int) -> int:
    """The offset where the `#define` line that holds `at` ends: at the first line end not continued by a
    backslash."""
    while True:
        end = code.find("\n", at)
        if end < 0:
            return len(code)
        if not code[at:end].rstrip(" \t\r").endswith("\\"):
            return end
        at = end + 1
