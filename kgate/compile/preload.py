"""Imported once by the compile workers' fork server, so that every worker starts with Triton loaded.

Importing Triton takes a few hundred milliseconds; forking a process that
has it costs next to nothing. A missing or broken Triton is not an error
here: the worker task that needs it reports it, with the reason.
"""

from __future__ import annotations

import contextlib

import kgate.compile.triton_backend  # noqa: F401

with contextlib.suppress(Exception):
    import triton.compiler  # noqa: F401
    from triton.backends.compiler import GPUTarget  # noqa: F401
