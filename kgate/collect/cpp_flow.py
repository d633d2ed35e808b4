"""Where control goes in C++ text: which statement a check after it covers, and what a `{` opens.

The reading follows the braces of blanked text (`kgate.collect.cpp_text.blank`: comments and literals are
spaces) and the C++ grammar of if/else chains, switches, loops and function heads, not a parse. A
statement in one arm of an if/else chain, in a case of a switch or in a loop's body reaches what comes
after the whole chain, switch or loop (a `break` leads there too); a function's or a lambda's body is where
the reading stops and the callers take over (`kgate.collect.cuda_callers`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import Protocol

from kgate.collect.cpp_statements import conditional, head, previous, statement_before
from kgate.collect.cpp_text import balanced

_NEWLINE = re.compile(r"\n")


class Matcher(Protocol):
    """What finds checks in code: a compiled pattern, or anything searched the same way."""

    def search(self, string: str, pos: int = ..., endpos: int = ...) -> re.Match[str] | None: ...

    def finditer(self, string: str, pos: int = ..., endpos: int = ...) -> Iterator[re.Match[str]]: ...


def line_starts(code: str) -> list[int]:
    """Offset of the start of each line, 1-based: starts[n] is where line n begins."""
    return [0, 0, *(match.end() for match in _NEWLINE.finditer(code))]


def line_at(starts: list[int], offset: int) -> int:
    """The 1-based line that holds `offset`."""
    return bisect_right(starts, offset, 1) - 1


def column(code: str, offset: int) -> int:
    """The 0-based column of `offset` on its line."""
    return offset - (code.rfind("\n", 0, offset) + 1)


def checked_after(code: str, semicolon: int, starts: list[int], checks: Matcher, window: int,
                  comments: frozenset[int] = frozenset()) -> bool:
    """Whether a check appears between a statement's `;` and the end of the `window`-th line after it, lines that
    hold only a comment (`comments`: the 1-based lines that hold one) not counted: a check below the comment
    block that explains it is as near as one right after the launch."""
    found = checks.search(code, semicolon, window_end(code, starts, line_at(starts, semicolon), window, comments))
    return found is not None and reached(code, semicolon, found.start())


def reached(code: str, end: int, at: int) -> bool:
    """Whether control that leaves the statement ending at `end` comes to offset `at` after it: not when that
    statement returns or throws (`return k<<<g, b>>>(x);`), nor past a `return` or `throw` between them that runs on
    every path there (a check in the value it returns runs) (not the braceless body of an if, else or loop, nor inside a block opened after `end`), nor
    into another function's body once the statement's function has ended."""
    if leaves(code, end):
        return False
    depth = lowest = 0
    for token in _FLOW_TOKEN.finditer(code, end + 1, at):
        if token.group() == "}":
            depth -= 1
            lowest = min(lowest, depth)
        elif token.group() == "{":
            if depth < 0 and depth == lowest and head(code, token.start())[0] == "function":
                return False
            depth += 1
        elif depth <= lowest and _exits(code, token.start()):
            # The statement that returns evaluates its value first: a check in it runs (`return cudaGetLastError();`).
            return at < _statement_end(code, token.end())
    return True


def first_exit(code: str, opening: int, close: int) -> int:
    """The end (its `;`) of the first `return`, `throw` or other statement that leaves (`_LEAVING`: `abort()`,
    `assert(false)`, `TORCH_CHECK(false, ...)`) of the block whose `{` is at `opening` that runs
    on every path through it (written in the block itself, not in a nested block nor as a braceless body, nor a
    `throw` inside an expression: `n > 0 ? n : throw e`); -1 for none, and where a `goto` of the block may jump past
    it to a label. The statement ends after what it returns (a lambda it calls, `return run([&] { ...; });`)."""
    if _GOTO.search(code, opening, close) is not None:
        return -1
    depth = 0
    for token in _EXIT_TOKEN.finditer(code, opening + 1, close):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
        elif depth == 0 and _exits(code, token.start()):
            return _statement_end(code, token.end())
    return -1


def _exits(code: str, at: int) -> bool:
    """Whether the `return` or `throw` at `at` leaves on every path that reaches its statement: it begins the
    statement (past labels), which is no braceless body of an if, else or loop."""
    return not statement_before(code, at).strip() and not conditional(code, at)


def _statement_end(code: str, at: int) -> int:
    """The offset of the `;` that ends the statement going on at `at`, past the brackets of what it holds (a lambda's
    body); -1 for none."""
    end = _scan_statement(code, at)
    return end if end < len(code) and code[end] == ";" else -1


def _scan_statement(code: str, at: int) -> int:
    """The offset where the statement going on at `at` stops, past the brackets of what it holds: its `;`, the
    bracket that closes what holds it, or the end of the code."""
    depth = 0
    for index in range(at, len(code)):
        ch = code[index]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return index
        elif ch == ";" and depth == 0:
            return index
    return len(code)


def leaves(code: str, end: int) -> bool:
    """Whether the statement ending at `end` returns or throws: nothing written after it in its block runs."""
    return _RETURN.match(statement_before(code, end).lstrip()) is not None


def window_end(code: str, starts: list[int], line: int, window: int, comments: frozenset[int] = frozenset()) -> int:
    """The offset where the `window` lines from `line` on end (`line` is the first), passing over the lines that
    hold only a comment (in `comments` and blank in blanked `code`) without counting them."""
    last = line + window
    at = line + 1
    while at < min(last, len(starts)):
        if at in comments and not code[starts[at]:starts[at + 1] if at + 1 < len(starts) else len(code)].strip():
            last += 1
        at += 1
    return starts[last] if last < len(starts) else len(code)



_ELSE = re.compile(r"else\b")
# A status that only a success guards, and the read of the last error stored in it.
_SUCCESS_TEST = r"if\s*\(\s*(\w+)\s*==\s*cudaSuccess\s*\)"
_SUCCESS_GUARDED = re.compile(_SUCCESS_TEST + r"\s*(\w+)\s*=\s*$")
_SUCCESS_HEAD = re.compile(r"(?<![\w])" + _SUCCESS_TEST + r"\s*\{$")
_ASSIGNED = re.compile(r"(\w+)\s*=")
_DIRECTIVE_LINE = re.compile(r"^[ \t]*#.*$", re.MULTILINE)
# What leaves a function for good: a return or throw, a call that ends the process or never returns, and the checks
# and assertions of a condition that is false as written (`assert(false)`: the author marks the path as never taken;
# `TORCH_CHECK(false, ...)` throws).
# (Each match ends before the call's parenthesis: the statement's end is found past what the call holds.)
_LEAVING = (r"\b(?:return|throw|co_return)\b"
            r"|(?<![.>])\b(?:std::)?(?:abort|exit|_Exit|quick_exit|terminate)(?=\s*\()"
            r"|\b__builtin_unreachable(?=\s*\()|\bassert(?=\s*\(\s*(?:false|0)\s*\))"
            r"|\b(?:TORCH_CHECK|TORCH_INTERNAL_ASSERT)(?=\s*\(\s*(?:false|0)\s*[,)])|\bAT_ERROR(?=\s*\()")
_RETURN = re.compile(r"\b(?:return|throw|co_return)\b")
_FLOW_TOKEN = re.compile(r"[{}]|\b(?:return|throw|co_return)\b")
_EXIT_TOKEN = re.compile(r"[{}]|" + _LEAVING)
_GOTO = re.compile(r"\bgoto\b")
_BREAK = re.compile(r"break\s*;")
_CONTROL_HEAD = re.compile(r"(if|for|while|switch)\b\s*(?:constexpr\b\s*)?\(")
_DO = re.compile(r"do\b")
_WORD_BEFORE = re.compile(r"(\w+)\s*$")
_OUTWARD = 8  # control statements left, one inside another, to reach a check


class Flow:
    """Where a statement's error check may be: after it, or after the control statements that hold it.

    A launch in one arm of an if/else chain, in a switch's case or in a loop's body is checked by a check
    right after the whole if/else chain, switch or loop (`break` leaves a switch or a loop the same way).
    The reading follows the braces of the blanked text and the C++ grammar of those statements, not a
    parse: it stops at the body of a function or a lambda, where the callers take over.
    """

    def __init__(self, code: str, starts: list[int], window: int, comments: frozenset[int] = frozenset()) -> None:
        self.code, self.starts, self.window, self.comments = code, starts, window, comments
        self.opens: list[int] = []
        self.closes: list[int] = []
        self.parents: list[int] = []
        self.at_open: dict[int, int] = {}
        self.at_close: dict[int, int] = {}
        stack: list[int] = []
        for match in re.finditer(r"[{}]", code):
            if match.group() == "{":
                self.parents.append(stack[-1] if stack else -1)
                stack.append(len(self.opens))
                self.at_open[match.start()] = len(self.opens)
                self.opens.append(match.start())
                self.closes.append(len(code))
            elif stack:
                brace = stack.pop()
                self.closes[brace] = match.start()
                self.at_close[match.start()] = brace

    def checked(self, end: int, checks: Matcher) -> bool:
        """Whether a check follows the statement whose last character (`;` or `}`) is at `end` within
        `window` lines, directly or after the if/else chains, switches and loops that hold it."""
        position: int | None = end if not leaves(self.code, end) else None
        for _ in range(_OUTWARD):
            if position is None:
                return False
            if checked_after(self.code, position, self.starts, checks, self.window, self.comments):
                return True
            position = self._leave(position + 1)
        return False

    def later(self, end: int, checks: Matcher) -> bool:
        """Whether a check comes later in the function (or lambda) that holds the statement ending at `end`, on
        every path: in that block or one around it (not in another branch), with no `return` or `throw` before
        it. A read of the last error reports every launch since the previous read."""
        brace = self.around(end)
        around: set[int] = set()
        while brace >= 0:
            around.add(brace)
            if self._kind(brace) == "other":
                break
            brace = self.parents[brace]
        close = self.closes[brace] if brace >= 0 else len(self.code)
        for found in checks.finditer(self.code, end, close):
            # The body of a braceless if, else or loop, or another branch: one path only, unless the read is kept in
            # a status only a success guards (`if (err == cudaSuccess) err = cudaGetLastError();`).
            if (conditional(self.code, found.start())
                    or not (self.around(found.start()) in around or (brace < 0 and self.around(found.start()) < 0))) \
                    and not self._first_error_kept(found.start(), around):
                continue
            return _RETURN.search(self.code, end, found.start()) is None and not leaves(self.code, end)
        return False

    def _first_error_kept(self, at: int, around: set[int]) -> bool:
        """Whether the read of the last error at `at` is stored in a status that only a success guards (`if (err ==
        cudaSuccess) err = cudaPeekAtLastError();`, braced or not, the `if` in a block of `around`): where the read
        does not run, the status already holds an earlier call's error, and whatever reads the status reads a failure
        either way, so the read counts as on every path."""
        statement = _DIRECTIVE_LINE.sub("", statement_before(self.code, at))
        braceless = _SUCCESS_GUARDED.match(statement.lstrip())
        if braceless is not None:
            return braceless.group(1) == braceless.group(2) and self.around(at) in around
        assigned = _ASSIGNED.fullmatch(statement.strip())
        inner = self.around(at)
        if assigned is None or inner < 0 or self.parents[inner] not in around:
            return False
        opening = self.opens[inner]
        guard = _SUCCESS_HEAD.search(self.code, max(0, opening - 200), opening + 1)
        return guard is not None and guard.group(1) == assigned.group(1)

    def every_path(self, at: int, top: int) -> bool:
        """Whether offset `at` runs on every path through the block `top` that holds it: every block between them is
        a bare block, a do-while's body or a brace block handed to a macro (not a branch, a case or a loop's body),
        and `at` is in no braceless body of an if, else or loop."""
        if conditional(self.code, at):
            return False
        brace = self.around(at)
        while brace >= 0 and brace != top:
            if self._kind(brace) not in ("block", "do") or self.code[previous(self.code, self.opens[brace])] == ":":
                return False  # (a block after a `case 1:` runs on that case's path only)
            brace = self.parents[brace]
        return True

    def later_anywhere(self, end: int, checks: Matcher) -> bool:
        """Whether a check comes later in the function (or lambda) that holds the statement ending at `end`, in any
        block of it, with no `return` or `throw` before it: what a program's own test of its results reaches."""
        brace = self.around(end)
        while brace >= 0 and self._kind(brace) != "other":
            brace = self.parents[brace]
        found = checks.search(self.code, end, self.closes[brace] if brace >= 0 else len(self.code))
        return found is not None and _RETURN.search(self.code, end, found.start()) is None and not leaves(self.code, end)

    def around(self, at: int) -> int:
        """The innermost block that holds offset `at`, -1 for none."""
        brace = bisect_right(self.opens, at) - 1
        while brace >= 0 and self.closes[brace] < at:
            brace = self.parents[brace]
        return brace

    def _leave(self, after: int) -> int | None:
        """The last character of the statement that control reaches the end of after a statement that
        ends before `after`; None when what follows is another statement or the end of a function."""
        at = self._next(after)
        if at >= len(self.code):
            return None
        if _ELSE.match(self.code, at):
            return self._skip(at + 4) - 1
        if _BREAK.match(self.code, at):
            brace = bisect_right(self.opens, at) - 1
            while brace >= 0 and self.closes[brace] < at:
                brace = self.parents[brace]
            while brace >= 0:
                kind = self._kind(brace)
                if kind in ("loop", "switch", "do"):
                    return self._end(brace)
                if kind == "other":
                    return None
                brace = self.parents[brace]
            return None
        if self.code[at] == "}" and at in self.at_close:
            return self._end(self.at_close[at])
        return None

    def _end(self, brace: int) -> int | None:
        """The last character of the statement whose body is the block `brace`, None for a function's."""
        kind = self._kind(brace)
        close = self.closes[brace]
        if kind == "if":
            at = self._next(close + 1)
            return self._skip(at + 4) - 1 if _ELSE.match(self.code, at) else close
        if kind == "do":
            paren = self.code.find("(", close)
            semicolon = self.code.find(";", balanced(self.code, paren)) if paren >= 0 else -1
            return semicolon if semicolon >= 0 else None
        return close if kind != "other" else None

    def _kind(self, brace: int) -> str:
        """What the block `brace` is the body of: "if", "loop", "switch", "do", "else", "block" (a bare or
        a case's block) or "other" (a function, a lambda, a class, an initializer)."""
        code = self.code
        before = previous(code, self.opens[brace])
        if before < 0 or code[before] in ";{}:":
            return "block"
        if code[before] in ",(" and self._holds_statements(brace):
            return "block"  # a macro's argument (`DISPATCH_BOOL(flag, kFlag, { ...; })`): pasted where it is used
        if code[before] == ")":
            depth = 0
            for paren in range(before, max(-1, before - 4000), -1):
                depth += {")": 1, "(": -1}.get(code[paren], 0)
                if depth == 0:
                    break
            else:
                return "other"
            word = _WORD_BEFORE.search(code, max(0, paren - 40), paren)
            if word is not None and word.group(1) == "constexpr":
                word = _WORD_BEFORE.search(code, max(0, word.start() - 40), word.start())
            name = word.group(1) if word is not None else ""
            return {"if": "if", "for": "loop", "while": "loop", "switch": "switch"}.get(name, "other")
        word = _WORD_BEFORE.search(code, max(0, before - 10), before + 1)
        return {"else": "else", "do": "do"}.get(word.group(1) if word is not None else "", "other")

    def _holds_statements(self, brace: int) -> bool:
        """Whether a block has a statement of its own: a `;` outside its inner brackets, which an initializer
        list (`f(x, {1, 2})`) never has."""
        depth = 0
        for ch in self.code[self.opens[brace] + 1:self.closes[brace]]:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == ";" and depth == 0:
                return True
        return False

    def _skip(self, at: int) -> int:
        """Offset just past the statement that starts at or after `at`."""
        code = self.code
        at = self._next(at)
        if at >= len(code):
            return len(code)
        if code[at] == "{":
            brace = self.at_open.get(at)
            return self.closes[brace] + 1 if brace is not None else len(code)
        head = _CONTROL_HEAD.match(code, at)
        if head is not None:
            after = self._skip(balanced(code, head.end() - 1))
            if head.group(1) == "if":
                following = self._next(after)
                if _ELSE.match(code, following):
                    return self._skip(following + 4)
            return after
        if _DO.match(code, at):
            body = self._skip(at + 2)
            paren = code.find("(", body)
            semicolon = code.find(";", balanced(code, paren)) if paren >= 0 else -1
            return semicolon + 1 if semicolon >= 0 else len(code)
        end = _scan_statement(code, at)
        return end + 1 if end < len(code) and code[end] == ";" else end

    def _next(self, at: int) -> int:
        """Offset of the first character at or after `at` that is not white space."""
        while at < len(self.code) and self.code[at].isspace():
            at += 1
        return at




# What may stand between a head's `)` (or a lambda's `]`) and its body's `{`.
