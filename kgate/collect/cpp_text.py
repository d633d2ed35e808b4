"""C++ source text with comments and string literals blanked out, offsets and lines preserved.

Source rules and launch-site analysis search C++ text with regular
expressions; a launch inside a comment or a string is not a launch. Blanking
(every character of a comment or of a literal's contents becomes a space,
newlines stay) keeps every match's offset and line number valid in the
original text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from kgate.collect import depends
from kgate.collect.cuda_tree import LAUNCH_MARKS
from kgate.support.comments.cpp import Blanked
from kgate.support.comments.cpp import blank as blank_comments

__all__ = ["LAUNCH_MARKS", "Blanked", "blank", "blanked", "may_launch", "shared_blank", "without_disabled"]

# One run's blankings by text, up to `_SHARED_CHARS` characters of text: a file under lint and the project's reading of
# the same file (`kgate.collect.cuda_project`, which reads the project's other files once a launch needs them) blank
# it once between them, whichever comes first.
_SHARED: dict[str, Blanked] = depends.per_run({})
_SHARED_SIZE: dict[str, int] = depends.per_run({})
_SHARED_CHARS = 1 << 24


# A kernel launch's chevrons written with spaces, as a formatter that reads CUDA as C++ writes them (`k<< <g, b>> >(x)`),
# which nvcc reads as `<<<` and `>>>`.
_SPACED_OPEN = re.compile(r"<<[ \t]+<(?!<)|<[ \t]+<<(?!<)")
_SPACED_CLOSE = re.compile(r">>[ \t]+>|>[ \t]+>>")


def may_launch(text: str) -> bool:
    """Whether `text` may hold a `<<<...>>>` launch, its chevrons spaced or not (`LAUNCH_MARKS`)."""
    return "<<<" in text or _SPACED_OPEN.search(text) is not None


def blank(text: str) -> Blanked:
    """`text` with comments and literal contents blanked (`kgate.support.comments.cpp.blank`), and a launch's spaced
    chevrons written together, padded to the same length so that offsets and lines hold: `<< <` is `<<< `, and its
    `>> >` up to the statement's end `>>> `."""
    found = blank_comments(text)
    code = found.code
    if "<" not in code or _SPACED_OPEN.search(code) is None:
        return found
    pieces: list[str] = []
    done = 0
    for match in _SPACED_OPEN.finditer(code):
        if match.start() < done:
            continue
        end = code.find(";", match.end())
        end = len(code) if end < 0 else end
        close = _SPACED_CLOSE.search(code, match.end(), end)
        pieces.append(code[done:match.start()])
        pieces.append("<<<" + " " * (len(match.group()) - 3))
        done = match.end()
        if close is not None and ">>>" not in code[match.end():close.start()]:
            pieces.append(code[done:close.start()])
            pieces.append(">>>" + " " * (len(close.group()) - 3))
            done = close.end()
    pieces.append(code[done:])
    return Blanked("".join(pieces), found.comment_lines, found.comments)


def blanked(source: Any) -> Blanked:
    """`blank(source.text)` of a file under lint, computed once for all the rules that read it."""
    derived = getattr(source, "derived", None)
    if derived is None:
        return blank(source.text)
    found = derived.get("cpp_blanked")
    if found is None:
        found = derived["cpp_blanked"] = shared_blank(source.text)
    return found


def shared_blank(text: str) -> Blanked:
    """`blank(text)`, computed once per run for the same text."""
    found = _SHARED.get(text)
    if found is None:
        found = blank(text)
        size = _SHARED_SIZE.get("chars", 0) + len(text)
        if size <= _SHARED_CHARS:
            _SHARED[text], _SHARED_SIZE["chars"] = found, size
    return found


_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b(.*)$", re.MULTILINE)
_CONSTANT = re.compile(r"^\s*\(?\s*(0|1|false|true)\s*\)?\s*$")


def without_disabled(code: str) -> str:
    """`code` (comments and strings already blanked) with the lines the preprocessor never compiles blanked too:
    those under `#if 0` (or `#if false`) up to its `#else`, `#elif` or `#endif`, and those after the `#else` of an
    `#if 1`. A launch there is no launch, and a check there checks nothing. Any other condition is taken to hold
    either way (both branches kept). Offsets and lines are kept."""
    if "#" not in code:
        return code
    found = list(_CONDITIONAL.finditer(code))
    if not any(m.group(1) == "if" and _CONSTANT.match(m.group(2)) for m in found):
        return code
    chars = list(code)
    stack: list[tuple[bool, str]] = []  # per open conditional: whether its enclosing text is dead; its constant
    dead_from: int | None = None
    for match in found:
        directive, rest = match.group(1), match.group(2)
        outer = bool(stack) and stack[-1][0]
        if directive.startswith("if"):
            constant = _CONSTANT.match(rest) if directive == "if" else None
            value = constant.group(1) if constant else ""
            stack.append((outer or value in ("0", "false"), value))
            here = stack[-1][0]
        elif not stack:
            continue  # an #else or #endif without its #if: left as it is
        elif directive == "endif":
            stack.pop()
            here = bool(stack) and stack[-1][0]
        else:  # #else, #elif: the other branch
            parent = len(stack) > 1 and stack[-2][0]
            value = stack[-1][1]
            branch_dead = parent or value in ("1", "true")  # after an `#if 1` every other branch is dead
            stack[-1] = (branch_dead, "1" if value in ("1", "true") else "")
            here = branch_dead
        if here and dead_from is None:
            dead_from = match.end()
        elif not here and dead_from is not None:
            for at in range(dead_from, match.start()):
                if chars[at] != "\n":
                    chars[at] = " "
            dead_from = None
    if dead_from is not None:
        for at in range(dead_from, len(chars)):
            if chars[at] != "\n":
                chars[at] = " "
    return "".join(chars)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def balanced(code: str, open_index: int, opening: str = "(", closing: str = ")") -> int:
    """Index just past the bracket that closes the one at `open_index` (len(code) if unclosed)."""
    depth = 0
    for index in range(open_index, len(code)):
        ch = code[index]
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return index + 1
    return len(code)


