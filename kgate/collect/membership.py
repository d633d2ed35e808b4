"""Whether a file is one of the project's: the one answer for every stage that asks (a captured kernel's
module, the frame of an import error a finding points at).

A project's files are those under its root (or a python-path folder), less what is installed there: a
virtual environment or a conda environment inside the project (`.venv/`, `env/`, whatever its name: a folder
holding `pyvenv.cfg` or `conda-meta/`), any `site-packages` or `dist-packages` folder, the standard library
and kgate's own modules. A library's kernel in the project's `.venv` is a library's kernel, as it is in
the system's.
"""

from __future__ import annotations

import functools
import os
import sysconfig
from pathlib import Path

import kgate

# Folders no project file is in, whatever folder the project is: kgate's own modules (also in a checkout of
# kgate's repository), the standard library and the installed packages.
_ELSEWHERE = tuple(dict.fromkeys(
    [str(Path(kgate.__file__).resolve().parent)]
    + [os.path.realpath(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")]))
INSTALLED = frozenset({"site-packages", "dist-packages"})
# What marks a folder as an environment, wherever it is and whatever it is called.
ENVIRONMENT_MARKS = ("pyvenv.cfg", "conda-meta")


def in_project(filename: str | os.PathLike[str], roots: list[str]) -> bool:
    """Whether a module's file is one of the project's: under one of `roots` (as the import path names it, or
    where it really is) and in no environment, installed package, the standard library or kgate."""
    filename = os.fspath(filename)
    if not os.path.isabs(filename):  # "<frozen importlib._bootstrap>", "<string>"
        return False
    names = {os.path.normpath(filename), os.path.realpath(filename)}
    if any(INSTALLED & set(Path(name).parts) for name in names):
        return False
    if any(_under(name, folder) for name in names for folder in _ELSEWHERE):
        return False
    for name in names:
        root = next((r for r in roots if _under(name, os.path.normpath(r))), None)
        if root is not None and not _in_environment(name, os.path.normpath(root)):
            return True
    return False


def _in_environment(path: str, root: str) -> bool:
    """Whether a folder between `root` and `path` (the root itself included) is an environment."""
    folder = os.path.dirname(path)
    while _under(folder, root):
        if is_environment(folder):
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return False


@functools.lru_cache(maxsize=4096)
def is_environment(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, mark)) for mark in ENVIRONMENT_MARKS)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
