"""Whole-file writes and reads: readers see the old file or the new one, never a part; a read never blocks.

Every file kgate writes (the baseline, reports written with -o, cache records,
run records) goes through `atomic_write` (files of the cache through
`write_cached`, which also replaces a folder standing at the name). Every file kgate reads whole because a
user named or configured it (the configuration, the baseline, the capture file,
compile_commands.json and the options files it names, shard results, the
timings file) goes through `read_input`, which refuses what is not a regular
file (a named pipe would block for ever, /dev/zero never ends) and bounds the
size. Every file kgate reads back from its own cache (records of every kind,
compile artifacts, the parse index, run records) goes through `read_cached`:
the same reader, which also refuses a symbolic link (kgate never writes one
there, so one is a planted or damaged record). Kept apart from the compile
side so that the commit hook's lint path and the replay of an unchanged run
can use it without loading that.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import Path

MB = 1 << 20
# The most kgate reads of one input file: far above any real configuration, baseline or shard result, far below
# what would exhaust a CI runner's memory.
INPUT_LIMIT = 256 * MB
# The most kgate reads of one file of its own cache. Records are kilobytes; the largest (a lint record of a
# large repository, a run record holding a long report, a cubin) stay far below this.
CACHE_LIMIT = 256 * MB

_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class NotRegularFile(OSError):
    """An input that is not a regular file (its `strerror` says what it is instead)."""


class InputTooLarge(OSError):
    """An input larger than kgate reads."""


def read_input(path: Path | str, limit: int = INPUT_LIMIT, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else an OSError whose `strerror` says why.

    The file is opened without blocking and checked on the opened descriptor (no window between a check and the
    read): a named pipe, a device or a socket raises `NotRegularFile`, a folder `IsADirectoryError`, a file over
    the limit `InputTooLarge`; without `follow_symlinks`, a symbolic link (the last part of the path) raises
    `NotRegularFile` too, unopened. Callers keep handling OSError as they did: the reason reads as one line.
    """
    return read_input_stat(path, limit, follow_symlinks=follow_symlinks)[0]


def read_input_stat(path: Path | str, limit: int = INPUT_LIMIT, *,
                    follow_symlinks: bool = True) -> tuple[bytes, os.stat_result]:
    """`read_input`, with the status of the file that was read (taken on the descriptor it was read from)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise NotRegularFile(errno.ELOOP, "not a regular file (a symbolic link)", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind})", str(path))
        if st.st_size > limit:
            raise InputTooLarge(errno.EFBIG, _too_large(st.st_size, limit), str(path))
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, min(MB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise InputTooLarge(errno.EFBIG, _too_large(size, limit), str(path))
        return b"".join(chunks), st
    finally:
        os.close(fd)


def read_cached(path: Path | str, limit: int = CACHE_LIMIT) -> bytes | None:
    """The bytes of a file of kgate's cache, or None where there is no whole regular file of at most `limit`
    bytes at that name (missing, unreadable, a folder, a named pipe, a device, a symbolic link, too large):
    what the caller then treats as a missing record, and rebuilds."""
    found = read_cached_stat(path, limit)
    return None if found is None else found[0]


def read_cached_stat(path: Path | str, limit: int = CACHE_LIMIT) -> tuple[bytes, os.stat_result] | None:
    """`read_cached`, with the status of the file that was read."""
    try:
        return read_input_stat(path, limit, follow_symlinks=False)
    except OSError:
        return None


def read_input_text(path: Path | str, limit: int = INPUT_LIMIT) -> str:
    """`read_input` decoded as UTF-8 (UnicodeDecodeError where it is not)."""
    return read_input(path, limit).decode("utf-8")


def _too_large(size: int, limit: int) -> str:
    return f"larger than kgate reads ({size / MB:.1f} MB; the limit is {limit // MB} MB)"


def atomic_write(path: Path, data: bytes, *, follow: bool = False) -> None:
    """Write bytes so that readers see the old file or the new one, never a part.

    The file gets the permissions a plain `open(path, "w")` would give it (an existing file keeps its
    own): mkstemp's private 0600 would make a report or a baseline unreadable to the rest of a team.

    `follow`: a file the user named (a report's `-o`, the baseline, the capture file), written as `open()`
    would write it: through a symlink to its target (the link stays), and as a stream where the path is not
    a regular file (`-o /dev/stdout`, a named pipe, a terminal), which cannot be replaced. Cache records
    never follow: a link planted in a cache must not send a write elsewhere.
    """
    commit([stage(path, data, follow=follow)])


Staged = tuple[Path, str]  # where a staged write goes, and the temporary file that holds it ("" for none)


def stage(path: Path, data: bytes, *, follow: bool = False) -> Staged:
    """The first half of `atomic_write`: the bytes written to a temporary file beside `path` (not yet flushed to
    the disk), for `commit` to put in place. A path that is no regular file under `follow` is written now, as a
    stream, and nothing is staged for it."""
    if follow:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            with open(path, "wb") as stream:
                stream.write(data)
            return path, ""
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary(path)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        _discard(tmp)
        raise
    return path, tmp


def _temporary(path: Path) -> tuple[int, str]:
    """A new file beside `path` to write it in, as `tempfile.mkstemp` makes one (created here, readable by the owner
    only, never a link followed): without `tempfile`, whose imports (`shutil`, `random`) are a measurable part
    of a commit hook's lint."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _attempt in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


def commit(staged: list[Staged], *, flush: bool = True) -> None:
    """The second half of `atomic_write`, for many files at once: each temporary file flushed to the disk (at the
    same time: a flush waits on the disk, not on this process), then moved over its path. On an error, the
    temporary files not yet moved are removed. `flush` False: moved without waiting for the disk (`write_cached`
    of a sealed record)."""
    pending = [(path, tmp) for path, tmp in staged if tmp]
    try:
        if flush and len(pending) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(16, len(pending))) as pool:
                list(pool.map(_flush, [tmp for _path, tmp in pending]))
        elif flush and pending:
            _flush(pending[0][1])
        while pending:
            path, tmp = pending[0]
            os.replace(tmp, path)
            pending.pop(0)
    except BaseException:
        for _path, tmp in pending:
            _discard(tmp)
        raise


def _flush(tmp: str) -> None:
    # Opened to write (nothing is written): a run's reads are its inputs (`kgate.support.reads`), its own output none.
    fd = os.open(tmp, os.O_WRONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_cached(path: Path, data: bytes, *, sealed: bool = False) -> None:
    """`atomic_write` for a file of kgate's cache, which replaces whatever stands at its name: a link or a pipe
    is replaced as a file is, and a folder (kgate makes none where it keeps a file) is removed first.

    `sealed`: the record carries a hash of its content that its reader checks, so a write a crash cut short reads
    back as no record at all: it is moved into place without waiting for the disk (a flush of each record was
    several milliseconds of every commit hook's lint, which writes three or four)."""
    clear_folder(path)
    commit([stage(path, data)], flush=not sealed)


def clear_folder(path: Path | str) -> None:
    """Remove a folder (not a link to one) that stands where kgate's cache keeps a file."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
    except OSError:
        return
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _mode_for(path: Path) -> int:
    """An existing regular file's permissions; an ordinary new file's where there is none (or where a link, a
    device or a pipe stands in its place: /dev/zero's 0666 is no file's mode)."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
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
