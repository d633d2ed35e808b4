"""Numbers read from compiler output.

A compiler writes counts as a few ASCII digits. Python's `int()` also takes
thousands of digits (and stops with a ValueError past 4300) and other
scripts' digits, which a regular expression's `\\d` matches: output like that
is not the compiler's, and saying so is a ParseError, not a crash.
"""

from __future__ import annotations

from kgate.core.errors import ParseError

MAX_DIGITS = 18  # fits in 64 bits: no register count, byte size or line number is longer


def count(digits: str) -> int:
    """A non-negative integer written by a compiler; ParseError for anything else."""
    if not (digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS):
        raise ParseError(f"not a number a compiler writes: {digits[:24]!r}")
    return int(digits)
