"""The lint cache: one compact JSON file per rule selection, so a warm run opens no unchanged source.

Layout: `<cache-dir>/v1/lint/<key>.json`, where the key hashes kgate's
version, the selected source rules with their options, the rule and
engine modules themselves and every module of the packages they read
(`shared_files`: editing a rule or an analysis it asks invalidates it), and for the
files of a nested project the configuration that governs them (so each
configuration has its own record, and a change to one re-lints exactly
the files it governs). Entries map a
project-relative path to its size, mtime and inode, a content digest,
the file's lint result, and what that result read beyond the file, each
read with the state it was made in and a digest of what it gave
(`kgate.collect.depends`: a kernel module that takes Triton from the
project's own module, a kernel whose launch sites are in another module; the
result is answered only while every read still gives what it gave). The file also carries its key and a hash of
its entries, and is read back only when both match: a record copied over
another selection's, or edited (a finding dropped from a file's result,
with the file's stats kept), is an empty cache, never a result trusted.

An entry is answered from `stat` alone only when the file's mtime was at
least two seconds older than the moment it was read: a file written in the
same clock tick as the read could change without changing its mtime (git's
"racily clean" problem), so such an entry is confirmed by hashing the
content on the next run. The file is written to a temporary name and moved
into place, and merged with what other processes wrote meanwhile (pre-commit
runs several `kgate lint` processes at once); losing a race costs speed,
never correctness, and an unreadable cache is an empty one.

A run that changed a few entries writes the record's entries as it read them with the changed ones after them (a
JSON object whose later member of a name is the one read back), rather than serialising every entry again: after
one file of a 10,000-file project changes, the record is copied, not rebuilt. The record counts the entries written
after the others since it was last written whole, and is written whole again when they grow to an eighth of its
entries, or when entries are removed.

The reads are kept once each: the entries of a project's modules read much the same files (on
flash-linear-attention, 179 entries noted 98,596 reads of 2,254 different ones), so each entry lists its reads as
indexes into a table of the record (members named `"\u0000<first index>"`, which no path is: the table as written
whole, then the reads an appending run added, each such member continuing the one before). An entry whose indexes
the table does not hold is answered by nothing, as a read that no longer holds.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kgate import __version__
from kgate.collect.depends import Check, asked
from kgate.core.findings import Related
from kgate.evaluate.source import FileResult, SourceRule, content_digest, from_json, to_json
from kgate.support import jsondoc
from kgate.support.atomicio import read_cached_stat
from kgate.support.filestat import current, state_of

FORMAT = 9  # 2: the record carries its key and the hash of its entries; 3: findings carry related places;
# 4: an entry carries the other files its result read, with their states; 5: directives say whether they are misplaced;
# 6: an entry carries what its result read beyond the file, each read with its state and a digest of what it gave;
# 7: the hash is of the entries' bytes as written (`_sealed`); 8: changed entries follow the others (`appended`);
# 9: the reads are kept once each, in a table of the record, and an entry lists their indexes (`_Reads`)
_RACY_NS = 2_000_000_000
_STALE_S = 14 * 24 * 3600  # cache files of other selections unused this long are removed


_digest = content_digest
_TABLE = "\x00"  # the names of the record's members that hold its table of reads start so (no path holds a NUL)
_NEVER = [[None, None, None]]  # the reads of an entry whose indexes the table does not hold: one that never holds


class _Reads:
    """The table of reads of one record: each read once, the entries' reads as indexes into it."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.written = 0  # the rows the record read holds; those after are new
        self._index: dict[tuple[Any, ...], int] = {}

    def take(self, data: dict[str, Any]) -> bool:
        """Take the table's members out of a record's members: False where they do not make one table."""
        starts = []
        for name, rows in [(n, data.pop(n)) for n in [n for n in data if n.startswith(_TABLE)]]:
            if not name[1:].isdigit() or type(rows) is not list:
                return False
            starts.append((int(name[1:]), rows))
        for start, rows in sorted(starts, key=lambda part: part[0]):
            if start != len(self.rows):
                return False
            self.rows.extend(rows)
        self.written = len(self.rows)
        for at, row in enumerate(self.rows):
            asked = _asked(row)
            if asked is not None:
                self._index.setdefault(asked, at)
        return True

    def expand(self, indexes: Any) -> Any:
        """An entry's reads from their indexes."""
        if type(indexes) is not list:
            return _NEVER
        if indexes and not (set(map(type, indexes)) == {int} and min(indexes) >= 0 and max(indexes) < len(self.rows)):
            return _NEVER
        return list(map(self.rows.__getitem__, indexes))  # (the 98,596 of flash-linear-attention's 179 entries)

    def indexes(self, reads: Any) -> Any:
        """An entry's reads as indexes, new ones added to the table (what is not a list of reads is kept as is)."""
        if type(reads) is not list:
            return reads
        out = []
        for read in reads:
            asked = _asked(read)
            if asked is None:
                return reads
            at = self._index.get(asked)
            if at is None:
                at = self._index[asked] = len(self.rows)
                self.rows.append(read)
            out.append(at)
        return out

    def member(self) -> dict[str, Any]:
        """The rows not yet written, as the member that continues the table."""
        return {f"{_TABLE}{self.written}": self.rows[self.written:]} if len(self.rows) > self.written else {}


