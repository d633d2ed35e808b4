"""A Python module's top-level blocks (`kgate.collect.pysparse`), each parsed once per lint run and shared by every
reading of the module that needs it.

A module is read in part, and in different parts by different readings: the definitions that mention what the
rules look for (`kgate.collect.pysource.info`), the definitions around the calls of a launcher
(`kgate.collect.pycallers`), the launchers of a kernel (`kgate.collect.pylaunch`), its top level with the
definitions' signatures (`kgate.collect.pynames`). Each part is a set of top-level blocks, whole or reduced to
their signature, laid out at their own lines and columns; parsing a block on its own gives the statements that
parsing it among the others gives. So each block, in each of the two forms, is parsed once per run and module text
(the module under lint and the same module read for another one share it), and a reading's tree is the list of its
blocks' statements: readings of one module share their syntax nodes, which nothing modifies.

Where a block does not parse on its own (the textual split misread a statement), the reading's text is parsed
whole, as it would have been without the blocks.

The split of every module is kept for the run; the parsed blocks of a module that the readings of the project read
for other files' verdicts (`keep`) are too, and those of the file under lint until the next file's lint begins (most
of a file's parts are read by its own rules only: keeping them all would keep every tree of the run).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left

from kgate.collect import depends, pysparse
from kgate.collect.pysparse import Block
from kgate.collect.source import SourceFile, UnreadableSource, parse_python

_WHOLE, _SIGNATURE, _CLAUSES = 0, 1, 2  # a block whole, its signature, a statement whole with its clauses' blocks
_CLAUSE = re.compile(r"(?:elif|else|except|finally)\b")


class Parts:
    """One module text: its split into top-level blocks (None: it cannot be split with confidence) and the statements
    of each block parsed so far."""

    __slots__ = ("_continued", "_parsed", "_run", "blocks", "lines")

    def __init__(self, lines: list[str], blocks: list[Block] | None, run: Parts | None = None) -> None:
        self.lines = lines
        self.blocks = blocks
        self._parsed: dict[tuple[int, int], list[ast.stmt] | None] = {}  # (first line, form) -> statements
        self._continued: dict[int, tuple[Block, ...]] = {}  # first line -> the blocks that continue the statement
        # The parts the run keeps of the same text, where these are the file under lint's: what the readings parsed
        # is taken from them, and what the file's own lint parses besides is not added to them (`of`).
        self._run = run

    def parse(self, whole: list[Block], signatures: list[Block] | None, filename: str) -> ast.Module:
        """The tree of `pysparse.excerpt(lines, whole, signatures)`; raises UnreadableSource as parsing that text
        would."""
        chosen = {block[0]: (block, _SIGNATURE) for block in signatures or () if block[2] is not None}
        chosen.update((block[0], (block, _WHOLE)) for block in whole)
        body: list[ast.stmt] = []
        order = sorted(chosen)
        at = 0
        while at < len(order):
            block, form = chosen[order[at]]
            clauses = self._clauses(block) if form == _WHOLE else ()
            if clauses and all(chosen.get(c[0]) == (c, _WHOLE) for c in clauses):
                # A statement the split cut at its clauses (`try:` and `except ...:` at column 0), every part read
                # whole: parsed as one (each part alone does not parse, or parses as another statement).
                statements = self._statements((block[0], clauses[-1][1], None), _CLAUSES)
                at += 1 + len(clauses)
            else:
                statements = self._statements(block, form)
                at += 1
            if statements is None:
                text = pysparse.excerpt(self.lines, whole, signatures)
                return parse_python(text.encode("utf-8"), filename)
            body.extend(statements)
        return ast.Module(body=body, type_ignores=[])

    def _statements(self, block: Block, form: int) -> list[ast.stmt] | None:
        key = (block[0], form)
        if key not in self._parsed:
            if self._run is not None and key in self._run._parsed:
                return self._run._parsed[key]
            self._parsed[key] = _parse_block(self.lines, block, form if form != _CLAUSES else _WHOLE)
        return self._parsed[key]

    def _clauses(self, block: Block) -> tuple[Block, ...]:
        """The blocks after a statement's first that continue it (`elif`, `else`, `except`, `finally` at column 0);
        empty for a definition, or a statement the next block does not continue."""
        if block[2] is not None or self.blocks is None:
            return ()
        found = self._continued.get(block[0])
        if found is None:
            at = bisect_left(self.blocks, block[0], key=_first)
            end = at + 1
            while end < len(self.blocks) and self.blocks[end][2] is None and \
                    _CLAUSE.match(self.lines[self.blocks[end][0]]):
                end += 1
            found = self._continued[block[0]] = tuple(self.blocks[at + 1:end]) \
                if at < len(self.blocks) and self.blocks[at] == block else ()
        return found


def _parse_block(lines: list[str], block: Block, form: int) -> list[ast.stmt] | None:
    """One block's statements at its own lines, parsed on its own: whole, or its signature with `pass` for a body."""
    first, end, header_end = block
    if form == _SIGNATURE and header_end is not None:
        kept = lines[first:header_end + 1] + (["    pass"] if header_end + 1 < end else [])
    else:
        kept = lines[first:end]
    try:
        return parse_python(("\n" * first + "\n".join(kept)).encode("utf-8"), "<block>").body
    except UnreadableSource:
        return None


