"""What a build for a bare or family architecture loses against the arch-specific (`a`) target.

Measured with nvcc 13.0 (and the Triton wheel's ptxas-blackwell 13.4 where
it applies) by assembling one instruction per architecture:

| instruction | sm_90 | sm_90a | sm_100 | sm_100a | sm_100f | sm_120 | sm_120a | sm_120f |
|---|---|---|---|---|---|---|---|---|
| `mma.sync ... kind::mxf8f6f4.block_scale` (QMMA.SF) | - | - | - | - | - | error | ok | ok |
| `mma.sync ... kind::mxf4nvf4.block_scale` (OMMA.SF) | - | - | - | - | - | error | ok | ok |
| `mma.sync ... f32.e4m3.e4m3.f32` (FP8, QMMA) | | | | | | ok | ok | ok |
| `wgmma.fence.sync.aligned` | error | ok | error | error | error | error | error | error |
| `setmaxnreg.inc.sync.aligned.u32` | error | ok | error | ok | ok | error | ok | ok |
| `tcgen05.fence::before_thread_sync` | error | error | error | ok | ok | error | error | error |

Feature macros in device code: `compute_120a` defines `__CUDA_ARCH_FEAT_SM120_ALL`,
`__CUDA_ARCH_SPECIFIC__` and `__CUDA_ARCH_FAMILY_SPECIFIC__`; `compute_120f`
only `__CUDA_ARCH_FAMILY_SPECIFIC__`; `compute_120` none of them. Code behind
the first two is compiled out of a family build, and behind any of them out
of a bare build, without an error. There is no `sm_90f`.
"""

from __future__ import annotations

import re

_ARCH = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")

# Family -> what a bare build of it cannot assemble (measured, see above).
LOST_BY_BARE = {
    "120": "block-scaled MMA (mma.sync kind::mxf8f6f4/mxf4nvf4 .block_scale, SASS QMMA.SF/OMMA.SF) and setmaxnreg",
    "100": "tcgen05 (tcgen05.mma, block-scaled or not, and TMEM) and setmaxnreg",
    "90": "wgmma and setmaxnreg",
}
FEATURE_MACROS = "__CUDA_ARCH_FEAT_SM{family}_ALL / __CUDA_ARCH_SPECIFIC__"


# Family -> source spellings of code that needs the family's arch-specific (`a`) target: the PTX opcodes a
# bare target cannot assemble (measured, see above) and the CUDA / CUTLASS / CuTe names that emit or guard them.
# Matched as bytes, case-sensitively, in C++/CUDA sources. TMA (`cp.async.bulk.tensor`, CuTe's SM90_TMA_* atoms)
# is not among them: the bare sm_90 / sm_100 / sm_120 targets assemble it.
# CUTLASS 3.x kernels name their architecture as a tag (`using ArchTag = cutlass::arch::Sm120;`) handed to the
# collective builders; every kernel those build for Sm90 / Sm100 / Sm120 is arch-conditional (wgmma, tcgen05, the
# block-scaled MMA) and, built for the bare target, aborts at run time with "Arch conditional MMA instruction used
# without targeting appropriate compute capability".
ARCH_SPECIFIC_CODE = {
    "90": (rb"\bwgmma\b|\bsetmaxnreg\b|__CUDA_ARCH_FEAT_SM90_ALL|CUTLASS_ARCH_MMA_SM90A_ENABLED|"
           rb"\bSM90_\w*_(?:SS|RS)\w*|\barch::Sm90\b"),
    "100": (rb"\btcgen05\b|\bUTCMMA\b|\bsetmaxnreg\b|__CUDA_ARCH_FEAT_SM100_ALL|CUTLASS_ARCH_MMA_SM100A_ENABLED|"
            rb"\bSM100_\w*(?:MMA|TMEM)\w*|\barch::Sm100\b"),
    "120": (rb"\.block_scale\b|kind::mxf8f6f4|kind::mxf4nvf4|kind::mxf4\b|\bsetmaxnreg\b|__CUDA_ARCH_FEAT_SM120_ALL|"
            rb"CUTLASS_ARCH_MMA_SM120A_ENABLED|\bSM120_\w*_VS\b|\bSM120_\w*MMA\w*|\barch::Sm120\b"),
}

# Byte strings of which one occurs in every match of the family's ARCH_SPECIFIC_CODE: a file with none is not
# searched further.
ARCH_SPECIFIC_NEEDLES = {
    "90": (b"wgmma", b"setmaxnreg", b"SM90", b"Sm90"),
    "100": (b"tcgen05", b"UTCMMA", b"setmaxnreg", b"SM100", b"Sm100"),
    "120": (b"block_scale", b"kind::mx", b"setmaxnreg", b"SM120", b"Sm120"),
}


def split_arch(name: str) -> tuple[str, str] | None:
    """`sm_120a` -> ("120", "a"); None when the name is no architecture."""
    match = _ARCH.match(name)
    return (match.group(1), match.group(2)) if match else None


def lost_by_bare(family: str) -> str:
    return LOST_BY_BARE.get(family, "the arch-specific instructions")


KEPT_BY_FAMILY = {
    "120": "block-scaled mma.sync (QMMA.SF/OMMA.SF, the same SASS as sm_120a) and setmaxnreg",
    "100": "tcgen05 and setmaxnreg",
}


def family_note(family: str) -> str:
    """What a family (`f`) build keeps and what it compiles out."""
    macros = FEATURE_MACROS.format(family=family)
    kept = KEPT_BY_FAMILY.get(family, "the family's instructions")
    return f"the family target assembles {kept} (measured), but compiles out code behind {macros}"
