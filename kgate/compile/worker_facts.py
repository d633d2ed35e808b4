"""A unit read in the compile worker that compiled it, and the SASS the run's plan wants of it disassembled there.

Where the run gave an `analyse` (`kgate.compile.compilation.Analyse`), the facts stage reads the unit in its worker,
right after its compile and while other units compile, says which symbols' SASS it lacks, and they are
disassembled from the cubin just written. Whatever goes wrong here is left to the main process, which reads the
unit as it would have without this and meets the same problem there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kgate.compile.cache import CacheWriteError
from kgate.compile.units import Compiled, store_text

# The SASS of the symbols asked for, and the symbols its listing holds (None: every function of the cubin).
Disassemble = Callable[[list[str]], "tuple[str, tuple[str, ...] | None]"]


def analysed(payload: Mapping[str, Any], unit: Compiled, disassemble: Disassemble) -> Compiled:
    """The unit with the SASS the facts stage lacks of it (its hash among the unit's), or the unit as it is."""
    analyse = payload.get("analyse")
    if analyse is None:
        return unit
    needs = analyse()
    try:
        lacking = needs(unit)
        if not lacking:
            return unit
        text, symbols = disassemble(sorted(lacking))
        done = replace(unit, hashes={**unit.hashes, "sass": store_text(unit.folder, "sass", text)}, sass_symbols=symbols)
        needs(done)  # its facts, with the SASS: kept in the cache
    except CacheWriteError:
        raise
    except Exception:  # noqa: BLE001 - the main process reads the unit again and meets the same problem there
        return unit
    return done
