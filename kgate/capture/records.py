"""The record files of `kgate capture`, read back: every process of the command appends JSON lines to
`records-<pid>-<random>.jsonl` in the capture's folder (`kgate.capture.runtime.Recorder`), and this reads them;
a process whose write failed (a full disk, a file size limit) leaves an empty `lost-<pid>-<errno name>` there.

The folder is named in the command's environment, so anything the command runs may write there: a record
file is an input like any other. It is read through `read_input` (a named pipe, a device, a link or a
folder in its place is refused, unopened or unread, and the size is bounded) and decoded by `jsondoc`; each
line is checked against `SCHEMA`, the one description of every record type and its fields. A line that
fails is one problem line (`kgate capture` prints them) and never a traceback; a last line without its
newline is a write cut short by a killed process, and is dropped without a word, as is its process's
only loss.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgate.capture.runtime import LOST, RECORD_VERSION
from kgate.collect.captures import capability_arch
from kgate.core.schema import MAX_INT64
from kgate.support import jsondoc
from kgate.support.atomicio import read_input

PATTERN = "records-*.jsonl"
# The most problems kept of one record file: a file of garbage is one file to look at, not a million lines.
MAX_PROBLEMS = 5

Check = Callable[[Any], bool]


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _count(value: Any) -> bool:
    """A count the capture file can hold: TOML's integers are 64-bit."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT64


def _capability(value: Any) -> bool:
    return capability_arch(value) is not None


def _any(value: Any) -> bool:
    return True


def _table(value: Any) -> bool:
    return isinstance(value, dict)


def _version(value: Any) -> bool:
    return value == RECORD_VERSION and not isinstance(value, bool)


@dataclass(frozen=True)
class Shape:
    """A record type's fields: those it must have and those it may have, each with its check. A spec record's
    specialisation fields are `Specialization.from_record`'s to judge, with that function's messages; a field
    the recorder does not write (another kgate's) is refused, never dropped: it might change what is compiled."""

    required: dict[str, Check] = field(default_factory=dict)
    optional: dict[str, Check] = field(default_factory=dict)
    open: bool = False  # other keys allowed (the driver's figures of a live record)


# The fields of a specialisation the recorder writes (`kgate.capture.runtime.specialization_record`).
SPECIALISATION = ("signature", "constexprs", "divisible", "equal_to_1", "none", "options")


SCHEMA: dict[str, Shape] = {
    "start": Shape(),  # the process ran the recorder
    "triton": Shape(),  # ... and imported Triton
    "cute-dsl": Shape(),  # ... and imported the CuTe DSL
    "env": Shape({"where": _text}, {"triton": _string, "cute-dsl": _string, "capability": _capability}),
    "lost-child": Shape({"command": _string}),
    "setup-error": Shape({"error": _string}),
    # A launch kgate could not describe carries `problem` and no specialisation; every other one names the
    # file of its kernel (where kgate finds its source).
    "spec": Shape({"id": _text, "kernel": _text, "version": _version},
                  {"problem": _string, "file": _text, **{name: _any for name in SPECIALISATION}}),
    # A `cute.compile` call: the call as a registration holds it (`kgate.core.cute`: checked when it is read into
    # the capture file), or a problem naming why it has no such form.
    "cute": Shape({"id": _text, "kernel": _text, "version": _version}, {"problem": _string, "file": _text, "call": _table}),
    "picked": Shape({"id": _text}),
    "launches": Shape({"id": _text, "count": _count}),
    "live": Shape({"id": _text}, open=True),
}


class BadRecord(ValueError):
    """Why a line is not a record of `SCHEMA` (a few words)."""


