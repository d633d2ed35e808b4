"""Python files changed through libcst, which gives back every comment, blank line and space around an edit."""

from __future__ import annotations

import re
from typing import Any

from kgate.core.fix import Edit

_NEWLINE = re.compile(r"\r\n|\r|\n")


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
