"""How a compile worker imports a project's kernel module: the project's folders first on its path, its set-up hook
(`setup` in the configuration) once per worker, what the import reads recorded (`kgate.compile.import_recorder`),
and a failure said as a `KernelError` at the project's line that raised. Runs inside worker processes only.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

from kgate.compile import gluon
from kgate.compile.frames import project_frame
from kgate.compile.payloads import ImportRequest
from kgate.core.errors import KgateError, did_you_mean

MISSING_ATTRIBUTE = "has no attribute"  # in the error for a kernel its module does not define (any more)


class KernelError(KgateError):
    """The kernel cannot be compiled: reported as a finding that it did not compile. `where`: the line of the project that
    raised, when the project's own code did (a module that fails as it is imported)."""

    def __init__(self, message: str, where: tuple[str, int] | None = None) -> None:
        super().__init__(message)
        self.where = where


# The project's folders (its root and python-path entries), as the task names them: where its own frames are.
_ROOTS: list[str] = []
# A byte shared with kgate (`kgate.compile.pool`), 1 while `imported` runs: a task stopped there was importing.
IMPORTING: Any = None


def _prepare(payload: ImportRequest) -> None:
    paths = payload["sys_path"]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    _ROOTS[:] = payload.get("roots", paths)
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    _run_setup(paths)


_SETUP_DONE = False


def _run_setup(paths: list[str]) -> None:
    """The project's set-up hook (`setup` in the configuration), once per worker, before any of its modules."""
    global _SETUP_DONE
    from kgate.capture.runtime import ENV_SETUP, ENV_SETUP_PATH, run_setup

    setup = os.environ.get(ENV_SETUP)
    if _SETUP_DONE or not setup:
        return
    _SETUP_DONE = True
    try:
        run_setup(setup, os.environ.get(ENV_SETUP_PATH, "").split(os.pathsep) + paths)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise KernelError(f"the set-up hook {setup} failed: {type(exc).__name__}: {exc}",
                          project_frame(exc, _ROOTS)) from None


def imported(payload: ImportRequest, kernel: str) -> Any:
    """The registered object, its module imported (the set-up hook first) with what the import reads recorded:
    the key of the records made from it (`kgate.compile.import_reads`)."""
    from kgate.compile import import_recorder

    roots = payload.get("roots") or payload["sys_path"]
    checkout = payload.get("checkout") or ()
    importer = os.getpid()  # a process the import forks leaves the byte to the worker
    if IMPORTING is not None:
        IMPORTING.value = 1
    try:
        with import_recorder.recording(roots[0], roots, payload.get("cwd"),
                                       (checkout[0], checkout[1]) if checkout else None):
            _prepare(payload)
            return load(kernel)
    finally:
        if IMPORTING is not None and os.getpid() == importer:
            IMPORTING.value = 0


def bound_apart(payload: ImportRequest) -> Any:
    """A `with` block that records, apart, what the project's code run inside it reads (its module already
    imported, as `imported` records): its `reads` once the block ends."""
    from kgate.compile import import_binding

    roots = payload.get("roots") or payload["sys_path"]
    checkout = payload.get("checkout") or ()
    return import_binding.recording_apart(roots[0], roots, payload.get("cwd"),
                                          (checkout[0], checkout[1]) if checkout else None)


def load(kernel: str) -> Any:
    module_name, _, attr = kernel.partition(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        lacking = gluon.lacks_gluon(exc)
        if lacking is not None:
            raise KernelError(f"cannot import {module_name}: {lacking}", project_frame(exc, _ROOTS)) from None
        probe = any(word in str(exc).lower() for word in ("device", "cuda", "gpu", "driver", "nvidia"))
        hint = "" if os.environ.get("KGATE_SETUP") or not probe else (
            " (a project whose modules probe the GPU when they import can name a set-up hook, run first, in the "
            "configuration's `setup`)")
        raise KernelError(f"cannot import {module_name}: {type(exc).__name__}: {exc}{hint}",
                          project_frame(exc, _ROOTS)) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        names = [name for name in vars(module) if not name.startswith("_")]
        raise KernelError(f"module {module_name} {MISSING_ATTRIBUTE} {attr!r}{did_you_mean(attr, names)}") from None
