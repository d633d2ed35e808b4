"""The cache folder: kgate's own, marked as such, and never a folder of the project's.

kgate marks its cache folder ignored with a `.gitignore` of `*` and tags it
with a `CACHEDIR.TAG` (https://bford.info/cachedir/, so that backup tools
skip it). Both would do harm in a folder that holds anything else: a
`.gitignore` of `*` in a source folder hides every new file there from git.
So a `cache-dir` that names a folder holding files kgate did not write is an
error, said before anything is written into it.
"""

from __future__ import annotations

import os
from pathlib import Path

from kgate.core.errors import ConfigError

TAG = "CACHEDIR.TAG"
_TAG_TEXT = b"Signature: 8a477f597d28d172789f06886806bc55\n# This folder is kgate's cache (cache-dir): safe to delete.\n"
_GITIGNORE = b"# Created by kgate: the cache is never committed.\n*\n"
# What kgate itself keeps at the top of its cache folder.
_OWN = {"v1", "triton", ".gitignore", TAG, "shard-timings.json", "capture.lock"}


def claim(directory: Path, configured: str, where: str | None) -> None:
    """Make `directory` kgate's cache folder (created, marked ignored and tagged), or raise ConfigError when it
    holds files kgate did not write. `configured` is the `cache-dir` as written, `where` the configuration file.
    A folder that cannot be made is left to the caller (a cache that cannot be used costs speed only)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        names = []
    except OSError:
        return
    strangers = sorted(n for n in names if n not in _OWN and not (n.startswith(".") and n.endswith(".tmp")))
    if strangers and not _tagged(directory):
        raise ConfigError(f"{configured!r} holds files kgate did not write ({', '.join(strangers[:3])}): the cache "
                          f"needs a folder of its own (kgate marks it ignored with a .gitignore of `*`)",
                          path=f"{where}: cache-dir" if where else "cache-dir")
    from kgate.support.atomicio import atomic_write

    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in ((".gitignore", _GITIGNORE), (TAG, _TAG_TEXT)):
            if not (directory / name).exists():
                atomic_write(directory / name, data)
    except OSError:
        return


def _tagged(directory: Path) -> bool:
    """Whether kgate tagged this folder as its cache (then what is in it is kgate's to manage)."""
    from kgate.support.atomicio import read_cached

    data = read_cached(directory / TAG, 1 << 16)
    return data is not None and data.startswith(_TAG_TEXT)
