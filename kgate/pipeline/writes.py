"""Writing the files a fix or a pin changed: never out of the project, never a second name of a file, a file
with other hard links, a read-only file, one changed since kgate read it or no longer a regular file, and never at
the same time as another kgate writes it."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kgate.report.paths import Shown, as_named
from kgate.support import filestat


class Change(NamedTuple):
    path: str  # where to write
    before: bytes
    after: bytes


def write(changes: dict[str, Change], shown: Shown = as_named, root: Path | None = None) -> list[tuple[str, str]]:
    """Write the changes; (path, why) for each file left as it was: a file (or a folder on its way) that links
    out of the project `root`, a second name of a file already written (a link inside the project, a hard
    link), a file with other hard links, a read-only file, or one changed since it was read (or no longer a regular
    file)."""
    skipped: list[tuple[str, str]] = []
    written: set[object] = set()  # the real paths and (device, inode) of the files read so far
    top = (os.path.abspath(root), os.path.realpath(root)) if root is not None else None
    ordered = sorted(changes.items())
    try:
        for at in range(0, len(ordered), _BATCH):
            skipped.extend(_write_batch(ordered[at:at + _BATCH], shown, top, written))
    finally:
        if written:  # what the run took of its files before no longer describes them (the lint after a fix)
            filestat.wrote()
    return skipped


_BATCH = 64  # files whose locks are held, and whose writes are flushed to the disk, together


def _write_batch(batch: list[tuple[str, Change]], shown: Shown, top: tuple[str, str] | None,
                 written: set[object]) -> list[tuple[str, str]]:
    """Some of the changes, each written whole or not at all, their locks held until all are in place: the new
    bytes go to temporary files first, are flushed to the disk at the same time, then moved in place."""
    from kgate.core.errors import ConfigError
    from kgate.support.atomicio import Staged, commit, stage

    skipped: list[tuple[str, str]] = []
    staged: list[Staged] = []
    locked: set[tuple[int, int]] = set()  # (device, inode) of the files this batch holds the lock of
    with contextlib.ExitStack() as held:
        try:
            for rel, change in batch:
                held.enter_context(_locked(change.path, locked))
                why = _unwritable(change, top, written)
                if why:
                    skipped.append((rel, why))
                    continue
                try:
                    staged.append(stage(Path(change.path), change.after, follow=True))
                except OSError as exc:
                    raise ConfigError(f"cannot write {shown(rel)}: {exc.strerror or exc}") from None
            try:
                commit(staged)
            except OSError as exc:
                raise ConfigError(f"cannot write: {exc.strerror or exc}") from None
        except BaseException:
            for _path, tmp in staged:
                if tmp and os.path.exists(tmp):
                    os.unlink(tmp)
            raise
    return skipped


@contextlib.contextmanager
def _locked(path: str, locked: set[tuple[int, int]]) -> Iterator[None]:
    """The file's lock held, so that another kgate writing it at the same time waits: it then finds the file
    changed since it read it, and leaves it (without the lock, both could find it unchanged and the second write
    would undo the first). `locked`: the files whose locks this run holds already, by (device, inode); another
    name of one of them (a link) is not locked again: a lock taken through a second descriptor would wait for the
    first, in this very process, for ever."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield  # the check that follows says why the file cannot be written
        return
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) in locked:
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        locked.add((info.st_dev, info.st_ino))
        yield
    finally:
        os.close(fd)


def _unwritable(change: Change, top: tuple[str, str] | None, written: set[object]) -> str:
    """Why a change must not be written ("" when it may)."""
    real = os.path.realpath(change.path)
    named = os.path.abspath(change.path)
    if top is not None and any(_inside(named, t) for t in top) and not _inside(real, top[1]):
        return f"it is a link to {real}, outside the project: not written"
    try:
        info, now = _read_again(real)
    except OSError as exc:
        return f"cannot read it again: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return "it is no longer a regular file: not written"
    if real in written or (info.st_dev, info.st_ino) in written:
        return "another name of a file already written (a link): written once"
    if info.st_nlink > 1:
        return f"it has {info.st_nlink - 1} other hard link(s), which a write would leave behind: not written"
    if not info.st_mode & 0o222 or not os.access(real, os.W_OK):
        return "it is read-only: not written"
    if now != change.before:
        return "it changed since kgate read it: not written"
    written.update((real, (info.st_dev, info.st_ino)))
    return ""


def _read_again(path: str) -> tuple[os.stat_result, bytes]:
    """The state and the bytes of a file about to be written; nothing read from one that is no longer a regular file
    (a FIFO put in its place would wait for a writer for ever)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return info, b""
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return info, b"".join(chunks)
    finally:
        os.close(fd)


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)