_WORD_CHAR = re.compile(r"\w")


def calls_of(code: str, name: str, start: int = 0, end: int | None = None) -> Iterator[re.Match[str]]:
    """Each `name(` or `name<...>(` in `code[start:end]` where `name` starts a word: what `\\bname\\s*(...)`
    matches, found from the name's own letters. A pattern that begins with `\\b` has no literal prefix, so
    Python's engine tries it at every position of the file (forty times slower on a large CUDA file)."""
    pattern = _CALL_PATTERNS.get(name)
    if pattern is None:
        pattern = _CALL_PATTERNS[name] = re.compile(re.escape(name) + r"\s*(?:<[^;{}]*?>)?\s*\(")
    stop = len(code) if end is None else end
    at = start
    while (match := pattern.search(code, at, stop)) is not None:
        if match.start() > 0 and _WORD_CHAR.match(code, match.start() - 1):
            at = match.start() + 1  # inside a longer name: look again from the next letter
            continue
        yield match
        at = match.end() if match.end() > match.start() else match.start() + 1


_CALL_PATTERNS: dict[str, re.Pattern[str]] = {}


def split_arguments(inner: str) -> list[str]:
    """Top-level comma-separated arguments (commas inside (), [], {} or <...> of a template don't split)."""
    args: list[str] = []
    depth = 0
    angle = 0
    current: list[str] = []
    for ch in inner:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and depth == 0:
            angle += 1
        elif ch == ">" and depth == 0 and angle:
            angle -= 1
        if ch == "," and depth == 0 and angle == 0:
            args.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    tail = "".join(current).strip()
    if tail or args:
        args.append(tail)
    return args


def macro_lines(code: str) -> frozenset[int]:
    """Lines that belong to a `#define` (with its backslash continuations)."""
    if "define" not in code:  # no line to look at (a large generated file without a macro is read once, here)
        return frozenset()
    lines = code.split("\n")
    out: set[int] = set()
    in_macro = False
    for number, text in enumerate(lines, 1):
        stripped = text.lstrip()
        if not in_macro and re.match(r"#\s*define\b", stripped):
            in_macro = True
        if in_macro:
            out.add(number)
            in_macro = text.rstrip().endswith("\\")
    return frozenset(out)


class Macro(NamedTuple):
    """A `#define` with its backslash continuations."""

    start: int
    end: int
    name: str
    params: str | None  # the parameter list with its parentheses (`(x, ...)`); None for an object-like macro
    body: int  # offset of the replacement text


# A backslash before the line's end joins the next line, `\r\n` ends included (a file written on Windows).
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\([^)\n]*\))?((?:[^\n]*\\\r?\n)*[^\n]*)", re.MULTILINE)


def macros(code: str) -> list[Macro]:
    """The `#define`s of `code`, in order."""
    if "define" not in code:
        return []
    return [Macro(m.start(), m.end(), m.group(1), m.group(2), m.start(3)) for m in _DEFINE.finditer(code)]


def strip_hash_comment(line: str) -> str:
    """A line of CMake, Python, shell or Makefile without its `#` comment (a `#` inside quotes stays)."""
    quote = ""
    index = 0
    while index < len(line):
        ch = line[index]
        if quote:
            if ch == "\\":
                index += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:index]
        index += 1
    return line


_FUNCTION_NAME = re.compile(r"([A-Za-z_~][\w:]*)\s*(?:<[^{};]*>)?\s*\([^{};]*\)\s*(?:const\s*)?(?:noexcept\s*)?"
                            r"(?:override\s*)?(?:->\s*[^{};]+)?$")


def enclosing_function(code: str, position: int) -> str:
    """The name of the function whose body holds `position` ('' at namespace scope), for stable identities."""
    return Scopes(code).function_at(position)


class Scopes:
    """`enclosing_function` for many positions of one text: asked in increasing order, the braces are
    scanned once (a generated file with thousands of launches must not cost a scan per launch)."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.stack: list[int] = []  # offsets of the braces open at `scanned`
        self.scanned = 0

    def function_at(self, position: int) -> str:
        if position < self.scanned:
            self.stack, self.scanned = [], 0
        for match in _BRACES.finditer(self.code, self.scanned, position):
            if match.group() == "{":
                self.stack.append(match.start())
            elif self.stack:
                self.stack.pop()
        self.scanned = position
        return _function_name(self.code, self.stack)


_BRACES = re.compile(r"[{}]")


def _function_name(code: str, stack: list[int]) -> str:
    for index in stack:
        head = code[max(0, index - 400):index].rstrip()
        match = _FUNCTION_NAME.search(head)
        if match and match.group(1) not in ("if", "for", "while", "switch", "catch"):
            return match.group(1)
    return ""
