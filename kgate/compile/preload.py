"""Imported once by the compile workers' fork server, so that every worker starts with Triton loaded.

Importing Triton takes a few hundred milliseconds; forking a process that
has it costs next to nothing. A missing or broken Triton is not an error
here: the worker that needs it reports it.
"""

from __future__ import annotations

try:
    import triton  # noqa: F401
    import triton.compiler  # noqa: F401
    from triton.backends.compiler import GPUTarget  # noqa: F401
except Exception:  # noqa: BLE001 - reported by the task that needs Triton
    pass

import kgate.compile.triton_backend  # noqa: E402,F401
