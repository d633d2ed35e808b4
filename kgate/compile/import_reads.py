"""What importing a kernel's module read, and the cache key it makes.

A kernel module can read anything while it is imported: a `tune.json` beside it that lists its autotune
configs, a constant from a module it imports by `importlib.import_module`, an environment variable. What it
read decides what kgate compiles, so a compile record, an expansion record and each side of a revision diff
are keyed on it, not on the module's text and its static imports alone.

A compile worker records the reads of the imports it runs (`kgate.compile.import_recorder`), and those of the
Python programs and forked processes the import starts (`kgate.compile.import_children`). Each read is kept as
a name (`file:./tune.json`, `env:MYPROJ_BLOCK`) and the value it had when it was read (`value`): a file under
the project's folders by its content, elsewhere by its state (size, times, inode), a folder by its listing, a
variable by its value. Names under the project's root are relative to it, so that the base revision's checkout
and the working tree name the same file alike, and differ only where its content does. A read whose value
cannot be named (a device such as /dev/urandom, a pipe, a socket, a program that ran without reporting what it
read) is `unrecorded`: a record made from such an import is never kept, and never served.

The cache holds, beside each static key (`pre`), the lists of names its imports read (`remember`); a run looks
each list up again (`find`): the key is the static key with the names' values now, so a record is found only
where every input its import read still holds what it held. Nothing of the other side of a diff, nor of an
earlier state of a file, can stand in.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgate.compile.cache import Cache, digest
from kgate.compile.import_times import KINDS as TIME_KINDS
from kgate.compile.sides import DIFF_RUN, Checkout, checked_out, named, on_this_side
from kgate.support.filestat import path_state

Reads = dict[str, Any]  # name -> value when read
UNRECORDED = "unrecorded"  # a read whose value cannot be named (`unrecorded:WHAT`): the import is not keyable
# A program the import ran whose own reads are not seen (`unseen:git`): named in the run; the import is unkeyable as
# well (`UNRECORDED`), so no record made from it is kept, in a check or on either side of a diff.
UNSEEN = "unseen"
# A file of the working tree read on a base revision's side where the checkout holds its own copy (`unrecorded:the
# working tree's PATH`): the import is not the base's, and nothing made from it is kept (`working_tree_reads`).
WORKING_TREE = "the working tree's"
# What the import read that no key can hold (`unkeyed:the clock`: `kgate.compile.import_chance`): kept as the first
# run had it, said in the run, and in a diff held by that diff's side alone, as an unseen program's reads are.
UNKEYED = "unkeyed"
_DISTRIBUTIONS = (".dist-info", ".egg-info", ".egg")
MANIFEST = "reads"  # the cache kind that lists, per static key, the names its imports read
INTERPRETER = "interpreter"  # the read of how the importing interpreter was started (`interpreter_state`)
USER_BASE = "userbase"  # the read of the user's base folder (`site.getuserbase()`, from PYTHONUSERBASE or HOME)
# Variables read for the import where no Python code looks them up: by the C library (the time zone, the locale of
# text, numbers and times) and by the interpreter as it starts (the seed of string hashing); the rest of how the
# interpreter was started is read as one (`interpreter_state`: `__debug__`, every flag, the warning and -X options,
# the bytecode cache folder, the user base folder).
PROCESS_VARIABLES = ("TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
                     "LC_MONETARY", "LC_MESSAGES", "PYTHONHASHSEED")
_KEPT_LISTS = 8  # read lists kept per static key (the same module under other inputs: an env var, a branch)
_CHUNK = 1 << 20


@dataclass(frozen=True)
class View:
    """Where names resolve: the project's root, the folders whose files count by content, the environment the
    import ran under (the worker's: kgate's with the pool's changes)."""

    root: str
    roots: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""  # the folder the import runs in: what a relative path names
    checkout: Checkout | None = None  # on a base revision's side (`kgate diff`): the repository and its checkout

    def path(self, name: str) -> str:
        return os.path.join(self.root, name[2:]) if name.startswith("./") else on_this_side(name, self.checkout)

    def name(self, path: str) -> str:
        path = os.path.abspath(path)
        if path == self.root or path.startswith(self.root.rstrip(os.sep) + os.sep):
            return "./" + os.path.relpath(path, self.root).replace(os.sep, "/")
        return named(path, self.checkout)

    def owned(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)


def view(root: str, roots: list[str], env_changes: Mapping[str, str | None], cwd: str,
         checkout: Checkout | None = None) -> View:
    """The view of the main process onto what a worker (started with `env_changes`, importing in `cwd`) reads."""
    env = dict(os.environ)
    for key, changed in env_changes.items():
        if changed is None:
            env.pop(key, None)
        else:
            env[key] = changed
    return View(os.path.abspath(root), tuple(os.path.abspath(r) for r in roots), env, os.path.abspath(cwd), checkout)


def value(name: str, where: View) -> Any:
    """What a read name holds now (None: nothing there)."""
    kind, _, rest = name.partition(":")
    if kind == UNRECORDED:
        return os.urandom(8).hex()  # never what it was: no later run finds the record
    if kind == "env":
        return _whole_env(where.env) if rest == "*" else where.env.get(rest)
    if kind == USER_BASE:
        import site

        return site.getuserbase()
    if kind == INTERPRETER:
        return interpreter_state()
    if kind in (UNSEEN, UNKEYED):  # what was read is not seen: in a diff, each side's of this diff alone
        return where.checkout[1] if where.checkout is not None else where.env.get(DIFF_RUN)
    if kind == "cwd":  # a relative path was read: which folder it is relative to
        return where.name(where.cwd)
    if kind == "pythonpath":  # where a module not in the project's folders is looked for
        return [where.name(folder) for folder in search_folders(where)]
    path = where.path(rest)
    if kind == "dir":
        try:
            return sorted(os.listdir(path))
        except (OSError, ValueError):
            return None
    if kind == "entries":  # a listing by os.scandir: each entry's kind, size and permissions, and whether a link
        try:
            names = sorted(os.listdir(path))
        except (OSError, ValueError):
            return None
        return [[n, _kind_of(os.path.join(path, n)), os.path.islink(os.path.join(path, n))] for n in names]
    if kind == "stat":
        return _kind_of(path)
    if kind == "lstat":  # the path itself, a link not followed (os.path.islink): where it points, if a link
        return f"link:{_link(path)}" if os.path.islink(path) else _kind_of(path)
    if kind == "link":  # where a symlink points (os.readlink)
        return _link(path)
    if kind in TIME_KINDS:  # a time the import read (`kgate.compile.import_times`); `l...`: a link's own
        try:
            return getattr(os.lstat(path) if kind.startswith("l") else os.stat(path), f"st_{kind[-5:]}_ns")
        except (OSError, ValueError):
            return None
    if kind == "dists":  # what importlib.metadata looks for in a folder: the installed distributions' metadata
        try:
            return sorted(n for n in os.listdir(path) if n.lower().endswith(_DISTRIBUTIONS))
        except (OSError, ValueError):
            return None
    if not keyable_file(path):
        return os.urandom(8).hex()  # a device, a pipe or a socket now: what it gives cannot be named
    if where.owned(os.path.abspath(path)) or checked_out(path, where.checkout):
        return _content(path)
    return path_state(path)


def interpreter_state() -> list[Any]:
    """What the interpreter the import runs in was started with that a module's code can read: every flag
    (`sys.flags`: optimisation and `__debug__`, development and UTF-8 mode, bytecode writing, the user's site
    folder, the safe path, the digits an int may be read from), the warning options (`-W`, PYTHONWARNINGS), the
    `-X` options, where bytecode is cached (PYTHONPYCACHEPREFIX), the library folder's name and the user's base
    folder's use. The interpreter reads them as it starts, where no look-up of the import's records them. kgate's
    compile workers are started with kgate's own (multiprocessing hands them over, and its environment), so the
    main process's are the workers'. The user's base folder itself is a read of its own (`USER_BASE`), made where
    the project asks for it: it follows HOME, which every import would otherwise be keyed on."""
    import site

    return [list(sys.flags), list(sys.warnoptions), sorted(map(str, sys._xoptions.items())), sys.pycache_prefix,
            getattr(sys, "platlibdir", ""), site.ENABLE_USER_SITE]


def search_folders(where: View) -> list[str]:
    """The folders PYTHONPATH puts on the import path besides the project's own (whose files are watched by name):
    a module found there, or looked for and found nowhere, depends on which they are."""
    named = (os.path.normpath(os.path.join(where.cwd, p)) for p in where.env.get("PYTHONPATH", "").split(os.pathsep)
             if p)
    return [folder for folder in dict.fromkeys(named) if folder not in where.roots]


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except (OSError, ValueError):
        return None


def keyable_file(path: str) -> bool:
    """Whether what reading `path` gives can be named: a regular file (links followed), a folder, the null device
    (always empty) or nothing there; not another device (/dev/urandom), a pipe or a socket, whose content is not a
    file's."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return True  # nothing there (a missing file is a state of its own)
    return stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or _null_device(st)


def _null_device(st: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def keyable(reads: Reads) -> bool:
    """Whether every read of an import has a value a later run can look up again."""
    return not any(name.partition(":")[0] == UNRECORDED for name in reads)


def _whole_env(env: Mapping[str, str]) -> str:
    """The environment a module iterated, as one value: all of it but the diff it runs in (`DIFF_RUN`), kgate's."""
    return hashlib.sha256(repr(sorted((k, v) for k, v in env.items() if k != DIFF_RUN)).encode()).hexdigest()


def _content(path: str) -> str | None:
    """The hash of a regular file's content (read without blocking on what is no longer one), None if none."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return hashlib.sha256(b"").hexdigest() if _null_device(st) else os.urandom(8).hex()
        sha = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
        return sha.hexdigest()


def _kind_of(path: str) -> str | None:
    """What a stat tells of a path that a module can act on: its kind, a file's size (os.path.getsize), the
    permissions (os.access, shutil.which) and a file's link count (another name made or removed for it, which
    `os.path.samefile` tells too). Not its times nor its inode, which a checkout or a copy changes with the content
    kept: a time the project's code reads is a read of its own (`kgate.compile.import_times`)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    permissions = f"{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISREG(st.st_mode):
        return f"file:{st.st_size}:{permissions}:{st.st_nlink}"
    return f"dir:{permissions}" if stat.S_ISDIR(st.st_mode) else "other"


