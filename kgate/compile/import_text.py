"""When an import reads a Python module's text as data, and not to import it, compile a kernel of it or show a line.

The static key holds the parts of a kernel's module that matter to that kernel (`kgate.collect.modules`), so the
module's file read to import it (the import system), to compile a kernel of it (Triton's `inspect.getsource`) or to
show one of its lines (a warning, a traceback) is no input of its own. Any other reader of a module's text (the
module searching its own comments, hashing its own file, `inspect.getsource` of the whole module) reads all of it,
and the recorder keys that text whole (a `text:` read). Who reads is told by the first code up the stack that is
not a reader in between (`linecache`, `tokenize`, `inspect`, a loader's method called by the code itself, not by
the import system). Lines that linecache already holds are served without opening the file, so its `getlines`
is watched as well as the files opened.
"""

from __future__ import annotations

from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder

_IMPORT_SYSTEM = frozenset(("_frozen_importlib", "_frozen_importlib_external", "importlib", "zipimport"))
_IN_BETWEEN = frozenset(("linecache", "tokenize", "inspect"))
# Code that reads a module's source for what kgate already keys: a kernel's own source compiled (Triton, kgate's
# registration), a line shown in a message.
_NOT_DATA = frozenset(("triton", "kgate", "warnings", "traceback"))
_SAVED: dict[str, Any] = {}


def note_open(rec: Recorder, path: str, frame: FrameType | None) -> None:
    """A file opened for reading by the code at `frame`: a module's text read as data is a `text:` read."""
    if path.endswith(".py") and read_as_data(frame):
        rec.note("text", path)


def read_as_data(frame: FrameType | None) -> bool:
    """Whether the code at `frame` reads a module's text as data (see the module's docstring)."""
    while frame is not None:
        top = _package(frame)
        if top in _IMPORT_SYSTEM:
            caller = frame.f_back
            if caller is not None and _package(caller) in _IMPORT_SYSTEM:
                return False  # the import system importing
            frame = caller  # a loader's method the code called itself (`loader.get_data`, `pkgutil.get_data`)
        elif top in _IN_BETWEEN:
            frame = frame.f_back
        else:
            return top not in _NOT_DATA
    return False


def _package(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).partition(".")[0]


def patch(rec: Recorder) -> None:
    """Watch the lines linecache serves (from its memory too) to the code that asks for them."""
    import linecache
    import sys

    real = _SAVED["getlines"] = linecache.getlines

    def getlines(filename: Any, module_globals: Any = None) -> Any:
        if not rec.busy and isinstance(filename, str) and filename.endswith(".py"):
            rec.busy = True
            try:
                note_open(rec, filename, sys._getframe(1))
            except Exception:  # noqa: BLE001 - recording must never break the import
                rec.unkeyable("a module's text read")
            finally:
                rec.busy = False
        return real(filename, module_globals)

    linecache.getlines = getlines


def unpatch() -> None:
    if "getlines" in _SAVED:
        import linecache

        linecache.getlines = _SAVED.pop("getlines")
