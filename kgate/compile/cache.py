"""The facts cache: content-addressed JSON records, written atomically.

Layout under the cache directory (default `.kgate-cache/` in the project):

    v1/expand/<key>.json       what importing a registered kernel told us (kernels whose
                               parameters and configs cannot be read from the source)
    v1/compiled/<key>.json     one Triton variant and target: its context and its artifacts' hashes
    v1/spans/<key>.json        where each definition of its module was, for the compile record
    v1/cuda/<key>.json         one CUDA source and target: its artifacts' hashes, or the compiler's error
    v1/artifacts/<key>/        kernel.ptx, ptxas.log, kernel.ttgir, kernel.sass, kernel.cubin, each also
                               under its name and its content hash (`kept`), which records read
    v1/facts/<key>.json        the facts read from one unit's artifacts (kgate.facts.run)
    v1/listing/<key>.json      a cubin's nvdisasm listing, parsed (kgate diff)

Two runs that share the cache may compile one key at once with outputs that differ where the compiler
wrote the source's path into them (a base revision's checkout in a folder of each `kgate diff`'s own). An
artifact is therefore also kept under a name that carries its content hash, and a record reads the
artifacts it was written with by those names: whichever run writes last, no record reads another's.

A record is written to a temporary name and moved into place with
os.replace, so a reader sees a whole file or none. Each record carries what
it describes (its kind and its key) and a hash of its content, and is read
back only when all three match where it was found: a record copied over
another key's, replaced by some other JSON, cut short or damaged is treated
as missing and rebuilt, never trusted. Records and artifacts are read
through `kgate.support.atomicio.read_cached`: a symbolic link, a folder, a named
pipe, a device or a file past its size bound where a record should be is a
missing record too, never followed, waited on or read without end. (A
forged record that is consistent with itself cannot be told from a real
one without compiling again: the cache is trusted as build output is; see
docs/trust.md.)
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from kgate.core.errors import KgateError
from kgate.support import jsondoc, tools
from kgate.support.atomicio import clear_folder, read_cached, write_cached

VERSION = "v1"
# The packages of kgate whose code a compile record depends on: every module a compile worker's task imports is in
# one of them (a test follows the imports). Their code is part of every compile and expansion record's key
# (`code_digest`).
CODE_PACKAGES = ("capture", "collect", "compile", "core", "support")


def digest(*parts: Any) -> str:
    """A stable hash of JSON-able parts."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.cache
