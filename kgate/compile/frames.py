"""Where in the project an error was raised: the place a compile-error finding points at when a kernel module, or
a project module it imports, raises while it is imported.

The project's files are those under its root or a python-path folder, less installed packages (a virtual
environment inside the project included), the standard library and kgate's own modules: the traceback's frames
in them are the libraries' part of the story, and the last frame in the project is the line its author can
change. Runs in compile workers.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path

import kgate

# Folders no project file is in, whatever folder the project is: kgate's own modules (also in a checkout of
# kgate's repository), the standard library and the installed packages.
_ELSEWHERE = tuple(dict.fromkeys(
    [str(Path(kgate.__file__).resolve().parent)]
    + [os.path.realpath(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")]))
_INSTALLED = {"site-packages", "dist-packages"}


def project_frame(exc: BaseException, roots: list[str]) -> tuple[str, int] | None:
    """(file, line) of the last frame of `exc`'s traceback in a file of the project under `roots`, or of the
    place a syntax error names there; None when none is the project's."""
    places = [(frame.filename, frame.lineno or 0) for frame in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        places.append((exc.filename, exc.lineno))  # the file that did not parse has no frame of its own
    for filename, line in reversed(places):
        if line > 0 and in_project(filename, roots):
            return filename, line
    return None


def in_project(filename: str, roots: list[str]) -> bool:
    """Whether a module's file is one of the project's: under one of `roots` (as the import path names it, or
    where it really is) and in no installed package, the standard library or kgate."""
    if not os.path.isabs(filename):  # "<frozen importlib._bootstrap>", "<string>"
        return False
    names = {os.path.normpath(filename), os.path.realpath(filename)}
    if any(_INSTALLED & set(Path(name).parts) for name in names):
        return False
    if any(_under(name, folder) for name in names for folder in _ELSEWHERE):
        return False
    return any(_under(name, root) for name in names for root in roots)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