def validate(record: Any) -> dict[str, Any]:
    """The record, when it is one of `SCHEMA`; BadRecord naming what is wrong."""
    if not isinstance(record, dict):
        raise BadRecord(f"a JSON {type(record).__name__}, not an object")
    kind = record.get("type")
    shape = SCHEMA.get(kind) if isinstance(kind, str) else None
    if shape is None:
        raise BadRecord(f"unknown record type {_shown(kind)}")
    for name, check in shape.required.items():
        if name not in record:
            raise BadRecord(f"a {kind} record without {name!r}")
        if not check(record[name]):
            raise BadRecord(f"a {kind} record whose {name!r} is {_shown(record[name])}")
    for name, check in shape.optional.items():
        if name in record and not check(record[name]):
            raise BadRecord(f"a {kind} record whose {name!r} is {_shown(record[name])}")
    if not shape.open:
        extra = sorted(set(record) - {"type"} - set(shape.required) - set(shape.optional))
        if extra:
            raise BadRecord(f"a {kind} record with an unknown key {_shown(extra[0])}")
    if kind in ("spec", "cute") and "problem" not in record and "file" not in record:
        raise BadRecord(f"a {kind} record without 'file' (where its kernel is defined)")
    if kind == "cute" and "problem" not in record and "call" not in record:
        raise BadRecord("a cute record without 'call'")
    return record


def _shown(value: Any) -> str:
    """A value in a message, cut short: a record line may be megabytes."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class RecordFile:
    """One process's records, each validated, in the order written; `problems`: lines that were not records;
    `unwritten`: why the process could not write all of its records (its marker file), or None."""

    name: str
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unwritten: str | None = None

    @property
    def where(self) -> str | None:
        """The environment the process launched in (its first env record), None where it wrote none."""
        return next((r["where"] for r in self.records if r["type"] == "env"), None)


def read_folder(folder: Path) -> list[RecordFile]:
    """Every record file in the capture's folder, sorted by name, read and validated."""
    if os.path.islink(folder):  # kgate made a folder there: the command replaced it
        return [RecordFile(folder.name, problems=["the capture's record folder was replaced by a symbolic link: "
                                                  "its records are not read"])]
    try:
        listed = os.listdir(folder)
    except OSError as exc:
        return [RecordFile(str(folder), problems=[f"the capture's record folder cannot be read: {exc.strerror}"])]
    names = sorted(n for n in listed if Path(n).match(PATTERN))
    lost = sorted(n for n in listed if n.startswith(LOST))
    return [*(read_file(folder / name) for name in names), *(_unwritten(name) for name in lost)]


_TAKEN = {"removed": "its record file was deleted while it ran", "truncated": "its record file was cut short"}


def _unwritten(name: str) -> RecordFile:
    """The marker a process leaves where its records are incomplete: `lost-<pid>-<why>`, an errno name (a write
    failed: a full disk, a file size limit) or what became of its file."""
    reason = name.rsplit("-", 1)[-1]
    code = getattr(errno, reason, None) if reason.isupper() and reason.isalpha() else None
    return RecordFile(name, unwritten=os.strerror(code) if isinstance(code, int) else _TAKEN.get(reason, "a write failed"))


def read_file(path: Path) -> RecordFile:
    out = RecordFile(path.name)
    try:
        raw = read_input(path, follow_symlinks=False)
    except OSError as exc:
        out.problems.append(f"record file {path.name}: cannot read it: {exc.strerror}")
        return out
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # no newline after it: a write the process did not finish (killed), dropped
    bad = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.records.append(validate(jsondoc.loads(line)))
        except ValueError as exc:  # NotJSON or BadRecord
            bad += 1
            if bad <= MAX_PROBLEMS:
                out.problems.append(f"record file {path.name}, line {number}: not a record kgate wrote: {exc}")
    if bad > MAX_PROBLEMS:
        out.problems.append(f"record file {path.name}: ... and {bad - MAX_PROBLEMS} more line(s) that are not records")
    wheres = {r["where"] for r in out.records if r["type"] == "env"}
    if len(wheres) > 1:  # one process describes one environment, once (a forked child its parent's, in its own file)
        out.problems.append(f"record file {path.name}: records of {len(wheres)} environments in one process's file "
                            "(a recorder writes one): its launches are not recorded")
    if (out.where is None or len(wheres) > 1) and any(r["type"] in ("spec", "cute") for r in out.records):
        if out.where is None:
            out.problems.append(f"record file {path.name}: launches without the record of where they ran: not "
                                "recorded")
        out.records = [r for r in out.records if r["type"] not in ("spec", "cute")]
    return out
