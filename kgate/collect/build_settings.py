"""The text of a build file that sets how it builds: comments and prose blanked out.

A build file names architectures in its settings (nvcc's `-gencode` and `-arch`, `CMAKE_CUDA_ARCHITECTURES`,
`TORCH_CUDA_ARCH_LIST`, a `setup.py`'s `extra_compile_args`) and in words nothing compiles: comments, the
text of a CMake `message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST must name 12.0a")`, the condition of an `if()`
that tests a value, a Python `raise`, `print` or logging call, a docstring, a shell `echo`. `settings`
returns the file with those blanked (every character a space, line breaks kept), so that a search of it
finds settings only, at the offsets, lines and columns of the original text.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator

from kgate.support.comments import PY_LINE, comments, language

# Every line break `str.splitlines` knows: kept, so that lines are numbered as in the original.
_NOT_A_BREAK = re.compile(r"[^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# CMake commands whose arguments are words for a person (message) or a test of values (if, elseif, while).
_CMAKE_PROSE = re.compile(r"^[ \t]*(message|if|elseif|while)[ \t]*\(", re.MULTILINE | re.IGNORECASE)
# Shell commands that print their arguments; in a Makefile, the functions that print theirs.
_SHELL_PROSE = re.compile(r"(?:^|(?<=[;&|(\n\t ]))@?(?:echo|printf)(?=[ \t])")
_MAKE_PROSE = re.compile(r"\$[({](?:info|warning|error)[ \t]")
# Python calls whose arguments are printed, logged or raised: the name, or the attribute at the end of one.
_PY_PROSE_CALLS = frozenset({"print", "warn", "debug", "info", "warning", "error", "critical", "exception", "log",
                             "fatal", "write", "exit", "echo", "secho"})


def settings(rel: str, text: str, tree: ast.Module | None = None, near: Iterable[int] = ()) -> str:
    """`text` of the build file `rel` with its comments and its prose blanked. For a Python file, `tree` is its syntax
    tree when the caller has it (None: parsed here), and only the statements on the lines that hold an offset of
    `near` (where the caller looks) are read, when it names some: a large script is not walked whole."""
    lang = language(rel)
    if lang == "python":
        return blank_spans(text, _python_spans(text, tree, near))
    spans = [(c.start, c.end) for c in comments(text, lang)]
    if lang == "cmake":
        spans += _cmake_prose(text)
    elif lang == "shell":
        spans += _shell_prose(text, 0, len(text))
    elif lang == "make":
        spans += _make_prose(text)
    return blank_spans(text, spans)


def blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each (start, end) span turned into spaces, its line breaks kept."""
    if not spans:
        return text
    pieces: list[str] = []
    done = 0
    for start, end in sorted(spans):
        start = max(start, done)
        if end <= start:
            continue
        pieces += [text[done:start], _NOT_A_BREAK.sub(" ", text[start:end])]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _cmake_prose(text: str) -> list[tuple[int, int]]:
    """The argument lists of `message()` and of the conditions of `if()`, `elseif()` and `while()`."""
    out = []
    for match in _CMAKE_PROSE.finditer(text):
        out.append((match.end(), cmake_close(text, match.end() - 1)))
    return out


def cmake_close(text: str, paren: int) -> int:
    """Offset of the `)` that closes the CMake argument list opened at `paren` (quoted and bracket arguments and
    nested parentheses passed over; len(text) if none)."""
    depth = 0
    index = paren
    while index < len(text):
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        if ch == '"':
            index = _quoted_end(text, index + 1)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return index
        elif ch == "#":  # a comment to the end of the line
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
            continue
        index += 1
    return len(text)


def _quoted_end(text: str, index: int) -> int:
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == '"':
            return index + 1
        index += 1
    return len(text)