def _asked(read: Any) -> tuple[Any, ...] | None:
    try:
        return asked(*read)
    except (TypeError, ValueError):
        return None


def _compacted(entry: Any, reads: _Reads) -> Any:
    if type(entry) is list and len(entry) == 5:
        return [*entry[:4], reads.indexes(entry[4])]
    return entry


def _checked(result: FileResult) -> FileResult:
    """A cached result as the engine writes it, or ValueError: a wrong type here would surface as a crash
    (or a wrong finding) far from the cache."""
    if not result.findings and not result.directives:  # most files: the codes that ran, nothing else to check
        if not all(type(code) is str for code in result.ran):
            raise ValueError("not a lint result")
        return result
    ints = [v for f in result.findings for v in (f.line, f.col)]
    ints += [v for d in result.directives for v in (d.line, d.col)]
    optional = [v for f in result.findings for v in (f.end_line, f.end_col, f.value)]
    for f in result.findings:
        for related in f.related:
            Related.from_record(related)  # ValueError unless a whole related place
    texts = [v for f in result.findings for v in (f.code, f.message, f.identity)] + list(result.ran) + [
        v for d in result.directives for v in (d.reason, d.problem, *d.codes)]
    if not (all(type(v) is int for v in ints) and all(v is None or type(v) is int for v in optional)
            and all(isinstance(v, str) for v in texts) and all(f.severity in _SEVERITIES for f in result.findings)
            and all(isinstance(d.file_level, bool) and isinstance(d.misplaced, bool) for d in result.directives)):
        raise ValueError("not a lint result")
    return result


_SEVERITIES = ("", "error", "warning", "note")


# The engine's own modules, besides the rules and the packages below (`shared_files`).
_ENGINE = ("kgate.evaluate.source", "kgate.pipeline.lint_cache")
# The packages a rule's verdict may read code of: the analyses (kgate/collect), the shared model (kgate/core), the
# cards as data (kgate/hardware) and the utilities (kgate/support), every module of each, imported yet or not.
_SHARED = ("collect", "core", "hardware", "support")


def _module_file(name: str) -> str:
    """The file of a module, loaded to find it (one the rules import only on demand may not be yet)."""
    module = sys.modules.get(name) or importlib.import_module(name)
    return module.__file__ or ""


