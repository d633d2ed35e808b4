"""What a kernel module's import reads by means the recorder did not see: the environment read as a file
(`/proc/self/environ`, which the recorder skipped with the rest of /proc), and C functions the module looks up
and calls through ctypes (`getenv`, `fopen`), whose reads no audit event shows. Each case is a project holding one
module whose one autotune config takes its BLOCK from the read: a cold check, the change, a warm check; the warm
row must be the new variant (8192), never the record of the old one (256)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_held_out_import_reads_third import FIRST_ENV, _rows
from test_held_out_keys import _write
from test_import_keys import CFG, HELPERS, _module

CTYPES = '''import ctypes
_LIBC = ctypes.CDLL(None)
_LIBC.getenv.restype = ctypes.c_char_p
_LIBC.fopen.restype = ctypes.c_void_p
_LIBC.fgets.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]


def _fread(path):
    found = _LIBC.fopen(path.encode(), b"r")
    text = ctypes.create_string_buffer(16)
    _LIBC.fgets(text, 16, ctypes.c_void_p(found))
    _LIBC.fclose(ctypes.c_void_p(found))
    return int(text.value)
'''
PROC = '''def _proc_env(name, default):
    with open("/proc/self/environ") as f:
        pairs = [item.split("=", 1) for item in f.read().split("\\0") if "=" in item]
    return int(dict(pairs).get(name, default))
'''

# case -> (preamble, BLOCK expression, files, the change); `env:NAME` in a change is a variable of the second run.
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "proc_self_environ": (PROC, '_proc_env("MYPROJ_PROC", 256)', {}, {"env:MYPROJ_PROC": "8192"}),
    "ctypes_getenv": (CTYPES, 'int(_LIBC.getenv(b"MYPROJ_LIBC") or b"256")', {}, {"env:MYPROJ_LIBC": "8192"}),
    "ctypes_fopen": (CTYPES, '_fread(os.path.join(HERE, "d", "c.txt"))', {"d/c.txt": "256"}, {"d/c.txt": "8192"}),
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and the C library's getenv of Linux")
@pytest.mark.parametrize("case", sorted(CASES))
def test_reads_no_audit_event_shows_are_in_the_key(tmp_path: Path, case: str) -> None:
    preamble, expression, files, change = CASES[case]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(HELPERS + _module(expression, preamble))
    _write(project, files)
    first = _rows(project, FIRST_ENV, process=True)[case]  # as a user runs kgate: a process of its own
    assert "BLOCK=256," in first, first
    env = {**FIRST_ENV, **{name[4:]: text for name, text in change.items() if name.startswith("env:")}}
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    second = _rows(project, env, process=True)[case]
    assert "BLOCK=8192," in second, second

