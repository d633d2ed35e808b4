"""`kgate capture -- COMMAND`: run a command with the recorder in each of its Python processes, then fold
what they recorded into the project's capture file.

The command runs as it would without kgate (its output, its exit code); every Python process it
starts loads `kgate/capture/boot/sitecustomize.py` first (PYTHONPATH), which installs the recorder
(`kgate.capture.runtime`) the moment Triton is imported. Each process appends its records to a
file of its own in a temporary folder as it goes, so a process that crashes or is killed keeps
what it recorded; the capture file is written once, at the end, whole (atomically), under a lock
so that two captures at once merge instead of losing one another's entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgate.capture import records, runtime
from kgate.collect import captures, membership
from kgate.collect.captures import CapturedSpec, CaptureFile
from kgate.collect.modules import import_roots, module_file, module_name, setup_env
from kgate.collect.specialization import Specialization
from kgate.core.config import Config, parse_cute_entry
from kgate.core.cute import CuteEntry
from kgate.core.errors import KgateError
from kgate.core.schema import CAPABILITY

BOOT = Path(__file__).resolve().parent / "boot"


@dataclass
class Recorded:
    """What the command's processes recorded, read back from their record files."""

    file: CaptureFile = field(default_factory=CaptureFile)
    problems: list[str] = field(default_factory=list)  # one line each: launches kgate cannot gate
    outside: dict[str, int] = field(default_factory=dict)  # kernel -> specialisations defined outside the project
    live: dict[str, dict[str, Any]] = field(default_factory=dict)  # `live_key` -> what the driver reported
    processes: int = 0  # processes that recorded a launch
    started: int = 0  # Python processes of the command that ran kgate's recorder
    imported: int = 0  # ... and imported Triton or the CuTe DSL, the recorder's hooks installed
    cute: int = 0  # ... of which imported the CuTe DSL
    lost: list[str] = field(default_factory=list)  # Python children started with an environment without the capture
    unwritten: list[str] = field(default_factory=list)  # why processes could not write all their records
    damaged: bool = False  # a record file held what kgate's recorder does not write, or could not be read

    @property
    def incomplete(self) -> bool:
        """Whether a launch may be missing that no line names: the capture is not a whole record of what ran."""
        return self.damaged or bool(self.unwritten)


