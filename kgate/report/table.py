"""Plain-text tables for the terminal: a header row, a rule, columns padded to fit, every cell escaped."""

from __future__ import annotations

from collections.abc import Sequence

from kgate.report.escape import terminal


def aligned(rows: Sequence[Sequence[str]], numeric: set[int]) -> list[str]:
    """The rows (the first is the header) as lines; `numeric` columns are right-aligned below the header."""
    rows = [[terminal(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        cells = [cell.rjust(widths[i]) if i in numeric and n else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out
