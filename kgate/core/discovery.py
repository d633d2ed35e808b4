"""Which configuration file a run uses: the nearest `kgate.toml`, or `pyproject.toml` with a `[tool.kgate]`
table, from a folder upwards.

One answer for the full run (`kgate.core.config.load_config`) and for the replay of an unchanged one
(`kgate.pipeline.fastpath`), which runs before anything else in the process: so this module loads only the
standard library's cheapest parts, and parses TOML only where the bytes leave the answer open.
"""

from __future__ import annotations

import os
import re
import sys

# A `[tool.kgate]` or `[tool.kgate.x]` header at the start of a line: the table is there, or the file is not valid
# TOML, which the run then reports rather than skip (the one exception, a header inside a multi-line string, is
# not worth a parse on every replay).
_TABLE_HEADER = re.compile(rb"^[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*kgate[ \t]*[.\]]", re.MULTILINE)


def find_config(start: str | os.PathLike[str]) -> str | None:
    """The configuration file that applies in `start` (symbolic links resolved), or None where there is none."""
    folder = os.path.realpath(start)
    while True:
        candidate = os.path.join(folder, "kgate.toml")
        if os.path.isfile(candidate):
            return candidate
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject) and configures_kgate(pyproject):
            return pyproject
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def configures_kgate(pyproject: str) -> bool:
    """Whether a pyproject.toml is kgate's configuration: it has a `tool.kgate` key. One that mentions kgate but
    cannot be read or parsed counts, so that the run reports it rather than skip it; one that never mentions
    kgate does not, whatever else is wrong with it."""
    from kgate.support.atomicio import read_input

    try:
        data = read_input(pyproject)
    except OSError:
        return True
    if b"kgate" not in data:
        return False
    if _TABLE_HEADER.search(data):
        return True
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    try:
        table = tomllib.loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):  # not UTF-8 (UnicodeDecodeError is a ValueError), not TOML
        return True
    tool = table.get("tool")
    return isinstance(tool, dict) and "kgate" in tool
