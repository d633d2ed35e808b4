"""Text that came from a file name or a file: made valid Unicode, or turned back into its bytes.

A file name need not be UTF-8: Python reads a name such as `b"x\\xff.cu"` as text holding a lone surrogate
(`"x\\udcff.cu"`, the "surrogateescape" error handler), which no UTF-8 output can carry. `representable`
writes such a character as the escape of the byte it stands for (`x\\xff.cu`); `as_bytes` gives the bytes
back, for a hash or a URI. The escaping for each medium kgate writes is `kgate.report.escape`'s.
"""

from __future__ import annotations

import re

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_sequence(char: str) -> str:
    """One character as Python would write it escaped: `\\n`, `\\x1b`, `\\u202e`; a lone surrogate that stands for a
    byte of a name that is not UTF-8 (surrogateescape) as that byte, `\\xff`."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # the byte it stands for (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def representable(text: str) -> str:
    """`text` as valid Unicode, which UTF-8 can encode: a lone surrogate written as an escape (`\\xff` for the
    byte 0xff of a name that is not UTF-8), everything else as it is."""
    return _SURROGATE.sub(lambda m: escape_sequence(m.group()), text)


def as_bytes(text: str) -> bytes:
    """The bytes `text` stands for: its UTF-8, with the original bytes of a name that is not UTF-8 (for a hash or a
    URI, where the name itself counts rather than how it is shown)."""
    return text.encode("utf-8", "surrogateescape")
