"""SASS of a cubin already in the cache, in a compile worker: `kgate audit` after `kgate check`.

The check kept each variant's cubin (`v1/artifacts/<key>/kernel.cubin`) but
disassembled only the kernels whose rules read SASS; the audit reads it for
every kernel. Disassembling the cached cubin gives the same SASS a compile
would, for half a second of cuobjdump instead of a compile.
"""

from __future__ import annotations

from pathlib import Path

from kgate.compile.payloads import SassRequest
from kgate.compile.triton_backend import disassemble
from kgate.compile.units import store_text


def disassemble_task(payload: SassRequest) -> str:
    """Keep the SASS listing of the cubin beside it; its content hash (the `sass` artifact of the unit's record)."""
    cubin = Path(payload["cubin"])
    return store_text(cubin.parent, "sass", disassemble(cubin))
