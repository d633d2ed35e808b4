"""Whole SASS listings of cached cubins, for `kgate diff`: `nvdisasm -g -c -hex`, kept in the cache.

A listing is a record of the facts cache keyed by the cubin's content, nvdisasm's version and the code of the facts
readers (a record holds the listing as parsed), so a cubin both revisions share (the same source, the same
toolchain) is disassembled once per kgate; the listing of a cubin that changed is made once per change (about half
a second). nvdisasm, rather than the
`cuobjdump -sass` the rules read, because it also prints the line table: a differing instruction is shown
with the source line it came from.
"""

from __future__ import annotations

import functools
from pathlib import Path

from kgate.compile.cache import Cache, digest, file_hash
from kgate.facts.listing import Instruction, parse_listing
from kgate.facts.model import facts_schema
from kgate.support import tools

Listing = dict[str, tuple[Instruction, ...]]


@functools.lru_cache(maxsize=1)
def _nvdisasm() -> tuple[str, str]:
    found = tools.require_tool("nvdisasm")
    return str(found), tools.tool_version(str(found))


def cubin_listing(cache: Cache, cubin: Path, recorded: str | None) -> Listing | None:
    """The functions of a cached cubin, or None when the cubin is not the one its record was written with."""
    actual = file_hash(cubin)
    if actual is None or (recorded is not None and actual != recorded):
        return None
    tool, version = _nvdisasm()
    key = digest("listing", version, actual, facts_schema())  # the reader's code too: records hold what it read
    stored = cache.get("listing", key, _shape)
    if stored is not None:
        return {name: tuple(Instruction.from_json(i) for i in instrs) for name, instrs in stored.items()}
    text = tools.run([tool, "-g", "-c", "-hex", str(cubin)], timeout=300).stdout
    functions = parse_listing(text)
    cache.put("listing", key, {name: [i.to_json() for i in instrs] for name, instrs in functions.items()})
    return functions


def _shape(value: object) -> None:
    if not isinstance(value, dict):
        raise TypeError("a listing record is an object")
    for instrs in value.values():
        for item in instrs:
            Instruction.from_json(item)
