"""Python files changed through libcst, which gives back every comment, blank line and space around an edit."""

from __future__ import annotations

import ast
import re
from typing import Any

from kgate.core.fix import Edit

_NEWLINE = re.compile(r"\r\n|\r|\n")
_CONTINUED = re.compile(r"\\(?:\r\n|\r|\n)\Z")


class CannotApply(Exception):
    """A fix that cannot be applied to this text; the message says why."""


def line_starts(text: str) -> list[int]:
    """Offset of each line's start, 1-based (starts[1] == 0), and one past the end."""
    return [0, 0, *(m.end() for m in _NEWLINE.finditer(text)), len(text) + 1]


def python_edits(text: str, edits: list[tuple[int, int, Edit]]) -> str:
    """`text` with the edits ((start, end, edit) offsets) made through libcst: replacements inside one string or
    comment, statements removed; CannotApply when libcst cannot make them, or would write more than they change."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise CannotApply(f"does not parse: {str(exc).splitlines()[0]}") from None
    if module.code != text:  # libcst would write more than the fix changes (a form feed before a statement goes)
        raise CannotApply("libcst cannot write this file back unchanged: left as it was")
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    starts = line_starts(text)

    def bounds(node: Any) -> tuple[int, int]:
        where = positions[node]
        return starts[where.start.line] + where.start.column, starts[where.end.line] + where.end.column

    tokens: list[tuple[int, int, Any]] = []
    statements: dict[int, Any] = {}
    node: Any
    for node in positions:
        if isinstance(node, (cst.SimpleString, cst.Comment, cst.FormattedStringText)):
            tokens.append((*bounds(node), node))
        elif isinstance(node, cst.BaseSmallStatement):
            statements[bounds(node)[0]] = node
    new_values: dict[Any, list[tuple[int, int, str]]] = {}
    removed: set[Any] = set()
    for start, end, edit in edits:
        if edit.kind == "delete-statement":
            node = statements.get(start)
            if node is None:
                raise CannotApply(f"no statement starts at line {edit.line}")
            removed.add(node)
            continue
        holder = next(((s, e, node) for s, e, node in tokens
                       if s <= end <= e and (s <= start or (edit.kind == "drop-suppression"
                                                            and isinstance(node, cst.Comment)))), None)
        if holder is None:
            raise CannotApply(f"line {edit.line}: the change is not inside one string or comment")
        s, _e, node = holder
        new_values.setdefault(node, []).append((max(start, s) - s, end - s, edit.text))

    def rewritten(node: Any) -> str:
        value = node.value
        for start, end, replacement in sorted(new_values[node], reverse=True):
            value = value[:start] + replacement + value[end:]
        return value

    emptied = {node for node in new_values if isinstance(node, cst.Comment) and not rewritten(node).strip()}

    class Fixer(cst.CSTTransformer):
        def leave_SimpleString(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(value=rewritten(original)) if original in new_values else updated

        def leave_FormattedStringText(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(value=rewritten(original)) if original in new_values else updated

        def leave_Comment(self, original: Any, updated: Any) -> Any:
            if original in new_values and original not in emptied:
                return updated.with_changes(value=rewritten(original))
            return updated

        def leave_TrailingWhitespace(self, original: Any, updated: Any) -> Any:
            if original.comment is not None and original.comment in emptied:
                return updated.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))
            return updated

        def leave_EmptyLine(self, original: Any, updated: Any) -> Any:
            if original.comment is not None and original.comment in emptied:
                return cst.RemoveFromParent()
            return updated

        def leave_SimpleStatementLine(self, original: Any, updated: Any) -> Any:
            if not any(node in removed for node in original.body):
                return updated
            kept = _kept(original, updated)
            # The comments inside a removed statement stay, each on a line of its own above where it was.
            inner = [cst.EmptyLine(comment=c) for old in original.body if old in removed for c in _comments_in(old)]
            if kept:
                return updated.with_changes(body=kept, leading_lines=[*updated.leading_lines, *inner])
            emptied_lines[original] = inner
            return updated.with_changes(body=[cst.Pass()])

        def leave_SimpleStatementSuite(self, original: Any, updated: Any) -> Any:
            """A block on its header's line (`if x: a; b`): the removed statements go, `pass` if none is left."""
            if not any(node in removed for node in original.body):
                return updated
            if any(_comments_in(old) for old in original.body if old in removed):
                raise CannotApply(f"a comment inside a statement of a one-line block, line {original_line(original)}")
            return updated.with_changes(body=_kept(original, updated) or [cst.Pass()])

        def leave_IndentedBlock(self, original: Any, updated: Any) -> Any:
            body, footer = _without_emptied(original.body, updated.body, updated.footer)
            if not body:  # a block needs a statement: `pass`, under the comments that were above the removed one
                carried = footer[:len(footer) - len(updated.footer)]
                body = [cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
                footer = list(updated.footer)
            return updated.with_changes(body=body, footer=footer)

        def leave_Module(self, original: Any, updated: Any) -> Any:
            body, footer = _without_emptied(original.body, updated.body, updated.footer)
            return updated.with_changes(body=body, footer=footer)

    emptied_lines: dict[Any, list[Any]] = {}  # a statement line left empty -> the comments its statements held
    done: set[Any] = set()  # the removed statements found in a line or a one-line block

    def _kept(original: Any, updated: Any) -> list[Any]:
        done.update(old for old in original.body if old in removed)
        kept = [new for old, new in zip(original.body, updated.body) if old not in removed]
        return [*kept[:-1], kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)] if kept else []

    def original_line(node: Any) -> int:
        return int(positions[node].start.line)

    def _without_emptied(old_body: Any, new_body: Any, footer: Any) -> tuple[list[Any], list[Any]]:
        """The statements left, the comments above a removed one kept above the next (or in the footer)."""
        out: list[Any] = []
        carried: list[Any] = []
        for old, new in zip(old_body, new_body):
            if old in emptied_lines:
                carried.extend(new.leading_lines)
                carried.extend(emptied_lines[old])
                comment = new.trailing_whitespace.comment
                if comment is not None:  # the removed statement's own comment stays, on a line of its own
                    carried.append(cst.EmptyLine(comment=comment))
                continue
            if carried:
                new = new.with_changes(leading_lines=[*carried, *new.leading_lines])
                carried = []
            out.append(new)
        return out, [*carried, *footer]

    code = wrapper.module.visit(Fixer()).code
    if removed - done:
        raise CannotApply("a statement to remove is in no statement line or block kgate can edit")
    return code


