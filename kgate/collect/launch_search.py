"""The launch search of `launch-guard` (KG302): every kernel launch in a C++/CUDA file that no error check covers.

A launch is a `<<<...>>>` launch or a `cudaLaunchKernelEx` call, found in blanked code (comments and
string literals are spaces). It is covered by a check within `window` lines after its statement, after the
control statements that hold it (`kgate.collect.cpp_flow`), or at every call of the lambda or helper that
performs it (`kgate.collect.cuda_callers`); a `cudaLaunchKernelEx` whose returned error is kept needs no
check. What is left is returned as data; the rule words the findings and the fixes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kgate.collect.cpp_flow import Flow, checked_after, line_at, line_starts, statement_end
from kgate.collect.cpp_text import balanced, macro_lines
from kgate.collect.cuda_callers import Callers, Site
from kgate.collect.cuda_checks import Checks, last_error_reads, launch_checks
from kgate.collect.cuda_project import Project

_TRIPLE = re.compile(r"<<<")
_LAUNCH_EX = re.compile(r"\bcudaLaunchKernelExC?\s*(?:<[^;()]*>\s*)?\(")


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
           project: Callable[[], Project]) -> Search:
    """The launches of blanked `code` (the file `rel`) that no check covers. `project` gives the project's other
    files, asked for only when the file's own text does not settle a launch."""
    in_macro = macro_lines(code)
    checks, reads = launch_checks(check_macros, {}), last_error_reads(check_macros, {})
    starts = line_starts(code)
    flow: Flow | None = None
    callers: dict[str, Callers] = {}
    beyond: Project | None = None
    skipped: list[int] = []
    found: dict[int, Unchecked] = {}  # by offset: several launches may reach the same unchecked call
    for start, end, what in sorted(launches(code)):
        line = line_at(starts, start)
        if line in in_macro:
            skipped.append(line)
            continue
        name = launched_name(code, start, what)
        if what == "ex" and result_used(code, start, checks):
            continue
        semicolon = code.find(";", end)
        semicolon = end if semicolon < 0 else semicolon
        wanted = checks if what == "<<<" else reads
        if checked_after(code, semicolon, starts, wanted, window):
            continue
        if beyond is None:
            # The project's own macros and functions that read the last error count as checks: read once per file,
            # on the first launch the file's own text does not settle.
            beyond = project()
            own = beyond.last_error_checks(check_macros)
            if own:
                checks, reads = launch_checks(check_macros, own), last_error_reads(check_macros, own)
                wanted = checks if what == "<<<" else reads
                if checked_after(code, semicolon, starts, wanted, window):
                    continue
        flow = flow or Flow(code, starts, window)
        if flow.checked(semicolon, wanted):
            continue
        follow = callers.setdefault(what, Callers(flow, in_macro, wanted, beyond, rel))
        reach = follow.unchecked_calls(start, semicolon)
        if reach is not None and not reach[0]:
            continue  # every call of the lambda or helper that performs it is checked
        if reach is not None:
            sites, checked = reach
            if checked and all(not site.path for site in sites):
                # Some callers check and these do not: each is where a check goes.
                for site in sites:
                    found.setdefault(site.offset, Unchecked(site.offset, statement_end(code, site.offset), "call",
                                                            name, site.callee))
                continue
            # No caller checks (or the unchecked ones are in other files): one finding, at the launch, where the
            # fix puts the check (after the launch's statement, inside the lambda or helper).
            found.setdefault(start, Unchecked(start, semicolon, "everywhere", name,
                                              sites=tuple(sorted(set(sites))), checked=checked))
            continue
        found.setdefault(start, Unchecked(start, semicolon, "launch" if what == "<<<" else "dropped", name))
    return Search(tuple(found[offset] for offset in sorted(found)), tuple(skipped), beyond is not None)


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
    if "cudaLaunchKernelEx" not in code:  # the pattern starts with `\b`: Python's engine would try every position
        return
    for match in _LAUNCH_EX.finditer(code):
        end = balanced(code, match.end() - 1)
        yield match.start(), end, "ex"


def name_start(code: str, triple: int) -> int:
    """Start of the launched expression before `<<<` (`ns::kernel<T, 4>`)."""
    index = triple
    depth = 0
    while index > 0:
        ch = code[index - 1]
        if ch == ">":
            depth += 1
        elif ch == "<":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not (ch.isalnum() or ch in "_:"):
            break
        index -= 1
    return index


def launched_name(code: str, start: int, what: str) -> str:
    if what == "<<<":
        return " ".join(code[start:code.find("<<<", start)].split())
    args = code[code.find("(", start) + 1:balanced(code, code.find("(", start)) - 1].split(",")
    return " ".join(args[1].split()) if len(args) > 1 else "cudaLaunchKernelEx"


def result_used(code: str, start: int, checks: Checks) -> bool:
    """Whether a cudaLaunchKernelEx call's result is checked, kept or returned rather than dropped.

    The statement's text before the call decides: nothing (or a `(void)` cast) drops the
    error; a check macro, an assignment, a comparison, a condition or a `return` keeps it.
    """
    head = max(code.rfind(";", 0, start), code.rfind("{", 0, start), code.rfind("}", 0, start)) + 1
    before = " ".join(code[head:start].split())
    return before not in ("", "(void)", "static_cast<void>(") or bool(checks.search(before))

