"""Imported once by the compile workers' fork server, so that every worker starts with Triton loaded.

Importing Triton takes a few hundred milliseconds, and its first compile in
a process pays for lazy imports, the backend's set-up (which runs
`ptxas --version`) and the hash of Triton's own installation. The fork
server pays for them once; every worker forked from it starts where a warm
process would. A missing or broken Triton is not
an error here: the worker task that needs it reports it. A run with no Triton
or CuTe DSL kernel to compile starts its server with `preload_cuda` alone.
"""

from __future__ import annotations

import contextlib

# First: it ignores SIGINT before anything slow (the server started with it held back), prepares the workers without
# the main module and imports the CUDA compile path.
import kgate.compile.preload_cuda  # noqa: F401
import kgate.compile.triton_backend  # noqa: F401


def _warm_up() -> None:
    import triton.compiler.code_generator  # noqa: F401 - imported lazily by the first compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    make_backend(GPUTarget("cuda", 120, 32)).hash()


def _hash_installation() -> None:
    """Every compile's cache key starts with a hash of Triton's own files, libtriton's half a gigabyte included:
    about half a second, which Triton keeps for the life of the process. Computed here, every worker is forked
    with it instead of computing it again."""
    import triton.runtime.cache

    triton.runtime.cache.triton_key()


for step in (_hash_installation, _warm_up):  # each on its own: a backend that fails to set up still gets the hash
    with contextlib.suppress(Exception):
        step()
