"""Replaying a `kgate check` or `kgate lint` whose inputs have not changed since it last ran.

A warm run with nothing changed should cost about what starting Python
does, not what collecting, hashing and re-reading every cached record does.
So a finished `kgate check` leaves a run record: the exact output it wrote
and its exit code, keyed by the command line and the environment that can
change the result, together with a snapshot of everything it read: every
file and folder of the project (with the configured exclusions, symlinked
folders followed), every file and folder the run itself read wherever it is
(recorded as it read them, by `kgate.support.reads`: kernel modules under a
`python-path` elsewhere, modules in excluded folders, `compile_commands.json`,
what compile workers imported), the configuration, the toolchain's files as
they are reached (through symlinks, not resolved once) and kgate's own. The
next identical command stats those paths; if every one is unchanged (size,
modification and change times, inode) it writes the recorded output and
exits, without importing the rest of kgate. Any difference, or any doubt,
falls through to the full run; so does a record that is not as it was
written (it carries a hash of its content: an edited output or exit code is
never replayed).

The snapshot is taken before the run, and the record keeps the states it
took: an edit made while kgate was running gives the file another state
than the recorded one, so the next run is a full one (a replay stats every
input anyway; checking them all a second time after the run would only
spare writing a record that is never replayed). A run whose outcome
depended on its circumstances (a compile that timed out, a worker that
died) leaves no record.

A `kgate lint` in a folder without a configuration (the defaults, the
folder its root) leaves its record in that folder's cache as well; the
record vouches for the configuration's absence: the `kgate.toml` and
`pyproject.toml` of that folder and of every folder above it are among its
inputs, so one that appears (or changes) runs it again.

A run record is a cache record: it names its key and its project and
carries a hash of its content, and a replay checks all three. It can only
write the report the command line's `-o` names, nothing else, and one that
vouches for no input (not even the configuration) is not replayed.

This module imports only the standard library's cheapest parts: it runs
before anything else in the process.
"""

from __future__ import annotations

import json
import os
import sys

from kgate.core.discovery import find_config
from kgate.support import jsondoc
from kgate.support.filestat import path_state
from kgate.support.hashing import sha256
from kgate.support.reads import env_value, listing

