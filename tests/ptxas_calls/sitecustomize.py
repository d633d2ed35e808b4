"""Records the ptxas commands a process runs, for tests/test_compiled_rules.py's independent ptxas run.

On PYTHONPATH with KGATE_TEST_PTXAS_CALLS set to a folder, every Python process of a kgate run (kgate, its
fork server and the compile workers forked from it) appends each ptxas command it starts to
calls-<pid>.jsonl there, with a copy of the PTX file the command reads (Triton deletes its own once the
compile ends). It changes nothing about the run: the compiler is the one Triton picks, so the run's cache
is the same as without it. Python's audit hook for subprocess.Popen sees the command before it starts.
"""

from __future__ import annotations

import os
import sys

_FOLDER = os.environ.get("KGATE_TEST_PTXAS_CALLS")


def _record(event: str, args: tuple) -> None:
    if event != "subprocess.Popen" or not isinstance(args[1], (list, tuple)) or not args[1]:
        return
    command = [os.fsdecode(part) for part in args[1]]
    if not os.path.basename(command[0]).startswith("ptxas"):
        return
    import json
    import shutil
    import uuid

    saved = None
    for part in command:
        if part.endswith(".ptx") and os.path.isfile(part):
            saved = os.path.join(_FOLDER, uuid.uuid4().hex + ".ptx")
            shutil.copyfile(part, saved)
    with open(os.path.join(_FOLDER, f"calls-{os.getpid()}.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"command": command, "ptx": saved}) + "\n")


if _FOLDER:
    sys.addaudithook(_record)
