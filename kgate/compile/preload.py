"""Imported once by the compile workers' fork server, so that every worker starts with Triton loaded.

Importing Triton takes a few hundred milliseconds, and its first compile in
a process pays for lazy imports, the backend's set-up (which runs
`ptxas --version`) and the hash of Triton's own installation. The fork
server pays for them once; every worker forked from it starts where a warm
process would. A missing or broken Triton is not
an error here: the worker task that needs it reports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from kgate.support import interrupts

interrupts.helper_ignores_interrupts()  # before anything slow: the server started with SIGINT held back

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


def _workers_without_the_main_module() -> None:
    """multiprocessing runs the parent's main module again in every child it starts (as `__mp_main__`): the script
    that called `kgate.api.check` would run again in each compile worker, and one without an `if __name__ ==
    "__main__":` guard would start a check of its own there, which kills the worker. A worker runs kgate's code
    alone (a kernel is imported from its module, never from `__main__`), so the processes of kgate's worker name
    start without it; any other process this server starts is prepared as multiprocessing prepares it."""
    import multiprocessing.spawn

    from kgate.compile.pool import WORKER_NAME

    prepare = multiprocessing.spawn.prepare

    def prepare_worker(data: Mapping[str, Any]) -> None:
        if data.get("name") == WORKER_NAME:
            data = {key: value for key, value in data.items()
                    if key not in ("init_main_from_name", "init_main_from_path")}
        prepare(data)

    multiprocessing.spawn.prepare = prepare_worker


_workers_without_the_main_module()
for step in (_hash_installation, _warm_up):  # each on its own: a backend that fails to set up still gets the hash
    with contextlib.suppress(Exception):
        step()