def _shell_prose(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The arguments of each `echo` and `printf` between `start` and `end`, to the end of the command, less the
    commands they substitute (`$(...)` and backquotes run, whatever prints their output)."""
    out = []
    for match in _SHELL_PROSE.finditer(text, start, end):
        out += _printed(text, match.end(), end)
    return out


def _printed(text: str, index: int, end: int) -> list[tuple[int, int]]:
    """The spans of the command that goes on at `index` that are only printed: up to an unquoted `;`, `&`, `|`, line
    end or the `)` of a substitution around it, less the substitutions in it (`$(...)`, backquotes)."""
    spans = []
    begin = index
    quote = ""
    depth = 0  # parentheses opened in the command (an arithmetic `$((...))`)
    while index < end:
        ch = text[index]
        if ch == "\\":
            index += 2
            continue
        substituted = _substitution_end(text, index, end) if quote != "'" else None
        if substituted is not None:
            spans.append((begin, index))
            index = begin = substituted
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(" or (ch == ")" and depth):
            depth += 1 if ch == "(" else -1
        elif ch in ";&|)\n":
            break
        index += 1
    spans.append((begin, min(index, end)))
    return spans


def _substitution_end(text: str, index: int, end: int) -> int | None:
    """Where the command substitution that opens at `index` (`$(` or a backquote, not `$((`) ends; None if none opens
    there."""
    if text.startswith("`", index):
        close = index + 1
        while close < end and text[close] != "`":
            close += 2 if text[close] == "\\" else 1
        return min(close + 1, end)
    if not text.startswith("$(", index) or text.startswith("$((", index):
        return None
    depth = 0
    quote = ""
    for at in range(index + 1, end):
        ch = text[at]
        if quote:
            quote = "" if ch == quote and text[at - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return at + 1
    return end


def _make_prose(text: str) -> list[tuple[int, int]]:
    """`$(info ...)`, `$(warning ...)` and `$(error ...)`, and the `echo` and `printf` of recipe lines."""
    out = []
    for match in _MAKE_PROSE.finditer(text):
        opening = text[match.start() + 1]
        out.append((match.end(), _balanced(text, match.start() + 1, opening, ")" if opening == "(" else "}")))
    for line in re.finditer(r"^\t[^\n]*", text, re.MULTILINE):
        out += _shell_prose(text, line.start(), line.end())
    return out


def _balanced(text: str, index: int, opening: str, closing: str) -> int:
    depth = 0
    for at in range(index, len(text)):
        if text[at] == opening:
            depth += 1
        elif text[at] == closing:
            depth -= 1
            if depth == 0:
                return at
    return len(text)


def _python_spans(text: str, tree: ast.Module | None, near: Iterable[int]) -> list[tuple[int, int]]:
    """The comments and the prose of a Python file: the whole file, or the lines that hold an offset of `near`."""
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):  # the tokenizer's fallback reads the comments; the prose is not known
            return [(c.start, c.end) for c in comments(text, "python")]
    starts = _python_line_starts(text)
    lines = {bisect_right(starts, offset, 1) - 1 for offset in near} or None
    strings: list[tuple[int, int]] = []
    out: list[tuple[int, int]] = []
    for node in _nodes(tree, lines):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and (span := _span(text, starts, node)) is not None:
            strings.append(span)
        out += [span for part in _prose(node) if (span := _span(text, starts, part)) is not None]
    for number in sorted(lines) if lines is not None else range(1, len(starts) - 1):
        out += _hash_comment(text, starts, number, strings)
    return out


def _nodes(tree: ast.AST, lines: set[int] | None) -> Iterator[ast.AST]:
    """Every node of `tree`, or those whose lines hold one of `lines` (a subtree that holds none is skipped)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            first, last = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
            if lines is None or first is None or last is None or any(first <= n <= last for n in lines):
                pending.append(child)


def _prose(node: ast.AST) -> list[ast.AST]:
    """The parts of a statement or expression that are words, not settings: a bare string statement (a
    docstring), what `raise` raises, an `assert` message, the arguments of a call that prints, logs or warns
    (`print`, `logger.warning`, `warnings.warn`, `sys.exit`), and both sides of a comparison (a test)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.JoinedStr)):
        return [node.value]
    if isinstance(node, ast.Raise) and node.exc is not None:
        return [node.exc]
    if isinstance(node, ast.Assert) and node.msg is not None:
        return [node.msg]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.Call) and _prose_call(node.func):
        return [*node.args, *(keyword.value for keyword in node.keywords)]
    return []


def _hash_comment(text: str, starts: list[int], number: int, strings: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The comment of Python line `number`: from its first `#` that no string literal holds to the line's end."""
    begin, end = starts[number], starts[number + 1] if number + 1 < len(starts) else len(text)
    at = text.find("#", begin, end)
    while at >= 0:
        if not any(start <= at < stop for start, stop in strings):
            return [(at, end)]
        at = text.find("#", at + 1, end)
    return []


def _prose_call(func: ast.expr) -> bool:
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name in _PY_PROSE_CALLS


def _python_line_starts(text: str) -> list[int]:
    """Offset of each line as `ast` numbers them (1-based: starts[n] is line n)."""
    starts = [0, 0]
    for line in PY_LINE.findall(text):
        starts.append(starts[-1] + len(line))
    return starts


def _span(text: str, starts: list[int], node: ast.AST) -> tuple[int, int] | None:
    """(start, end) offsets of a node: `ast` gives UTF-8 byte columns, turned into characters."""
    end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    if end_line is None or end_col is None or end_line >= len(starts):
        return None
    return (_offset(text, starts, node.lineno, node.col_offset),  # type: ignore[attr-defined]
            _offset(text, starts, end_line, end_col))


def _offset(text: str, starts: list[int], line: int, byte_col: int) -> int:
    begin = starts[line]
    return begin + len(text[begin:begin + byte_col].encode("utf-8")[:byte_col].decode("utf-8", "ignore"))
