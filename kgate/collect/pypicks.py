"""Local names that pick one of several functions, for the launch-site reading (`kgate.collect.pylaunch`) and its
callers (`kgate.collect.pycallers`): `fn = naive_kernel` in one branch and `fn = loop_kernel` in another, and any
way of writing a choice as a value: a conditional (`a if small else b if tiny else c`), in parentheses or over
several lines, annotated (`fn: Callable = ...`), an entry of a literal table (`{0: a, 1: b}[mode]`, `(a, b)[i]`,
or of a module constant holding one), `custom or a`, an assignment expression (`if (fn := a if s else b):`), or an
item unpacked from a tuple each branch gives (`fn, grid = (a, g) if small else (b, h)`).

Two readings, one per stage: `picking_lines` finds in the text, before anything is parsed, the names a statement
binds to a value that spells one of the functions (a pre-filter: it may find more), and `chosen` reads from the
syntax tree what a bound value may hold.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping

from kgate.collect import pysource as py

_REACH = 16  # physical lines a statement is followed back over from a name it spells (`fn = (\n a if s\n else b)`)
_ROUNDS = 2  # a table of kernels (`KERNELS = {...}`), then a name picking one of its entries (`fn = KERNELS[mode]`)
_DEPTH = 8  # nested choices and module constants followed for one value
# The names a statement binds at its start: `fn =`, `fn: Callable =`, `fn, grid =`, `(fn, grid) =`.
_HEAD = re.compile(r"[ \t]*\(?[ \t]*([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*,?[ \t]*\)?[ \t]*"
                   r"(?::[^=\n\r]*)?=(?!=)")
_WALRUS = re.compile(r"([A-Za-z_]\w*)[ \t]*:=")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as Python numbers lines
_OPEN, _CLOSE = "([{", ")]}"
_USED = ("(", "[", ".", "=")  # what follows a name that is called, launched, read from or bound


def picking_lines(text: str, names: set[str]) -> dict[str, list[int]]:
    """The names a statement binds to a value that spells one of `names` as a word (`fn = a if small else b`), each
    with the 0-based lines that spell it there; then the names bound to a value that spells one of those."""
    out: dict[str, list[int]] = {}
    wanted = set(names)
    for _round in range(_ROUNDS):
        found: dict[str, list[int]] = {}
        for name in sorted(wanted):
            for alias, line in _binders(text, name):
                if alias not in names and alias not in out:
                    found.setdefault(alias, []).append(line)
        if not found:
            break
        for alias, lines in found.items():
            out[alias] = sorted(set(lines))
        wanted = set(found)
    return out


def _binders(text: str, name: str) -> Iterator[tuple[str, int]]:
    """(name bound, 0-based line) for each statement whose value spells `name` as a word."""
    line, counted = 0, 0
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        before = text[at - 1] if at else " "
        after = text[end] if end < len(text) else " "
        # The name as a value: not called, launched, bound or a definition's (`k(`, `k[grid]`, `k.run`, `k =`)
        if not (before.isalnum() or before in "_.") and not (after.isalnum() or after == "_") \
                and text[end:end + 8].lstrip(" \t")[:1] not in _USED:
            line += len(_LINE_BREAK.findall(text, counted, at))
            counted = at
            start = _statement_start(text, at)
            head = _HEAD.match(text, start)
            if head is not None and head.end() <= at:
                yield from ((target.strip(), line) for target in head.group(1).split(","))
            yield from ((match.group(1), line) for match in _WALRUS.finditer(text, start, at))
        at = text.find(name, end)


def _line_start(text: str, at: int) -> int:
    return max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1


def _statement_start(text: str, at: int) -> int:
    """Where the statement that holds offset `at` starts, as far as brackets and backslashes continue it (strings
    and comments read roughly: this only chooses what is parsed)."""
    start = _line_start(text, at)
    for _ in range(_REACH):
        if start == 0:
            break
        before = _line_start(text, start - 2 if text[start - 2:start] == "\r\n" else start - 1)
        if not _continued(text, before, at):
            break
        start = before
    return start


def _continued(text: str, start: int, end: int) -> bool:
    """Whether every line break between `start` and `end` is inside brackets or after a backslash."""
    depth, quote, comment = 0, "", False
    at = start
    while at < end:
        char = text[at]
        if char in "\r\n":
            if depth <= 0 and not (at > start and text[at - 1] == "\\" and not comment):
                if not (char == "\n" and at > start and text[at - 1] == "\r"):
                    return False
            comment = False
            quote = ""
        elif comment:
            pass
        elif quote:
            if char == "\\":
                at += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            comment = True
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        at += 1
    return True


def chosen(value: ast.expr | None, position: int | None, constants: Mapping[str, ast.expr],
           depth: int = 0) -> list[ast.expr]:
    """What a bound value may hold where it picks among several: each branch of a conditional, each operand of `or`
    and `and`, each entry of a literal table it indexes (a module constant's too), what an assignment expression
    holds; at `position` (an item unpacked from it), that item of each tuple a branch gives. The value itself
    where it picks nothing; nothing for an item unpacked from anything else."""
    if value is None or depth > _DEPTH:
        return []
    depth += 1
    if isinstance(value, ast.IfExp):
        return [*chosen(value.body, position, constants, depth), *chosen(value.orelse, position, constants, depth)]
    if isinstance(value, ast.BoolOp):
        return [found for part in value.values for found in chosen(part, position, constants, depth)]
    if isinstance(value, ast.NamedExpr):
        return chosen(value.value, position, constants, depth)
    if position is not None:
        if isinstance(value, (ast.Tuple, ast.List)) and -len(value.elts) <= position < len(value.elts) and not any(
                isinstance(item, ast.Starred) for item in value.elts):
            return chosen(value.elts[position], None, constants, depth)
        return []
    if isinstance(value, ast.Subscript):
        table = value.value
        if isinstance(table, ast.Name) and table.id in constants:
            table = constants[table.id]
        if isinstance(table, ast.Dict):
            return [found for entry in table.values for found in chosen(entry, None, constants, depth)]
        if isinstance(table, (ast.Tuple, ast.List)):
            return [found for entry in table.elts if not isinstance(entry, ast.Starred)
                    for found in chosen(entry, None, constants, depth)]
        return [value]
    if isinstance(value, ast.Name) and value.id in constants:  # `fn = DEFAULT_KERNEL`, a module constant naming one
        return [value, *chosen(constants[value.id], None, constants, depth)]
    return [value]


def chosen_names(value: ast.expr | None, position: int | None, constants: Mapping[str, ast.expr]) -> set[str]:
    """The dotted names among what a bound value may hold (`chosen`)."""
    return {name for found in chosen(value, position, constants) if (name := py.dotted(found)) is not None}
