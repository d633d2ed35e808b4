"""Source files as the source rules see them: bytes first, text, lines and a Python tree on demand.

A rule that only needs a byte search never pays for decoding or parsing;
the first rule that asks for `tree` parses the file once for all rules.
Positions handed to rules are 1-based lines and 1-based character columns
(Python's `ast` counts columns in UTF-8 bytes: `span` converts them).
"""

from __future__ import annotations

import ast
import codecs
import re
from typing import Any, TypedDict

# PEP 263: a coding declaration on one of the first two lines.
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_NEWLINE = re.compile(r"\r\n|\r|\n")


class Span(TypedDict):
    """Where a finding is, as `Report` keywords: `Report(message, **source.span(node))`."""

    line: int
    col: int
    end_line: int | None
    end_col: int | None


class UnreadableSource(Exception):
    """A file that cannot be read, decoded or parsed; the engine reports it as KG004."""

    def __init__(self, message: str, line: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col


class SourceFile:
    """One file under lint. `data` is always there; the rest is computed on first use."""

    __slots__ = ("_error", "_lines", "_text", "_tree", "data", "derived", "path", "rel")

    def __init__(self, path: str, rel: str, data: bytes) -> None:
        self.path = path
        self.rel = rel  # project-relative, forward slashes: what findings show
        self.data = data
        self._text: str | None = None
        self._lines: list[str] | None = None
        self._tree: ast.Module | None = None
        self._error: UnreadableSource | None = None
        # What rules compute from the file and share (e.g. kgate.collect.pysource.info): computed once.
        self.derived: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    @property
    def is_python(self) -> bool:
        return self.rel.endswith((".py", ".pyi"))

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = decode(self.data, python=self.is_python)
        return self._text

    @property
    def lines(self) -> list[str]:
        """Lines without their end-of-line characters, numbered as Python numbers them (\\n, \\r\\n, \\r)."""
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    def line_text(self, line: int) -> str:
        lines = self.lines
        return lines[line - 1] if 0 < line <= len(lines) else ""

    @property
    def tree(self) -> ast.Module:
        """The Python syntax tree; raises UnreadableSource (once per file) if it does not parse."""
        if self._tree is None:
            if self._error is not None:
                raise self._error
            try:
                self._tree = parse_python(self.data, self.rel)
            except UnreadableSource as exc:
                self._error = exc
                raise
        return self._tree

    def char_col(self, line: int, byte_col: int) -> int:
        """0-based character column of a 0-based UTF-8 byte column on a line."""
        if byte_col <= 0:
            return 0
        text = self.line_text(line)
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> Span:
        """Report position keywords (line, col, end_line, end_col; 1-based) of an ast node."""
        line = getattr(node, "lineno", 1)
        col = self.char_col(line, getattr(node, "col_offset", 0)) + 1
        end_line = getattr(node, "end_lineno", None)
        end_col = None
        if end_line is not None and getattr(node, "end_col_offset", None) is not None:
            end_col = self.char_col(end_line, node.end_col_offset) + 1  # type: ignore[attr-defined]
        return {"line": line, "col": col, "end_line": end_line, "end_col": end_col}


def decode(data: bytes, *, python: bool) -> str:
    """Text of a source file: UTF-8 (with or without BOM), or a Python file's declared encoding."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = exc
    if python:
        head = b"\n".join(data.split(b"\n", 2)[:2])
        match = _CODING.search(head)
        if match:
            try:
                return data.decode(match.group(1).decode("ascii"))
            except (LookupError, UnicodeDecodeError):
                pass
    line = data.count(b"\n", 0, error.start) + 1
    raise UnreadableSource(f"not valid UTF-8 (byte {error.start})", line=line, col=1)


def split_lines(text: str) -> list[str]:
    """The lines of a text as Python numbers them (\\n, \\r\\n, \\r end one), without their ends: the plain split
    where no carriage return stands (a few times faster than the expression)."""
    return text.split("\n") if "\r" not in text else _NEWLINE.split(text)


# Python's syntax trees take about 200 bytes of memory per byte of dense source (measured: a 4 MB table of
# constants, 0.8 GB and 3.5 s; 50 MB would need 10 GB). Larger texts are reported, not parsed: no kernel
# module is that big, a generated data file is.
MAX_PARSE_BYTES = 4 * 1024 * 1024


def parse_python(data: bytes, filename: str) -> ast.Module:
    if len(data) > MAX_PARSE_BYTES:
        return _raise(f"too large to parse ({len(data) / 2**20:.1f} MB; kgate parses up to "
                      f"{MAX_PARSE_BYTES >> 20} MB of Python): exclude it if it is generated", 1, 0)
    nul = data.find(b"\0")
    if nul >= 0:  # Python refuses these without a line: say where the first one is
        return _raise(f"cannot parse: a null byte (byte {nul})", data.count(b"\n", 0, nul) + 1, 1)
    try:
        return ast.parse(data, filename=filename)
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        if message.startswith("(unicode error)"):
            return _raise(f"not valid UTF-8 and no coding declaration: {message[16:]}", exc.lineno or 1, 1)
        return _raise(f"syntax error: {message}", exc.lineno or 1, exc.offset or 0)
    except (ValueError, UnicodeDecodeError) as exc:  # null bytes, an undecodable file
        return _raise(f"cannot parse: {exc}", 1, 0)
    except (RecursionError, MemoryError):
        return _raise("cannot parse: nested too deeply", 1, 0)


def try_parse(data: bytes) -> ast.Module | None:
    """The syntax tree of a Python file, or None when Python cannot parse it (a syntax error, null bytes,
    nesting too deep for the parser): for readers that fall back to something else; the linter reports it."""
    try:
        return parse_python(data, "<unknown>")
    except UnreadableSource:
        return None


def _raise(message: str, line: int, col: int) -> ast.Module:
    raise UnreadableSource(message, line=line, col=col)