def of(source: SourceFile) -> Parts:
    """The parts of a source file's module text: kept for the run where the file is one the readings of the project
    read for many files (`keep`), else while the same file is under lint. The file under lint whose text the readings
    read too shares what they parsed of it, but what its own lint parses besides (most of a kernel module: its
    kernels whole) is dropped when its lint ends, as any other file's is."""
    key = source.derived.get(_KEY)
    if key is None:
        key = source.derived[_KEY] = _key(source.data)
    kept = bool(source.derived.get(_KEPT))
    run = _RUN.get(key) if not kept else None
    if run is not None:
        found = _FILE.get(key)
        if found is None or found._run is not run:
            found = _FILE[key] = Parts(run.lines, run.blocks, run)
        return found
    return _parts(key, source.lines, kept=kept)


def keep(source: SourceFile) -> None:
    """Mark a module read beyond the file under lint, for the readings of other files: its parts are kept for the
    run, with what the lint of that file parsed of them."""
    source.derived[_KEPT] = True


def of_text(data: bytes, lines: list[str]) -> Parts:
    """The parts of a module (`lines`: its text split as `SourceFile.lines` splits it), as far as the run or the
    file under lint has them parsed."""
    return _parts(_key(data), lines, kept=False)


def _parts(key: str, lines: list[str], kept: bool) -> Parts:
    found = _RUN.get(key)
    if found is None and kept:
        found = _RUN[key] = _FILE.pop(key) if key in _FILE else _new(key, lines)
    elif found is None:
        found = _FILE.get(key)
        if found is None:
            found = _FILE[key] = _new(key, lines)
    return found


def _new(key: str, lines: list[str]) -> Parts:
    if key not in _SPLITS:
        _SPLITS[key] = pysparse.split(lines, remember=False)
    return Parts(lines, _SPLITS[key])


def _key(data: bytes) -> str:
    return depends.digest(data)


_KEY = "pyparts.key"  # `SourceFile.derived`: a digest of the file's bytes
_KEPT = "pyparts.kept"  # `SourceFile.derived`: the file's parts are kept for the run

# By a digest of the module's bytes. The split of every module the run met. The parts of the modules the readings
# of the project read beyond the file under lint (`keep`), read again for other files, for the run; of the others,
# mostly read by the file's own rules, while the file is under lint.
_SPLITS: dict[str, list[Block] | None] = depends.per_run({})
_RUN: dict[str, Parts] = depends.per_run({}, trees=True)
_FILE: dict[str, Parts] = depends.per_file({})


def _first(block: Block) -> int:
    return block[0]