def code_digest() -> str:
    """A hash of the code of every module of `CODE_PACKAGES`: part of the key of every record a compile worker's
    task makes, so that a record another kgate wrote under the same version number (an install from another
    commit, which compiles with other flags or records other things) is never read back. By content, not by file
    state: a checkout of the same kgate keeps a restored cache."""
    base = Path(__file__).resolve().parent.parent
    sha = hashlib.sha256()
    for package in CODE_PACKAGES:
        for folder, dirs, files in sorted(os.walk(base / package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(f for f in files if f.endswith(".py")):
                path = Path(folder) / name
                sha.update(f"{path.relative_to(base).as_posix()}\0".encode())
                sha.update(hashlib.sha256(path.read_bytes()).digest())
    return sha.hexdigest()


class Cache:
    def __init__(self, directory: Path, shown: str | None = None) -> None:
        self.directory = directory / VERSION
        self.shown = shown or str(directory)  # the folder as the configuration names it, for messages

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / kind / f"{key}.json"

    def artifacts(self, key: str) -> Path:
        return self.directory / "artifacts" / key

    def cubin(self, key: str, meta: dict[str, Any]) -> Path | None:
        """The cubin a record was made from, when it is still in the cache as it was written (`meta["cubin"]`)."""
        wanted = meta.get("cubin")
        if not isinstance(wanted, str):
            return None
        path = kept(self.artifacts(key) / "kernel.cubin", wanted)
        return path if file_hash(path) == wanted else None

    def get(self, kind: str, key: str, check: Callable[[Any], object] | None = None) -> Any | None:
        """A record's value, or None: there is none, or it is not whole, not the record of this kind and key,
        not the content it was written with, or, when `check` is given, not of its kind's shape
        (`kgate.compile.records`). None means: rebuild it."""
        found = self.entry(kind, key, check)
        return None if found is None else found.value

    def entry(self, kind: str, key: str, check: Callable[[Any], object] | None = None) -> Entry | None:
        """A record with what was stored beside its value (`put`'s `meta`), checked as `get` checks it."""
        data = read_cached(self._path(kind, key))  # never a named pipe, a device, a link or an endless file
        if data is None:
            return None
        try:
            record = jsondoc.loads(data)
        except jsondoc.NotJSON:
            return None
        try:
            if (record["record"] != kind or record["key"] != key
                    or record["sha256"] != jsondoc.content_hash(record["value"]) or not isinstance(record["meta"], dict)):
                return None
            if check is not None:
                check(record["value"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None
        return Entry(record["value"], record["meta"])

    def put(self, kind: str, key: str, value: Any, meta: dict[str, Any] | None = None) -> None:
        """Store a record under its key; raises CacheWriteError when the cache cannot take it (a full disk,
        the folder deleted under the run): a run that cannot keep what it compiled stops and says why."""
        path = self._path(kind, key)
        record = {"record": kind, "key": key, "sha256": jsondoc.content_hash(value), "meta": meta or {}, "value": value}
        data = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
        try:
            write_cached(path, data)
        except OSError as exc:
            raise CacheWriteError.of(exc, self.shown) from None


def file_hash(path: Path) -> str | None:
    """The hash of a compile artifact in the cache; None where it is not a whole regular file (`read_cached`)."""
    data = read_cached(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


class Entry(NamedTuple):
    value: Any
    meta: dict[str, Any]



class CacheWriteError(KgateError):
    """The cache folder cannot take what a run compiled any more (its disk is full, it was deleted or replaced
    while the run wrote into it): an environment error, exit 2, not a finding on every kernel."""

    def __init__(self, reason: str, folder: str | None = None) -> None:
        self.reason = reason
        where = f"the cache folder {folder}" if folder else "the cache folder"
        super().__init__(f"cannot write {where} ({reason}): free space on its disk or make it writable again, "
                         f"or run with --no-cache")

    @classmethod
    def of(cls, exc: OSError, folder: str | None = None) -> CacheWriteError:
        """The error of `exc`, naming the file it was about (whole: a compile worker runs in another folder)."""
        reason = exc.strerror or type(exc).__name__
        if exc.filename:
            reason = f"{reason}: {os.path.abspath(os.fsdecode(exc.filename))}"
        return cls(reason, folder)


def kept(path: Path, digest: str) -> Path:
    """Where the artifact `path` with this content hash is kept, whatever another compile of its key wrote since."""
    return path.with_name(f"{path.name}.{digest[:16]}")


def write_artifact(path: Path, data: bytes) -> str:
    """Write one compile artifact (in a compile worker) whole, as every file of the cache is written
    (`kgate.support.atomicio.write_cached`): under its content's name (`kept`) and, linked to it, under its own.
    Returns its content hash; a failure is a CacheWriteError."""
    found = hashlib.sha256(data).hexdigest()
    where = kept(path, found)
    try:
        write_cached(where, data)
        _link(where, path, data)
    except OSError as exc:
        raise CacheWriteError.of(exc) from None
    return found


def _link(source: Path, path: Path, data: bytes) -> None:
    """`path` made the same file as `source` (a copy where the file system has no links), replaced at once."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        os.link(source, temporary)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.EACCES):
            raise
        write_cached(path, data)
        return
    try:
        clear_folder(path)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


# The errors of a disk that cannot take more, whatever file was being written.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def cache_write_failure(exc: BaseException, cache_dir: str | None) -> CacheWriteError | None:
    """The CacheWriteError behind an exception a compiler raised (its own cache is in kgate's), or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError):
            name = str(current.filename or "")
            inside = bool(cache_dir and name) and os.path.commonpath(
                [os.path.abspath(name), os.path.abspath(str(cache_dir))]) == os.path.abspath(str(cache_dir))
            if current.errno in _NO_SPACE or inside:
                return CacheWriteError.of(current)
        current = current.__cause__ or current.__context__
    return None


def unusable(directory: Path) -> str | None:
    """Why the cache folder cannot be used (a file stands where a folder must be, no permission), or None.

    Compile workers write into it unchecked, so a broken cache would otherwise fail every kernel.
    """
    try:
        for folder in ("expand", "compiled", "facts", "spans", "cuda", "artifacts", "lint"):
            (directory / VERSION / folder).mkdir(parents=True, exist_ok=True)
        (directory / "triton").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory / VERSION):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


@contextlib.contextmanager
def triton_folder(root: str | None) -> Iterator[None]:
    """Triton's cache for one compile: an empty folder of this process's under `root` (TRITON_CACHE_DIR), which
    Triton reads from the environment at each compile; removed afterwards."""
    if not root:
        yield
        return
    os.makedirs(root, exist_ok=True)
    folder = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root)
    os.environ["TRITON_CACHE_DIR"] = folder
    try:
        yield
    finally:
        os.environ["TRITON_CACHE_DIR"] = root
        shutil.rmtree(folder, ignore_errors=True)


def sweep_triton(root: Path) -> None:
    """Remove from Triton's folder what no running compile uses: the folders of compile workers that have
    ended (killed mid-compile), and anything else (the shared layout of older releases)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        pid, dash, _rest = entry.name.partition("-")
        if dash and pid.isdigit() and tools.alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
