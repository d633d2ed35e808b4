"""SASS of a cubin already in the cache, in a compile worker: `kgate audit` after `kgate check`.

The check kept each variant's cubin (`v1/artifacts/<key>/kernel.cubin`) but
disassembled only the kernels whose rules read SASS; the audit reads it for
every kernel. Disassembling the cached cubin gives the same SASS a compile
would, for half a second of cuobjdump instead of a compile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgate.compile.cache import write_artifact
from kgate.compile.triton_backend import disassemble
from kgate.facts.sass import parse_sass


def disassemble_task(payload: dict[str, Any]) -> dict[str, int]:
    """The opcode counts of the entry's SASS (the `sass` field of its facts); the listing is kept beside the cubin."""
    cubin = Path(payload["cubin"])
    text = disassemble(cubin)
    write_artifact(cubin.with_name("kernel.sass"), text.encode())
    functions = parse_sass(text)
    ops = functions.get(payload["entry"]) or next(iter(functions.values()), None)
    return dict(ops.opcodes) if ops else {}