def _comments_in(node: Any) -> list[Any]:
    """The comments inside a libcst node, in order."""
    import libcst as cst

    found: list[Any] = []

    class Collector(cst.CSTVisitor):
        def visit_Comment(self, comment: Any) -> None:
            found.append(comment)

    node.visit(Collector())
    return found


# --------------------------------------------------------------------------- edits made on the text itself

_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
             ast.AsyncWith, ast.Try, ast.Match, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_BODIES = ("body", "orelse", "finalbody")


def text_edits(text: str, edits: list[tuple[int, int, Edit]]) -> str | None:
    """`text` with the edits made on the text itself, as `python_edits` would make them through libcst, where every
    edit allows it: a code dropped from a `kgate: ignore` comment (a comment left empty goes, and its line with it
    where nothing else is on it), a simple statement removed that is alone on its lines (its comments stay, each
    on a line of its own where it was; a block left empty gets `pass`). None where one needs libcst: a
    replacement inside a string, a statement that shares a line, a file Python cannot parse. Positions come from
    Python's own parse, never libcst's."""
    if any(edit.kind not in ("drop-suppression", "delete-statement") for _s, _e, edit in edits):
        return None
    starts = line_starts(text)
    pieces: list[tuple[int, int, str]] = []
    deleted = [(start, edit) for start, _end, edit in edits if edit.kind == "delete-statement"]
    if deleted:
        found = _statements_removed(text, starts, deleted)
        if found is None:
            return None
        pieces.extend(found)
    for start, end, edit in edits:
        if edit.kind == "drop-suppression":
            dropped = _dropped(text, starts, start, end, edit)
            if dropped is None:
                return None
            pieces.append(dropped)
    out: list[str] = []
    done = 0
    for start, end, new in sorted(pieces):
        if start < done:
            return None  # edits that overlap: libcst's to judge
        out.extend((text[done:start], new))
        done = end
    out.append(text[done:])
    written = "".join(out)
    return written if written or not text else None  # a file left empty: libcst writes its newline