def gpu_present() -> bool:
    """Whether this machine has a CUDA GPU the driver can see (without importing torch or Triton)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except (OSError, AttributeError):
        return False


def command_env(config: Config, folder: Path, *, offline: bool, target: str, live: bool, counts: bool
                ) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env[runtime.ENV_DIR] = str(folder)
    env[runtime.ENV_MODE] = "offline" if offline else "gpu"
    env[runtime.ENV_TARGET] = str(CAPABILITY[target])
    env[runtime.ENV_WHERE] = f"cpu {target}"
    env[runtime.ENV_LIVE] = "1" if live else "0"
    env[runtime.ENV_COUNTS] = "1" if counts else "0"
    for key, value in setup_env(config).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kgate-capture-"))
    try:
        yield folder
    finally:
        if folder.is_symlink():  # the command replaced kgate's folder with a link: remove the link, not its target
            folder.unlink()
        shutil.rmtree(folder, ignore_errors=True)


def read_records(config: Config, folder: Path) -> Recorded:
    """Every record file of the command's processes (`kgate.capture.records`: read and validated), as capture-file
    entries; what is not a record is a problem line."""
    roots = import_roots(config.root, config.python_path)
    project = config.root.resolve()
    out = Recorded()
    specs: dict[str, CapturedSpec] = {}
    ids: dict[str, str] = {}  # record id -> entry key
    cute: list[CuteEntry] = []
    calls: dict[str, str] = {}  # a cute.compile record's id -> its call's identity ("kernel|variant")
    files = records.read_folder(folder)
    for read in files:
        out.problems.extend(read.problems)
        out.damaged = out.damaged or bool(read.problems)
        if read.unwritten is not None:
            out.unwritten.append(read.unwritten)
        kinds = {r["type"] for r in read.records}
        out.started += "start" in kinds
        out.imported += bool(kinds & {"triton", "cute-dsl"})
        out.cute += "cute-dsl" in kinds
        out.processes += bool(kinds & {"spec", "cute"})
        for record in read.records:
            if record["type"] == "cute" and read.where is not None:
                made = _cute_entry(record, read.where, roots, project, out)
                cute.extend(made)
                for call in (call for entry in made for call in entry.calls()):
                    calls[record["id"]] = live_key(call.kernel, call.variant)
            else:
                _note(record, read.where, specs, ids, (roots, project, out))
    # What refers to a specialisation by its id, after every file's specialisations: a forked child counts the
    # launches of one its parent recorded, whichever file is read first.
    for read in files:
        for record in read.records:
            if record.get("id") in ids:
                _refer(record, ids[record["id"]], specs, out)
            elif record["type"] == "live" and record["id"] in calls:  # the driver's figures of a call's kernels
                out.live[calls[record["id"]]] = {k: v for k, v in record.items() if k not in ("type", "id")}
    out.file.entries = sorted(specs.values(), key=lambda e: (e.spec.kernel, e.spec.variant, e.key))
    out.file.cute = captures.merged_cute([], cute, replace_kernels=False)
    return out


def _note(record: dict[str, Any], where: str | None, specs: dict[str, CapturedSpec], ids: dict[str, str],
          context: tuple[list[Path], Path, Recorded]) -> None:
    """One record of a process that launched in `where`: a specialisation, an environment, a problem."""
    roots, project, out = context
    kind = record["type"]
    if kind == "lost-child" and record["command"] not in out.lost:
        out.lost.append(record["command"])
    elif kind == "env":
        described: dict[str, str] = {name: str(record[name]) for name in ("triton", "cute-dsl") if name in record}
        if "capability" in record:  # what its launcher bound for: which target its entries are gated on
            described["capability"] = record["capability"]
        out.file.environments.setdefault(record["where"], described)
    elif kind == "setup-error":
        out.problems.append(f"the set-up hook failed in a process of the command: {record['error']}")
    elif kind == "spec" and where is not None:
        entry = _entry(record, where, roots, project, out)
        if entry is None:
            return
        before = specs.get(entry.key)
        if before is not None:
            entry = CapturedSpec(entry.spec, tuple(sorted(set(before.captured) | set(entry.captured))),
                                 before.picked, before.launches)
        specs[entry.key] = entry
        ids[record["id"]] = entry.key


def _refer(record: dict[str, Any], key: str, specs: dict[str, CapturedSpec], out: Recorded) -> None:
    """A record about a recorded specialisation: the autotuner picked it, how often it launched, the driver's
    figures of it."""
    kind = record["type"]
    item = specs[key]
    if kind == "picked":
        specs[key] = CapturedSpec(item.spec, item.captured, True, item.launches)
    elif kind == "launches":
        specs[key] = CapturedSpec(item.spec, item.captured, item.picked, captures.added_launches(item.launches,
                                                                                                  record["count"]))
    elif kind == "live":
        out.live[live_key(item.spec.kernel, item.spec.variant)] = {k: v for k, v in record.items()
                                                                   if k not in ("type", "id")}


def live_key(kernel: str, variant: str) -> str:
    """The identity `Recorded.live` holds a variant's figures under: a Triton specialisation's, or a `cute.compile`
    call's (its figures then hold each kernel's, by symbol)."""
    return f"{kernel}|{variant}"


def _entry(record: dict[str, Any], where: str, roots: list[Path], project: Path, out: Recorded) -> CapturedSpec | None:
    kernel = _located(record, roots, project, out)
    if kernel is None:
        return None
    try:
        spec = Specialization.from_record({**record, "kernel": kernel})
    except ValueError as exc:
        out.problems.append(f"{record['kernel']}: not recorded: {exc}")
        return None
    return CapturedSpec(spec, (where,))


def _cute_entry(record: dict[str, Any], where: str, roots: list[Path], project: Path, out: Recorded
                ) -> list[CuteEntry]:
    """A `cute.compile` call as a captured `[[cute]]` entry: the call checked as a registration of it is."""
    kernel = _located(record, roots, project, out, what="cute.compile call")
    if kernel is None:
        return []
    call = record["call"]
    try:
        entry = parse_cute_entry({"kernel": kernel, "args": [call.get("args")], "init": call.get("init", {}),
                                  "options": call.get("options", ""), "captured": [where]},
                                 f"a cute.compile call of {kernel}", source="captured")
    except KgateError as exc:
        out.problems.append(f"{record['kernel']}: cute.compile call not recorded: {exc}")
        return []
    return [entry]


def _located(record: dict[str, Any], roots: list[Path], project: Path, out: Recorded, what: str = "launch"
             ) -> str | None:
    """The name `kgate check` imports a recorded kernel by (`package.module:name`); None, with a problem line or
    counted as a kernel outside the project, where it cannot gate it."""
    kernel = str(record.get("kernel", "?"))
    if "problem" in record:
        out.problems.append(f"{kernel}: {what} not recorded: {record['problem']}" if what != "launch"
                            else f"{kernel}: not recorded: {record['problem']}")
        return None
    module, _, qualname = kernel.partition(":")
    if not module or not all(part.isidentifier() for part in module.split(".")) or not qualname:
        out.problems.append(f"{kernel}: not recorded: not a kernel's name as \"package.module:function\"")
        return None
    if "<locals>" in qualname or "." in qualname:
        out.problems.append(f"{kernel}: defined inside a function or class, so kgate cannot import it to compile it "
                            f"(define the kernel at the top level of a module)")
        return None
    if not qualname.isidentifier():
        out.problems.append(f"{kernel}: not recorded: not a kernel's name as \"package.module:function\"")
        return None
    if module == "__main__":
        out.problems.append(f"{kernel}: defined in the script the command ran; importing a script runs it, so kgate "
                            f"gates kernels of modules (move the kernel into one the script imports)")
        return None
    file = Path(record.get("file") or "")
    try:
        inside = membership.in_project(file.resolve(), [str(project)])
    except (OSError, ValueError):  # a name the file system cannot hold (a NUL byte) is no file of the project
        inside = False
    if inside:
        if not file.is_file():  # a module the command wrote, launched from and removed: nothing to compile
            out.problems.append(f"{kernel}: not recorded: its file {os.path.relpath(file, project)} no longer exists "
                                f"(the command removed it), so kgate cannot import it to compile it")
            return None
        located = module_name(file, roots)
        if located is None:
            out.problems.append(f"{kernel}: {file.relative_to(project)} is not under python-path, so kgate cannot "
                                f"import it (add its folder to python-path)")
            return None
        module = located[0]
    elif module_file(module, roots) is None:
        # Not the project's: a library's kernel, or code generated at run time (torch.compile).
        out.outside[kernel] = out.outside.get(kernel, 0) + 1
        return None
    # else: the project's own module, run from an installed copy; kgate gates the project's source of it.
    return f"{module}:{qualname}"


@contextlib.contextmanager
def locked(config: Config) -> Iterator[None]:
    """One capture at a time folds into the file (another waits), so neither loses the other's entries."""
    import fcntl

    from kgate.support.cachedir import claim

    folder = config.root / config.cache_dir
    # The lock lives in the cache folder: claimed as kgate's first, as every writer into it does.
    claim(folder, config.cache_dir, config.display() if config.source else None)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / "capture.lock", "a")
    except OSError:
        yield  # no cache folder to lock in: the write is still atomic
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fold(config: Config, recorded: Recorded, *, output: Path, display: str, replace: bool) -> tuple[int, int]:
    """Merge what was recorded into the capture file; (entries now, entries new)."""
    with locked(config):
        old = captures.load(output, display)
        merged = captures.merge(old, recorded.file, replace_kernels=replace)
        before = {e.key for e in old.entries} | {_cute_key(e) for e in old.cute}
        if merged.entries or merged.cute or output.exists():
            captures.save(merged, output, display)
    keys = [e.key for e in merged.entries] + [_cute_key(e) for e in merged.cute]
    return len(keys), sum(key not in before for key in keys)