def key(pre: str, reads: Reads) -> str:
    """The key of a record made from an import that read `reads` (name -> value), under static key `pre`."""
    return digest(MANIFEST, pre, sorted(reads.items()))


def find(cache: Cache, pre: str, where: View) -> tuple[str, Reads] | None:
    """(key, reads) of the first list of names recorded under `pre` whose values now have a record (the caller
    says which kind: it looks the key up); None when no list was recorded. The lists are tried newest first."""
    lists = cache.get(MANIFEST, pre, _names_shape)
    for names in lists or []:
        reads = {name: value(name, where) for name in names}
        made = key(pre, reads)
        if cache.get(MANIFEST, made, _names_shape) is not None:  # written with the record: that state was seen
            return made, reads
    return None


def remember(cache: Cache, pre: str, reads: Reads) -> str:
    """Record that an import under `pre` read `reads`; its key."""
    names = sorted(reads)
    lists = [n for n in cache.get(MANIFEST, pre, _names_shape) or [] if n != names]
    cache.put(MANIFEST, pre, [names, *lists][:_KEPT_LISTS])
    made = key(pre, reads)
    cache.put(MANIFEST, made, [names])
    return made


def _names_shape(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(n, list) and all(isinstance(s, str) for s in n)
                                              for n in value):
        raise TypeError("not lists of names")