def shared_files() -> list[tuple[str, str]]:
    """(module, file) of every module of the packages the source rules and their analyses read (`_SHARED`), found
    in the package's folder without importing any: an edit to one may change a verdict."""
    base = os.path.dirname(os.path.abspath(_module_file("kgate")))
    out: list[tuple[str, str]] = []
    for package in _SHARED:
        for folder, dirs, files in os.walk(os.path.join(base, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            prefix = "kgate." + os.path.relpath(folder, base).replace(os.sep, ".")
            out.extend((prefix if name == "__init__.py" else f"{prefix}.{name[:-3]}", os.path.join(folder, name))
                       for name in sorted(files) if name.endswith(".py"))
    return out


def keyed_modules(rules: list[SourceRule]) -> list[tuple[str, str]]:
    """(module, file) of the code whose states key the cache: the engine, the selected rules, and every module of
    the packages they read (`shared_files`)."""
    names = [*_ENGINE, *(sr.check.__module__ for sr in rules)]
    return [*((name, _module_file(name)) for name in names), *shared_files()]


def selection_key(rules: list[SourceRule], scope: str = "") -> str:
    """What the cached results depend on besides the files. `scope`: the configuration that governs the files
    (empty for the run's own), so that each nested project's files have a record of their own and a change
    to its configuration invalidates exactly the files it governs."""
    parts: list[Any] = [FORMAT, __version__] + ([scope] if scope else [])
    for sr in rules:
        parts.append([sr.rule.code, sr.rule.files, [p.decode("latin-1") for p in sr.prefilter],
                      [[m.decode("latin-1") for m in (p if isinstance(p, tuple) else (p,))] for p in sr.rule.requires],
                      sorted(sr.ctx.options.items())])
    # Editing a rule, the engine or an analysis a rule asks (a development install) must invalidate the results.
    for name, path in keyed_modules(rules):
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        parts.append([name, *state_of(st)] if st else [name])
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return _digest(blob)


class LintCache:
    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory / "v1" / "lint"
        self.key = key
        self.path = self.directory / f"{key}.json"
        self.entries: dict[str, list[Any]] = {}
        self.changed: dict[str, list[Any]] = {}
        self._loaded_mtime = 0
        self._raw = b""  # the entries' bytes as read ("": none read)
        self._appended = 0  # entries written after the others since the record was last written whole
        self._check = Check(self._read_keys)  # each source of what results read, looked at once per run
        # A result with nothing but the codes that ran, by those codes, checked once: most files' (10,000 entries of a
        # large project hold a handful of these).
        self._plain: dict[tuple[Any, ...], FileResult] = {}
        self._reads = _Reads()
        # rel -> (the entry's reads as loaded, their indexes in the table): each read of the table is checked once, by
        # its index, however many entries list it (`_holds`); what each index found: None until asked, else (whether
        # it holds, whether it holds only by a digest where a state can now be kept)
        self._loaded: dict[str, tuple[Any, list[int]]] = {}
        self._found: list[tuple[bool, bool] | None] = []
        self._unsettled = False
        self._load()

    def _read_keys(self) -> list[Any]:
        """The key of every read the entries noted (what is not an entry this cache wrote is passed over): those of the
        table, each once, and those of the entries that do not list theirs from it."""
        keys: list[Any] = []
        for row in self._reads.rows:
            try:
                keys.append(row[0])
            except (TypeError, IndexError, KeyError):
                continue
        loaded = self._loaded
        for rel, entry in self.entries.items():
            try:
                reads = entry[4]
                if rel in loaded and loaded[rel][0] is reads:
                    continue
                if reads and type(reads) is list:  # most entries read nothing beyond their file
                    keys.extend([read[0] for read in reads])
            except (TypeError, IndexError, KeyError):
                continue
        return keys

    def _load(self) -> None:
        found = read_cached_stat(self.path)  # never a named pipe, a device, a link or an endless file
        try:
            if found is None:
                raise ValueError("no lint record")
            self._loaded_mtime = found[1].st_mtime_ns
            raw, appended = _unsealed(found[0], self.key)
            data = jsondoc.loads(raw)
        except ValueError:  # jsondoc.NotJSON is a ValueError
            data = None
        reads = _Reads()
        self._loaded = {}
        if isinstance(data, dict) and reads.take(data):
            for rel, entry in data.items():
                if type(entry) is list and len(entry) == 5:
                    indexes = entry[4]
                    entry[4] = reads.expand(indexes)
                    if entry[4] is not _NEVER and entry[4]:
                        self._loaded[rel] = (entry[4], indexes)
            self.entries, self._raw, self._appended, self._reads = data, raw, appended, reads
        else:
            self.entries, self._raw, self._appended, self._reads = {}, b"", 0, _Reads()
        self._found = [None] * len(self._reads.rows)

    def lookup(self, rel: str, path: str) -> FileResult | None:
        entry = self.entries.get(rel)
        if entry is None:
            return None
        state = current(path)
        if state is None or state[0] < 0:  # gone, or a link to nothing
            return None
        try:
            stat, trusted, digest, result, depends = entry
        except (TypeError, ValueError):  # not an entry this cache wrote: rebuilt
            return None
        if stat != state or (depends != [] and not self._holds(rel, depends)):
            return None
        refreshed = self._check.refreshed(depends) if depends != [] and self._unsettled else None
        if not trusted:
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                return None
            if _digest(data) != digest:
                return None
        if not trusted or refreshed is not None:
            self._remember(rel, state, digest, result, depends if refreshed is None else refreshed)
        try:
            found = self._plain.get(tuple(result[2])) if not result[0] and not result[1] else None
            if found is None:
                found = _checked(from_json(result))
                if not found.findings and not found.directives:
                    self._plain[found.ran] = found
            return FileResult(found.findings, found.directives, found.ran, digest=digest)
        except (TypeError, ValueError, IndexError, KeyError):
            return None

    def _holds(self, rel: str, depends: Any) -> bool:
        """Whether every read of an entry holds (`Check.holds`), each read of the table checked once by its index."""
        loaded = self._loaded.get(rel)
        if loaded is None or loaded[0] is not depends:  # an entry written in this run, or read back merged
            held = self._check.holds(depends)
            self._unsettled = held and self._check.unsettled
            return held
        found, rows, check = self._found, self._reads.rows, self._check
        unsettled = False
        for index in loaded[1]:
            answer = found[index]
            if answer is None:
                held = check.holds([rows[index]])
                answer = found[index] = (held, held and check.unsettled)
            if not answer[0]:
                return False
            unsettled = unsettled or answer[1]
        self._unsettled = unsettled
        return True

    def store(self, rel: str, path: str, digest: str, size: int, result: FileResult) -> None:
        """Remember a file's result; `digest` and `size` are those of the bytes that were linted."""
        try:
            st = os.stat(path)
        except OSError:
            return
        if st.st_size != size:
            return  # changed while we read it
        self._remember(rel, state_of(st), digest, to_json(result), [[key, list(state) if state is not None else None,
                                                                     found] for key, state, found in result.depends])

    def _remember(self, rel: str, state: list[int], digest: str, result: list[Any], depends: list[Any]) -> None:
        trusted = state[1] < time.time_ns() - _RACY_NS
        entry = [state, trusted, digest, result, depends]
        self.entries[rel] = entry
        self.changed[rel] = entry

    def save(self, keep: set[str] | None = None) -> None:
        """Write the cache if anything changed; `keep`: the complete set of files (prune the rest)."""
        pruned = keep is not None and any(rel not in keep for rel in self.entries)
        if not self.changed and not pruned:
            return
        entries = self._merged()
        if keep is not None:
            pruned = pruned or any(rel not in keep for rel in entries)
            entries = {rel: entry for rel, entry in entries.items() if rel in keep}
        blob = self._appending(len(entries)) if not pruned else None
        if blob is None:
            reads = _Reads()
            compact = {rel: _compacted(entry, reads) for rel, entry in entries.items()}
            try:
                blob = _sealed(json.dumps({**compact, **reads.member()}, separators=(",", ":")).encode(), self.key)
            except RecursionError:  # an entry read back nested too deeply to write again: start afresh
                blob = _sealed(b"{}", self.key)
        try:
            self._write(blob)
            self._tidy()
        except OSError:
            pass  # an unwritable cache costs speed, not correctness

    def _appending(self, total: int) -> bytes | None:
        """The record as read with the changed entries after its own, or None where it is to be written whole (none
        was read, or the entries written after the others would grow past an eighth of all)."""
        appended = self._appended + len(self.changed)
        if len(self._raw) < 3 or appended > max(64, total // 8):
            return None
        compact = {rel: _compacted(entry, self._reads) for rel, entry in self.changed.items()}
        try:
            tail = json.dumps({**compact, **self._reads.member()}, separators=(",", ":")).encode()
        except RecursionError:
            return None
        return _sealed(self._raw[:-1] + b"," + tail[1:], self.key, appended)

    def _merged(self) -> dict[str, list[Any]]:
        """Entries another process wrote since we loaded, with ours on top."""
        try:
            if os.stat(self.path).st_mtime_ns == self._loaded_mtime:
                return self.entries
        except OSError:
            return self.entries
        self.entries, mine = {}, self.changed
        self._load()
        return {**self.entries, **mine}

    def _write(self, blob: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        _replace(self.path, blob)

    def _tidy(self) -> None:
        cutoff = time.time() - _STALE_S
        for other in self.directory.glob("*.json"):
            try:
                if other != self.path and other.stat().st_mtime < cutoff:
                    other.unlink()
            except OSError:
                pass


def _head(key: str) -> bytes:
    return b'{"format":' + str(FORMAT).encode() + b',"key":"' + key.encode() + b'","sha256":"'


_APPENDED = b'","appended":'
_FILES = b',"files":'


def _sealed(entries: bytes, key: str, appended: int = 0) -> bytes:
    """The record: one JSON document with the format, the key, a hash of the entries' bytes, how many entries follow
    the others (`LintCache._appending`) and the entries."""
    return _head(key) + _digest(entries).encode() + _APPENDED + str(appended).encode() + _FILES + entries + b"}"


def _unsealed(record: bytes, key: str) -> tuple[bytes, int]:
    """The entries' bytes of a record `_sealed` wrote for this key and format, whose hash they match, and how many
    entries follow the others; ValueError for anything else (another key's record, an older format, a record edited
    or damaged, even if still JSON)."""
    head = _head(key)
    at = len(head) + 32
    digest = record[len(head):at]
    count_at = at + len(_APPENDED)
    end = record.find(_FILES, count_at, count_at + 12)
    if not (record.startswith(head) and record[at:count_at] == _APPENDED and end > count_at
            and record[count_at:end].isdigit() and record.endswith(b"}")):
        raise ValueError("not a lint record of this selection")
    entries = record[end + len(_FILES):-1]
    if _digest(entries).encode() != digest:
        raise ValueError("a lint record that is not as it was written")
    return entries, int(record[count_at:end])


def _replace(path: Path, data: bytes) -> None:
    """Write a whole file or none (its key and the hash of its entries are checked where it is read back)."""
    from kgate.support.atomicio import write_cached

    write_cached(path, data, sealed=True)
