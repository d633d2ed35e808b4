"""Following an unchecked kernel launch out of the lambda or helper that performs it, to the calls of it.

A launch inside a named lambda (`auto launch = [&](...) { ... };`) or inside a function that is not a
member is checked when every call of it is: each call is held to the same test as a launch (a check after
it, after the control statements that hold it, or later in its function on every path) and followed
outwards in turn. A lambda written as an argument (`dispatch(kind, [&] { ... });`) runs where it is
written: the statement that holds it is. A function other files may call is followed to its calls in the
project's other files (`kgate.collect.cuda_project`). Braces are matched on the blanked text, so this is
a reading of the code, not a parse.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import NamedTuple

from kgate.collect.cpp_flow import Flow, Matcher, line_at
from kgate.collect.cpp_statements import NAMESPACE_HEAD, SCOPE_HEAD, head, is_call
from kgate.collect.cpp_text import Macro, balanced, calls_of, macro_lines, macros, split_arguments
from kgate.collect.cuda_checks import CheckedSyncs, error_kept, is_program
from kgate.collect.cuda_project import Project, nearest
from kgate.collect.cuda_tree import HEADERS

_ASSIGNED = re.compile(r"(?<![\w.>])(\w+)\s*(?<![=!<>+\-*/%&|^])=\s*$")
_LOCAL_LINKAGE = re.compile(r"\b(?:static|inline|__forceinline__|__inline__)\b")
_DEPTH = 4  # lambdas and helpers followed outwards from one launch
_NAME_BEFORE = re.compile(r"[A-Za-z_]\w*\s*$")
_DEFINED = re.compile(r"#\s*define\s+$")
_LAST_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")


class Body(NamedTuple):
    """The body of a lambda or helper that holds a launch."""

    brace: int  # index of its `{` among the file's braces
    name: str  # what calls it; '' for a lambda that runs where it is written
    begin: int  # offset of its head (the lambda's `[`, the function's declaration)
    lambda_: bool
    exported: bool = False  # a function other files may call


class Site(NamedTuple):
    """A call through which a launch reaches no check: in this file (`path` empty, at `offset`) or in another
    file of the project (`path` and `line`)."""

    path: str
    offset: int
    line: int
    callee: str


class Callers:
    """Follows an unchecked launch out of the lambda or file-local helper that performs it.

    A launch inside a named lambda (`auto launch = [&](...) { ... };`) or inside a function that only
    this file can call (`static`, `inline`, an anonymous namespace) is checked when every call of it is:
    each call is held to the same rule as a launch, and followed outwards in turn. A lambda written as
    an argument (`dispatch(kind, [&] { ... });`) runs where it is written: the statement that holds it
    is. Braces are matched on the blanked text, so this is a reading of the code, not a parse.
    """

    def __init__(self, flow: Flow, in_macro: frozenset[int], checks: Matcher,
                 project: Project | None = None, rel: str = "", syncs: Matcher | None = None) -> None:
        self.flow, self.code, self.starts, self.in_macro, self.checks = flow, flow.code, flow.starts, in_macro, checks
        self.opens, self.closes, self.parents, self.at_open = flow.opens, flow.closes, flow.parents, flow.at_open
        self.project, self.rel = project, rel
        self.syncs = syncs  # in a program of its own: what reports a failed launch later in a calling function
        self._memo: dict[int, tuple[list[Site], int] | None] = {}
        self._programs: dict[str, bool] = {}  # the project's other files that call here: whether each is a program
        self._project_syncs: Matcher | None = None
        self._defines: list[Macro] | None = None
        self.outer = False  # reading another file's macro for a file's own call (`_expanded_elsewhere`)
        self._others: dict[str, Callers] = {}  # those readings, by file

    def unchecked_calls(self, at: int, semicolon: int, depth: int = 0,
                        seen: frozenset[int] = frozenset()) -> tuple[list[Site], int] | None:
        """The calls through which the statement at `at` reaches no check, and how many calls on the way do
        check; ([], n) when every path is checked; None when the statement cannot be followed (not in a lambda
        or a function that is not a member, no call of it in sight, or too deep)."""
        if depth and (wrapped(self.code, at, self.checks) or self.flow.checked(semicolon, self.checks) or
                      self.flow.later(semicolon, self.checks) or (
                          self.syncs is not None and self.flow.later_anywhere(semicolon, self.syncs))):
            return [], 1
        if depth >= _DEPTH:
            return None
        body = self._callable(at)
        if body is None or body.brace in seen:
            return None
        if not body.name:  # a lambda written where it runs: its statement goes on
            end = self.code.find(";", self.closes[body.brace])
            return self.unchecked_calls(body.begin, end if end >= 0 else len(self.code), depth + 1,
                                        seen | {body.brace})
        if body.brace in self._memo:  # many launches in one helper: its calls are followed once
            return self._memo[body.brace]
        calls = self._calls(body)
        elsewhere = self._calls_elsewhere(body) if calls is not None and (
            body.exported or (not calls and self.rel.endswith(HEADERS))) else []
        out: tuple[list[Site], int] | None = None
        if calls or elsewhere:
            sites: list[Site] = []
            checked = 0
            repeated = False  # a lambda called again without arguments launches what a checked call launched
            ran = False  # a lambda passed on (to a timing loop) after a checked call launches what that call did
            for runs, call, end, callee in calls or ():
                bare = body.lambda_ and re.match(r"\s*\(\s*\)", self.code[self.code.find("(", call):]) is not None
                if (bare and repeated) or (runs != call and ran and body.lambda_):
                    checked += 1
                    continue
                inner = self.unchecked_calls(call, end, depth + 1, seen | {body.brace})
                if inner is None:
                    sites.append(Site("", call, 0, callee))
                else:
                    sites.extend(inner[0])
                    checked += inner[1]
                    repeated = repeated or (bare and not inner[0])
                    ran = ran or (runs == call and not inner[0])
            for site in elsewhere:
                if site is None:
                    checked += 1
                else:
                    sites.append(site)
            out = (sites, checked)
        self._memo[body.brace] = out
        return out

    def expanded(self, at: int, value: bool = False) -> tuple[list[Site], int] | None:
        """For a launch written in a macro's body: the uses of the macro through which it reaches no check, and how
        many uses do check; each use is held to the test of a call (a check after it, after the control statements
        that hold it, later in its function, or at the calls of the lambda or helper that holds it). Uses in the
        project's other files are judged where they are when the file uses the macro nowhere; None when no use is
        found. `value`: the macro's body is the launch call whose error it returns, so a use that keeps its value
        (`cudaError_t e = LAUNCH(x);`, `return LAUNCH(x);`) checks it."""
        macro = next((m for m in self._macros() if m.start <= at < m.end), None)
        if macro is None:
            return None
        key = -1 - 2 * macro.start - int(value)  # one answer per macro, however many launches it writes
        if key not in self._memo:
            uses = self._macro_uses(at, (0, len(self.code)))
            if uses is not None:
                self._memo[key] = self._followed(uses, value)
            else:
                elsewhere = self._uses_elsewhere(macro.name, value)
                self._memo[key] = ([site for site in elsewhere if site is not None],
                                   elsewhere.count(None)) if elsewhere else None
        return self._memo[key]

    def _followed(self, uses: list[tuple[int, int, str]], value: bool = False) -> tuple[list[Site], int]:
        sites: list[Site] = []
        checked = 0
        for use, end, name in uses:
            if value and error_kept(self.code, use):
                checked += 1
                continue
            inner = self.unchecked_calls(use, end, 1)
            if inner is None:
                sites.append(Site("", use, 0, name))
            else:
                sites.extend(inner[0])
                checked += inner[1]
        return sites, checked

    def _uses_elsewhere(self, name: str, value: bool = False) -> list[Site | None]:
        """The uses of a macro in the project's other files: None for each that a check follows (or that keeps the
        macro's `value`, the launch's error), a site for each that none does."""
        if self.project is None:
            return []
        out: list[Site | None] = []
        for rel, flow, use, end in self.project.calls(name, self.rel):
            if (value and error_kept(flow.code, use)) or self._checked_elsewhere(rel, flow, use, end):
                out.append(None)
            else:
                out.append(Site(rel, use, bisect_right(flow.starts, use, 1) - 1, name))
        return out

    def _calls_elsewhere(self, body: Body) -> list[Site | None]:
        """The calls of a function in the project's other files: None for each that checks after it (within
        `window` lines, after the control statements that hold it, or later in its block; in a program, a checked
        synchronizing call later in its function: `_checked_elsewhere`), a site for each that does not. Those calls
        are not followed further."""
        if self.project is None or body.lambda_:
            return []
        out: list[Site | None] = []
        definers: list[str] | None = None  # the files that define a function of that name, read at the first call
        for rel, flow, call, end in self.project.calls(body.name, self.rel):
            if definers is None:
                definers = self.project.definers(body.name)
            if rel in definers:
                continue  # a file that defines a function of that name itself calls its own
            if not nearest(rel, self.rel, definers):
                continue  # a call of another definition of the name, nearer to the caller
            if self._checked_elsewhere(rel, flow, call, end) or self._expanded_elsewhere(rel, flow, call):
                out.append(None)
            else:
                out.append(Site(rel, call, bisect_right(flow.starts, call, 1) - 1, body.name))
        return out

    def _expanded_elsewhere(self, rel: str, flow: Flow, call: int) -> bool:
        """Whether a call written in a macro's body in the project's file `rel` is checked at every use of the macro
        there, each use followed as a launch written in that file is (`expanded`: to the calls of the function that
        holds it, in that file and, once, in the others): a dispatcher a generator wrote as a macro pasted into each
        case (`RUN_GEMM(...)`), whose function's caller checks. Followed from this file's own calls only."""
        if self.project is None or self.outer:
            return False
        other = self._others.get(rel)
        if other is None:  # one reading of the file's macros and calls, however many of its calls are asked about
            other = self._others[rel] = Callers(flow, macro_lines(flow.code), self.checks, self.project, rel)
            other.outer = True
        if line_at(flow.starts, call) not in other.in_macro:
            return False
        reach = other.expanded(call)
        return reach is not None and not reach[0]

    def _checked_elsewhere(self, rel: str, flow: Flow, call: int, end: int) -> bool:
        """Whether the call at `call`, its statement ending at `end`, in the project's file `rel` is checked where it
        is: by the check it is the argument of, a check after it, after the control statements that hold it, or
        later in its function on every path; in a program of its own
        (a test or benchmark with a `main`), also by a synchronizing call whose error is read later in the calling
        function, which reports the failure of what the call launched and stops the program there, as it does for
        a launch or a call in the program's own file."""
        if wrapped(flow.code, call, self.checks) or flow.checked(end, self.checks) or flow.later(end, self.checks):
            return True
        if self.project is None or not self._program(rel, flow):
            return False
        if self._project_syncs is None:
            self._project_syncs = CheckedSyncs(self.project.sync_checks())
        return flow.later_anywhere(end, self._project_syncs)

    def _program(self, rel: str, flow: Flow) -> bool:
        found = self._programs.get(rel)
        if found is None:
            found = self._programs[rel] = is_program(flow.code, flow)
        return found

    def _callable(self, at: int) -> Body | None:
        """The lambda or file-local function whose body holds `at`; None for anything else (a member, an
        exported function, a lambda stored away)."""
        brace = bisect_right(self.opens, at) - 1
        while brace >= 0 and self.closes[brace] <= at:
            brace = self.parents[brace]
        while brace >= 0:
            opening = self.opens[brace]
            kind, begin, name = head(self.code, opening)
            if kind == "lambda":
                before = self.code[max(0, begin - 200):begin]
                named = _ASSIGNED.search(before)
                if named is not None:
                    return Body(brace, named.group(1), begin, lambda_=True)
                # An argument (`dispatch(kind, [&] {...})`) or a lambda called where it is written.
                runs_here = before.rstrip()[-1:] in ("(", ",", ";", "{", "}", "")
                return Body(brace, "", begin, lambda_=True) if runs_here else None
            if kind == "function":
                outer = self._nested(brace)
                if outer is None:
                    return self._helper(brace, name, begin)
                if SCOPE_HEAD.search(self.code, max(0, self.opens[outer] - 200), self.opens[outer]):
                    return None  # a member function
                # else a block that looks like a function inside one: a macro's loop, `FOR_EACH(i) {`
            if SCOPE_HEAD.search(self.code, max(0, opening - 200), opening):
                return None
            brace = self.parents[brace]  # a block of an if, a loop, a switch: look further out
        return None

    def _nested(self, brace: int) -> int | None:
        """The innermost brace around `brace` that is not a namespace's, None at namespace scope."""
        parent = self.parents[brace]
        while parent >= 0:
            if not NAMESPACE_HEAD.search(self.code, max(0, self.opens[parent] - 200), self.opens[parent]):
                return parent
            parent = self.parents[parent]
        return None

    def _helper(self, brace: int, name: str, begin: int) -> Body | None:
        """A function at namespace scope that only this file can call, else None."""
        head = self.code[max(0, begin - 400):begin]
        declaration = head[max(head.rfind(";"), head.rfind("}"), head.rfind("{")) + 1:]
        local = bool(_LOCAL_LINKAGE.search(declaration))
        parent = self.parents[brace]
        while parent >= 0 and not local:
            local = bool(re.search(r"\bnamespace\s*$", self.code[max(0, self.opens[parent] - 200):self.opens[parent]]))
            parent = self.parents[parent]
        if "::" in name:
            return None
        return Body(brace, name, begin - len(declaration), lambda_=False, exported=not local)

    def _calls(self, body: Body) -> list[tuple[int, int, int, str]] | None:
        """(where it runs, offset, end of statement, what is called there) of each direct call of `name` where it can
        be called from: a lambda in the rest of its block, a helper in the file; and of each call of a parameter it
        is passed to (`Callers._passed`), which runs where it is passed. A call written in a macro's body is followed
        to the uses of the macro (`kgate.collect.cuda_callers.Callers._macro_uses`): None when one cannot be."""
        parent = self.parents[body.brace]
        if body.lambda_:
            region = (self.closes[body.brace], self.closes[parent] if parent >= 0 else len(self.code))
        else:
            region = (0, len(self.code))
        out: list[tuple[int, int, int, str]] = []
        for match in calls_of(self.code, body.name, *region):
            call = match.start()
            if body.begin <= call <= self.closes[body.brace] or "<<<" in match.group() or not is_call(self.code, call):
                continue
            if bisect_right(self.starts, call, 1) - 1 in self.in_macro:
                uses = self._macro_uses(call, region)
                if uses is None:
                    return None
                out.extend((use, use, end, name) for use, end, name in uses)
                continue
            end = self.code.find(";", balanced(self.code, match.end() - 1))
            out.append((call, call, end if end >= 0 else len(self.code), body.name))
        out += [(use, call, end, body.name) for use, call, end in self._passed(body, region)]
        return sorted(set(out))  # a macro that calls the helper in each of its arms is used once for all of them

    def _passed(self, body: Body, region: tuple[int, int]) -> list[tuple[int, int, int]]:
        """(where it is passed, offset, end of statement) of each call of a parameter that the lambda or helper is
        passed to, by name, as an argument of a function this file defines (`dispatch(launch, block_size)`,
        `dispatch` calling its `launch` parameter): the function runs it there."""
        code = self.code
        out: list[tuple[int, int, int]] = []
        for use in _names(code, body.name, region):
            if body.begin <= use <= self.closes[body.brace]:
                continue
            paren, callee = _enclosing_call(code, use)
            if callee is None or not is_call(code, callee.start()):
                continue
            args = [arg.lstrip("&").strip() for arg in split_arguments(code[paren + 1:balanced(code, paren) - 1])]
            if body.name not in args:
                continue
            for opening, parameter in self._parameters(callee.group().strip(), args.index(body.name)):
                close = self.closes[self.at_open[opening]]
                for call in calls_of(code, parameter, opening, close):
                    if is_call(code, call.start()):
                        end = code.find(";", balanced(code, call.end() - 1))
                        out.append((use, call.start(), end if end >= 0 else close))
        return out

    def _parameters(self, function: str, index: int) -> Iterator[tuple[int, str]]:
        """(offset of the body's `{`, name of the `index`-th parameter) of each definition of `function` in the
        file that has that many parameters."""
        code = self.code
        for match in calls_of(code, function):
            close = balanced(code, match.end() - 1)
            opening = close
            while opening < len(code) and code[opening].isspace():
                opening += 1
            if opening not in self.at_open or head(code, opening)[2] != function:
                continue
            parameters = split_arguments(code[match.end():close - 1])
            if index < len(parameters):
                name = _LAST_NAME.search(parameters[index].split("=", 1)[0])
                if name is not None:
                    yield opening, name.group(1)

    def _macro_uses(self, at: int, region: tuple[int, int], depth: int = 0) -> list[tuple[int, int, str]] | None:
        """The uses, outside a `#define`, of the macro whose body holds `at`: (offset, end, macro name) each, where
        the end is the use's `;` or, for a use without one (`case 1: DISPATCH(x) break;`), its `)`. A macro that
        writes out a dispatcher runs its calls where it is used, so its uses are the calls; a macro handed by name
        to another (`DISPATCH_BY_DTYPE(dtype, CALL_KERNEL);`) is used where that one is. None when the macro is used
        nowhere in the file outside a `#define` or only inside another macro's (two levels are followed)."""
        macro = next((m for m in self._macros() if m.start <= at < m.end), None)
        if macro is None or depth > 2:
            return None
        out: list[tuple[int, int, str]] = []
        for use, paren in self._uses_of(macro, region):
            if bisect_right(self.starts, use, 1) - 1 in self.in_macro:
                inner = self._macro_uses(use, region, depth + 1)
                if inner is None:
                    return None
                out.extend(inner)
                continue
            close = balanced(self.code, paren) if paren >= 0 else use + len(macro.name)
            after = close
            while after < len(self.code) and self.code[after].isspace():
                after += 1
            out.append((use, after if self.code.startswith(";", after) else close - 1, macro.name))
        return out or None

    def _uses_of(self, macro: Macro, region: tuple[int, int]) -> Iterator[tuple[int, int]]:
        """(offset, offset of the `(` of the call there) of each use of a macro outside its own `#define`: a call of
        it, or the call it is handed to by name; (offset, -1) for an object-like macro written as a statement of its
        own (`KERNEL_LAUNCH_CODE` on its line, its body the statements)."""
        code = self.code
        for match in re.compile(re.escape(macro.name) + r"\b").finditer(code, *region):
            use = match.start()
            if macro.start <= use < macro.end or (use and (code[use - 1].isalnum() or code[use - 1] == "_")):
                continue
            if _DEFINED.search(code, code.rfind("\n", 0, use) + 1, use):
                continue  # the name of another definition of it (`#if` ... `#else` each define their own)
            after = match.end()
            while after < len(code) and code[after].isspace():
                after += 1
            if code.startswith("(", after):
                if is_call(code, use):
                    yield use, after
                continue
            paren, name = _enclosing_call(code, use)
            if name is not None:
                yield name.start(), paren
            elif paren < 0 and macro.params is None and self.flow.around(use) >= 0:
                yield use, -1

    def _macros(self) -> list[Macro]:
        if self._defines is None:
            self._defines = macros(self.code)
        return self._defines


