"""JSON documents kgate reads from files, decoded one way: UTF-8 only, and every way it fails is one error.

`json.loads` given bytes guesses UTF-16 and UTF-32 from them, and its scanner
recurses once per nested array or object, so a file of deeply nested brackets
raises RecursionError, which is not a ValueError and escaped the handlers of
every reader. Every JSON file kgate reads, whether a user named it (shard
results, compile_commands.json) or kgate wrote it earlier (cache records, run
records, the timings file), is decoded by `loads`: a reader handles
`NotJSON` (a ValueError) and says what is wrong in one line, or treats a
cache record as missing. A record kgate writes for itself also carries a hash
of its content (`content_hash`), compared when it is read back.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from kgate.support.hashing import sha256

# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


class NotJSON(ValueError):
    """Why a file is not a JSON document kgate reads, as a few words ("not valid UTF-8 (...)", "not JSON (...)")."""


def loads(data: bytes | str) -> Any:
    """The value of a UTF-8 JSON document (a UTF-8 byte order mark is allowed), or NotJSON."""
    if isinstance(data, bytes):
        data = _text(data)
    elif data.startswith("\ufeff"):
        data = data[1:]
    try:
        value = json.loads(data)
    except RecursionError:
        raise NotJSON("not JSON (nested too deeply)") from None
    except ValueError as exc:  # JSONDecodeError, or a number too long for int()
        raise NotJSON(f"not JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(data) and not _all_unicode(value):
        raise NotJSON("not JSON kgate reads (a string escapes a lone surrogate, \\ud800 to \\udfff, which is no "
                      "character: no UTF-8 text can hold it)")
    return value


# A `\u` escape of a surrogate: json pairs two into one character, and leaves a lone one in the string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _all_unicode(value: Any) -> bool:
    """Whether every string of a decoded document (keys too) is text UTF-8 can hold: no lone surrogate."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not _encodes(item):
                return False
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def _encodes(text: str) -> bool:
    """Whether UTF-8 holds the text, or the bytes a name that is not UTF-8 stood for (U+DC80 to U+DCFF: how Python
    decodes a file name's undecodable bytes, and how kgate's own documents carry such a name)."""
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def _text(data: bytes) -> str:
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise NotJSON(f"not valid UTF-8 (it is {name}, by its byte order mark): save it as UTF-8")
    nul = data.find(b"\0")
    if nul >= 0:  # JSON text never holds a NUL byte; UTF-16 without a byte order mark does
        raise NotJSON(f"not valid UTF-8 (a NUL byte at byte {nul}: UTF-16 or UTF-32?): save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotJSON(f"not valid UTF-8 (byte {exc.start})") from None



def content_hash(value: Any) -> str:
    """The hash a record kgate writes carries of its own content (its JSON with sorted keys and no spaces): damage
    or an edit that keeps the JSON whole still shows when the record is read back. NotJSON where a value read back
    is nested too deeply to write again."""
    try:
        blob = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except RecursionError:
        raise NotJSON("not JSON (nested too deeply)") from None
    return sha256(blob.encode()).hexdigest()