def _cute_key(entry: CuteEntry) -> str:
    return "cute " + json.dumps(entry.calls()[0].to_record(), sort_keys=True)


def describe(recorded: Recorded) -> list[str]:
    """One line per thing the user should know that is not an entry of the file."""
    lines = [f"kgate: error: a process of the command could not write its records ({reason}): what it launched is "
             f"not recorded" for reason in dict.fromkeys(recorded.unwritten)]
    lines += [f"kgate: {p}" for p in recorded.problems[:10]]
    if len(recorded.problems) > 10:
        lines.append(f"kgate: ... and {len(recorded.problems) - 10} more launch(es) that cannot be recorded")
    for command in recorded.lost[:3]:
        lines.append(f"kgate: warning: a process of the command started `{command}` with an environment of its own "
                     f"that drops the capture, so its launches are not recorded (keep {runtime.ENV_DIR} and add to "
                     f"PYTHONPATH instead of replacing it)")
    if recorded.outside:
        count = sum(recorded.outside.values())
        names = ", ".join(sorted(recorded.outside)[:3])
        more = "" if len(recorded.outside) <= 3 else f" and {len(recorded.outside) - 3} more"
        lines.append(f"kgate: note: {count} specialisation(s) of {len(recorded.outside)} kernel(s) defined outside the "
                     f"project were not recorded ({names}{more}): kgate gates the project's own kernels")
    return lines


def interpreter_note() -> str | None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return ("TRITON_INTERPRET is set: the interpreter runs the kernels without Triton's launcher, so there is "
                "nothing to capture (unset it for the capture)")
    return None
