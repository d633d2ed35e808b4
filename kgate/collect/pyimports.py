"""Which Python files of a project import a name: the words of every file's import statements, kept across runs.

The launch reading asks which of the project's modules import a name (`kgate.collect.pyproject.Modules.importers`):
the modules that launch a kernel or call a launcher defined elsewhere. Its answer is read from the words of the
import statements of every Python file of the project (a scan of the text, no parse). The words of each file are
kept in the cache (`<cache>/v1/imports.json`, by project root, each file's words with its state), so a run reads only
the files that changed since: a warm run that has to check such an answer (`kgate.collect.depends`) after one file
changed scans that file alone. A file written less than two seconds before it was read is read again next time
(its state may not show a change made within the same tick of its clock). The record is written again when a file's
words changed, or a file came or went; files edited without a change to their imports are read again by the next runs
until they are many (`_RESTATED`). The record is sealed with the kgate that wrote it and a digest of its bytes: one
another kgate wrote, or edited since, is read as no record.

The questions of which files import a name are answered for the names the lint cache's verdicts asked together, in one
pass over the words (`Index.prepare`); other names are searched for one by one, and after a few of them the index of
every word is built.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kgate.collect.depends import blake2b, per_run
from kgate.collect.files import tree_listing
from kgate.support.filestat import currents

_VENDORED = "site-packages"  # skipped besides what every reading of the tree skips (`tree_listing`)
_WORD = re.compile(rb"\w+")
_IMPORT = b"import"
_FROM = re.compile(rb"from[\s.]")
_ENDS = re.compile(rb"\r\n|[\r\n;]")
_CONTINUATION = re.compile(rb"\\(?:\r\n|\r|\n)")
_CONTINUED = re.compile(rb"\\(?:\r\n|\r|\n)\Z")
_RACY_NS = 2_000_000_000
_SEARCHES = 16  # names asked about one by one before the index of every word is built
_RESTATED = 64  # files read again with the same words that a run leaves unrecorded
VERSION = 4  # 2: a file's words as one string; 3: statements read as Python reads lines; 4: a file's state as a string


class Index:
    """The import words of the Python files of one project root, as they are now."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.paths: list[str] = []
        self.state: list[int] | None = None  # the files together (None: one was written too recently to vouch)
        self._words: list[str] = []  # each file's words, by its place in `paths`
        self._asked: dict[str, list[int]] = {}  # the places of the files that hold a word, for the words asked about
        self._inverted: dict[str, list[int]] | None = None  # the places of every word, once built
        self._searches = 0
        self._read()

    def importers(self, name: str) -> list[str]:
        """The files (absolute paths, in walk order) whose import statements hold the word `name`."""
        places = self._asked.get(name)
        if places is None:
            places = self._asked[name] = self._places(name)
        return [self.paths[i] for i in places]

    def prepare(self, names: Iterable[str]) -> None:
        """Find the files that hold each of these words in one pass over the files' words: the verdicts a lint cache
        holds ask about hundreds of names, each answered once (`kgate.collect.depends.Check`)."""
        wanted = {name for name in names if name not in self._asked}
        if not wanted:
            return
        found: dict[str, list[int]] = {name: [] for name in wanted}
        disjoint = wanted.isdisjoint
        for number, held in enumerate(self._words):
            split = held.split()
            if not disjoint(split):
                for word in wanted.intersection(split):
                    found[word].append(number)
        self._asked.update(found)

    def _places(self, name: str) -> list[int]:
        """The places of the files that hold `name`: a search of the words for the first few names asked, the index of
        every word after that (a cold run asks about many; a warm one about a few, besides those `prepare`d)."""
        if self._inverted is None and self._searches < _SEARCHES:
            self._searches += 1
            return [number for number, held in enumerate(self._words) if name in held and name in held.split()]
        if self._inverted is None:
            self._inverted = _inverted(self._words)
        return self._inverted.get(name, [])

    def _read(self) -> None:
        kept = _STORE.root(self.root)
        cut = len(self.root.rstrip(os.sep)) + 1
        self.paths = paths = python_files(self.root)
        rels = [path[cut:] for path in paths]
        states = currents(paths)
        # Kept as the summary spells it: a string reads and compares faster than a list of four large numbers.
        shown = [str(state) if state is not None else None for state in states]
        racy_ns = time.time_ns() - _RACY_NS
        racy = changed = False
        restated = 0  # files read again whose words are the ones kept (an edit that leaves the imports alone)
        words = self._words
        for number, rel in enumerate(rels):
            held, now = kept.get(rel), shown[number]
            if now is not None and type(held) is list and len(held) == 2 and held[0] == now and type(held[1]) is str:
                words.append(held[1])
                continue
            found = " ".join(sorted(w.decode("utf-8", "surrogateescape") for w in _imported_words(_data(paths[number]))))
            state = states[number]
            if state is not None and state[1] >= racy_ns:
                racy, now = True, None  # read again next time
            if type(held) is list and len(held) == 2 and held[1] == found:
                restated += 1
            else:
                changed = True
            kept[rel] = [now, found]
            words.append(found)
        if len(kept) != len(rels):  # files gone since, or entries this module did not write
            kept = {rel: kept[rel] for rel in rels}
            changed = True
        self.state = None if racy else [int.from_bytes(blake2b("\n".join(map("{}\0{}".format, rels, shown)).encode(
            "utf-8", "surrogateescape"), digest_size=8).digest(), "big")]
        # Files whose words are as kept under an older state are read again by the next run too, until they are many:
        # writing the record again for them would cost more than reading them (a megabyte and a half for 10,000 files).
        if changed or restated > max(_RESTATED, len(rels) // 8):
            _STORE.keep(self.root, kept)


def _inverted(words: list[str]) -> dict[str, list[int]]:
    """The places of the files that hold each word."""
    out: dict[str, list[int]] = {}
    for number, held in enumerate(words):
        for word in held.split():
            places = out.get(word)
            if places is None:
                out[word] = [number]
            elif places[-1] != number:
                places.append(number)
    return out


def _data(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class _Store:
    """The words of each project's files, as the cache keeps them (`use_cache`, `save`)."""

    def __init__(self) -> None:
        self.file: Path | None = None
        self.data: dict[str, dict[str, list[Any]]] | None = None
        self.dirty = False

    def use(self, file: Path | None) -> None:
        if file != self.file:
            self.file, self.data, self.dirty = file, None, False

    def root(self, root: str) -> dict[str, list[Any]]:
        if self.data is None:
            self.data = self._load()
        found = self.data.get(root)
        return found if isinstance(found, dict) else {}

    def keep(self, root: str, files: dict[str, list[Any]]) -> None:
        if self.file is None:
            return
        assert self.data is not None
        self.data[root] = files
        self.dirty = True

    def _load(self) -> dict[str, dict[str, list[Any]]]:
        if self.file is None:
            return {}
        from kgate.support import jsondoc
        from kgate.support.atomicio import read_cached

        try:
            data = jsondoc.loads(_unsealed(read_cached(self.file) or b""))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        # An entry is used only where its state is the file's and its words a string (`Index._read`): one this module
        # did not write is read again, never trusted.
        return {root: files for root, files in data.items() if isinstance(files, dict)}

    def save(self) -> None:
        if not self.dirty or self.file is None or self.data is None:
            return
        from kgate.support.atomicio import write_cached

        try:
            write_cached(self.file, _sealed(json.dumps(self.data, separators=(",", ":")).encode()), sealed=True)
        except OSError:
            pass  # costs a scan next time, nothing else
        self.dirty = False


def _reader() -> bytes:
    """Who wrote the words: this form, kgate's version and this module's file (a development edit of the scan
    reads every file again)."""
    from kgate import __version__

    try:
        st = os.stat(__file__)
        state = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    except OSError:
        state = ""
    return blake2b(f"{VERSION}\0{__version__}\0{state}".encode(), digest_size=16).hexdigest().encode()


def _sealed(roots: bytes) -> bytes:
    """The record: its writer (`_reader`), a digest of the roots' bytes as written, and the roots."""
    return b'{"reader":"' + _reader() + b'","digest":"' + _hex(roots) + b'","roots":' + roots + b"}"


def _unsealed(record: bytes) -> bytes:
    """The roots' bytes of a record `_sealed` wrote in this kgate, whose digest they match; ValueError for anything
    else (another version's record, one edited or damaged, even if still JSON)."""
    head = b'{"reader":"' + _reader() + b'","digest":"'
    tail = b'","roots":'
    start = len(head) + 32 + len(tail)
    if not (record.startswith(head) and record[len(head) + 32:start] == tail and record.endswith(b"}")):
        raise ValueError("not an import words record of this kgate")
    roots = record[start:-1]
    if _hex(roots) != record[len(head):len(head) + 32]:
        raise ValueError("an import words record that is not as it was written")
    return roots


def _hex(data: bytes) -> bytes:
    return blake2b(data, digest_size=16).hexdigest().encode()


_STORE = _Store()
_INDEXES: dict[str, Index] = per_run({})  # a run reads each project's files once, for its checks and its rules


def index_of(root: str) -> Index:
    """The import words of the project at `root`, read once per lint run."""
    found = _INDEXES.get(root)
    if found is None:
        found = _INDEXES[root] = Index(root)
    return found


def use_cache(cache_dir: Path | None) -> None:
    """Keep the words in this cache folder (the project's `cache-dir`; None: keep none)."""
    _STORE.use(cache_dir / "v1" / "imports.json" if cache_dir is not None else None)


def save() -> None:
    _STORE.save()


def python_files(root: str) -> list[str]:
    """Every Python file under `root`, in a stable order, past hidden folders and those of builds and caches."""
    found: list[str] = []
    for here, names in tree_listing(root):
        if _VENDORED not in here[len(root):].split(os.sep):
            folder = here if here.endswith(os.sep) else here + os.sep  # os.path.join's result, for 10,000 files
            found.extend([folder + name for name in names if name.endswith(".py")])
    return found


def import_statements(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each import statement of a module's text (`import a.b as c`, `from x import (y, z)`), at any
    depth: an import inside a function counts, since a launcher is often imported where it is called. A scan of the
    text, not a parse, that reads lines as Python does (a backslash continues one, `;` parts statements on it, a lone
    CR ends it, tabs are spaces): a word `import` in a string may give a span that is no statement."""
    at = data.find(_IMPORT)
    while at >= 0:
        start = _statement_start(data, at)
        head = _CONTINUATION.sub(b" ", data[start:at]).lstrip()
        if head and not _FROM.match(head):
            at = data.find(_IMPORT, at + len(_IMPORT))
            continue
        end = _statement_end(data, at + len(_IMPORT))
        if _CONTINUATION.sub(b" ", data[at + len(_IMPORT):end]).lstrip().startswith(b"("):
            close = data.find(b")", at)
            end = len(data) if close < 0 else close + 1
        yield start, end
        at = data.find(_IMPORT, end)


def _statement_start(data: bytes, at: int) -> int:
    """Where the statement around `at` starts: after the line's `;` or newline, lines continued by a backslash
    taken back to the first."""
    while True:
        start = max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at), data.rfind(b";", 0, at)) + 1
        if start and data[start - 1] in b"\r\n" and _CONTINUED.search(data, 0, start):
            at = start - 1 - (data[start - 2:start] == b"\r\n")
            continue
        return start


def _statement_end(data: bytes, at: int) -> int:
    """Where the statement with a word at `at` ends: at the line's `;` or newline, past newlines a backslash
    continues."""
    while True:
        found = _ENDS.search(data, at)
        if found is None:
            return len(data)
        if found.group() == b";" or data[found.start() - 1:found.start()] != b"\\":
            return found.start()
        at = found.end()


def statements_digest(data: bytes) -> str:
    """A digest of a module's import statements (`import_statements`): what a question of the names the module
    imports read of it."""
    from kgate.collect.depends import digest

    return digest(b"\n".join(data[start:end] for start, end in import_statements(data)))


def _imported_words(data: bytes) -> set[bytes]:
    """The words of a module's import statements."""
    words: set[bytes] = set()
    for start, end in import_statements(data):
        words.update(_WORD.findall(data, start, end))
    return words