RECORD_VERSION = 5  # 3: a record names its key, project and command line and carries a hash of its content;
# 4: and the environment variables kernel modules looked up as they were imported; 5: the hash is of the record's bytes
# Environment variables that can change what a check finds.
_ENV_PREFIXES = ("TRITON_", "CUDA", "NVCC", "KGATE_", "NVIDIA_")
_ENV_NAMES = ("PATH", "PYTHONPATH", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LD_LIBRARY_PATH", "CI")
# Flags whose output describes the run itself (counts of compiled kernels), not the inputs; and flags that print
# something else than the report (the settings, the files), which is never recorded.
UNCONFIGURED = "kgate.toml"  # the name a lint without a configuration records its absence under
_NOT_REPLAYED = ("-v", "--verbose", "--no-cache", "-h", "--help", "--triton", "--cute-dsl", "--show-settings",
                 "--show-files")


def _cache_dir(config_path: str) -> str | None:
    root = os.path.dirname(config_path)
    if not os.path.lexists(config_path) and os.path.basename(config_path) == UNCONFIGURED:
        return os.path.join(root, ".kgate-cache")  # a lint without a configuration: the defaults, cwd the root
    try:
        from kgate.support.atomicio import read_input

        data = read_input(config_path)  # a named pipe given as --config would block here
    except OSError:
        return None
    if b"cache-dir" not in data:
        return os.path.join(root, ".kgate-cache")
    try:
        from kgate.core.config import load_config

        config = load_config(_path(config_path))
    except Exception:  # noqa: BLE001 - any doubt means the full run, which reports it properly
        return None
    return os.path.join(str(config.root), config.cache_dir)


def _path(text: str):  # type: ignore[no-untyped-def]
    from pathlib import Path

    return Path(text)


def run_key(argv: list[str], config: str = "") -> str:
    from kgate.support.compiler_env import NVCC_NAMES, triton_names

    knobs = triton_names()  # the compilers' own variables, without a prefix of these (DISABLE_PTXAS_OPT, CPATH)
    env = {k: v for k, v in os.environ.items()
           if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES or k in NVCC_NAMES or k in knobs}
    from kgate import __version__

    # How the interpreter was started (-O, -W, PYTHONOPTIMIZE): compile workers are started so too, and a kernel
    # module's import may read it (`__debug__`, sys.warnoptions).
    blob = json.dumps([RECORD_VERSION, __version__, sys.executable, sys.version, list(sys.flags), sys.warnoptions,
                       os.getcwd(), config, argv, sorted(env.items()), sys.stdout.isatty(), sys.stderr.isatty(),
                       _repository(config)])
    return sha256(blob.encode()).hexdigest()


def _repository(config: str) -> str | None:
    """The git repository the project is in (its .gitignore files count only inside one): the folder that holds
    `.git`. Part of the key, since `git init` changes what a lint walks without changing a file it reads."""
    folder = os.path.dirname(config) if config else os.getcwd()
    while not os.path.lexists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return folder


class _Where:
    """Where a command's run record lives, and what it describes."""

    def __init__(self, config: str, cache: str, key: str) -> None:
        self.config, self.cache, self.key = config, cache, key
        self.path = os.path.join(cache, "v1", "runs", key + ".json")


def _record_path(argv: list[str]) -> _Where | None:
    # A matrix run (`--triton`, `--cute-dsl`) also depends on environments outside the project: always run it whole.
    if any(arg.split("=", 1)[0] in _NOT_REPLAYED for arg in argv) or _output_of(argv) is False:
        return None
    config = _explicit_config(argv) or find_config(os.getcwd())
    if config is None:
        if argv[:1] != ["lint"]:
            return None
        config = unconfigured(os.getcwd())
    cache = _cache_dir(config)
    if cache is None:
        return None
    return _Where(config, os.path.abspath(cache), run_key(argv, config))


def unconfigured(folder: str) -> str:
    """Where a lint in `folder` without a configuration records its configuration: the `kgate.toml` that is not
    there (a record vouches for its absence, and for every place above where one would be found: `candidates`)."""
    return os.path.join(os.path.realpath(folder), UNCONFIGURED)


def candidates(folder: str, config: str) -> list[str]:
    """The files whose appearance or change would give a run in `folder` another configuration than `config`: the
    `kgate.toml` and `pyproject.toml` of `folder` and of every folder above it, up to the configuration's own."""
    out: list[str] = []
    here = os.path.realpath(folder)
    top = os.path.dirname(config) if os.path.lexists(config) else ""  # none: every folder above
    while True:
        out.extend(os.path.join(here, name) for name in (UNCONFIGURED, "pyproject.toml"))
        parent = os.path.dirname(here)
        if here == top or parent == here:
            return out
        here = parent


def config_of(argv: list[str]) -> str | None:
    """The configuration file a replay of this command would look for its record by (None: never replayed)."""
    where = _record_path(argv)
    return where.config if where is not None else None


def _output_of(argv: list[str]) -> str | None | bool:
    """The report file the command line names (`-o`), None for none, False when it cannot be told for sure
    without argparse (a bundle of short flags such as `-qo`): such a command is never replayed."""
    found: str | None = None
    for index, arg in enumerate(argv):
        if arg in ("-o", "--output"):
            if index + 1 >= len(argv):
                return False
            found = argv[index + 1]
        elif arg.startswith("--output="):
            found = arg.split("=", 1)[1]
        elif arg.startswith("-o"):
            found = arg[2:]
        elif arg.startswith("-") and not arg.startswith("--") and "o" in arg[1:]:
            return False
    return os.path.abspath(found) if found else None


def _explicit_config(argv: list[str]) -> str | None:
    for index, arg in enumerate(argv):
        if arg == "--config" and index + 1 < len(argv):
            return os.path.abspath(argv[index + 1])
        if arg.startswith("--config="):
            return os.path.abspath(arg.split("=", 1)[1])
    return None


def replay(argv: list[str]) -> int | None:
    """Write the recorded output of an unchanged `kgate check` and return its exit code; None to run it."""
    _STATED.clear()
    where = _record_path(argv)
    if where is None:
        return None
    from kgate.support.atomicio import read_cached

    data = read_cached(where.path)  # never a named pipe, a device, a link or an endless file
    if data is None:
        return None
    try:
        record = jsondoc.loads(_unsealed(data))
        if not _describes(record, argv, where):
            return None  # another key's record, another project's, damaged or made by hand: the full run
        taken = _STATED[tuple(argv)] = {}
        for name, stat in record["files"].items():
            now = taken[name] = path_state(name)
            if now != stat:
                return None
        for name, (kept, ignored) in record["dirs"].items():
            if listing(name, ignored) != kept:
                return None
        if not _env_holds(record["env"]):
            return None
        stdout, stderr, code = record["stdout"], record["stderr"], record["exit"]
        for name, content in record["outputs"].items():
            _rewrite(name, content)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    _STATED.clear()
    sys.stdout.write(stdout)
    sys.stdout.flush()
    sys.stderr.write(stderr)
    sys.stderr.flush()
    return int(code)


# The states of files a replay that did not hold took, by its command line: the snapshot of the full run that follows
# it takes them rather than stating those files a second time (`stated`); what that run does not take is dropped when
# it ends (`kgate.entry`), so they never outlive it.
_STATED: dict[tuple[str, ...], dict[str, list[int] | None]] = {}


def stated(argv: list[str]) -> dict[str, list[int] | None]:
    """The states this command's replay took before it gave way to the full run (none for another command)."""
    found = _STATED.get(tuple(argv), {})
    _STATED.clear()
    return found


def _env_holds(env: dict) -> bool:
    return all(env_value(name) == held for name, held in env.items())


def _describes(record: dict, argv: list[str], where: _Where) -> bool:
    """Whether a run record is the one this command, in this project, would have left: its key, project,
    command line and content as written; the only file it writes is the report `-o` names; and it vouches for
    the configuration at least (a record that vouches for no input would stand in for any run)."""
    if not isinstance(record, dict):
        return False
    if (record.get("version"), record.get("key"), record.get("config"), record.get("argv")) != (
            RECORD_VERSION, where.key, where.config, argv):
        return False
    outputs, wanted = record["outputs"], _output_of(argv)
    if not isinstance(outputs, dict) or set(outputs) != ({wanted} if isinstance(wanted, str) else set()):
        return False
    if not all(isinstance(v, str) for v in outputs.values()) or where.config not in record["files"]:
        return False
    return isinstance(record["stdout"], str) and isinstance(record["stderr"], str) and record["exit"] in (0, 1, 2)


_SEAL = b',"sha256":"'


def _sealed(record: bytes) -> bytes:
    """A record (a JSON object's bytes) with the hash of those bytes as its last member, `sha256`."""
    return record[:-1] + _SEAL + sha256(record).hexdigest().encode() + b'"}'


def _unsealed(data: bytes) -> bytes:
    """The record `_sealed` sealed, if its hash matches; ValueError for anything else (a record edited or damaged,
    even if still JSON, or written otherwise)."""
    at = data.rfind(_SEAL)
    record = data[:at] + b"}"
    if at < 0 or len(data) != at + len(_SEAL) + 66 or not data.endswith(b'"}') or \
            data[at + len(_SEAL):-2] != sha256(record).hexdigest().encode():
        raise ValueError("not a run record as it was written")
    return record


def _rewrite(name: str, content: str) -> None:
    """Write an output file again only where it is gone or differs (it is not an input)."""
    try:
        with open(name, encoding="utf-8") as handle:
            if handle.read() == content:
                return
    except (OSError, UnicodeDecodeError):
        pass
    from kgate.support.atomicio import atomic_write

    atomic_write(_path(name), content.encode())


# --------------------------------------------------------------------------- recording (after a full run)


class Snapshot:
    """The stats of every input of a run, taken before it (a replay holds only while they all still hold).

    Folders are compared by their listings (less the entries the run does not read), not their
    modification times: writing the cache or a report next to the sources is not a change.
    """

    def __init__(self, files: dict[str, list[int] | None], dirs: dict[str, list[list[str]]]) -> None:
        self.files = files
        self.dirs = dirs
        self.env: dict[str, str | None] = {}  # variables kernel modules looked up as they were imported
        # Each folder's entries as the walk listed them, sorted by name (not recorded): the run's own walks of the
        # project take them rather than listing every folder again (`kgate.support.filestat.listed`).
        self.entries: dict[str, list[os.DirEntry[str]]] = {}

    @classmethod
    def take(cls, root: str, exclude: tuple[str, ...], skip: tuple[str, ...], extra: list[str],
             stated: dict[str, list[int] | None] | None = None) -> Snapshot:
        """`stated`: states of some of the files, taken already by this run (`stated`)."""
        from kgate.collect.files import Exclusions

        known = stated or {}

        excluded = Exclusions(exclude)

        files: dict[str, list[int] | None] = {}
        dirs: dict[str, list[list[str]]] = {}
        listed: dict[str, list[os.DirEntry[str]]] = {}
        skip_abs = {os.path.abspath(s) for s in skip}
        # (folder, its project-relative name with a trailing "/"): the folders above were tested already.
        stack = [(root, "")]
        seen: set[tuple[int, int]] = set()
        while stack:
            folder, prefix = stack.pop()
            try:
                st = os.stat(folder)
                if (st.st_dev, st.st_ino) in seen:  # a symlink loop, or a folder reached twice
                    continue
                seen.add((st.st_dev, st.st_ino))
                entries = listed[folder] = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            kept: list[str] = []
            # Outputs and caches of the run itself, whether they exist yet or not.
            ignored: list[str] = sorted(os.path.basename(p) for p in skip_abs if os.path.dirname(p) == folder)
            for entry in entries:
                rel = prefix + entry.name
                if excluded.entry(rel, entry.name) or entry.path in skip_abs:
                    if entry.name not in ignored:
                        ignored.append(entry.name)
                    continue
                kept.append(entry.name)
                # A symlinked folder is followed, as the lint walk follows it: an edit in place behind it shows.
                if _is_dir(entry):
                    stack.append((entry.path, rel + "/"))
                else:
                    files[entry.path] = known[entry.path] if entry.path in known else path_state(entry.path)
            dirs[folder] = [kept, ignored]
        for name in extra:
            path = os.path.abspath(name)
            files[path] = known[path] if path in known else path_state(name)
        taken = cls(files, dirs)
        taken.entries = listed
        return taken

    def add(self, files: dict[str, list[int] | None], dirs: dict[str, list[list[str]]],
            env: dict[str, str | None] | None = None) -> None:
        """What the run read beyond the project walk (`kgate.support.reads`), with its state when it was read."""
        for name, held in (env or {}).items():
            self.env.setdefault(name, held)
        for name, stat in files.items():
            self.files.setdefault(name, stat)
        for name, listed in dirs.items():
            self.dirs.setdefault(name, listed)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def compiler_files() -> list[str]:
    """Files whose change means a different compiler: Triton's package and tools, nvcc."""
    import importlib.util
    import shutil

    out: list[str] = []
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin:
        package = os.path.dirname(spec.origin)
        out.append(spec.origin)
        tools = os.path.join(package, "backends", "nvidia", "bin")
        if os.path.isdir(tools):
            out.extend(os.path.join(tools, name) for name in sorted(os.listdir(tools)))
    for name in ("nvcc", "ptxas", "cuobjdump", "nvdisasm"):
        found = shutil.which(name)
        if found:
            # As reached, not resolved: a symlinked toolkit folder pointed at another release changes the
            # state of this path (its target's), where the resolved path of the old release would not change.
            out.append(os.path.abspath(found))
    return out


def kgate_files() -> list[str]:
    """kgate's own sources and data: a changed kgate is a different gate."""
    import importlib.util

    out: list[str] = []
    for module in ("kgate", "kgate.rules", "kgate.kernels"):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                for dirpath, _dirs, names in os.walk(folder):
                    out.extend(os.path.join(dirpath, n) for n in sorted(names)
                               if n.endswith((".py", ".toml", ".cu", ".cuh")))
    return out


def record(argv: list[str], snapshot: Snapshot, stdout: str, stderr: str, code: int,
           outputs: dict[str, str]) -> None:
    """Leave the run record for `replay`, with the states the run's inputs had before it began."""
    where = _record_path(argv)
    if where is None or where.config not in snapshot.files:
        return
    wanted = _output_of(argv)
    if set(outputs) != ({wanted} if isinstance(wanted, str) else set()):
        return
    data = {"version": RECORD_VERSION, "key": where.key, "config": where.config, "argv": argv,
            "files": snapshot.files, "dirs": snapshot.dirs, "env": snapshot.env, "stdout": stdout, "stderr": stderr,
            "exit": code, "outputs": outputs}
    from kgate.support.atomicio import write_cached

    try:
        write_cached(_path(where.path), _sealed(json.dumps(data, separators=(",", ":")).encode()), sealed=True)
    except OSError:
        return  # no record: the next run is a full one, nothing else is lost
    _prune(os.path.dirname(where.path))


def _prune(folder: str, keep: int = 64) -> None:
    """Keep the most recent records only: a commit hook runs with a new list of files every time."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.endswith(".json")]
        if len(entries) <= keep:
            return
        entries.sort(key=lambda e: e.stat().st_mtime_ns, reverse=True)
        for entry in entries[keep:]:
            os.unlink(entry.path)
    except OSError:
        pass
