"""What a compile worker wrote to its stderr, read for the outcome of a task that failed.

A compiler says some things only on stderr: MLIR's diagnostics (`file:line:col: error: ...`), printed before Triton
raises "error encountered during parsing"; LLVM's "Cannot select" for an instruction the target lacks, printed as it
aborts the process. `kgate.compile.pool` keeps what each task's worker wrote and asks here what to quote.
"""

from __future__ import annotations

import os
import re

# An MLIR diagnostic a compiler prints as it fails: "path:line:col: error: message".
_DIAGNOSTIC = re.compile(r"^(\S[^:\n]*):(\d+):\d+: error: (.+)$", re.MULTILINE)


def diagnosed(message: str, said: str) -> tuple[str, tuple[str, int] | None] | None:
    """A failed task's message with the compiler's diagnostics the task printed that it does not already hold (three
    at most), and the first diagnostic's file and line where that file exists; None where it printed none."""
    found = list(dict.fromkeys(_DIAGNOSTIC.findall(said)))
    messages = [text for _path, _line, text in found if text not in message]
    if not messages:
        return None
    path, line, _text = found[0]
    return (f"{message}; the compiler said: {'; '.join(dict.fromkeys(messages[:3]))}",
            (path, int(line)) if os.path.isfile(path) else None)


def last_words(text: str) -> str:
    """The last line a dead worker wrote, shortened: what the compiler that stopped it said (`LLVM ERROR: ...`)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# A frame of the stack `faulthandler` dumps ("  File "/p/m.py", line 12 in f"), and the header of each thread's.
_FRAME = re.compile(r'^\s+File "([^"\n]+)", line (\d+) in (\S+)', re.MULTILINE)
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$|^Stack \(most recent call "
                     r"first\):$", re.MULTILINE)
DUMPED = "most recent call first"
_KGATE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stopped_at(text: str, libraries: tuple[str, ...]) -> tuple[str, int, str, bool] | None:
    """Where a worker stopped past its deadline was in the project's code (file, line, function), from the stack it
    dumped on the signal kgate sent (`faulthandler`): in the thread that was running kgate's task, the innermost
    frame outside kgate, the import machinery and `libraries` (the standard library's and the installed packages'
    folders: a wait in `threading` or a client library was called from the project's line), and whether it was in
    an import (the import machinery's frames under it); None where no frame is the project's (a compiler that does
    not end)."""
    start = text.rfind(DUMPED)
    if start < 0:
        return None
    dump = text[text.rfind("\n", 0, start) + 1:]
    heads = [m.start() for m in _THREAD.finditer(dump)] + [len(dump)]
    for begin, end in zip(heads, heads[1:]):
        frames = [(path, int(line), name) for path, line, name in _FRAME.findall(dump, begin, end)]
        if not any(path.startswith(_KGATE + os.sep) for path, _line, _name in frames):
            continue  # another thread of the worker
        project = [f for f in frames if not f[0].startswith((_KGATE + os.sep, "<", *libraries))]
        if not project:
            return None
        path, line, name = project[0]
        importing = any(frame[0].startswith("<frozen importlib") for frame in frames)
        return (_shown(path), line, name, importing)
    return None


def _shown(path: str) -> str:
    """A file as a message names it: relative to the folder kgate runs in where it lies there."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return relative if not relative.startswith(os.pardir) else path