def wrapped(code: str, at: int, checks: Matcher) -> bool:
    """Whether the launch or call at `at` is written as the argument of a check: a call of a macro or function that
    reads the last error (`RUN_AND_CHECK(launch(x))`, whose body runs what it is given and then reads the error; a
    function's arguments run before its body), or of a configured check macro, which checks the call it wraps."""
    paren, name = _enclosing_call(code, at)
    if name is None:
        return False
    found = checks.search(code, name.start(), paren + 1)
    return found is not None and found.start() == name.start()


def _names(code: str, name: str, region: tuple[int, int]) -> Iterator[int]:
    """Offset of each use of `name` in `code[region]` as a value, neither called nor a member nor part of a longer
    name (`dispatch(launch, n)`, `run(&helper)`)."""
    at = code.find(name, *region)
    while at >= 0:
        after = at + len(name)
        rest = code[after:after + 40].lstrip()
        before = code[max(0, at - 2):at]
        inside = before[-1:].isalnum() or before[-1:] in ("_", ".", ":") or before.endswith("->") or (
            after < len(code) and (code[after].isalnum() or code[after] == "_"))
        if not inside and not rest.startswith(("(", "<")):
            yield at
        at = code.find(name, after, region[1])


def _enclosing_call(code: str, at: int) -> tuple[int, re.Match[str] | None]:
    """The `(` of the call whose arguments hold `at` (-1: none in its statement) and the name called there."""
    paren = _enclosing_paren(code, at)
    return paren, _NAME_BEFORE.search(code, max(0, paren - 200), paren) if paren > 0 else None


def _enclosing_paren(code: str, at: int) -> int:
    """Offset of the `(` of the call whose arguments hold `at`, -1 when `at` is in no argument list of its
    statement."""
    depth = 0
    for index in range(at - 1, max(-1, at - 2000), -1):
        ch = code[index]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                return index
            depth -= 1
        elif ch in ";{}":
            return -1
    return -1
