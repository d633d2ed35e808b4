"""Whole-file writes: readers see the old file or the new one, never a part.

Every file kgate writes (the baseline, reports written with -o, cache records,
run records) goes through `atomic_write`. Kept apart from the compile side so
that the commit hook's lint path can use it without loading that.
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, follow: bool = False) -> None:
    """Write bytes so that readers see the old file or the new one, never a part.

    The file gets the permissions a plain `open(path, "w")` would give it (an existing file keeps its
    own): mkstemp's private 0600 would make a report or a baseline unreadable to the rest of a team.

    `follow`: a file the user named (a report's `-o`, the baseline, the capture file), written as `open()`
    would write it: through a symlink to its target (the link stays), and as a stream where the path is not
    a regular file (`-o /dev/stdout`, a named pipe, a terminal), which cannot be replaced. Cache records
    never follow: a link planted in a cache must not send a write elsewhere.
    """
    if follow:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            with open(path, "wb") as stream:
                stream.write(data)
            return
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


@functools.cache
def _umask() -> int:
    """The process's umask, read without changing it (Linux reports it), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
