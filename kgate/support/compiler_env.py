"""What the compilers read from the environment, so that it is part of every compile's key.

Triton reads its knobs from environment variables at each compile (`TRITON_DEFAULT_FP_FUSION=0` turns
`x * a + b` into FMUL and FADD instead of one FFMA; `DISABLE_PTXAS_OPT=1` runs ptxas at -O0), and nvcc
adds `NVCC_PREPEND_FLAGS` and `NVCC_APPEND_FLAGS` to every command line. A cached record made without
them is not the kernel a run with them compiles, so the variables that are set go into the key.

The names Triton reads are taken from the installed Triton's `knobs.py` as text (Triton is not imported
for it), with every `TRITON_*` variable besides; a Triton without that file (before 3.4) reads the
historic names listed here. Keying on a variable that changes nothing costs a compile, never a verdict.
"""

from __future__ import annotations

import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path

# Variables that change no compiled kernel: those kgate sets for its compile workers (the cache it gives Triton,
# that Triton always compiles, that its log is kept, that no interpreter runs), and those that choose only where
# Triton keeps or shares its files or what it prints. Keyed, they would only make a run compile again.
NOT_CODE = frozenset({"TRITON_CACHE_DIR", "TRITON_ALWAYS_COMPILE", "TRITON_CACHE_MANAGER", "TRITON_DUMP_PTXAS_LOG",
                      "TRITON_INTERPRET", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_PRINT_AUTOTUNING",
                      "TRITON_CACHE_AUTOTUNING", "TRITON_REMOTE_CACHE_BACKEND", "TRITON_REDIS_HOST",
                      "TRITON_REDIS_PORT", "TRITON_REDIS_KEY_FORMAT"})
# Triton's knobs without the TRITON_ prefix, in the releases that have no knobs.py.
_OLD_TRITON_NAMES = ("DISABLE_LLVM_OPT", "DISABLE_PTXAS_OPT", "PTXAS_OPTIONS", "MLIR_ENABLE_DUMP",
                     "LLVM_IR_ENABLE_DUMP", "USE_IR_LOC", "NVPTX_ENABLE_DUMP", "LLVM_ENABLE_TIMING")
# What nvcc, and the host compiler it runs to preprocess, read from the environment.
NVCC_NAMES = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH", "C_INCLUDE_PATH",
              "CPLUS_INCLUDE_PATH")


@lru_cache(maxsize=None)
def _knob_names(knobs: str) -> frozenset[str]:
    try:
        text = Path(knobs).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset(_OLD_TRITON_NAMES)
    return frozenset(re.findall(r"""["']([A-Z][A-Z0-9_]{2,})["']""", text))


def triton_names() -> frozenset[str]:
    """The environment variables the installed Triton may read as knobs, besides every `TRITON_*` one."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    knobs = next((os.path.join(f, "knobs.py") for f in folders if os.path.isfile(os.path.join(f, "knobs.py"))), "")
    return _knob_names(knobs) if knobs else frozenset(_OLD_TRITON_NAMES)


def triton_environment() -> dict[str, str]:
    """The variables set in this environment that Triton's compiler reads, sorted by name."""
    names = triton_names()
    return {k: v for k, v in sorted(os.environ.items())
            if (k in names or k.startswith("TRITON_")) and k not in NOT_CODE}


def nvcc_environment() -> dict[str, str]:
    """The variables set in this environment that nvcc and its host compiler read, sorted by name."""
    return {k: os.environ[k] for k in NVCC_NAMES if k in os.environ}
