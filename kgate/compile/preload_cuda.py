"""Imported once by the compile workers' fork server, first: what every worker needs, and what a worker compiling
CUDA C++ needs.

A run whose only kernels are CUDA sources (nvcc or NVRTC compiles) never imports Triton in a worker: its server
imports this module alone (`kgate.compile.pool.start_server`), and its first compile starts without waiting for
Triton's import, the hash of Triton's installation and its backend's set-up (about a second of CPU, all before any
compile can start). `kgate.compile.preload` imports this module, then Triton.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgate.support import interrupts

interrupts.helper_ignores_interrupts()  # before anything slow: the server started with SIGINT held back

# The CUDA compile task (the facts stage it runs on its unit arrives with the task: `CUDA_PRELOAD` names it).
import kgate.compile.cuda_backend  # noqa: F401
import kgate.compile.disassembly  # noqa: F401
import kgate.compile.worker_facts  # noqa: F401


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
