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
