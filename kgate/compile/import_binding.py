"""What binding a registration reads in a compile worker, recorded apart from its module's import: the heuristics
(and `early_config_prune`, a `pre_hook`) Triton runs as kgate binds the example arguments. Those reads key the
compile record (`kgate.compile.engine`); what Triton's own code reads meanwhile is the toolchain's
(`import_recorder.Recorder.by_toolchain`).
"""

from __future__ import annotations

import os
import sys

from kgate.compile import import_recorder
from kgate.compile.import_reads import Reads

_BOUND: Reads = {}  # what the bindings this worker ran read


class recording_apart(import_recorder.recording):
    """Record, apart from the worker's imports, what the project's code run inside it reads after its module was
    imported (the heuristics a registration's binding runs). `reads` holds, once the block ends, every such read
    this worker has made so far (empty where nothing records), as an import is keyed on every read of its worker:
    a heuristic that caches what it read (`functools.cache`) reads nothing the second time. They join the worker's
    reads on the way out."""

    reads: Reads

    def __enter__(self) -> import_recorder.Recorder | None:
        rec = import_recorder.current()
        self.reads = {}
        if rec is not None:
            self.saved, rec.reads = rec.reads, self.reads
            compiler = sys.modules.get("triton")
            folder = getattr(compiler, "__file__", None)
            rec.toolchain = os.path.join(os.path.dirname(os.path.abspath(folder)), "") if folder else ""
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        rec = import_recorder.current()
        if rec is not None:
            rec.toolchain = ""
            rec.reads = {**self.reads, **self.saved}
            for name, held in self.reads.items():
                _BOUND.setdefault(name, held)
            self.reads = dict(_BOUND)