def _dropped(text: str, starts: list[int], start: int, end: int, edit: Edit) -> tuple[int, int, str] | None:
    """A suppression's code removed from its comment: the whole line where the comment was all it held; None where
    libcst would write the line otherwise."""
    line_start = starts[edit.line]
    line_end = starts[edit.line + 1] if edit.line + 1 < len(starts) - 1 else len(text)
    before = text[line_start:start]
    if not edit.text and not (before + text[end:line_end]).strip():
        if line_end == len(text) and not text.endswith(("\n", "\r")):
            return None  # the last line, without a newline: libcst takes the newline before it as well
        return line_start, line_end, ""
    if not edit.text and before.rstrip().endswith(";"):
        return None  # the spaces before the comment are the `;`'s, which libcst keeps
    return start, end, edit.text


def _statements_removed(text: str, starts: list[int], deleted: list[tuple[int, Edit]]) -> list[tuple[int, int, str]] \
        | None:
    """The pieces that remove the statements starting at the edits' offsets; None unless each is a simple statement
    alone on its lines."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    where = _statements_on(tree, text, starts, {edit.line for _offset, edit in deleted})
    targets = []
    for _offset, edit in deleted:
        held = where.get((edit.line, edit.col))
        if held is None or isinstance(held[0], _COMPOUND):
            return None
        targets.append(held)
    removed = {id(stmt) for stmt, _body in targets}
    newline = _NEWLINE.search(text)
    default = newline.group() if newline else "\n"
    pieces = []
    shared: dict[int, list[ast.stmt]] = {}  # first line -> the removed statements that share it with others
    for stmt, body in targets:
        siblings = _on_its_line(stmt, body)
        if len(siblings) > 1:
            shared.setdefault(stmt.lineno, siblings)
            continue
        piece = _removal(text, starts, stmt, body, removed, default, isinstance(tree, ast.Module) and body is tree.body)
        if piece is None:
            return None
        pieces.append(piece)
    for siblings in shared.values():
        piece = _kept_on_line(text, starts, siblings, removed)
        if piece is None:
            return None
        pieces.append(piece)
    return pieces


def _on_its_line(stmt: ast.stmt, body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` that share a line with `stmt` (itself included), in order."""
    index = next(i for i, other in enumerate(body) if other is stmt)
    first, last = index, index
    while first > 0 and (body[first - 1].end_lineno or 0) >= body[first].lineno:
        first -= 1
    while last + 1 < len(body) and body[last + 1].lineno <= (body[last].end_lineno or body[last].lineno):
        last += 1
    return body[first:last + 1]


_SEMICOLON = re.compile(r"[ \t]*;[ \t]*\Z")
_LINE_TAIL = re.compile(r"[ \t]*(?:#[^\r\n]*)?(?:\r\n|\r|\n)\Z")


def _kept_on_line(text: str, starts: list[int], siblings: list[ast.stmt], removed: set[int]) \
        -> tuple[int, int, str] | None:
    """The piece that removes some of the simple statements one line holds (`a = 1; b = 2`) and keeps the others,
    as libcst writes it: each kept statement with the `;` and spaces that followed it, the last without them, then
    the line's spaces and comment. None unless the line holds nothing but those statements, each on that line
    alone, separated by `;`, with at least one kept, in a block of its own (not `if x: a; b`)."""
    line = siblings[0].lineno
    if any(s.lineno != line or (s.end_lineno or line) != line or isinstance(s, _COMPOUND) for s in siblings):
        return None
    if all(id(s) in removed for s in siblings) or line + 1 >= len(starts) - 1:
        return None
    begin, finish = starts[line], starts[line + 1]
    spans = [(begin + _char_col(text, starts, line, s.col_offset), begin + _char_col(text, starts, line,
                                                                                     s.end_col_offset or 0))
             for s in siblings]
    if text[begin:spans[0][0]].strip(" \t") or _continues(text, begin):
        return None  # the statements follow a block's header, or the line continues the one before it
    if not _LINE_TAIL.match(text, spans[-1][1], finish):
        return None  # a `;` after the last statement, or more than a comment
    separators = [text[spans[index][1]:spans[index + 1][0]] for index in range(len(siblings) - 1)]
    if not all(_SEMICOLON.match(between) for between in separators):
        return None  # a backslash, or a form feed, between two of them
    kept = [index for index, s in enumerate(siblings) if id(s) not in removed]
    out: list[str] = []
    for index in kept:
        out.append(text[spans[index][0]:spans[index][1]])
        if index != kept[-1]:  # a kept statement keeps its own `;`: the last has none
            out.append(separators[index])
    return spans[0][0], spans[-1][1], "".join(out)


