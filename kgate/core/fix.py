"""Fixes: what a rule attaches to a finding when the change that removes it is mechanical.

A fix is data, never an action: a message saying what it changes, whether
it is safe to apply without reading it (`safe`) or changes what the code
does and needs `--unsafe-fixes` (`unsafe`), and its edits. `kgate lint
--fix` (kgate.pipeline.fix) applies them, one fixer for every rule.

An edit names its place by line and character column, as findings do, so a
rule writes it from the positions it already has. Three kinds:

- `replace`: the text from (line, col) to (end_line, end_col) becomes
  `text`. In a Python file the span must lie inside one string or comment
  token, and libcst rewrites that token, so nothing else moves.
- `delete-statement`: the Python statement that starts at (line, col) goes,
  as libcst removes it (a block left empty gets `pass`): on the text, where
  it is alone on its lines (`kgate.pipeline.fix_python.text_edits`).
- `drop-suppression`: the code `text` leaves the `kgate: ignore` comment
  whose marker starts at (line, col); the whole comment goes when it named
  nothing else. The fixer reads the comment to write the change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Applicability(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


EDIT_KINDS = ("replace", "delete-statement", "drop-suppression")


@dataclass(frozen=True, order=True)
class Edit:
    line: int  # 1-based
    col: int  # 0-based, in characters
    end_line: int
    end_col: int
    text: str = ""
    kind: str = "replace"

    @classmethod
    def insert(cls, line: int, col: int, text: str) -> Edit:
        return cls(line, col, line, col, text)


@dataclass(frozen=True)
class Fix:
    message: str  # what the fix changes, in a sentence
    applicability: Applicability
    edits: tuple[Edit, ...]

    @property
    def safe(self) -> bool:
        return self.applicability is Applicability.SAFE