def working_tree_reads(reads: Reads) -> list[str]:
    """The files of the working tree an import on a base revision's side read in place of the checkout's own copy
    (a path written out absolute: `open("/work/repo/tune.json")`): what it built is not the base's."""
    prefix = f"{UNRECORDED}:{WORKING_TREE} "
    return sorted(name[len(prefix):] for name in reads if name.startswith(prefix))


def unseen_programs(reads: Reads) -> list[str]:
    """The programs an import ran whose own reads kgate does not see (by name), and what it read that no key can
    hold (`unkeyed:the clock`)."""
    return sorted(name.partition(":")[2] if name.startswith(UNSEEN + ":") else name for name in reads
                  if name.startswith((UNSEEN + ":", UNKEYED + ":")))


def unseen_notices(unseen: Mapping[str, list[str]], diff: bool = False) -> list[str]:
    """What a run says of the programs its imports ran whose own reads it does not see, and of what they read that
    no key can hold (docs/performance.md); in a diff, whose sides compile such a module afresh, that it was."""
    out = []
    for module, names in sorted(unseen.items()):
        inputs = [n.partition(":")[2] for n in names if n.startswith(UNKEYED + ":")]
        programs = [n for n in names if not n.startswith(UNKEYED + ":")]
        if programs:
            tail = ("so its kernels were compiled afresh for each side of this diff" if diff else
                    "so nothing made from its import is kept and its kernels are compiled afresh on every run")
            out.append(f"importing {module} ran {', '.join(programs)}, whose own reads kgate does not see, {tail}")
        if inputs:
            tail = ("so its kernels were compiled afresh for each side of this diff" if diff else
                    "its kernels are the ones the run that first compiled them made; run with --no-cache to "
                    "compile them again")
            out.append(f"importing {module} read {' and '.join(inputs)}, which no key can hold: {tail}")
    return out


def still_held(reads: Any, where: View) -> bool:
    """Whether every name of `reads` (as a record kept them: None or a mapping) still holds what it held."""
    if reads is None:
        return True
    return isinstance(reads, dict) and all(value(name, where) == held for name, held in reads.items())


def agree(first: Reads, second: Reads) -> bool:
    """Whether two imports saw the same values wherever both read (a file edited between them did not)."""
    return all(second[name] == held for name, held in first.items() if name in second)