def _statements_on(tree: ast.Module, text: str, starts: list[int], lines: set[int]) \
        -> dict[tuple[int, int], tuple[ast.stmt, list[ast.stmt]]]:
    """The statements that start on `lines`, by (line, character column), each with the block that holds it: found
    by descending only into the statements whose lines hold one of `lines` (a statement lies within the lines of
    every statement around it), not by walking the whole tree."""
    where: dict[tuple[int, int], tuple[ast.stmt, list[ast.stmt]]] = {}
    blocks: list[list[ast.stmt]] = [tree.body]
    while blocks:
        body = blocks.pop()
        for stmt in body:
            last = stmt.end_lineno or stmt.lineno
            if not any(stmt.lineno <= line <= last for line in lines):
                continue
            if stmt.lineno in lines:
                where[(stmt.lineno, _char_col(text, starts, stmt.lineno, stmt.col_offset))] = (stmt, body)
            blocks.extend(_blocks_of(stmt))
    return where


def _blocks_of(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The blocks of statements directly inside a statement: its bodies, its handlers' and its match cases'."""
    found = [body for field in _BODIES if isinstance(body := getattr(stmt, field, None), list)]
    found.extend(part.body for field in ("handlers", "cases") for part in getattr(stmt, field, ()))
    return found


def _removal(text: str, starts: list[int], stmt: ast.stmt, body: list[ast.stmt], removed: set[int], newline: str,
             module: bool) -> tuple[int, int, str] | None:
    """The piece that replaces the lines of `stmt` by its comments (and `pass` where it was the last statement of a
    block all of whose statements go); None unless it is alone on its lines."""
    from kgate.support.comments.python import comments

    first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
    if last + 1 >= len(starts) - 1 and not text.endswith(("\n", "\r")):
        return None  # on the file's last line, without a newline after it
    begin, finish = starts[first], starts[last + 1]
    head = text[begin:begin + _char_col(text, starts, first, stmt.col_offset)]
    index = next(i for i, other in enumerate(body) if other is stmt)
    if head.strip() or (index and (body[index - 1].end_lineno or 0) >= first) or (
            index + 1 < len(body) and body[index + 1].lineno <= last) or _continues(text, begin):
        return None  # not alone on its lines (a one-line block, statements separated by `;`, a line continued)
    tail_col = _char_col(text, starts, last, stmt.end_col_offset or 0)
    tail = text[starts[last] + tail_col:finish]
    if tail.strip() and not tail.strip().startswith("#"):
        return None  # `;` or more after it
    span = text[begin:finish]
    notes = [span[start:end] for start, end, _block in comments(span)]
    lines = [head + note + newline for note in notes]
    if not module and all(id(other) in removed for other in body) and stmt is max(
            (other for other in body), key=lambda other: other.lineno):
        lines.append(head + "pass" + newline)
    return begin, finish, "".join(lines)


def _continues(text: str, begin: int) -> bool:
    """Whether the line that starts at `begin` continues the line before it (a backslash before its newline): the
    two are one line of Python, `x = 1; \\` above a statement shares its line."""
    return _CONTINUED.search(text, 0, begin) is not None


def _char_col(text: str, starts: list[int], line: int, byte_col: int) -> int:
    """The character column of a UTF-8 byte column on a line (Python's parse counts bytes)."""
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    row = text[starts[line]:end]
    return byte_col if row.isascii() else len(row.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))
